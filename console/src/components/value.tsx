/**
 * Any JSON value from an event or an answer, as text: hostile input
 * (`<script>`, `javascript:` strings, 10,000-character values, 60-deep
 * objects) renders inert and readable. Strings are text nodes, never markup or
 * links; long strings show their start and fold the rest; objects deeper than
 * a few levels start folded and open one level per click, so a deep value
 * never builds a deep page at once.
 */
import { useState } from 'preact/hooks';

const LONG = 300;
const OPEN_LEVELS = 3;
const MAX_KEYS_SHOWN = 200;

/** A string, quoted as JSON (`raw`: as it is); past LONG characters the rest is folded. */
function Str({ text, raw = false }: { text: string; raw?: boolean }) {
  const [open, setOpen] = useState(false);
  const show = (t: string) => (raw ? t : JSON.stringify(t));
  if (text.length <= LONG) return <span class="v-str">{show(text)}</span>;
  return (
    <span class="v-str">
      {show(open ? text : text.slice(0, LONG))}
      {open ? null : '…'}{' '}
      <button type="button" class="fold fold-str" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? 'show less' : `show all ${text.length.toLocaleString('en')} characters`}
      </button>
    </span>
  );
}

function Fold({ label, children, startOpen }: { label: string; children: () => preact.ComponentChildren; startOpen: boolean }) {
  const [open, setOpen] = useState(startOpen);
  return (
    <span>
      <button type="button" class="fold fold-obj" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? '▾' : '▸'} {label}
      </button>
      {open ? children() : null}
    </span>
  );
}

export function Value({ value, depth = 0 }: { value: unknown; depth?: number }) {
  if (value === null) return <span class="v-null">null</span>;
  if (value === undefined) return <span class="v-null">undefined</span>;
  if (typeof value === 'string') return <Str text={value} />;
  if (typeof value === 'number' || typeof value === 'boolean') return <span class="v-lit">{String(value)}</span>;
  if (typeof value !== 'object') return <span>{String(value)}</span>;
  const entries: Array<[string, unknown]> = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return <span class="v-lit">{Array.isArray(value) ? '[]' : '{}'}</span>;
  const label = Array.isArray(value) ? `[${entries.length} item${entries.length === 1 ? '' : 's'}]` : `{${entries.length} key${entries.length === 1 ? '' : 's'}}`;
  return (
    <Fold label={label} startOpen={depth < OPEN_LEVELS}>
      {() => (
        <ul class="v-obj">
          {entries.slice(0, MAX_KEYS_SHOWN).map(([key, child]) => (
            <li key={key}>
              <span class="v-key">{Array.isArray(value) ? key : JSON.stringify(key)}</span>: <Value value={child} depth={depth + 1} />
            </li>
          ))}
          {entries.length > MAX_KEYS_SHOWN ? <li class="muted">… and {entries.length - MAX_KEYS_SHOWN} more</li> : null}
        </ul>
      )}
    </Fold>
  );
}

/** A value in a sentence or a table cell: one line, folded when long. */
export function Inline({ value }: { value: unknown }) {
  if (value === undefined) return <span class="v-null">undefined</span>;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return <Str text={text} raw />;
}
