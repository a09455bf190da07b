/** Small pieces every page uses: status badges, loading and error states, a switch, a data loader. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api.js';

export function Badge({ status }: { status: string }) {
  return <span class={`badge s-${status.replace(/[^a-z_]/g, '')}`}>{status.replace(/_/g, ' ')}</span>;
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error as ApiError;
  return (
    <div class="error" role="alert">
      <strong>{e.code ?? 'error'}</strong>: {e.message ?? String(error)}
      {e.details?.length ? (
        <ul>
          {e.details.map((d, i) => (
            <li key={i}>
              <code>{d.path}</code>: {d.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export function Loading() {
  return (
    <p class="muted" role="status">
      Loading…
    </p>
  );
}

export function Switch({ on, label, onChange, disabled }: { on: boolean; label: string; onChange: (on: boolean) => void; disabled?: boolean }) {
  return (
    <button type="button" role="switch" aria-checked={on} aria-label={label} class={`switch ${on ? 'on' : 'off'}`} disabled={disabled} onClick={() => onChange(!on)}>
      <span class="knob" />
      <span>{on ? 'enabled' : 'disabled'}</span>
    </button>
  );
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  return (
    <section class="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => Promise<void>;
}

/** Loads with `load` whenever `key` changes; `reload` loads again in place (no flicker). */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const latest = useRef(0);
  const run = useCallback(async () => {
    const ticket = ++latest.current;
    try {
      const data = await load();
      if (ticket === latest.current) setState({ data, loading: false });
    } catch (error) {
      if (ticket === latest.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, [key]);
  useEffect(() => {
    setState({ loading: true });
    void run();
  }, [run]);
  return { data: state.data, error: state.error, loading: state.loading, reload: run };
}

/** Calls `tick` every `ms` while `active`. */
export function useEvery(ms: number, active: boolean, tick: () => void): void {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(() => saved.current(), ms);
    return () => clearInterval(timer);
  }, [ms, active]);
}

/** Focuses the page's heading when the page changes, so keyboard and screen-reader users start there. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    ref.current?.focus({ preventScroll: true });
    document.title = `${ref.current?.textContent ?? 'Console'} · automation engine`;
  }, []);
  return (
    <h1 tabIndex={-1} ref={ref}>
      {children}
    </h1>
  );
}
