import { Controller, Get, Param, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute } from '../http/openapi.js';
import { AdminEventContextService } from './admin-event-context.service.js';
import { AdminOverviewService } from './admin-overview.service.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';

/** Reads the console needs that the rest of the admin API does not give. */
@ApiTags('console')
@Controller('admin')
@UseGuards(AdminGuard)
export class AdminOverviewController {
  constructor(
    private readonly overview: AdminOverviewService,
    private readonly contexts: AdminEventContextService,
    private readonly registry: RuleRegistry,
  ) {}

  @Get('overview')
  @AdminRoute('The engine at a glance: work waiting, rate budget, loops blocked, failed action runs, the last hour by minute', 200, 'Overview')
  get() {
    return this.overview.overview();
  }

  @Get('rule-problems')
  @AdminRoute('Problems of the rule files at the last reload (a file with problems is skipped, or kept at its last good version)', 200, 'RuleProblems')
  ruleProblems() {
    return { problems: this.registry.problems.map(({ file, path, message }) => ({ file, path, message })) };
  }

  @Get('events/:id/context')
  @AdminRoute('Beside an event: the chain it is part of, why it still waits, each remembered attempt of its action runs, throttles', 200, 'EventContext', [404, 'no such event'])
  context(@Param('id') id: string) {
    return this.contexts.context(id);
  }
}
