/** Sign-in with the admin token: sent once in a JSON body, then forgotten by the page. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api.js';

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    input.current?.focus();
    document.title = 'Sign in · automation engine';
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const token = input.current?.value ?? '';
    setBusy(true);
    setError(undefined);
    try {
      await api('/console/session', { method: 'POST', body: { token } });
      if (input.current) input.current.value = '';
      onSignedIn();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'That is not the admin token.' : `Could not sign in: ${(err as Error).message}`);
      input.current?.select();
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="sign-in">
      <form onSubmit={submit} aria-labelledby="sign-in-title" action="#">
        <h1 id="sign-in-title">Automation engine console</h1>
        <p>Sign in with the engine's admin token (ADMIN_TOKEN). It is sent once and kept by no script of this page; the session lasts until you sign out, 8 hours unused, or 24 hours.</p>
        <label for="token">Admin token</label>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck={false} required ref={input} aria-describedby={error ? 'sign-in-error' : undefined} />
        {error ? (
          <p id="sign-in-error" class="error" role="alert">
            {error}
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
