import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { AdminGuard } from './admin.guard.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';

@Controller('admin/executions')
@UseGuards(AdminGuard)
export class AdminExecutionsController {
  constructor(private readonly queries: AdminQueryService) {}

  @Get()
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listExecutions(query, parseLimit(query.limit));
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.queries.getExecution(id);
  }
}
