import { Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ActionRunner } from '../actions/action-runner.js';
import { Workers } from '../processing/workers.js';
import { AdminGuard } from './admin.guard.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';
import { actionRunView } from './views.js';

@Controller('admin/actions')
@UseGuards(AdminGuard)
export class AdminActionsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly runner: ActionRunner,
    private readonly workers: Workers,
  ) {}

  @Get()
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listActionRuns(query, parseLimit(query.limit));
  }

  @Post(':id/retry')
  @HttpCode(200)
  async retry(@Param('id') id: string) {
    const run = await this.runner.retryFailed(id);
    this.workers.nudgeActions();
    return actionRunView(run);
  }
}
