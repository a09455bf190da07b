/**
 * The simulator's in-memory data. The maps are cleared and refilled in place on
 * reset, so a test holding `simulator.state.tasks` keeps seeing the live data.
 * Field names follow SPEC section 4's convention for webhook payloads.
 */
import { TASK_DEFAULTS, type TaskPriority } from './simulator.fields.js';

export interface User {
  id: string;
  email: string;
  name: string | null;
  role: string;
  status: 'active' | 'invited';
  created_at: string;
  [field: string]: unknown;
}

export interface Project {
  id: string;
  name: string;
  description: string | null;
  status: string;
  owner_id: string | null;
  created_at: string;
  updated_at: string;
  [field: string]: unknown;
}

export interface Task {
  id: string;
  project_id: string;
  title: string;
  status: string;
  assignee_id: string | null;
  /** An ISO date (`2026-11-30`) or null (simulator.fields.ts). */
  due_date: string | null;
  priority: TaskPriority;
  created_at: string;
  updated_at: string;
  [field: string]: unknown;
}

export interface Workflow {
  id: string;
  name: string;
  description: string | null;
  created_at: string;
}

export interface WorkflowRun {
  id: string;
  workflow_id: string;
  status: 'running' | 'completed';
  input: unknown;
  created_at: string;
  completed_at: string | null;
}

export class SimulatorState {
  readonly users = new Map<string, User>();
  readonly projects = new Map<string, Project>();
  readonly tasks = new Map<string, Task>();
  readonly workflows = new Map<string, Workflow>();
  readonly workflowRuns = new Map<string, WorkflowRun>();
  private counters = new Map<string, number>();

  /** Sequential ids (`tsk_4`) read better in test failures than random ones. */
  nextId(prefix: string): string {
    const n = (this.counters.get(prefix) ?? 0) + 1;
    this.counters.set(prefix, n);
    return `${prefix}_${n}`;
  }

  clear(): void {
    this.users.clear();
    this.projects.clear();
    this.tasks.clear();
    this.workflows.clear();
    this.workflowRuns.clear();
    this.counters = new Map();
  }

  /** Plain JSON for `GET /_sim/state`. */
  snapshot(): Record<string, unknown[]> {
    return {
      users: [...this.users.values()],
      projects: [...this.projects.values()],
      tasks: [...this.tasks.values()],
      workflows: [...this.workflows.values()],
      workflow_runs: [...this.workflowRuns.values()],
    };
  }
}

/** A small, stable world: the example rules and the demo refer to these ids. */
export function seedState(state: SimulatorState, now: Date): void {
  const at = now.toISOString();
  const user = (email: string, name: string, role: string): void => {
    const id = state.nextId('usr');
    state.users.set(id, { id, email, name, role, status: 'active', created_at: at });
  };
  user('ada@example.com', 'Ada Lovelace', 'admin');
  user('grace@example.com', 'Grace Hopper', 'member');

  const project = (name: string, owner: string): void => {
    const id = state.nextId('prj');
    state.projects.set(id, {
      id, name, description: null, status: 'active', owner_id: owner, created_at: at, updated_at: at,
    });
  };
  project('Website relaunch', 'usr_1');
  project('Mobile app', 'usr_2');

  const task = (projectId: string, title: string, status: string, assignee: string | null): void => {
    const id = state.nextId('tsk');
    state.tasks.set(id, {
      id, project_id: projectId, title, status, assignee_id: assignee, ...TASK_DEFAULTS, created_at: at, updated_at: at,
    });
  };
  task('prj_1', 'Draft the release notes', 'open', 'usr_1');
  task('prj_1', 'Release 1.0', 'in_progress', 'usr_2');
  task('prj_2', 'Design the login screen', 'open', null);

  const workflow = (id: string, name: string): void => {
    state.workflows.set(id, { id, name, description: null, created_at: at });
  };
  workflow('wf_notify', 'Notify the team');
  workflow('wf_escalate', 'Escalate to the project owner');
  workflow('wf_onboarding', 'Onboard a new member');
}
