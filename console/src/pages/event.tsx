/**
 * One event, the whole story: its envelope; why for every rule that listened
 * (outcome, condition tree, the failing leaf); the facts and lookups used; what
 * matched rules did, action by action and attempt by attempt; the chain of
 * engine-caused events around it; replay and retry. The page refreshes itself
 * while anything about the event is still moving.
 */
import { useState } from 'preact/hooks';
import { api, enc } from '../api.js';
import { Badge, ErrorBox, Loading, PageTitle, Section, useEvery, useLoad } from '../components/common.js';
import { ConditionTree } from '../components/conditions.js';
import { Executions } from '../components/timeline.js';
import { Inline, Value } from '../components/value.js';
import { eventReason, ruleOutcome, waitingReason } from '../explain.js';
import { when } from '../format.js';
import { Link, navigate, to } from '../router.js';
import type { ChainLink, ConditionResult, EventContext, EventDetail } from '../types.js';

const MOVING_RUNS = ['pending', 'running', 'retrying'];

function moving(e: EventDetail): boolean {
  return e.status === 'received' || e.executions.some((x) => x.status === 'running' || (x.actions ?? []).some((r) => MOVING_RUNS.includes(r.status)));
}

function Why({ event, context }: { event: EventDetail; context?: EventContext }) {
  if (event.status === 'loop_blocked') {
    return <p class="reason">{eventReason(event, context?.max_chain_depth)}. {context?.caused_by ? <ChainSentence link={context.caused_by} /> : null}</p>;
  }
  if (event.rules.length === 0) {
    return <p class="reason">{event.status === 'received' ? 'Not evaluated yet.' : 'No rule listens to this event type (or every rule that does is disabled).'}</p>;
  }
  return (
    <ol class="rules-why">
      {event.rules.map((entry) => (
        <li key={entry.rule} class={`rule-why o-${entry.outcome}`} data-rule={entry.rule}>
          <div class="run-head">
            Rule <Link href={to.rule(entry.rule)}>{entry.rule}</Link> <Badge status={entry.outcome} /> <span class="reason">{ruleOutcome(entry, context)}</span>
          </div>
          {entry.note ? <p class="muted">{entry.note}</p> : null}
          {entry.outcome === 'ignored_self_caused' ? null : <ConditionTree conditions={entry.conditions ?? []} matched={entry.outcome === 'matched' || entry.outcome === 'throttled'} />}
        </li>
      ))}
    </ol>
  );
}

/** The `changes` fact and the lookups the conditions used, with the values they had. */
function FactsUsed({ event }: { event: EventDetail }) {
  const used = new Map<string, ConditionResult>();
  for (const entry of event.rules) {
    for (const c of entry.conditions ?? []) {
      if (c.fact === 'event' || c.fact === 'now' || c.skipped) continue;
      used.set(`${c.fact} ${JSON.stringify(c.params ?? {})} ${c.path ?? ''}`, c);
    }
  }
  const sent = (event.payload as { data?: { changes?: unknown } } | null)?.data?.changes;
  if (used.size === 0 && sent === undefined) return <p class="muted">No rule used `changes` or a lookup for this event.</p>;
  return (
    <ul class="facts">
      {sent !== undefined ? <li><strong>changes</strong> as the service sent them (data.changes): <Value value={sent} /></li> : null}
      {[...used.values()].map((c, i) => (
        <li key={i}>
          <strong>{c.fact}</strong>{c.params ? <> <span class="muted">params</span> <Inline value={c.params} /></> : null}
          {c.path ? <code class="path">{c.path}</code> : null} = <Inline value={c.factValue} />
          {c.error ? <span class="error-text"> lookup failed: {c.error}</span> : null}
        </li>
      ))}
    </ul>
  );
}

function ChainSentence({ link }: { link: ChainLink }) {
  return (
    <span>
      Caused by the engine: action <code>{link.action_type}</code> of rule <Link href={to.rule(link.rule)}>{link.rule}</Link>, run for event{' '}
      <Link href={to.event(link.event_id)}>{link.event_id}</Link> ({when(link.at)}).
    </span>
  );
}

function Chain({ context }: { context?: EventContext }) {
  if (!context) return <Loading />;
  return (
    <div class="chain">
      <p>
        {context.caused_by ? <ChainSentence link={context.caused_by} /> : context.self_caused ? 'Self-caused (an engine action changed its resource), but the action is no longer on record.' : 'Not caused by the engine: it came from outside (chain depth 0).'}{' '}
        <span class="muted">Chain depth {context.depth} of MAX_CHAIN_DEPTH {context.max_chain_depth}.</span>
      </p>
      {context.caused.length > 0 ? (
        <>
          <p>Events this event's actions caused:</p>
          <ul>
            {context.caused.map((c) => (
              <li key={c.event_id}>
                <Link href={to.event(c.event_id)}>{c.event_id}</Link> {c.type} {c.status ? <Badge status={c.status} /> : null} <span class="muted">after {c.action_type} of rule {c.rule}</span>
              </li>
            ))}
          </ul>
        </>
      ) : (
        <p class="muted">Its actions caused no event the engine has received.</p>
      )}
    </div>
  );
}

function Summary({ event, context }: { event: EventDetail; context?: EventContext }) {
  const rows: Array<[string, preact.ComponentChildren]> = [
    ['Type', event.type], ['Status', <Badge status={event.status} />],
    ['Received', when(event.received_at)], ['Evaluated', when(event.processed_at)], ['Source', event.source], ['Resource', event.resource ?? '—'],
    ['Chain depth', `${event.depth}${context?.self_caused ? ' (self-caused)' : ''}`], ['Evaluation attempts', event.attempts],
  ];
  if (event.replay_of) rows.push(['Replay of', <Link href={to.event(event.replay_of)}>{event.replay_of}</Link>]);
  if (event.error) rows.push(['Error', <span class="error-text">{event.error}</span>]);
  return (
    <>
    <p class="verdict" data-testid="verdict"><Badge status={event.status} /> {eventReason(event, context?.max_chain_depth, event.status === 'received' ? undefined : event.rules)}</p>
    <dl class="summary">
      {rows.map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
    </dl>
    </>
  );
}

export function EventPage({ id }: { id: string }) {
  const detail = useLoad(() => api<EventDetail>(`/admin/events/${enc(id)}`), id);
  const context = useLoad(() => api<EventContext>(`/admin/events/${enc(id)}/context`), id);
  const [action, setAction] = useState<unknown>();
  const refresh = () => {
    void detail.reload();
    void context.reload();
  };
  useEvery(1_000, detail.data ? moving(detail.data) : false, refresh);
  if (!detail.data) return detail.error ? <><PageTitle>Event {id}</PageTitle><ErrorBox error={detail.error} /></> : <Loading />;
  const event = detail.data;
  const replay = async () => {
    try {
      const replayed = await api<{ id: string }>(`/admin/events/${enc(id)}/replay`, { method: 'POST' });
      navigate(to.event(replayed.id));
    } catch (e) {
      setAction(e);
    }
  };
  return (
    <>
      <PageTitle>Event <span class="id">{event.id}</span></PageTitle>
      <div class="toolbar">
        <button type="button" onClick={() => void replay()}>Replay this event</button>
        <span class="muted">Replay stores it again as a new event, evaluated by the rules as they are now.</span>
      </div>
      <ErrorBox error={action} />
      <Summary event={event} context={context.data} />
      {context.data && context.data.waiting.length > 0 ? (
        <Section title="Why it is waiting" id="waiting">
          <ul>{context.data.waiting.map((w, i) => <li key={i} class="reason">{waitingReason(w)}</li>)}</ul>
        </Section>
      ) : null}
      <Section title="Why: every rule that listened" id="why"><Why event={event} context={context.data} /></Section>
      <Section title="Facts and lookups used" id="facts"><FactsUsed event={event} /></Section>
      <Section title="What the matched rules did" id="executions"><Executions executions={event.executions} context={context.data} onChange={refresh} /></Section>
      <Section title="Chain" id="chain"><Chain context={context.data} /></Section>
      <Section title="Envelope" id="envelope"><div class="envelope"><Value value={event.payload} /></div></Section>
    </>
  );
}
