/**
 * The rules the engine runs now: the files in RULES_DIR, each kept at its last
 * good version when its file turns invalid, with operators' enable/disable
 * overrides applied, and indexed by the event types they listen to.
 */
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { loadRuleFiles } from './rule-files.js';
import { RuleIndex } from './rule-index.js';
import { RuleStateEntity } from './rule-state.entity.js';
import { formatProblem, type LoadedRule, type RuleProblem } from './rule.types.js';

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

@Injectable()
export class RuleRegistry implements OnModuleInit {
  private readonly logger = new Logger('rules');
  private rules = new Map<string, LoadedRule>();
  private overrides = new Map<string, boolean>();
  private currentIndex = new RuleIndex([]);
  private loadedOnce = false;
  problems: RuleProblem[] = [];

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @InjectRepository(RuleStateEntity) private readonly states: Repository<RuleStateEntity>,
    private readonly db: Database,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.reload();
  }

  get ready(): boolean {
    return this.loadedOnce;
  }

  get index(): RuleIndex {
    return this.currentIndex;
  }

  all(): LoadedRule[] {
    return [...this.rules.values()].map((rule) => this.withOverride(rule));
  }

  get(id: string): LoadedRule | undefined {
    const rule = this.rules.get(id);
    return rule && this.withOverride(rule);
  }

  async reload(): Promise<ReloadReport> {
    const { rules: fresh, problems } = await loadRuleFiles(this.config.rulesDir);
    const overrides = await this.states.find();
    this.overrides = new Map(overrides.map((s) => [s.ruleId, s.enabled]));
    const report = this.merge(fresh, problems);
    this.problems = problems;
    this.rebuildIndex();
    this.loadedOnce = true;
    for (const problem of problems) this.logger.warn(`rule file problem: ${formatProblem(problem)}`);
    this.logger.log({
      msg: 'rules loaded',
      active: this.rules.size,
      loaded: report.loaded.length,
      changed: report.changed.length,
      removed: report.removed.length,
      kept: report.kept.length,
      problems: problems.length,
    });
    return report;
  }

  /** Records an operator's override; it survives reloads and restarts. */
  async setEnabled(ruleId: string, enabled: boolean, now: Date): Promise<void> {
    await this.db.write((manager) => manager.save(RuleStateEntity, { ruleId, enabled, updatedAt: now.toISOString() }));
    this.overrides.set(ruleId, enabled);
    this.rebuildIndex();
  }

  private merge(fresh: LoadedRule[], problems: RuleProblem[]): ReloadReport {
    const report: ReloadReport = { loaded: [], changed: [], removed: [], unchanged: [], kept: [], rejected: problems };
    const filesWithProblems = new Set(problems.map((p) => p.file));
    const next = new Map<string, LoadedRule>();
    for (const rule of fresh) {
      const previous = this.rules.get(rule.id);
      if (!previous) report.loaded.push(rule.id);
      else if (previous.version !== rule.version) report.changed.push(rule.id);
      else report.unchanged.push(rule.id);
      next.set(rule.id, rule);
    }
    for (const [id, previous] of this.rules) {
      if (next.has(id)) continue;
      const file = fileOf(previous);
      if (file !== undefined && this.isInvalidNow(file, filesWithProblems)) {
        next.set(id, previous);
        report.kept.push(id);
      } else {
        report.removed.push(id);
      }
    }
    this.rules = next;
    return report;
  }

  private isInvalidNow(file: string, filesWithProblems: Set<string>): boolean {
    for (const problemFile of filesWithProblems) if (problemFile === file || problemFile.endsWith(`/${file}`)) return true;
    return false;
  }

  private withOverride(rule: LoadedRule): LoadedRule {
    const override = this.overrides.get(rule.id);
    return override === undefined || override === rule.enabled ? rule : { ...rule, enabled: override };
  }

  private rebuildIndex(): void {
    this.currentIndex = new RuleIndex(this.all());
  }
}
