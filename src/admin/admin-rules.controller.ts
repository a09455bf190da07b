import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Query, Req, UseGuards } from '@nestjs/common';
import type { Request } from 'express';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { ApiRulesService } from '../rules/api-rules.service.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import { AdminGuard } from './admin.guard.js';
import { AdminRulesService } from './admin-rules.service.js';
import { readJson } from './json-body.js';
import { decodeCursor, parseLimit, toPage } from './pagination.js';

const isString = (v: unknown): v is string => typeof v === 'string';

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
  async list(@Query() query: Record<string, string | undefined>) {
    const limit = parseLimit(query.limit);
    const after = decodeCursor(query.cursor, isString);
    const all = (await this.rules.list()).filter((r) => after === undefined || r.id > after);
    return toPage(all.slice(0, limit + 1), limit, (r) => r, (r) => r.id);
  }

  @Post('validate')
  @HttpCode(200)
  async validate(@Req() req: Request) {
    return this.rules.validate(await readJson(req, this.config.webhookMaxBytes));
  }

  @Post('test')
  @HttpCode(200)
  async testUnsaved(@Req() req: Request) {
    return this.rules.testUnsaved(await readJson(req, this.config.webhookMaxBytes));
  }

  @Post('backtest')
  @HttpCode(200)
  async backtest(@Req() req: Request) {
    return this.rules.backtest(await readJson(req, this.config.webhookMaxBytes, { optional: true }));
  }

  @Post('reload')
  @HttpCode(200)
  reload() {
    return this.registry.reload();
  }

  @Post()
  async create(@Req() req: Request) {
    const rule = await this.apiRules.create(await readJson(req, this.config.webhookMaxBytes));
    return this.rules.get(rule.id);
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.rules.get(id);
  }

  @Put(':id')
  async replace(@Param('id') id: string, @Req() req: Request) {
    await this.apiRules.replace(id, await readJson(req, this.config.webhookMaxBytes));
    return this.rules.get(id);
  }

  @Delete(':id')
  @HttpCode(204)
  async remove(@Param('id') id: string): Promise<void> {
    await this.apiRules.remove(id);
  }

  @Post(':id/enable')
  @HttpCode(200)
  async enable(@Param('id') id: string) {
    this.rules.find(id);
    await this.registry.setEnabled(id, true, this.clock.now());
    return this.rules.get(id);
  }

  @Post(':id/disable')
  @HttpCode(200)
  async disable(@Param('id') id: string) {
    this.rules.find(id);
    await this.registry.setEnabled(id, false, this.clock.now());
    return this.rules.get(id);
  }

  @Post(':id/test')
  @HttpCode(200)
  async test(@Param('id') id: string, @Req() req: Request) {
    return this.rules.test(this.rules.find(id), await readJson(req, this.config.webhookMaxBytes));
  }
}
