import { Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, ListQueries, Paged, StorageWrite } from '../http/openapi.js';
import { AdminActionsService } from './admin-actions.service.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';
import { actionRunView } from './views.js';

@ApiTags('actions')
@Controller('admin/actions')
@UseGuards(AdminGuard)
export class AdminActionsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly actions: AdminActionsService,
  ) {}

  @Get()
  @AdminRoute('Action runs, newest first (status=failed: the dead ones)', 200, Paged('ActionRun'))
  @ListQueries(['status', 'pending, running, succeeded, retrying, failed, skipped or cancelled'])
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listActionRuns(query, parseLimit(query.limit));
  }

  @Post(':id/retry')
  @StorageWrite()
  @HttpCode(200)
  @AdminRoute('Retry a failed action run; its execution resumes from it', 200, 'ActionRun', [404, 'no such action run'], [409, 'the run has not failed (not_retryable)'])
  async retry(@Param('id') id: string) {
    return actionRunView(await this.actions.retryFailed(id));
  }
}
