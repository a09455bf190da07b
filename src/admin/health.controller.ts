import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { errorResponse } from '../http/openapi.js';
import { DataSource } from 'typeorm';
import { DomainError } from '../errors.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly dataSource: DataSource,
    private readonly rules: RuleRegistry,
  ) {}

  @Get()
  @ApiOperation({ summary: 'The process is up' })
  @ApiResponse({ status: 200, schema: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } } })
  live() {
    return { status: 'ok' };
  }

  /** Ready when the database answers and the rules are loaded. */
  @Get('ready')
  @ApiOperation({ summary: 'The database answers and the rules are loaded' })
  @ApiResponse({ status: 200, schema: { type: 'object', properties: { status: { type: 'string' }, rules: { type: 'integer' } } } })
  @errorResponse(503, 'not ready (not_ready)')
  async ready() {
    try {
      await this.dataSource.query('SELECT 1');
    } catch {
      throw new DomainError('not_ready', 'the database does not answer');
    }
    if (!this.rules.ready) throw new DomainError('not_ready', 'rules are not loaded yet');
    return { status: 'ok', rules: this.rules.all().length };
  }
}
