import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { errorResponse } from '../http/openapi.js';
import { Database } from '../database/database.service.js';
import { DomainError } from '../errors.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly db: Database,
    private readonly rules: RuleRegistry,
  ) {}

  @Get()
  @ApiOperation({ summary: 'The process is up' })
  @ApiResponse({ status: 200, schema: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } } })
  live() {
    return { status: 'ok' };
  }

  /**
   * Ready when the database answers and takes writes, and the rules are loaded.
   * While writes are failing, each check tries one real write, so the answer
   * turns 200 as soon as the database takes writes again, traffic or not.
   */
  @Get('ready')
  @ApiOperation({ summary: 'The database answers and takes writes, and the rules are loaded' })
  @ApiResponse({ status: 200, schema: { type: 'object', properties: { status: { type: 'string' }, rules: { type: 'integer' } } } })
  @errorResponse(503, 'not ready: the database does not answer or the rules are not loaded (not_ready), or the database refuses writes (storage_unavailable)')
  async ready() {
    try {
      await this.db.manager.query('SELECT 1');
    } catch {
      throw new DomainError('not_ready', 'the database does not answer');
    }
    const fault = this.db.health.current;
    if (fault && !(await this.db.probe())) {
      // Kind and time only: this route needs no token, and the driver's words (paths, hosts) are in the log.
      const { kind, since } = this.db.health.current ?? fault;
      throw new DomainError('storage_unavailable', `the database refuses writes (${kind}) since ${since.toISOString()}; the engine's log says why`);
    }
    if (!this.rules.ready) throw new DomainError('not_ready', 'rules are not loaded yet');
    return { status: 'ok', rules: this.rules.all().length };
  }
}
