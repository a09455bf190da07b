import { Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, ListQueries, Paged } from '../http/openapi.js';
import { AdminExecutionsService } from './admin-executions.service.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';

@ApiTags('executions')
@Controller('admin/executions')
@UseGuards(AdminGuard)
export class AdminExecutionsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly executions: AdminExecutionsService,
  ) {}

  @Get()
  @AdminRoute('Executions (one rule matched one event), newest first', 200, Paged('Execution'))
  @ListQueries(['rule', 'rule id'], ['status', 'running, waiting, succeeded, failed, stopped, cancelled, debounced, throttled or skipped'])
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listExecutions(query, parseLimit(query.limit));
  }

  @Get(':id')
  @AdminRoute('One execution with its action runs', 200, 'Execution', [404, 'no such execution'])
  get(@Param('id') id: string) {
    return this.queries.getExecution(id);
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @AdminRoute('Cancel a waiting execution: nothing after its wait runs', 200, 'Execution', [404, 'no such execution'], [409, 'the execution is not waiting (not_waiting)'])
  async cancel(@Param('id') id: string) {
    await this.executions.cancel(id);
    return this.queries.getExecution(id);
  }

  @Post(':id/resume')
  @HttpCode(200)
  @AdminRoute('End the wait of a waiting execution now: it goes on at once', 200, 'Execution', [404, 'no such execution'], [409, 'the execution is not waiting (not_waiting)'])
  async resume(@Param('id') id: string) {
    await this.executions.resume(id);
    return this.queries.getExecution(id);
  }
}
