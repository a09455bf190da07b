import { Controller, Get } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DomainError } from '../errors.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';

@Controller('health')
export class HealthController {
  constructor(
    private readonly dataSource: DataSource,
    private readonly rules: RuleRegistry,
  ) {}

  @Get()
  live() {
    return { status: 'ok' };
  }

  /** Ready when the database answers and the rules are loaded. */
  @Get('ready')
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
