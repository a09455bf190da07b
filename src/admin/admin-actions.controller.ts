import { Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ActionRunner } from '../processing/action-runner.js';
import { Workers } from '../processing/workers.js';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, ListQueries, Paged } from '../http/openapi.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';
import { actionRunView } from './views.js';

@ApiTags('actions')
@Controller('admin/actions')
@UseGuards(AdminGuard)
export class AdminActionsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly runner: ActionRunner,
    private readonly workers: Workers,
  ) {}

  @Get()
  @AdminRoute('Action runs, newest first (status=failed: the dead ones)', 200, Paged('ActionRun'))
  @ListQueries(['status', 'pending, running, succeeded, retrying, failed or skipped'])
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listActionRuns(query, parseLimit(query.limit));
  }

  @Post(':id/retry')
  @HttpCode(200)
  @AdminRoute('Retry a failed action run; its execution resumes from it', 200, 'ActionRun', [404, 'no such action run'], [409, 'the run has not failed (not_retryable)'])
  async retry(@Param('id') id: string) {
    const run = await this.runner.retryFailed(id);
    this.workers.nudgeActions();
    return actionRunView(run);
  }
}
