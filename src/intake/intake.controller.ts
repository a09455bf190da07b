import { Controller, Headers, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import getRawBody from 'raw-body';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { IntakeService } from './intake.service.js';

@Controller('webhooks')
export class IntakeController {
  constructor(
    private readonly intake: IntakeService,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Post()
  @HttpCode(202)
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

/** Reads the body as raw bytes, refusing it as soon as it is known to exceed the limit. */
export async function readBody(req: Request, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(req, { limit, length: req.headers['content-length'] });
  } catch (error) {
    const type = (error as { type?: string }).type;
    if (type === 'entity.too.large') {
      throw new DomainError('payload_too_large', `body is larger than ${limit} bytes (WEBHOOK_MAX_BYTES)`);
    }
    throw new DomainError('bad_request', `could not read the request body: ${(error as Error).message}`);
  }
}
