/**
 * The console's pages and files, served by the engine itself: every path under
 * /console that is not a file is the single page (it routes in the browser),
 * with the strict Content-Security-Policy of console-security.ts. The data the
 * page shows comes from the admin API, through the admin guard.
 */
import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ConsoleAssets, type ConsoleFile } from './console-assets.js';
import { CONSOLE_HEADERS } from './console-security.js';

@ApiExcludeController()
@Controller('console')
export class ConsolePageController {
  constructor(private readonly assets: ConsoleAssets) {}

  @Get('assets/:file')
  asset(@Param('file') file: string, @Req() req: Request, @Res() res: Response): void {
    const found = this.assets.get(file);
    if (!found || file === 'index.html') {
      res.status(404).set(CONSOLE_HEADERS).type('text/plain').send('no such console file');
      return;
    }
    send(req, res, found, 'no-cache');
  }

  @Get()
  page(@Req() req: Request, @Res() res: Response): void {
    const index = this.assets.get('index.html');
    if (!index) {
      res
        .status(503)
        .set(CONSOLE_HEADERS)
        .type('text/plain')
        .send('The console has not been built: run `npm run build` (npm start builds it when needed).');
      return;
    }
    send(req, res, index, 'no-store');
  }

  /** Deep links (/console/events/evt_1): the same page, which reads its route from the address. */
  @Get('*path')
  deepLink(@Req() req: Request, @Res() res: Response): void {
    this.page(req, res);
  }
}

function send(req: Request, res: Response, file: ConsoleFile, cache: string): void {
  res.set(CONSOLE_HEADERS).set({ 'Cache-Control': cache, ETag: file.etag }).type(file.type);
  if (req.headers['if-none-match'] === file.etag) {
    res.status(304).end();
    return;
  }
  res.status(200).send(file.body);
}
