import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Query, Req, UseGuards } from '@nestjs/common';
import type { Request } from 'express';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { ApiRulesService } from '../rules/api-rules.service.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import { ApiTags } from '@nestjs/swagger';
import { AdminGuard } from './admin.guard.js';
import { AdminRoute, JsonBody, ListQueries, Paged, StorageWrite } from '../http/openapi.js';
import { AdminRulesService } from './admin-rules.service.js';
import { readJson } from '../http/json-body.js';
import { decodeCursor, parseLimit, toPage } from './pagination.js';

const isString = (v: unknown): v is string => typeof v === 'string';

@ApiTags('rules')
@Controller('admin/rules')
@UseGuards(AdminGuard)
export class AdminRulesController {
  constructor(
    private readonly rules: AdminRulesService,
    private readonly apiRules: ApiRulesService,
    private readonly registry: RuleRegistry,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Get()
  @AdminRoute('All rules: source, enabled, triggers, version, counts', 200, Paged('RuleSummary'))
  @ListQueries()
  async list(@Query() query: Record<string, string | undefined>) {
    const limit = parseLimit(query.limit);
    const after = decodeCursor(query.cursor, isString);
    const all = (await this.rules.list()).filter((r) => after === undefined || r.id > after);
    return toPage(all.slice(0, limit + 1), limit, (r) => r, (r) => r.id);
  }

  @Post('validate')
  @HttpCode(200)
  @AdminRoute('Validate a rule without saving it', 200, 'Validation', [400, 'the body is not JSON'])
  @JsonBody('Rule')
  async validate(@Req() req: Request) {
    return this.rules.validate(await readJson(req, this.config.webhookMaxBytes));
  }

  @Post('test')
  @HttpCode(200)
  @AdminRoute('Dry-run an unsaved rule against an event: each condition, the requests it would send', 200, 'TestResult', [400, 'the rule or the event is invalid (details)'])
  @JsonBody({ type: 'object', properties: { rule: { $ref: '#/components/schemas/Rule' }, event: { $ref: '#/components/schemas/Event' } }, required: ['rule', 'event'] })
  async testUnsaved(@Req() req: Request) {
    return this.rules.testUnsaved(await readJson(req, this.config.webhookMaxBytes));
  }

  @Post('backtest')
  @HttpCode(200)
  @AdminRoute('Run rules (or the files in RULES_DIR now) against stored events, as a dry run, next to what happened', 200, 'BacktestReport', [400, 'bad rules or filter (details)'])
  @JsonBody({ type: 'object', properties: { rules: { oneOf: [{ $ref: '#/components/schemas/Rule' }, { type: 'array', items: { $ref: '#/components/schemas/Rule' } }] }, type: { type: 'string' }, since: { type: 'string', format: 'date-time' }, until: { type: 'string', format: 'date-time' }, limit: { type: 'integer', minimum: 1, maximum: 5000 } } }, 'optional; without rules the files in RULES_DIR are used')
  async backtest(@Req() req: Request) {
    return this.rules.backtest(await readJson(req, this.config.webhookMaxBytes, { optional: true }));
  }

  @Post('reload')
  @HttpCode(200)
  @AdminRoute('Re-read RULES_DIR: what was loaded, changed, removed, kept and rejected', 200, 'ReloadReport')
  reload() {
    return this.registry.reload();
  }

  @Post()
  @StorageWrite()
  @AdminRoute('Create an API-managed rule', 201, 'RuleDetail', [400, 'the rule is invalid (details)'], [409, 'the id is taken (rule_id_taken)'])
  @JsonBody('Rule')
  async create(@Req() req: Request) {
    const rule = await this.apiRules.create(await readJson(req, this.config.webhookMaxBytes));
    return this.rules.get(rule.id);
  }

  @Get(':id')
  @AdminRoute('One rule with its definition', 200, 'RuleDetail', [404, 'no such rule'])
  get(@Param('id') id: string) {
    return this.rules.get(id);
  }

  @Put(':id')
  @StorageWrite()
  @AdminRoute('Replace an API-managed rule', 200, 'RuleDetail', [400, 'the rule is invalid (details)'], [404, 'no such rule'], [409, 'the rule is defined in a file (rule_defined_in_file)'])
  @JsonBody('Rule')
  async replace(@Param('id') id: string, @Req() req: Request) {
    await this.apiRules.replace(id, await readJson(req, this.config.webhookMaxBytes));
    return this.rules.get(id);
  }

  @Delete(':id')
  @StorageWrite()
  @HttpCode(204)
  @AdminRoute('Delete an API-managed rule', 204, undefined, [404, 'no such rule'], [409, 'the rule is defined in a file (rule_defined_in_file)'])
  async remove(@Param('id') id: string): Promise<void> {
    await this.apiRules.remove(id);
  }

  @Post(':id/enable')
  @StorageWrite()
  @HttpCode(200)
  @AdminRoute('Enable a rule (survives restarts and reloads)', 200, 'RuleDetail', [404, 'no such rule'])
  async enable(@Param('id') id: string) {
    this.rules.find(id);
    await this.registry.setEnabled(id, true, this.clock.now());
    return this.rules.get(id);
  }

  @Post(':id/disable')
  @StorageWrite()
  @HttpCode(200)
  @AdminRoute('Disable a rule (survives restarts and reloads)', 200, 'RuleDetail', [404, 'no such rule'])
  async disable(@Param('id') id: string) {
    this.rules.find(id);
    await this.registry.setEnabled(id, false, this.clock.now());
    return this.rules.get(id);
  }

  @Post(':id/test')
  @HttpCode(200)
  @AdminRoute('Dry-run a rule against an event: each condition, the requests it would send', 200, 'TestResult', [400, 'the event is invalid (details)'], [404, 'no such rule'])
  @JsonBody({ type: 'object', properties: { event: { $ref: '#/components/schemas/Event' } }, required: ['event'] })
  async test(@Param('id') id: string, @Req() req: Request) {
    return this.rules.test(this.rules.find(id), await readJson(req, this.config.webhookMaxBytes));
  }
}
