/**
 * The rules the engine runs now: the files in RULES_DIR (each kept at its last
 * good version when its file turns invalid) and the rules created through the
 * admin API, with operators' enable/disable overrides applied, indexed by the
 * event types they listen to. Everything here is in memory; the database holds
 * the API rules and the overrides, and `reload()` reads both again.
 *
 * Replicas sharing PostgreSQL hear of each other's changes through a
 * notification sent with each change (database/notifications.ts) and reload at
 * once; a fingerprint of both tables, polled, catches whatever a lost
 * notification missed.
 */
import { randomUUID } from 'node:crypto';
import { join, resolve } from 'node:path';
import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { type EntityManager, Repository } from 'typeorm';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Interval } from '@nestjs/schedule';
import { Mutex } from 'async-mutex';
import { Database } from '../database/database.service.js';
import { ChannelListener, notifyRulesChanged, RULES_CHANNEL } from '../database/notifications.js';
import { queryRows } from '../database/sql.js';
import { safeJsonParse } from '../json.js';
import { ApiRuleEntity } from '../database/api-rule.entity.js';
import { displayPath, loadRuleFiles, toLoadedRule, type RuleFilesRead } from './rule-files.js';
import { RuleIndex, triggerMatches } from './rule-index.js';
import { RuleStateEntity } from '../database/rule-state.entity.js';
import { formatProblem, type LoadedRule, type RuleDefinition, type RuleProblem } from './rule.types.js';

export interface ReloadReport {
  loaded: string[];
  changed: string[];
  removed: string[];
  unchanged: string[];
  /** Rules whose file is invalid now; the last good version keeps running. */
  kept: string[];
  rejected: RuleProblem[];
}

function fileOf(rule: LoadedRule): string | undefined {
  return rule.source.kind === 'file' ? rule.source.path : undefined;
}

/** The name of the polling fallback's interval in Nest's SchedulerRegistry (a test turns it off to see notifications alone at work). */
export const FOLLOW_REPLICAS_INTERVAL = 'rules: follow other replicas';

@Injectable()
export class RuleRegistry implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('rules');
  private fileRules = new Map<string, LoadedRule>();
  private apiRules = new Map<string, LoadedRule>();
  private overrides = new Map<string, boolean>();
  private currentIndex = new RuleIndex([]);
  private loadedOnce = false;
  private reloading: Promise<ReloadReport> | undefined;
  private readonly changeListeners: Array<() => void> = [];
  private readonly cancellers = new Map<string, string[]>();
  private lastFingerprint: string | undefined;
  private readonly lock = new Mutex();
  private listener: ChannelListener | undefined;
  private reloadQueued = false;
  private lastFileRead: RuleFilesRead | undefined;
  /** This process's name in the notifications it sends: it has applied its own changes already. */
  readonly origin = randomUUID();
  /** Problems of the last reload, by file. */
  problems: RuleProblem[] = [];

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @InjectRepository(RuleStateEntity) private readonly states: Repository<RuleStateEntity>,
    @InjectRepository(ApiRuleEntity) private readonly apiRuleRows: Repository<ApiRuleEntity>,
    private readonly db: Database,
  ) {}

  async onModuleInit(): Promise<void> {
    // Listening before the first read: a change committed while it reads is not missed.
    if (this.db.kind === 'postgres') {
      this.listener = new ChannelListener(this.config.databaseUrl, RULES_CHANNEL, {
        notified: (origin) => {
          if (origin !== this.origin) this.reloadAfterNotice();
        },
        resumed: () => this.reloadAfterNotice(),
      });
      await this.listener.start();
    }
    // A start that fails here never reaches the shutdown hooks: the connection is closed now.
    await this.reload().catch(async (error: unknown) => {
      await this.listener?.close();
      throw error;
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.listener?.close();
  }

  /** Inside the transaction of a write that changed API rules or overrides: the other replicas reload when it commits. */
  announceChange(manager: EntityManager): Promise<void> {
    return notifyRulesChanged(manager, this.origin);
  }

  /**
   * A reload that starts after the notice arrived: one already running may have
   * read the tables before the change committed, so one more is queued behind
   * it, and a burst of notices meanwhile shares that one.
   */
  private reloadAfterNotice(): void {
    if (this.reloadQueued) return;
    this.reloadQueued = true;
    void (this.reloading ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        this.reloadQueued = false;
        return this.reload();
      })
      .catch((error: Error) => this.logger.warn(`reloading after another replica's rule change failed: ${error.message}`));
  }

  /** The rule files as the last reload read them (rule-files.ts ruleFilesChanged), none before the first. */
  get fileRead(): RuleFilesRead | undefined {
    return this.lastFileRead;
  }

  get ready(): boolean {
    return this.loadedOnce;
  }

  get index(): RuleIndex {
    return this.currentIndex;
  }

  /** Ids of the enabled rules whose `options.cancelOn` matches an event type (SPEC 11), cached per type until the rules change. */
  cancellersOf(type: string): string[] {
    let ids = this.cancellers.get(type);
    if (ids === undefined) {
      ids = this.all()
        .filter((rule) => rule.enabled && [rule.definition.options?.cancelOn ?? []].flat().some((pattern) => triggerMatches(pattern, type)))
        .map((rule) => rule.id);
      if (this.cancellers.size > 1_000) this.cancellers.clear();
      this.cancellers.set(type, ids);
    }
    return ids;
  }

  all(): LoadedRule[] {
    return [...this.fileRules.values(), ...this.apiRules.values()].map((rule) => this.withOverride(rule));
  }

  get(id: string): LoadedRule | undefined {
    const rule = this.fileRules.get(id) ?? this.apiRules.get(id);
    return rule && this.withOverride(rule);
  }

  /**
   * The fallback for lost notifications: replicas sharing PostgreSQL look at a
   * fingerprint of both tables every two seconds and reload when it changes.
   * (With SQLite there is one engine process per database.)
   */
  @Interval(FOLLOW_REPLICAS_INTERVAL, 2_000)
  async followOtherReplicas(): Promise<void> {
    if (this.db.kind !== 'postgres' || !this.loadedOnce) return;
    try {
      if ((await this.fingerprint()) !== this.lastFingerprint) await this.reload();
    } catch (error) {
      this.logger.warn(`checking for rule changes by other replicas failed: ${(error as Error).message}`);
    }
  }

  private async fingerprint(): Promise<string> {
    const rows = await queryRows(
      this.db.manager,
      `SELECT (SELECT COUNT(*) FROM api_rules) AS a, (SELECT MAX(updated_at) FROM api_rules) AS b,
              (SELECT COUNT(*) FROM rule_states) AS c, (SELECT MAX(updated_at) FROM rule_states) AS d`,
    );
    return JSON.stringify(rows[0]);
  }

  /** Called whenever the set of rules or their enabled state changes (the schedules follow it). */
  onChange(listener: () => void): void {
    this.changeListeners.push(listener);
  }

  /** The problems that currently keep a file rule at its last good version. */
  problemsOf(rule: LoadedRule): RuleProblem[] {
    const file = fileOf(rule);
    return file === undefined ? [] : this.problems.filter((p) => this.sameFile(p.file, file));
  }

  /** Re-reads RULES_DIR, the API rules and the overrides; concurrent calls share one reload. */
  reload(): Promise<ReloadReport> {
    this.reloading ??= this.exclusive(() => this.doReload()).finally(() => (this.reloading = undefined));
    return this.reloading;
  }

  /**
   * Runs a change of the stored rules (its database write and its in-memory
   * update) so that no reload reads the database before the write and swaps in
   * its older picture after the update.
   */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.lock.runExclusive(work);
  }

  putApiRule(definition: RuleDefinition): LoadedRule {
    const rule = toLoadedRule(definition, { kind: 'api' });
    this.apiRules.set(rule.id, rule);
    this.rebuildIndex();
    return this.withOverride(rule);
  }

  dropApiRule(id: string): void {
    this.apiRules.delete(id);
    this.overrides.delete(id);
    this.rebuildIndex();
  }

  isFileRule(id: string): boolean {
    return this.fileRules.has(id);
  }

  /** Records an operator's override; it survives reloads and restarts. */
  async setEnabled(ruleId: string, enabled: boolean, now: Date): Promise<void> {
    await this.exclusive(async () => {
      await this.db.write(async (manager) => {
        await manager.save(RuleStateEntity, { ruleId, enabled, updatedAt: now.toISOString() });
        await this.announceChange(manager);
      });
      this.overrides.set(ruleId, enabled);
      this.rebuildIndex();
    });
  }

  private async doReload(): Promise<ReloadReport> {
    // Taken before reading, so a change made meanwhile is seen at the next look.
    if (this.db.kind === 'postgres') this.lastFingerprint = await this.fingerprint();
    const { rules: fresh, problems, files, stamps } = await loadRuleFiles(this.config.rulesDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === undefined) throw error; // not the folder's: e.g. the rule schema (rule-schema.ts)
      throw new Error(`RULES_DIR ${this.config.rulesDir} cannot be read: ${error.code === 'ENOENT' ? 'no such folder' : error.message}`);
    });
    this.lastFileRead = { files, stamps };
    const [states, apiRows] = await Promise.all([this.states.find(), this.apiRuleRows.find()]);
    this.overrides = new Map(states.map((s) => [s.ruleId, s.enabled]));
    this.apiRules = new Map(
      apiRows.map((row) => [row.ruleId, toLoadedRule(safeJsonParse(row.definition) as RuleDefinition, { kind: 'api' })]),
    );
    const collisions = fresh.filter((rule) => this.apiRules.has(rule.id));
    for (const rule of collisions) {
      const file = fileOf(rule);
      problems.push({ file: file === undefined ? '?' : displayPath(join(this.config.rulesDir, file)), path: '$.id', message: `rule id "${rule.id}" is taken by a rule created through the admin API` });
    }
    const report = this.merge(fresh.filter((rule) => !this.apiRules.has(rule.id)), problems);
    this.problems = problems;
    this.rebuildIndex();
    this.loadedOnce = true;
    for (const problem of problems) this.logger.warn(`rule file problem: ${formatProblem(problem)}`);
    this.logger.log({
      msg: 'rules loaded',
      files: this.fileRules.size,
      api: this.apiRules.size,
      loaded: report.loaded.length,
      changed: report.changed.length,
      removed: report.removed.length,
      kept: report.kept.length,
      problems: problems.length,
    });
    return report;
  }

  private merge(fresh: LoadedRule[], problems: RuleProblem[]): ReloadReport {
    const report: ReloadReport = { loaded: [], changed: [], removed: [], unchanged: [], kept: [], rejected: problems };
    const next = new Map<string, LoadedRule>();
    for (const rule of fresh) {
      const previous = this.fileRules.get(rule.id);
      if (!previous) report.loaded.push(rule.id);
      else if (previous.version !== rule.version) report.changed.push(rule.id);
      else report.unchanged.push(rule.id);
      next.set(rule.id, rule);
    }
    for (const [id, previous] of this.fileRules) {
      if (next.has(id)) continue;
      const file = fileOf(previous);
      if (file !== undefined && problems.some((p) => this.sameFile(p.file, file))) {
        next.set(id, previous);
        report.kept.push(id);
      } else {
        report.removed.push(id);
      }
    }
    this.fileRules = next;
    return report;
  }

  /** Problems name files relative to the working directory, rules relative to RULES_DIR. */
  private sameFile(problemFile: string, ruleFile: string): boolean {
    return resolve(problemFile) === resolve(this.config.rulesDir, ruleFile);
  }

  private withOverride(rule: LoadedRule): LoadedRule {
    const override = this.overrides.get(rule.id);
    return override === undefined || override === rule.enabled ? rule : { ...rule, enabled: override };
  }

  private rebuildIndex(): void {
    this.currentIndex = new RuleIndex(this.all());
    this.cancellers.clear();
    for (const listener of this.changeListeners) listener();
  }
}


