import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, ListQueries, Paged } from '../http/openapi.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';

@ApiTags('executions')
@Controller('admin/executions')
@UseGuards(AdminGuard)
export class AdminExecutionsController {
  constructor(private readonly queries: AdminQueryService) {}

  @Get()
  @AdminRoute('Executions (one rule matched one event), newest first', 200, Paged('Execution'))
  @ListQueries(['rule', 'rule id'], ['status', 'running, succeeded, failed, throttled or skipped'])
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listExecutions(query, parseLimit(query.limit));
  }

  @Get(':id')
  @AdminRoute('One execution with its action runs', 200, 'Execution', [404, 'no such execution'])
  get(@Param('id') id: string) {
    return this.queries.getExecution(id);
  }
}
