import { readFileSync } from 'node:fs';
import { RULE_SCHEMA_PATH } from '../rules/rule-schema.js';
import { ACTION_HANDLERS, ACTION_TYPES, CREATING_ACTIONS, handlerFor, touchedResource } from './action-types.js';

interface Conditional {
  if: { properties: { type: { const?: string; enum?: string[] } } };
  then: { properties: { params: { required?: string[] } } };
}

const schema = JSON.parse(readFileSync(RULE_SCHEMA_PATH, 'utf8')) as {
  definitions: Record<string, { properties: { type: { enum: string[] } }; allOf: Conditional[] }>;
};
const actionSchema = Object.values(schema.definitions).find((definition) => definition.properties?.type?.enum?.includes('task.create'))!;

/** The params the rule schema requires for an action type, gathered from its if/then blocks. */
function schemaRequired(type: string): string[] {
  return actionSchema.allOf
    .filter(({ if: when }) => when.properties.type.const === type || when.properties.type.enum?.includes(type))
    .flatMap(({ then }) => then.properties.params.required ?? [])
    .sort();
}

describe('action types', () => {
  describe('the rule schema against the registry', () => {
    it('lists exactly the registered action types, in the same order', () => {
      expect(actionSchema.properties.type.enum).toEqual(ACTION_TYPES);
    });

    it.each(ACTION_TYPES)('requires the same params as the %s handler', (type) => {
      expect(schemaRequired(type)).toEqual([...ACTION_HANDLERS[type].required].sort());
    });
  });

  describe('creating actions', () => {
    it('are the types whose handler says it creates a resource', () => {
      expect([...CREATING_ACTIONS].sort()).toEqual(['project.create', 'task.create', 'user.invite', 'workflow.trigger']);
    });
  });

  describe(touchedResource.name, () => {
    it('names the target of a changing action before any answer', () => {
      const request = handlerFor('task.update').toRequest({ id: 'tsk_9', status: 'done' });
      expect(touchedResource('task.update', request, null)).toBe('task:tsk_9');
    });

    it('names a created resource from the answer', () => {
      const request = handlerFor('task.create').toRequest({ project_id: 'prj_1' });
      expect(touchedResource('task.create', request, { id: 'tsk_new' })).toBe('task:tsk_new');
    });
  });

  describe(handlerFor.name, () => {
    it('refuses a type that is not registered', () => {
      expect(() => handlerFor('task.explode')).toThrow('unknown action type "task.explode"');
    });

    it('refuses a rendered user.invite without an email, as the schema does', () => {
      expect(() => handlerFor('user.invite').toRequest({ role: 'member' })).toThrow('user.invite needs params.email');
    });
  });
});
