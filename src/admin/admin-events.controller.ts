import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { readBody } from '../http/body.js';
import { IntakeService } from '../intake/intake.service.js';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, JsonBody, ListQueries, Paged, StorageWrite, SuccessResponse } from '../http/openapi.js';
import { EventFilterQueries } from '../http/openapi-console.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';

@ApiTags('events')
@Controller('admin/events')
@UseGuards(AdminGuard)
export class AdminEventsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly intake: IntakeService,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Get()
  @AdminRoute('Stored events, newest first', 200, Paged('EventSummary'))
  @ListQueries()
  @EventFilterQueries()
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listEvents(query, parseLimit(query.limit));
  }

  @Get(':id')
  @AdminRoute('One event: every rule that listened with each condition, and what the matched rules did', 200, 'EventDetail', [404, 'no such event'])
  get(@Param('id') id: string) {
    return this.queries.getEvent(id);
  }

  /** Evaluates a stored event again, as a new event linked to the original. */
  @Post(':id/replay')
  @StorageWrite()
  @HttpCode(202)
  @AdminRoute('Evaluate a stored event again, as a new event linked to the original', 202, 'Replayed', [404, 'no such event'])
  replay(@Param('id') id: string) {
    return this.intake.replay(id);
  }

  /** Injects an event as if the service had sent it, without a signature. */
  @Post()
  @StorageWrite()
  @HttpCode(202)
  @AdminRoute('Inject an event (no signature needed); 200 when its id is known already', 202, 'Accepted', [400, 'not JSON or not an event'])
  @SuccessResponse(200, 'this event id was received before (not processed again)', 'Accepted')
  @JsonBody('Event')
  async inject(@Req() req: Request, @Res({ passthrough: true }) res: Response) {
    const result = await this.intake.accept(await readBody(req, this.config.webhookMaxBytes), 'admin');
    if (result.status === 'duplicate') res.status(200);
    return result;
  }
}
