import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { EventProcessor } from './event-processor.js';
import { SELF_CAUSED_WINDOW_MS } from './loop-guard.js';

const kinds = await databasesUnderTest('event processor: loop protection');

const MAX_CHAIN_DEPTH = 3;
const echoOnly = aRule({ id: 'echo-only' });
const selfTriggered = aRule({ id: 'self-triggered', options: { allowSelfTriggered: true } });

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${EventProcessor.name} on $name: loop protection`, (kind) => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(kind, { env: { MAX_CHAIN_DEPTH: String(MAX_CHAIN_DEPTH) } });
  });

  afterEach(() => core.close());

  /** An engine action at chain depth `depth` touched the task `ageMs` ago; returns an event about that task. */
  async function eventAboutTaskTheEngineTouched(depth: number, ageMs = 60_000): Promise<string> {
    const taskId = `tsk_${randomUUID().slice(0, 8)}`;
    const changedAt = new Date(core.clock.now().getTime() - ageMs).toISOString();
    await core.db.write((m) =>
      m.insert(ResourceProvenanceEntity, { resourceKey: `task:${taskId}`, depth, actionRunId: randomUUID(), ruleId: 'earlier-rule', changedAt }),
    );
    return core.store(taskEvent('task.completed', { id: taskId }));
  }

  describe('an event about a resource an engine action touched a minute ago', () => {
    it('is self-caused, one link deeper, and ignored by a rule that does not allow self-triggering', async () => {
      core.useRules(echoOnly);
      const eventId = await eventAboutTaskTheEngineTouched(1);
      expect((await core.processNext()).runs).toBe(0);

      expect(await core.event(eventId)).toMatchObject({ status: 'ignored', selfCaused: true, depth: 2 });
      expect(await core.explanation(eventId)).toEqual([
        expect.objectContaining({ rule: 'echo-only', outcome: 'ignored_self_caused', conditions: [] }),
      ]);
      expect(await core.executions(eventId)).toEqual([]);
    });

    it('is evaluated by a rule that allows self-triggering', async () => {
      core.useRules(echoOnly, selfTriggered);
      const eventId = await eventAboutTaskTheEngineTouched(1);
      expect((await core.processNext()).runs).toBe(1);

      expect(await core.event(eventId)).toMatchObject({ status: 'processed', selfCaused: true, depth: 2 });
      expect((await core.explanation(eventId)).map((e) => [e.rule, e.outcome])).toEqual([
        ['echo-only', 'ignored_self_caused'],
        ['self-triggered', 'matched'],
      ]);
      expect((await core.executions(eventId)).map((x) => x.ruleId)).toEqual(['self-triggered']);
    });
  });

  describe('an event about a resource the engine touched longer ago than the window', () => {
    it('is an outside event again, at depth zero', async () => {
      core.useRules(echoOnly);
      const eventId = await eventAboutTaskTheEngineTouched(1, SELF_CAUSED_WINDOW_MS + 1);
      expect((await core.processNext()).runs).toBe(1);

      expect(await core.event(eventId)).toMatchObject({ status: 'processed', selfCaused: false, depth: 0 });
    });
  });

  describe(`a chain at MAX_CHAIN_DEPTH (${MAX_CHAIN_DEPTH})`, () => {
    it('is cut: the event is loop_blocked and no rule evaluates it', async () => {
      core.useRules(echoOnly, selfTriggered);
      const eventId = await eventAboutTaskTheEngineTouched(MAX_CHAIN_DEPTH - 1);
      expect((await core.processNext()).runs).toBe(0);

      expect(await core.event(eventId)).toMatchObject({ status: 'loop_blocked', selfCaused: true, depth: MAX_CHAIN_DEPTH });
      expect(await core.explanation(eventId)).toEqual([]);
      expect(await core.executions(eventId)).toEqual([]);
      expect((await core.metrics.loopsBlocked.get()).values[0].value).toBe(1);
    });

    it('is not cut one link earlier', async () => {
      core.useRules(selfTriggered);
      const eventId = await eventAboutTaskTheEngineTouched(MAX_CHAIN_DEPTH - 2);
      expect((await core.processNext()).runs).toBe(1);

      expect(await core.event(eventId)).toMatchObject({ status: 'processed', depth: MAX_CHAIN_DEPTH - 1 });
    });
  });
});
