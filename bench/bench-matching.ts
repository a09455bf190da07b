/**
 * Rule matching throughput (SPEC 10), for `npm run bench`: index + conditions
 * + explanations, as the processor runs them, without storage or actions.
 *
 * The rules are spread over event types and projects the way a real
 * installation's are, so most of them cannot match a given event: the number
 * that shows is how well the index keeps those out of the way.
 */
import { EventFacts, type Lookups, type RuleEvent } from '../src/rules/facts.js';
import { compileRules, evaluateEvent } from '../src/rules/rule-evaluator.js';
import { RuleIndex } from '../src/rules/rule-index.js';
import type { LoadedRule, RuleDefinition } from '../src/rules/rule.types.js';

export interface MatchingBenchmark {
  ruleCount: number;
  eventsPerSecond: number;
  /** Rules whose conditions ran per event, on average (the rest were never looked at). */
  evaluatedPerEvent: number;
}

const TYPES = [
  'task.created', 'task.updated', 'task.completed', 'task.deleted',
  'project.created', 'project.updated', 'user.invited', 'workflow.run.completed',
];
/** About this many rules share one (type, project): what an event can meet. */
const RULES_PER_PROJECT_AND_TYPE = 2;

const noLookups: Lookups = {
  project: async (id) => ({ id }),
  user: async (id) => ({ id }),
  tasks: async () => [],
};

function kindOf(type: string): string {
  return type.split('.')[0];
}

function benchRule(i: number, projects: number): LoadedRule {
  const type = TYPES[i % TYPES.length];
  const path = `$.data.${kindOf(type)}`;
  const definition: RuleDefinition = {
    id: `bench-${i}`,
    priority: 1 + (i % 5),
    on: type,
    conditions: {
      all: [
        { fact: 'event', path: `${path}.project_id`, operator: 'equal', value: `prj_${i % projects}` },
        { any: [{ fact: 'event', path: `${path}.title`, operator: 'matches', value: '^Release' }, { fact: 'event', path: `${path}.priority`, operator: 'greaterThan', value: 3 }] },
      ],
    },
    actions: [{ type: 'task.create', params: { project_id: `prj_${i % projects}`, title: 'Follow-up' } }],
  };
  return { id: definition.id, definition, source: { kind: 'api' }, version: 'bench', triggers: [type], priority: definition.priority!, enabled: true };
}

/** `count` rule definitions spread over event types and projects, as rule files would hold them (the start-up run writes them). */
export function ruleDefinitions(count: number): RuleDefinition[] {
  const projects = Math.max(1, Math.ceil(count / (TYPES.length * RULES_PER_PROJECT_AND_TYPE)));
  return Array.from({ length: count }, (_, i) => ({ name: `Benchmark rule ${i}`, ...benchRule(i, projects).definition }));
}

/** A small deterministic generator, so runs are comparable. */
function sequence(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

function benchEvents(count: number, projects: number): RuleEvent[] {
  const random = sequence(42);
  return Array.from({ length: count }, (_, i) => {
    const type = TYPES[Math.floor(random() * TYPES.length)];
    const resource = { id: `res_${i}`, project_id: `prj_${Math.floor(random() * projects)}`, title: random() < 0.5 ? 'Release 1.0' : 'Chore', priority: 1 + Math.floor(random() * 5) };
    return { id: `evt_${i}`, type, data: { [kindOf(type)]: resource } };
  });
}

async function run(index: RuleIndex, events: RuleEvent[]): Promise<number> {
  let evaluated = 0;
  for (const event of events) {
    const facts = new EventFacts(event, { now: new Date(0), lookups: noLookups });
    evaluated += (await evaluateEvent(index, event, facts)).evaluations.length;
  }
  return evaluated;
}

export async function benchmarkMatching(ruleCount: number, events: number): Promise<MatchingBenchmark> {
  const projects = Math.max(1, Math.ceil(ruleCount / (TYPES.length * RULES_PER_PROJECT_AND_TYPE)));
  const rules = Array.from({ length: ruleCount }, (_, i) => benchRule(i, projects));
  const index = new RuleIndex(rules);
  compileRules(rules);
  const sample = benchEvents(events, projects);
  await run(index, sample.slice(0, Math.min(events, 1_000))); // warm-up: JIT, type cache
  const started = performance.now();
  const evaluated = await run(index, sample);
  const seconds = (performance.now() - started) / 1000;
  return { ruleCount, eventsPerSecond: Math.round(events / seconds), evaluatedPerEvent: evaluated / events };
}
