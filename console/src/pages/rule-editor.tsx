/**
 * Creating and editing an API rule as JSON, checked against the rule schema as
 * you type (POST /admin/rules/validate): each problem is listed under the
 * editor with its JSON path, and saving is refused with the same messages.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, enc } from '../api.js';
import { ErrorBox } from '../components/common.js';
import { navigate, to } from '../router.js';
import type { Problem, RuleDetail } from '../types.js';

export const NEW_RULE = {
  id: 'my-new-rule',
  name: 'Describe what it does',
  on: 'task.completed',
  conditions: { all: [{ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' }] },
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Follow up: {{ event.data.task.title }}' } }],
};

type Check = { ok: true; problems: Problem[] } | { ok: false; message: string };

async function check(text: string): Promise<Check> {
  let rule: unknown;
  try {
    rule = JSON.parse(text);
  } catch (e) {
    return { ok: false, message: `not JSON: ${(e as Error).message}` };
  }
  const result = await api<{ valid: boolean; errors: Problem[] }>('/admin/rules/validate', { method: 'POST', body: rule });
  return { ok: true, problems: result.errors };
}

export function RuleEditor({ existing, onSaved, onText }: { existing?: RuleDetail; onSaved?: () => void; onText?: (text: string) => void }) {
  const [text, setText] = useState(() => JSON.stringify(existing?.definition ?? NEW_RULE, null, 2));
  const [status, setStatus] = useState<Check>({ ok: true, problems: [] });
  const [error, setError] = useState<unknown>();
  const [confirmDelete, setConfirmDelete] = useState(false);
  useEffect(() => {
    onText?.(text);
    const timer = setTimeout(() => void check(text).then(setStatus, setError), 300);
    return () => clearTimeout(timer);
  }, [text]);
  const save = async () => {
    setError(undefined);
    try {
      const body = JSON.parse(text) as { id?: string };
      const saved = existing
        ? await api<RuleDetail>(`/admin/rules/${enc(existing.id)}`, { method: 'PUT', body })
        : await api<RuleDetail>('/admin/rules', { method: 'POST', body });
      if (existing) onSaved?.();
      else navigate(to.rule(saved.id));
    } catch (e) {
      if (e instanceof ApiError && e.details.length > 0) setStatus({ ok: true, problems: e.details });
      setError(e);
    }
  };
  const remove = async () => {
    if (!existing) return;
    try {
      await api(`/admin/rules/${enc(existing.id)}`, { method: 'DELETE' });
      navigate(to.rules());
    } catch (e) {
      setError(e);
    }
  };
  const problems = status.ok ? status.problems : [];
  return (
    <div class="editor">
      <label for="rule-json">Rule (JSON, as in a rule file)</label>
      <textarea id="rule-json" spellcheck={false} rows={Math.min(30, text.split('\n').length + 2)} value={text} aria-invalid={!status.ok || problems.length > 0} aria-describedby="rule-problems" onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
      <div id="rule-problems" class="problems" role="status" aria-live="polite">
        {!status.ok ? <p class="error-text">{status.message}</p> : problems.length === 0 ? <p class="ok-text">Valid: the schema and the engine's checks pass.</p> : (
          <ul>{problems.map((p, i) => <li key={i} class="error-text"><code>{p.path}</code>: {p.message}</li>)}</ul>
        )}
      </div>
      <ErrorBox error={error} />
      <div class="toolbar">
        <button type="button" class="primary" disabled={!status.ok || problems.length > 0} onClick={() => void save()}>{existing ? 'Save changes' : 'Create rule'}</button>
        {existing ? (
          confirmDelete ? (
            <>
              <button type="button" class="danger" onClick={() => void remove()}>Really delete {existing.id}</button>
              <button type="button" onClick={() => setConfirmDelete(false)}>Keep it</button>
            </>
          ) : (
            <button type="button" class="danger" onClick={() => setConfirmDelete(true)}>Delete rule…</button>
          )
        ) : null}
      </div>
    </div>
  );
}
