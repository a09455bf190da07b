/**
 * Hot reload: any change under RULES_DIR (a file added, changed, removed) is
 * picked up without a restart. Editors write a file in several steps, so changes
 * are debounced and one reload follows a burst of them. An invalid edit keeps
 * the rule's last good version (the registry's rule) and is logged.
 */
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { watch, type FSWatcher } from 'chokidar';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { ruleFilesChanged, type RuleFilesRead } from './rule-files.js';
import { RuleRegistry } from './rule-registry.service.js';

export const RELOAD_DEBOUNCE_MS = 250;

@Injectable()
export class RuleWatcher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('rules');
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly registry: RuleRegistry,
  ) {}

  onApplicationBootstrap(): void {
    this.watcher = watch(this.config.rulesDir, {
      ignoreInitial: true,
      ignored: (path, stats) => (stats?.isFile() ?? false) && !path.endsWith('.json'),
      awaitWriteFinish: { stabilityThreshold: 100, pollInterval: 25 },
    });
    this.watcher.on('all', () => this.schedule());
    this.watcher.on('error', (error) => this.logger.warn(`watching ${this.config.rulesDir} failed: ${(error as Error).message}`));
    // Its first look at the folder (about a tenth of a second for a thousand files) is not waited for. Once it is done,
    // what changed since the read the engine started with gets its reload, as the watcher would have reported it,
    // even when a reload on demand took the change in meanwhile.
    const read = this.registry.fileRead;
    this.watcher.once('ready', () => void this.catchUp(read));
  }

  /** A reload when a rule file changed between the registry's read `read` and the end of the watcher's first look. */
  private async catchUp(read: RuleFilesRead | undefined): Promise<void> {
    if (read === undefined || this.closed) return;
    try {
      if (await ruleFilesChanged(this.config.rulesDir, read)) this.schedule();
    } catch (error) {
      this.logger.warn(`looking for rule files changed while the watcher started failed: ${(error as Error).message}`);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.watcher?.close();
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.registry.reload().then(
        (report) => this.logger.log({ msg: 'rules reloaded after a file change', ...summary(report) }),
        (error: Error) => this.logger.error(`reloading rules failed: ${error.message}`),
      );
    }, RELOAD_DEBOUNCE_MS);
  }
}

function summary(report: Awaited<ReturnType<RuleRegistry['reload']>>) {
  return {
    loaded: report.loaded,
    changed: report.changed,
    removed: report.removed,
    kept: report.kept,
    problems: report.rejected.length,
  };
}
