// Who is using the dashboard. With tokens configured, the user signs in
// once per browser session (the token is kept in sessionStorage only); the
// caller's permissions decide which buttons are drawn. ctasd checks every
// request anyway: hiding a button only spares the user a 403.
import { createContext, type ComponentChildren } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { api, ApiProblem, type Caller, onUnauthenticated, type Permission, token, unwrap } from "./api";

interface Session {
  caller: Caller;
  signOut: () => void;
}

const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside a signed-in page");
  return session;
}

/** Whether the signed-in caller may do it. */
export function useCan(permission: Permission): boolean {
  return useSession().caller.permissions.includes(permission);
}

type State =
  | { kind: "checking" }
  | { kind: "signed-in"; caller: Caller }
  | { kind: "signed-out"; message?: string }
  | { kind: "unreachable"; problem: ApiProblem };

async function whoami(): Promise<Caller> {
  return unwrap(api.GET("/v1/whoami"));
}

export function SessionGate({ children }: { children: ComponentChildren }) {
  const [state, setState] = useState<State>({ kind: "checking" });

  const check = async (message?: string) => {
    try {
      setState({ kind: "signed-in", caller: await whoami() });
    } catch (e) {
      if (e instanceof ApiProblem && e.status === 401) {
        token.clear();
        setState({ kind: "signed-out", message });
      } else if (e instanceof ApiProblem) {
        setState({ kind: "unreachable", problem: e });
      }
    }
  };

  useEffect(() => {
    void check();
    return onUnauthenticated(() => {
      token.clear();
      setState({ kind: "signed-out", message: "ctasd no longer accepts your token. Sign in again." });
    });
  }, []);

  switch (state.kind) {
    case "checking":
      return <main class="centered"><p role="status">Connecting to ctasd…</p></main>;
    case "unreachable":
      return (
        <main class="centered">
          <h1>ctasd is not answering</h1>
          <p>{state.problem.problem.detail}</p>
          <button type="button" class="button primary" onClick={() => void check()}>Try again</button>
        </main>
      );
    case "signed-out":
      return <SignIn message={state.message} onSignedIn={(caller) => setState({ kind: "signed-in", caller })} />;
    case "signed-in": {
      const signOut = () => {
        token.clear();
        setState({ kind: "signed-out" });
      };
      return <SessionContext.Provider value={{ caller: state.caller, signOut }}>{children}</SessionContext.Provider>;
    }
  }
}

function SignIn({ message, onSignedIn }: { message: string | undefined; onSignedIn: (caller: Caller) => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const entered = value.trim();
    if (!entered) {
      setError("Enter the token you were given (it starts with ctasd_).");
      return;
    }
    setBusy(true);
    token.set(entered);
    try {
      onSignedIn(await whoami());
    } catch (e) {
      token.clear();
      setError(
        e instanceof ApiProblem && e.status === 401
          ? "ctasd does not accept this token. Check it, or ask for a new one (ctasd token --name <you> --role reader)."
          : e instanceof ApiProblem ? e.problem.detail : String(e),
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="centered sign-in">
      <h1>Sign in to ctasd</h1>
      <p class="muted">This ctasd asks for a token. It is kept for this browser tab only, until you sign out or close it.</p>
      {message && <div class="notice" role="status">{message}</div>}
      <form onSubmit={submit} noValidate>
        <div class="field">
          <label for="token">Token</label>
          <input
            id="token"
            name="token"
            type="password"
            autoComplete="current-password"
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            aria-invalid={error ? "true" : undefined}
            aria-describedby={error ? "token-error" : undefined}
            autoFocus
          />
          {error && <p id="token-error" class="field-error">{error}</p>}
        </div>
        <button type="submit" class="button primary" disabled={busy}>Sign in</button>
      </form>
    </main>
  );
}
