/**
 * The console: a single page served by the engine at /console, built over the
 * admin API. Sign-in state comes from GET /console/session; each page has its
 * own address. Every value from events is rendered as text (no HTML from data).
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, enc, onSessionChange, prefetch, sessionChanged } from './api.js';
import { EventPage } from './pages/event.js';
import { Events, firstPagePath } from './pages/events.js';
import { Failed } from './pages/failed.js';
import { Overview } from './pages/overview.js';
import { NewRulePage, RulePage } from './pages/rule.js';
import { Rules } from './pages/rules.js';
import { SignIn } from './pages/sign-in.js';
import { Link, match, to, useLocation } from './router.js';

function Page({ path }: { path: string }) {
  let params: Record<string, string> | undefined;
  if (path === '/console') return <Overview />;
  if (path === '/console/events') return <Events />;
  if ((params = match('/console/events/:id', path))) return <EventPage key={params.id} id={params.id} />;
  if (path === '/console/rules') return <Rules />;
  if (path === '/console/rules/new') return <NewRulePage />;
  if ((params = match('/console/rules/:id', path))) return <RulePage key={params.id} id={params.id} />;
  if (path === '/console/failed') return <Failed />;
  return (
    <>
      <h1>Not a console page</h1>
      <p>
        <Link href={to.overview()}>Go to the overview</Link>
      </p>
    </>
  );
}

const NAV: Array<[string, string, (path: string) => boolean]> = [
  ['Overview', to.overview(), (p) => p === '/console'],
  ['Events', to.events(), (p) => p.startsWith('/console/events')],
  ['Rules', to.rules(), (p) => p.startsWith('/console/rules')],
  ['Failed actions', to.failed(), (p) => p.startsWith('/console/failed')],
];

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const { path, query } = useLocation();
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <span class="brand">Automation engine</span>
        <nav aria-label="console">
          {NAV.map(([label, href, active]) => (
            <Link key={href} href={href} aria-current={active(path) ? 'page' : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <button type="button" class="sign-out" onClick={onSignOut}>Sign out</button>
      </header>
      <main id="main" key={path + query.toString()}>
        <Page path={path} />
      </main>
    </>
  );
}

/**
 * The page starts as if signed in, so that its data loads at once, while the
 * session is checked beside it: a 401 from either shows the sign-in form (the
 * page has shown nothing from the API by then: every call was refused).
 */
function App() {
  const [signedIn, setSignedIn] = useState<boolean>(true);
  useEffect(() => {
    const off = onSessionChange(setSignedIn);
    api('/console/session').catch(() => setSignedIn(false));
    return off;
  }, []);
  const signOut = async () => {
    await api('/console/session', { method: 'DELETE' }).catch(() => undefined);
    sessionChanged(false);
  };
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  return <Shell onSignOut={() => void signOut()} />;
}

/** The data the first page needs, asked for before it renders (the answers travel meanwhile). */
function prefetchFirstPage(): void {
  const path = window.location.pathname.replace(/\/+$/, '');
  const event = match('/console/events/:id', path);
  if (path === '/console/events') prefetch(firstPagePath(new URLSearchParams(window.location.search)));
  else if (event) {
    prefetch(`/admin/events/${enc(event.id)}`);
    prefetch(`/admin/events/${enc(event.id)}/context`);
  }
}

prefetchFirstPage();
const root = document.getElementById('app') as HTMLElement;
root.textContent = ''; // the page's "Loading…" placeholder: render() adds to what is there
render(<App />, root);
