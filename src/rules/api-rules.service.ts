/** Rules created, replaced and deleted through the admin API, stored in the database. */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { DomainError } from '../errors.js';
import { ApiRuleEntity } from '../database/api-rule.entity.js';
import { RuleStateEntity } from '../database/rule-state.entity.js';
import { RuleRegistry } from './rule-registry.service.js';
import { validateRule } from './rule-validation.js';
import type { LoadedRule, RuleDefinition, RuleProblem } from './rule.types.js';

export function problemDetails(problems: RuleProblem[]) {
  return problems.map((p) => ({ path: p.path, message: p.message }));
}

/** Validates a rule sent to the API; throws 400 validation_failed with one detail per problem. */
export function assertValidRule(body: unknown): RuleDefinition {
  const problems = validateRule(body, 'request body');
  if (problems.length > 0) {
    throw new DomainError('validation_failed', `the rule has ${problems.length} problem(s)`, problemDetails(problems));
  }
  return body as RuleDefinition;
}

@Injectable()
export class ApiRulesService {
  constructor(
    private readonly registry: RuleRegistry,
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async create(body: unknown): Promise<LoadedRule> {
    const definition = assertValidRule(body);
    return this.registry.exclusive(async () => {
      if (this.registry.get(definition.id)) {
        const where = this.registry.isFileRule(definition.id) ? 'a rule file' : 'the admin API';
        throw new DomainError('rule_id_taken', `rule id "${definition.id}" is already used by ${where}`);
      }
      await this.save(definition, true);
      return this.registry.putApiRule(definition);
    });
  }

  async replace(id: string, body: unknown): Promise<LoadedRule> {
    this.assertApiRule(id);
    const withId = typeof body === 'object' && body !== null && !Array.isArray(body) ? { id, ...body } : body;
    const definition = assertValidRule(withId);
    if (definition.id !== id) {
      throw new DomainError('validation_failed', 'the rule id cannot change', [{ path: '$.id', message: `must be "${id}"` }]);
    }
    return this.registry.exclusive(async () => {
      this.assertApiRule(id);
      await this.save(definition, false);
      return this.registry.putApiRule(definition);
    });
  }

  async remove(id: string): Promise<void> {
    await this.registry.exclusive(async () => {
      this.assertApiRule(id);
      await this.db.write(async (manager) => {
        await manager.delete(ApiRuleEntity, { ruleId: id });
        // A rule created later under the same id starts with no override.
        await manager.delete(RuleStateEntity, { ruleId: id });
        await this.registry.announceChange(manager);
      });
      this.registry.dropApiRule(id);
    });
  }

  private assertApiRule(id: string): void {
    if (this.registry.isFileRule(id)) {
      throw new DomainError('rule_defined_in_file', `rule "${id}" is defined in a file; change the file instead`);
    }
    if (!this.registry.get(id)) throw new DomainError('not_found', `no rule "${id}"`);
  }

  private async save(definition: RuleDefinition, isNew: boolean): Promise<void> {
    const now = this.clock.now().toISOString();
    await this.db.write(async (manager) => {
      if (isNew) await manager.insert(ApiRuleEntity, { ruleId: definition.id, definition: JSON.stringify(definition), createdAt: now, updatedAt: now });
      else await manager.update(ApiRuleEntity, { ruleId: definition.id }, { definition: JSON.stringify(definition), updatedAt: now });
      await this.registry.announceChange(manager);
    });
  }
}
