import { Controller, type MessageEvent, Query, Sse, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { Observable } from 'rxjs';
import { AdminGuard } from './admin.guard.js';
import { EventFilterQueries, EventStream } from '../http/openapi-console.js';
import { parseEventFilter } from './event-filter.js';
import { EventFeed } from './event-feed.js';

@ApiTags('events')
@Controller('admin/live')
@UseGuards(AdminGuard)
export class AdminLiveController {
  constructor(private readonly feed: EventFeed) {}

  /** Server-sent events: `ready`, then `event` with a summary for every new event and every status change. */
  @Sse('events')
  @EventStream('Live feed of events (server-sent events): each new event and each change of status, as EventSummary')
  @EventFilterQueries()
  events(@Query() query: Record<string, string | undefined>): Observable<MessageEvent> {
    return this.feed.listen(parseEventFilter(query));
  }
}
