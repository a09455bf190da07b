import { Controller, Headers, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { readBody } from '../http/body.js';
import { errorResponse } from '../http/openapi.js';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { IntakeService } from './intake.service.js';

@ApiTags('webhooks')
@Controller('webhooks')
export class IntakeController {
  constructor(
    private readonly intake: IntakeService,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Post()
  @HttpCode(202)
  @ApiOperation({ summary: 'Receive a signed event from the service; answered once the event is stored' })
  @ApiHeader({ name: 'X-Service-Signature', required: true, description: 'sha256=<hex HMAC of the raw body>, or t=<unix>,v1=<hex> (timestamped)' })
  @ApiBody({ schema: { $ref: '#/components/schemas/Event' } })
  @ApiResponse({ status: 202, description: 'stored, will be processed', schema: { $ref: '#/components/schemas/Accepted' } })
  @ApiResponse({ status: 200, description: 'this event id was received before (not processed again)', schema: { $ref: '#/components/schemas/Accepted' } })
  @errorResponse(400, 'not JSON (invalid_json), or not an event (invalid_event)')
  @errorResponse(401, 'missing_signature or invalid_signature')
  @errorResponse(413, 'body larger than WEBHOOK_MAX_BYTES (payload_too_large)')
  @errorResponse(503, 'no WEBHOOK_SECRET configured, the engine is shutting down, or its database cannot take writes now (storage_unavailable, with Retry-After): nothing was stored')
  async receive(
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
    @Headers('x-service-signature') signature: string | undefined,
  ) {
    this.intake.assertReady();
    const rawBody = await readBody(req, this.config.webhookMaxBytes);
    const result = await this.intake.receiveWebhook(rawBody, signature);
    if (result.status === 'duplicate') res.status(200);
    return result;
  }
}
