import { Controller, Get, Header } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ServiceClient } from '../actions/service-client.js';
import { Database } from '../database/database.service.js';
import { Metrics } from '../observability/metrics.js';
import { WorkQueue } from '../processing/work-queue.js';

@ApiTags('health')
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: Metrics,
    private readonly queue: WorkQueue,
    private readonly client: ServiceClient,
    private readonly db: Database,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Prometheus metrics' })
  @ApiProduces('text/plain')
  @ApiResponse({ status: 200, description: 'Prometheus text format', schema: { type: 'string' } })
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape(): Promise<string> {
    this.metrics.storageFailed(this.db.health.failuresByKind);
    // While the database does not answer, the depths keep their last values: the scrape that shows the storage failures must not fail with it.
    const depths = await this.queue.depths().catch(() => undefined);
    if (depths) {
      this.metrics.queueDepth.set({ queue: 'events' }, depths.events);
      this.metrics.queueDepth.set({ queue: 'actions' }, depths.actions);
    }
    if (this.client.lastRemaining !== undefined) this.metrics.rateLimitRemaining.set(this.client.lastRemaining);
    return this.metrics.registry.metrics();
  }
}
