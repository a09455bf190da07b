/**
 * The engine's core services on a real database, built by hand the way
 * app.module.ts wires them: no Nest application and no HTTP server of the
 * engine. The tier between unit specs and end-to-end suites. The service's API
 * is the simulator over real HTTP when a test gives its address; without one,
 * actions run dry (DRY_RUN), because sending is then not the point.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EntityTarget, ObjectLiteral, Repository } from 'typeorm';
import { ServiceClient } from '../../src/actions/service-client.js';
import { loadConfig, type EngineConfig } from '../../src/config/config.js';
import { ActionRunEntity, type ActionRunStatus } from '../../src/database/action-run.entity.js';
import { ApiRuleEntity } from '../../src/database/api-rule.entity.js';
import type { Database } from '../../src/database/database.service.js';
import { EventEntity } from '../../src/database/event.entity.js';
import { ExecutionEntity } from '../../src/database/execution.entity.js';
import { RuleStateEntity } from '../../src/database/rule-state.entity.js';
import { resourceKeyOf, type EventEnvelope } from '../../src/intake/envelope.js';
import { EventWriter } from '../../src/intake/event-writer.js';
import { IntakeService } from '../../src/intake/intake.service.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ActionRunner } from '../../src/processing/action-runner.js';
import { EventProcessor } from '../../src/processing/event-processor.js';
import { ExecutionProgress } from '../../src/processing/execution-progress.js';
import { StepRunner } from '../../src/processing/step-runner.js';
import { RunRequests } from '../../src/processing/run-request.js';
import { WorkQueue } from '../../src/processing/work-queue.js';
import { ApiRulesService } from '../../src/rules/api-rules.service.js';
import { RuleRegistry } from '../../src/rules/rule-registry.service.js';
import type { LoadedRule } from '../../src/rules/rule.types.js';
import { startSimulator, type Simulator } from '../../src/simulator/simulator.js';
import type { DatabaseKindUnderTest, TestDatabase } from './databases.js';
import { TEST_ADMIN_TOKEN, TEST_API_KEY, TEST_SECRET } from './secrets.js';
import { ManualClock, openDatabase } from './storage.js';
import type { ClaimedActionRun, ClaimedEvent, RuleExplanation } from '../../src/processing/work.js';

/** The core services run with the same secrets as the end-to-end engines. */
export const CORE_SECRET = TEST_SECRET;
const API_KEY = TEST_API_KEY;
const ADMIN_TOKEN = TEST_ADMIN_TOKEN;

/** A task event as the service sends it; `task` fields override the defaults. */
export function taskEvent(type: string, task: Record<string, unknown> = {}): EventEnvelope {
  return {
    id: `evt_${randomUUID()}`,
    type,
    created_at: '2026-01-01T00:00:00.000Z',
    data: { task: { id: `tsk_${randomUUID().slice(0, 8)}`, project_id: 'prj_1', title: 'Write docs', status: 'open', ...task } },
  };
}

export interface CoreOptions {
  /** The simulator's /v1 address: actions are sent there. Without it they run dry. */
  serviceUrl?: string;
  /** Environment overrides, read by loadConfig like the engine's own. */
  env?: Record<string, string | undefined>;
}

function coreConfig(databaseUrl: string, rulesDir: string, { serviceUrl, env = {} }: CoreOptions): EngineConfig {
  return loadConfig(
    {
      DATABASE_URL: databaseUrl,
      RULES_DIR: rulesDir,
      WEBHOOK_SECRET: CORE_SECRET,
      ADMIN_TOKEN,
      SERVICE_API_URL: serviceUrl ?? 'http://127.0.0.1:9/v1',
      SERVICE_API_KEY: serviceUrl === undefined ? undefined : API_KEY,
      DRY_RUN: serviceUrl === undefined ? 'true' : 'false',
      SERVICE_TIMEOUT_MS: '2000',
      ...env,
    },
    () => ADMIN_TOKEN,
  );
}

/** A registry over the database, as a freshly started engine builds it (call `reload()`). */
export function ruleRegistry(config: EngineConfig, db: Database): RuleRegistry {
  const repository = <T extends ObjectLiteral>(entity: EntityTarget<T>) => db.dataSource.getRepository(entity);
  return new RuleRegistry(config, repository(RuleStateEntity), repository(ApiRuleEntity), db);
}

export class Core {
  readonly metrics = new Metrics();
  readonly writer: EventWriter;
  readonly queue: WorkQueue;
  readonly registry: RuleRegistry;
  readonly apiRules: ApiRulesService;
  readonly client: ServiceClient;
  readonly processor: EventProcessor;
  readonly runner: ActionRunner;
  readonly intake: IntakeService;

  constructor(
    readonly config: EngineConfig,
    readonly clock: ManualClock,
    readonly db: Database,
    private readonly cleanUp: () => Promise<void>,
  ) {
    this.writer = new EventWriter(db, clock);
    this.queue = new WorkQueue(db, clock);
    this.registry = ruleRegistry(config, db);
    this.apiRules = new ApiRulesService(this.registry, db, clock);
    this.client = new ServiceClient(config, clock);
    this.processor = new EventProcessor(config, clock, db, this.registry, this.client, this.metrics);
    const requests = new RunRequests(clock, db);
    const steps = new StepRunner(config, clock, db, this.client, requests);
    this.runner = new ActionRunner(config, clock, this.client, db, requests, new ExecutionProgress(this.metrics, db), steps);
    this.intake = new IntakeService(config, clock, this.writer, this.repository(EventEntity), this.metrics);
  }

  repository<T extends ObjectLiteral>(entity: EntityTarget<T>): Repository<T> {
    return this.db.dataSource.getRepository(entity);
  }

  /** Rules the registry runs from now on (in memory, as the admin API puts them). */
  useRules(...rules: LoadedRule[]): void {
    for (const rule of rules) this.registry.putApiRule(rule.definition);
  }

  /** Stores an event as intake does once it is verified; returns its id. */
  async store(event: EventEnvelope): Promise<string> {
    await this.writer.write({
      eventId: event.id,
      type: event.type,
      resourceKey: resourceKeyOf(event.data),
      source: 'webhook',
      payload: JSON.stringify(event),
    });
    return event.id;
  }

  /** Claims the next event and evaluates it, as a worker does. */
  async processNext(): Promise<{ claim: ClaimedEvent; runs: number }> {
    const [claim] = await this.queue.claimEvents(1);
    if (!claim) throw new Error('no event is claimable');
    return { claim, runs: (await this.processor.process(claim, this.queue.owner)).length };
  }

  /** Claims the next due action run and performs it, as a worker does. */
  async performNext(): Promise<{ claim: ClaimedActionRun; status: ActionRunStatus }> {
    const [claim] = await this.queue.claimActionRuns(1, this.runner.leaseMs);
    if (!claim) throw new Error('no action run is due');
    return { claim, status: await this.runner.perform(claim, this.queue.owner) };
  }

  event(eventId: string): Promise<EventEntity> {
    return this.db.manager.findOneByOrFail(EventEntity, { eventId });
  }

  async explanation(eventId: string): Promise<RuleExplanation[]> {
    return JSON.parse((await this.event(eventId)).explanation ?? 'null') as RuleExplanation[];
  }

  executions(eventId: string): Promise<ExecutionEntity[]> {
    return this.db.manager.find(ExecutionEntity, { where: { eventId }, order: { createdAt: 'ASC', ruleId: 'ASC' } });
  }

  runs(executionId: string): Promise<ActionRunEntity[]> {
    return this.db.manager.find(ActionRunEntity, { where: { executionId }, order: { position: 'ASC' } });
  }

  run(id: string): Promise<ActionRunEntity> {
    return this.db.manager.findOneByOrFail(ActionRunEntity, { id });
  }

  close(): Promise<void> {
    return this.cleanUp();
  }
}

/** A fresh database of `kind` with the engine's schema, an empty rules folder, and the core on them. */
export async function openCore(kind: DatabaseKindUnderTest, options: CoreOptions = {}): Promise<Core> {
  const testDb: TestDatabase = await kind.create();
  const rulesDir = mkdtempSync(join(tmpdir(), 'core-rules-'));
  const db = await openDatabase(testDb.url);
  const cleanUp = async () => {
    await db.dataSource.destroy();
    await testDb.drop();
    rmSync(rulesDir, { recursive: true, force: true });
  };
  return new Core(coreConfig(testDb.url, rulesDir, options), new ManualClock(), db, cleanUp);
}

/**
 * For a describe block: one simulator (the service, over real HTTP) for the
 * block, and fresh core services sending to it for each test.
 */
export function useCoreWithSimulator(kind: DatabaseKindUnderTest): { readonly sim: Simulator; readonly core: Core } {
  let sim: Simulator;
  let core: Core;
  beforeAll(async () => {
    sim = await startSimulator({ seed: true });
  });
  afterAll(() => sim.close());
  beforeEach(async () => {
    sim.reset();
    core = await openCore(kind, { serviceUrl: sim.url });
  });
  afterEach(() => core.close());
  return {
    get sim() {
      return sim;
    },
    get core() {
      return core;
    },
  };
}
