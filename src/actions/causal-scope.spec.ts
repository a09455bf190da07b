import { ACTION_HANDLERS, CREATING_ACTIONS, handlerFor } from './action-types.js';
import { inScope, scopeOf, scopeOfEvent, type CausalScope } from '../causal-scope.js';

describe('causal scopes', () => {
  it.each<[string, string | null, unknown, CausalScope | null]>([
    ['a task names its project', 'task:t1', { task: { id: 't1', project_id: 'prj_1' } }, { kind: 'task', parent: 'project:prj_1' }],
    ['a numeric project id', 'task:t1', { task: { id: 't1', project_id: 7 } }, { kind: 'task', parent: 'project:7' }],
    ['a task without a project could be any task', 'task:t1', { task: { id: 't1' } }, { kind: 'task', parent: null }],
    ['an empty project id tells nothing', 'task:t1', { task: { id: 't1', project_id: '' } }, { kind: 'task', parent: null }],
    ['an invited user by address, case and spaces folded', 'user:u1', { user: { id: 'u1', email: ' Ann@Example.COM' } }, { kind: 'user', parent: 'email:ann@example.com' }],
    ['a workflow run by its workflow', 'workflow_run:r1', { workflow_run: { id: 'r1', workflow_id: 'wf_1' } }, { kind: 'workflow_run', parent: 'workflow:wf_1' }],
    ['a project has no parent', 'project:p1', { project: { id: 'p1', name: 'x' } }, { kind: 'project', parent: null }],
    ['an event about no resource has no scope', null, { other: 1 }, null],
  ])('%s', (_name, resourceKey, data, expected) => {
    expect(scopeOfEvent(resourceKey, data)).toEqual(expected);
  });

  it('cuts a parent too long for its column, so two such scopes can only merge (wait more), never part', () => {
    expect(scopeOf('task', { project_id: 'p'.repeat(1_000) }).parent).toHaveLength(250);
  });

  it.each<[string, CausalScope, CausalScope, boolean]>([
    ['same kind and parent', { kind: 'task', parent: 'project:A' }, { kind: 'task', parent: 'project:A' }, true],
    ['another project', { kind: 'task', parent: 'project:B' }, { kind: 'task', parent: 'project:A' }, false],
    ['the event cannot tell its project', { kind: 'task', parent: null }, { kind: 'task', parent: 'project:A' }, true],
    ['the create names no parent', { kind: 'project', parent: null }, { kind: 'project', parent: null }, true],
    ['another kind', { kind: 'task', parent: null }, { kind: 'project', parent: null }, false],
  ])('an event may have been caused by a create in flight: %s', (_name, event, action, expected) => {
    expect(inScope(event, action)).toBe(expected);
  });

  describe('what a creating request could create', () => {
    it.each([
      ['task.create', { project_id: 'prj_1', title: 'x' }, { kind: 'task', parent: 'project:prj_1' }],
      ['user.invite', { email: 'Ann@example.com' }, { kind: 'user', parent: 'email:ann@example.com' }],
      ['project.create', { name: 'x' }, { kind: 'project', parent: null }],
      ['workflow.trigger', { id: 'wf_1', input: {} }, { kind: 'workflow_run', parent: 'workflow:wf_1' }],
    ])('%s', (type, params, scope) => {
      expect(handlerFor(type).toRequest(params).createsIn).toEqual(scope);
    });

    it('every creating action names its scope, in the kind it creates; no other action does', () => {
      for (const [type, handler] of Object.entries(ACTION_HANDLERS)) {
        const params = { id: 'x1', project_id: 'p', email: 'a@b.c', name: 'n', title: 't' };
        const scope = handler.toRequest(params).createsIn;
        if (CREATING_ACTIONS.includes(type as never)) expect(scope?.kind).toBe(handler.kind);
        else expect(scope).toBeUndefined();
      }
    });

    it('a task created in a project is in the scope of the webhook about it, and only of that project', () => {
      const created = handlerFor('task.create').toRequest({ project_id: 'prj_1', title: 'x' }).createsIn!;
      expect(inScope(scopeOfEvent('task:t9', { task: { id: 't9', project_id: 'prj_1' } })!, created)).toBe(true);
      expect(inScope(scopeOfEvent('task:t9', { task: { id: 't9', project_id: 'prj_2' } })!, created)).toBe(false);
    });
  });
});
