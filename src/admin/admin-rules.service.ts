/** What the admin API shows of rules, and the dry runs it offers (test, backtest). */
import { Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { parseEnvelope, type EventEnvelope } from '../intake/envelope.js';
import { runBacktest, BACKTEST_MAX_LIMIT, type BacktestFilter } from '../processing/backtest.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { testRule } from '../processing/dry-run.js';
import { assertValidRule, problemDetails } from '../rules/api-rules.service.js';
import { loadRuleFiles, toLoadedRule } from '../rules/rule-files.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import { validateRule } from '../rules/rule-validation.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { invalid, type FieldProblem } from '../http/json-body.js';
import { isObject } from '../json.js';

interface RuleCounts {
  matched: number;
  succeeded: number;
  failed: number;
  last_matched_at: string | null;
}

@Injectable()
export class AdminRulesService {
  constructor(
    private readonly registry: RuleRegistry,
    private readonly client: ServiceClient,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @InjectRepository(ExecutionEntity) private readonly executions: Repository<ExecutionEntity>,
  ) {}

  async list() {
    const counts = await this.counts();
    return this.registry
      .all()
      // Code-unit order, the order the list's cursor (`id > after`) pages in; localeCompare differs on ".", "-", "_".
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((rule) => this.summary(rule, counts.get(rule.id)));
  }

  async get(id: string) {
    const rule = this.find(id);
    const counts = await this.counts(id);
    const problems = this.registry.problemsOf(rule);
    return {
      ...this.summary(rule, counts.get(id)),
      definition: rule.definition,
      ...(problems.length ? { file_problems: problemDetails(problems), note: 'the file is invalid now; this is its last good version' } : {}),
    };
  }

  find(id: string): LoadedRule {
    const rule = this.registry.get(id);
    if (!rule) throw new DomainError('not_found', `no rule "${id}"`);
    return rule;
  }

  validate(body: unknown) {
    const problems = validateRule(body, 'request body');
    return { valid: problems.length === 0, errors: problemDetails(problems) };
  }

  async test(rule: LoadedRule, body: unknown) {
    const event = eventOf(body);
    return testRule(rule, event, { lookups: new ServiceLookups(this.client), now: this.clock.now(), maxForEachItems: this.config.maxForEachItems });
  }

  async testUnsaved(body: unknown) {
    if (!isObject(body)) throw invalid('body must be an object with "rule" and "event"', [{ path: '$', message: 'must be an object' }]);
    const definition = withPrefix(() => assertValidRule(body.rule), '$.rule');
    return this.test(toLoadedRule(definition, { kind: 'api' }), body);
  }

  async backtest(body: unknown) {
    const input = body === undefined ? {} : body;
    if (!isObject(input)) throw invalid('body must be an object', [{ path: '$', message: 'must be an object' }]);
    const filter = backtestFilter(input);
    const rules = input.rules === undefined ? await this.rulesInFilesNow() : this.proposedRules(input.rules);
    return runBacktest(this.executions.manager, rules.filter((r) => r.enabled), filter, {
      lookups: () => new ServiceLookups(this.client),
      now: this.clock.now(),
      maxForEachItems: this.config.maxForEachItems,
    });
  }

  private proposedRules(raw: unknown): LoadedRule[] {
    const list = Array.isArray(raw) ? raw : [raw];
    const problems = list.flatMap((rule, i) => validateRule(rule, 'request body', i));
    if (problems.length > 0) throw invalid('the rules have problems', problemDetails(problems).map((p) => ({ ...p, path: p.path.replace(/^\$/, '$.rules') })));
    return list.map((definition) => toLoadedRule(definition, { kind: 'api' }));
  }

  private async rulesInFilesNow(): Promise<LoadedRule[]> {
    const { rules } = await loadRuleFiles(this.config.rulesDir);
    return rules;
  }

  private summary(rule: LoadedRule, counts?: RuleCounts) {
    return {
      id: rule.id,
      name: rule.definition.name ?? null,
      source: rule.source.kind,
      ...(rule.source.kind === 'file' ? { path: rule.source.path } : {}),
      enabled: rule.enabled,
      priority: rule.priority,
      triggers: rule.triggers,
      ...(rule.definition.schedule ? { schedule: rule.definition.schedule } : {}),
      version: rule.version,
      counts: { matched: counts?.matched ?? 0, succeeded: counts?.succeeded ?? 0, failed: counts?.failed ?? 0 },
      last_matched_at: counts?.last_matched_at ?? null,
    };
  }

  private async counts(ruleId?: string): Promise<Map<string, RuleCounts>> {
    const query = this.executions
      .createQueryBuilder('x')
      .select('x.rule_id', 'rule')
      .addSelect('COUNT(*)', 'matched')
      .addSelect(`SUM(CASE WHEN x.status = 'succeeded' THEN 1 ELSE 0 END)`, 'succeeded')
      .addSelect(`SUM(CASE WHEN x.status = 'failed' THEN 1 ELSE 0 END)`, 'failed')
      .addSelect('MAX(x.created_at)', 'last')
      .groupBy('x.rule_id');
    if (ruleId) query.where('x.rule_id = :ruleId', { ruleId });
    const rows = await query.getRawMany<{ rule: string; matched: string; succeeded: string; failed: string; last: string }>();
    return new Map(
      rows.map((r) => [r.rule, { matched: Number(r.matched), succeeded: Number(r.succeeded), failed: Number(r.failed), last_matched_at: r.last }]),
    );
  }
}

function eventOf(body: unknown): EventEnvelope {
  if (!isObject(body) || body.event === undefined) {
    throw invalid('body must be an object with an "event"', [{ path: '$.event', message: 'is required' }]);
  }
  const parsed = parseEnvelope(Buffer.from(JSON.stringify(body.event)));
  if (!parsed.ok) throw invalid(parsed.message, [{ path: '$.event', message: parsed.message }]);
  return parsed.envelope;
}

function withPrefix<T>(work: () => T, prefix: string): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof DomainError && Array.isArray(error.details)) {
      const details = (error.details as FieldProblem[]).map((d) => ({ ...d, path: d.path.replace(/^\$/, prefix) }));
      throw new DomainError(error.code, error.message, details);
    }
    throw error;
  }
}

function backtestFilter(input: Record<string, unknown>): BacktestFilter {
  const problems: FieldProblem[] = [];
  const filter: BacktestFilter = {};
  for (const key of ['since', 'until'] as const) {
    const value = input[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || Number.isNaN(Date.parse(value))) problems.push({ path: `$.${key}`, message: 'must be an ISO-8601 date-time' });
    else filter[key] = new Date(value).toISOString();
  }
  if (input.type !== undefined) {
    if (typeof input.type !== 'string' || input.type === '') problems.push({ path: '$.type', message: 'must be an event type' });
    else filter.type = input.type;
  }
  if (input.limit !== undefined) {
    if (!Number.isInteger(input.limit) || (input.limit as number) < 1 || (input.limit as number) > BACKTEST_MAX_LIMIT) {
      problems.push({ path: '$.limit', message: `must be a whole number from 1 to ${BACKTEST_MAX_LIMIT}` });
    } else filter.limit = input.limit as number;
  }
  if (problems.length > 0) throw invalid('the backtest filter has problems', problems);
  return filter;
}
