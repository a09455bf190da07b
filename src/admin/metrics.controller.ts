import { Controller, Get, Header } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ServiceClient } from '../actions/service-client.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { Metrics } from '../observability/metrics.js';

@ApiTags('health')
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: Metrics,
    private readonly db: Database,
    private readonly client: ServiceClient,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Prometheus metrics' })
  @ApiProduces('text/plain')
  @ApiResponse({ status: 200, description: 'Prometheus text format', schema: { type: 'string' } })
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape(): Promise<string> {
    const [events] = await queryRows<{ n: number | string }>(this.db.manager, `SELECT COUNT(*) AS n FROM events WHERE status = 'received'`);
    const [runs] = await queryRows<{ n: number | string }>(
      this.db.manager,
      `SELECT COUNT(*) AS n FROM action_runs WHERE status IN ('pending', 'running', 'retrying')`,
    );
    this.metrics.queueDepth.set({ queue: 'events' }, Number(events?.n ?? 0));
    this.metrics.queueDepth.set({ queue: 'actions' }, Number(runs?.n ?? 0));
    if (this.client.lastRemaining !== undefined) this.metrics.rateLimitRemaining.set(this.client.lastRemaining);
    return this.metrics.registry.metrics();
  }
}
