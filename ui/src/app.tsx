// The shell: a header with the navigation, live counts of jobs by status
// and of pending and failed actions, and who is signed in; then the page
// for the current route.
import { api, unwrap } from "./api";
import { Link } from "./components";
import { CatalogList, CatalogPage, RegisterCatalog } from "./pages/catalogs";
import { SubscriptionList, SubscriptionPage } from "./pages/events";
import { JobList, JobPage } from "./pages/jobs";
import { usePoll } from "./poll";
import { match, useLocation } from "./router";
import { SessionGate, useCan, useSession } from "./session";

export function App() {
  return (
    <SessionGate>
      <Shell />
    </SessionGate>
  );
}

function Shell() {
  const { path } = useLocation();
  const section = path.startsWith("/catalogs") ? "catalogs" : path.startsWith("/events") ? "events" : "jobs";
  const canSubscribe = useCan("manage_subscriptions");
  return (
    <>
      <a class="skip-link" href="#main">Skip to content</a>
      <header class="top">
        <div class="brand"><Link href="/jobs">ctasd</Link></div>
        <nav aria-label="Sections">
          <Link href="/jobs" aria-current={section === "jobs" ? "page" : undefined}>Jobs</Link>
          <Link href="/catalogs" aria-current={section === "catalogs" ? "page" : undefined}>Catalogs</Link>
          {canSubscribe && <Link href="/events" aria-current={section === "events" ? "page" : undefined}>Events</Link>}
          <a href="/docs">API docs</a>
        </nav>
        <Caller />
      </header>
      <Counts />
      <main id="main" tabIndex={-1}>
        <Route path={path} />
      </main>
    </>
  );
}

function Route({ path }: { path: string }) {
  let params;
  if (path === "/" || path === "/jobs" || path === "/jobs/") return <JobList />;
  if ((params = match("/jobs/:id", path))) return <JobPage id={params.id ?? ""} />;
  if (path === "/catalogs" || path === "/catalogs/") return <CatalogList />;
  if (path === "/catalogs/new") return <RegisterCatalog />;
  if ((params = match("/catalogs/:name", path))) return <CatalogPage name={params.name ?? ""} />;
  if (path === "/events" || path === "/events/") return <SubscriptionList />;
  if ((params = match("/events/:name", path))) return <SubscriptionPage name={params.name ?? ""} />;
  return (
    <section>
      <h1>Not found</h1>
      <p>The dashboard has no page at <code>{path}</code>. Go to <Link href="/jobs">jobs</Link> or <Link href="/catalogs">catalogs</Link>.</p>
    </section>
  );
}

function Caller() {
  const { caller, signOut } = useSession();
  if (!caller.tokens_required) return <div class="caller muted small">open (no tokens)</div>;
  return (
    <div class="caller">
      <span class="small">
        <span class="muted">signed in as</span> <strong>{caller.name}</strong> <span class="muted">({caller.role})</span>
      </span>
      <button type="button" class="button small" onClick={signOut}>Sign out</button>
    </div>
  );
}

/** Jobs by status and the ledger's open and failed actions, refreshed every few seconds. */
function Counts() {
  const { data } = usePoll(() => unwrap(api.GET("/v1/overview")), 3000, []);
  if (!data) return <div class="counts" aria-hidden="true" />;
  const shown = data.jobs.filter((c) => c.jobs > 0);
  return (
    <section class="counts" aria-label="Counts">
      <ul>
        {shown.length === 0 && <li class="muted">no jobs</li>}
        {shown.map((c) => (
          <li key={c.status}>
            <Link href={`/jobs?status=${c.status}`}>
              <span class="count-label">{c.status}</span> <span class="count" data-count={c.status}>{c.jobs}</span>
            </Link>
          </li>
        ))}
        <li class="count-actions">
          <span class="count-label">pending actions</span> <span class="count" data-count="pending-actions">{data.pending_actions}</span>
        </li>
        <li class={data.failed_actions > 0 ? "count-actions failed" : "count-actions"}>
          <span class="count-label">failed actions</span> <span class="count" data-count="failed-actions">{data.failed_actions}</span>
        </li>
      </ul>
    </section>
  );
}
