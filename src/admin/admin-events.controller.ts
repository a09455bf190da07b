import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { readBody } from '../intake/intake.controller.js';
import { IntakeService } from '../intake/intake.service.js';
import { AdminGuard } from './admin.guard.js';
import { AdminQueryService } from './admin-query.service.js';
import { parseLimit } from './pagination.js';

@Controller('admin/events')
@UseGuards(AdminGuard)
export class AdminEventsController {
  constructor(
    private readonly queries: AdminQueryService,
    private readonly intake: IntakeService,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Get()
  list(@Query() query: Record<string, string | undefined>) {
    return this.queries.listEvents(query, parseLimit(query.limit));
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.queries.getEvent(id);
  }

  /** Evaluates a stored event again, as a new event linked to the original. */
  @Post(':id/replay')
  @HttpCode(202)
  replay(@Param('id') id: string) {
    return this.intake.replay(id);
  }

  /** Injects an event as if the service had sent it, without a signature. */
  @Post()
  @HttpCode(202)
  async inject(@Req() req: Request, @Res({ passthrough: true }) res: Response) {
    const result = await this.intake.accept(await readBody(req, this.config.webhookMaxBytes), 'admin');
    if (result.status === 'duplicate') res.status(200);
    return result;
  }
}
