// Jobs: the list, newest first, with a status filter, a search by name or
// id and paging; and a job's page (its statuses as a timeline, each hook's
// target and write location, the action ledger with the operator's retry
// and give-up), kept live by polling while it is open.
import { useEffect, useState } from "preact/hooks";
import { api, ApiProblem, type Job, type JobEvent, type JobStatus, type Schemas, unwrap } from "../api";
import { CopyButton, Empty, Link, Loading, ProblemNotice, ShortId, StatusBadge, Time, Tone } from "../components";
import { between, duration, JobCharts } from "../charts";
import { usePoll } from "../poll";
import { navigate, useLocation } from "../router";
import { useCan } from "../session";

const STATUSES: JobStatus[] = [
  "INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING",
  "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING",
];
const PAGE_SIZE = 25;

const SETTLEMENT_TONE: Record<Schemas["Settlement"], string> = {
  in_progress: "active", settled: "good", failed: "bad", quarantined: "bad",
};

export function Settlement({ value }: { value: Schemas["Settlement"] }) {
  return <Tone tone={SETTLEMENT_TONE[value]}>{value.replace("_", " ")}</Tone>;
}

/** What happened to the job, in a user's words: its status and whether its tables were published. */
export function headline(job: Job): string {
  const ended = { FINISHED: "Finished", FAILED: "Failed", CANCELED: "Cancelled" } as Record<string, string>;
  const end = ended[job.status];
  if (!end) return job.status.charAt(0) + job.status.slice(1).toLowerCase();
  if (job.mode === "streaming") {
    return job.settlement === "failed" ? `${end}, its table not created` : `${end}; its table stays`;
  }
  switch (job.settlement) {
    case "quarantined": return `${end}, held back by its audits`;
    case "in_progress": return job.status === "FINISHED" ? `${end}, publishing` : `${end}, cleaning up`;
    case "failed": return job.status === "FINISHED" ? `${end}, not published` : `${end}, staging not cleaned up`;
    default: return job.status === "FINISHED" ? `${end}, published` : `${end}, nothing published`;
  }
}

/** What became of a hook's staging: published, discarded, or still there (`undefined`). */
function stagingFate(job: Job, hook: number): string | undefined {
  const done = job.actions.filter((a) => a.hook === hook && (a.state === "done" || a.outcome === "discarded" || a.outcome === "vetoed"));
  if (done.some((a) => a.action === "commit" && a.state === "done")) return "published as the table";
  if (done.some((a) => a.action === "abort" || a.outcome === "discarded" || a.outcome === "vetoed")) return "discarded";
  return undefined;
}

function targetName(t: Schemas["HookTarget"]): string {
  return `${t.catalog}.${t.database}.${t.table}`;
}

export function JobTable({ jobs, caption }: { jobs: Job[]; caption: string }) {
  return (
    <div class="table-wrap">
      <table class="jobs">
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Id</th><th scope="col">Mode</th><th scope="col">Status</th>
            <th scope="col">Settlement</th><th scope="col">Targets</th><th scope="col">Submitted</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((job) => (
            <tr key={job.id} data-job={job.id}>
              <th scope="row"><Link href={`/jobs/${encodeURIComponent(job.id)}`}>{job.name || job.id}</Link></th>
              <td class="job-id"><ShortId id={job.id} /></td>
              <td class="job-mode">{job.mode}</td>
              <td><StatusBadge status={job.status} /></td>
              <td><Settlement value={job.settlement} /></td>
              <td class="job-targets">{job.hooks.map((h) => <div key={h.index}><code>{targetName(h.target)}</code></div>)}</td>
              <td class="job-time"><Time at={job.created_at} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function JobList() {
  const { query } = useLocation();
  const status = (query.get("status") ?? "") as JobStatus | "";
  const catalog = query.get("catalog") ?? "";
  const search = query.get("search") ?? "";
  // Tokens of the pages before this one, to go back to newer jobs.
  const [pages, setPages] = useState<(string | undefined)[]>([undefined]);
  const pageToken = pages[pages.length - 1];
  const [typed, setTyped] = useState(search);

  useEffect(() => setPages([undefined]), [status, catalog, search]);
  useEffect(() => setTyped(search), [search]);
  // The search applies once the user pauses typing.
  useEffect(() => {
    if (typed === search) return;
    const timer = window.setTimeout(() => setFilter("search", typed), 300);
    return () => window.clearTimeout(timer);
  }, [typed]);

  const setFilter = (key: string, value: string) => {
    const next = new URLSearchParams(query);
    if (value) next.set(key, value);
    else next.delete(key);
    const rest = next.toString();
    navigate(`/jobs${rest ? `?${rest}` : ""}`, true);
  };

  const list = usePoll(
    () => unwrap(api.GET("/v1/jobs", {
      params: {
        query: {
          page_size: PAGE_SIZE,
          ...(status ? { status } : {}),
          ...(catalog ? { catalog } : {}),
          ...(search ? { search } : {}),
          ...(pageToken ? { page_token: pageToken } : {}),
        },
      },
    })),
    2000,
    [status, catalog, search, pageToken],
  );
  const filtered = Boolean(status || catalog || search);

  return (
    <section>
      <div class="page-head"><h1>Jobs</h1></div>
      {!filtered && pages.length === 1 && <JobCharts />}
      <form class="filters" role="search" onSubmit={(e) => { e.preventDefault(); setFilter("search", typed); }}>
        <div class="field">
          <label for="job-status">Status</label>
          <select id="job-status" value={status} onChange={(e) => setFilter("status", e.currentTarget.value)}>
            <option value="">Any status</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="field grow">
          <label for="job-search">Search by name or id</label>
          <input id="job-search" type="search" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} placeholder="e.g. daily totals" />
        </div>
        {catalog && (
          <p class="filter-chip">catalog <code>{catalog}</code> <button type="button" class="button small" onClick={() => setFilter("catalog", "")}>Clear</button></p>
        )}
      </form>
      <ProblemNotice problem={list.problem} />
      {!list.data && !list.problem && <Loading what="jobs" />}
      {list.data && list.data.jobs.length === 0 && (
        filtered
          ? <Empty title="No job matches">Change the status or the search, or <Link href="/jobs">show every job</Link>.</Empty>
          : <Empty title="No jobs yet">
              <p>Submit one with <code>POST /v1/jobs</code> (the README's walk-through shows how; <a href="/docs">the API docs</a> list every field). It appears here at once, and its page follows it live.</p>
            </Empty>
      )}
      {list.data && list.data.jobs.length > 0 && <JobTable jobs={list.data.jobs} caption="Jobs, newest first" />}
      <nav class="pager" aria-label="Pages of jobs">
        <button type="button" class="button" disabled={pages.length <= 1} onClick={() => setPages(pages.slice(0, -1))}>Newer</button>
        <span class="muted small" aria-live="polite">page {pages.length}</span>
        <button type="button" class="button" disabled={!list.data?.next_page_token}
          onClick={() => list.data?.next_page_token && setPages([...pages, list.data.next_page_token])}>Older</button>
      </nav>
    </section>
  );
}

/** Events read per page, and the most pages one poll reads (a job's history is bounded). */
const EVENTS_PER_PAGE = 200;
const MOST_EVENT_PAGES = 5;

type Loaded = { job: Job; events: JobEvent[]; foldedRestarts: number; more: boolean };

/** The job and its events, a page at a time, up to MOST_EVENT_PAGES pages. */
async function loadJob(id: string): Promise<Loaded> {
  const readEvents = async () => {
    const events: JobEvent[] = [];
    let token: string | undefined;
    let foldedRestarts = 0;
    for (let pages = 0; pages < MOST_EVENT_PAGES; pages++) {
      const query = { page_size: EVENTS_PER_PAGE, ...(token ? { page_token: token } : {}) };
      const page = await unwrap(api.GET("/v1/jobs/{job}/events", { params: { path: { job: id }, query } }));
      events.push(...page.events);
      foldedRestarts = page.folded_restarts;
      if (!page.next_page_token) return { events, foldedRestarts, more: false };
      token = page.next_page_token;
    }
    return { events, foldedRestarts, more: true };
  };
  const [job, history] = await Promise.all([unwrap(api.GET("/v1/jobs/{job}", { params: { path: { job: id } } })), readEvents()]);
  return { job, ...history };
}

export function JobPage({ id }: { id: string }) {
  const loaded = usePoll(() => loadJob(id), 1000, [id]);
  if (loaded.problem?.status === 404) {
    return (
      <section>
        <h1>Job {id}</h1>
        <Empty title="No such job"><p>ctasd has no job with this id. See <Link href="/jobs">the jobs</Link>.</p></Empty>
      </section>
    );
  }
  if (!loaded.data) return <section><h1>Job</h1><ProblemNotice problem={loaded.problem} />{!loaded.problem && <Loading what="the job" />}</section>;
  const { job, events, foldedRestarts, more } = loaded.data;
  return (
    <section>
      <div class="page-head">
        <h1><span class="muted">job</span> {job.name || job.id}</h1>
        <p class="status-line" aria-live="polite">
          <strong class="headline">{headline(job)}</strong>{" "}
          <span class="visually-hidden">Status: </span><StatusBadge status={job.status} /> <Settlement value={job.settlement} />
        </p>
      </div>
      <ProblemNotice problem={loaded.problem} title="Live updates paused" />
      {job.failures.length > 0 && (
        <div class="notice notice-bad">
          <strong>{job.status === "FINISHED" ? "Why nothing was published" : "Actions that failed"}</strong>
          {job.failures.map((f) => <p key={f.action_id}>Hook {f.hook}, {f.action} (action {f.action_id}): {f.error}</p>)}
        </div>
      )}
      {job.failure && <div class="notice notice-bad"><strong>Why the job failed</strong><p class="pre-line">{job.failure}</p></div>}
      {job.quarantined_until && <Quarantine job={job} onDecided={loaded.reload} />}
      <dl class="facts">
        <dt>Id</dt><dd><code>{job.id}</code> <CopyButton text={job.id} label="Copy the job id" /></dd>
        <dt>Mode</dt><dd>{job.mode}</dd>
        <dt>Submitted</dt><dd><Time at={job.created_at} /></dd>
        <dt>Changed</dt><dd><Time at={job.updated_at} /></dd>
        <dt>Duration</dt><dd data-duration>{duration(jobDuration(job, events))}</dd>
        {job.engine && <><dt>Engine</dt><dd><code>{job.engine}</code>{job.engine_job_id && <> job <code>{job.engine_job_id}</code></>}</dd></>}
        {!job.engine && job.engine_job_id && <><dt>Engine's id</dt><dd><code>{job.engine_job_id}</code></dd></>}
        {job.watch?.note && <><dt>Watcher</dt><dd>{job.watch.note}</dd></>}
      </dl>
      <div class="columns">
        <div>
          <h2>Timeline</h2>
          {foldedRestarts > 0 && (
            <p class="muted small">{foldedRestarts} earlier restart{foldedRestarts === 1 ? "" : "s"} left out: the latest are shown.</p>
          )}
          <Timeline events={events} running={!["FINISHED", "FAILED", "CANCELED"].includes(job.status)} />
          {more && <p class="muted small">The first {events.length} events are shown.</p>}
        </div>
        <div>
          <h2>Hooks</h2>
          {job.hooks.map((hook) => <HookCard key={hook.index} hook={hook} job={job} />)}
        </div>
      </div>
      <h2>Actions</h2>
      <Actions job={job} onSettled={loaded.reload} />
      {job.statement && (
        <>
          <h2>Statement</h2>
          <pre class="code">{job.statement}</pre>
        </>
      )}
    </section>
  );
}

/** When each status event's status ended: the next status's time (none for the last). */
function statusEnds(events: JobEvent[]): Map<number, string> {
  const ends = new Map<number, string>();
  let last: number | undefined;
  events.forEach((event, i) => {
    if (event.kind !== "status") return;
    const at = event.engine_at ?? event.at;
    if (last !== undefined) ends.set(last, at);
    last = i;
  });
  return ends;
}

/** The job's run time: from submission to its last status if it ended, else until now. */
function jobDuration(job: Job, events: JobEvent[]): number {
  const ended = ["FINISHED", "FAILED", "CANCELED"].includes(job.status);
  const statuses = events.filter((e) => e.kind === "status");
  const last = statuses[statuses.length - 1];
  const end = ended && last?.kind === "status" ? last.engine_at ?? last.at : undefined;
  return between(job.created_at, end);
}

function Timeline({ events, running }: { events: JobEvent[]; running: boolean }) {
  if (events.length === 0) return <p class="muted">Nothing has happened yet.</p>;
  const ends = statusEnds(events);
  return (
    <ol class="timeline" aria-label="What happened, oldest first">
      {events.map((event, i) => {
        switch (event.kind) {
          case "status": {
            const end = ends.get(i);
            const lasted = end !== undefined || running ? duration(between(event.engine_at ?? event.at, end)) : undefined;
            return (
              <li key={i} class="timeline-status" data-event-status={event.to}>
                <StatusBadge status={event.to} /> <Time at={event.engine_at ?? event.at} />
                {lasted && <span class="muted small lasted"> · {end === undefined ? "for" : "lasted"} {lasted}</span>}
                {event.inferred && <span class="muted small"> passed over (a later status was reported)</span>}
                {event.failure && <p class="pre-line small">{event.failure}</p>}
              </li>
            );
          }
          case "action":
            return (
              <li key={i} class="timeline-action small">
                hook {event.hook} <strong>{event.action}</strong> {event.state}
                {event.outcome && <> · {event.outcome}</>} · attempt {event.attempts} · <Time at={event.at} />
                {event.last_error && <p class="pre-line">{event.last_error}</p>}
              </li>
            );
          case "intervention":
            return (
              <li key={i} class="timeline-intervention small">
                operator{event.decided_by && <> <code>{event.decided_by}</code></>}: <strong>{event.decision.replaceAll("_", " ")}</strong> action {event.action_id} · <Time at={event.at} />
                {event.reason && <p class="pre-line">“{event.reason}”</p>}
              </li>
            );
          case "audit":
            return (
              <li key={i} class="timeline-audit small" data-audit-passed={String(event.passed)}>
                hook {event.hook} audit <strong>{event.name}</strong>{" "}
                <Tone tone={event.passed ? "good" : "bad"}>{event.passed ? "passed" : "failed"}</Tone> · observed {event.observed} · <Time at={event.at} />
              </li>
            );
        }
      })}
    </ol>
  );
}

function HookCard({ hook, job }: { hook: Job["hooks"][number]; job: Job }) {
  const location = hook.write_location;
  const gone = stagingFate(job, hook.index);
  return (
    <article class="card" aria-label={`Hook ${hook.index}`}>
      <h3>
        <code>{targetName(hook.target)}</code>{" "}
        <span class="muted small">hook {hook.index}, {hook.kind.replaceAll("_", " ")}</span>
      </h3>
      <p class="small">
        Catalog <Link href={`/catalogs/${encodeURIComponent(hook.target.catalog)}`}>{hook.target.catalog}</Link>
        {hook.if_not_exists && " · if not exists"}
        {hook.skipped && <> · <Tone tone="muted">skipped: the table existed</Tone></>}
      </p>
      <details>
        <summary>Columns ({hook.table.columns.length})</summary>
        <ul class="small">
          {hook.table.columns.map((c) => <li key={c.name}><code>{c.name}</code> <code class="muted">{c.type}</code></li>)}
        </ul>
      </details>
      {hook.audits.length > 0 && <Audits hook={hook} />}
      {location && (
        <div class="write-location">
          <h4>Write location{gone && <> <Tone tone="muted">gone: {gone}</Tone></>}</h4>
          <dl class={`facts small${gone ? " gone" : ""}`}>
            <dt>Kind</dt><dd>{location.kind}</dd>
            <dt>Name</dt><dd><code>{location.name}</code></dd>
            {location.url && <><dt>URL</dt><dd><code>{location.url}</code></dd></>}
            {location.path && <><dt>Path</dt><dd><code>{location.path}</code></dd></>}
          </dl>
          {location.sink_statement && !gone && (
            <div class="copyable">
              <div class="copyable-head">
                <span class="small">Sink statement for Flink SQL</span>
                <CopyButton text={location.sink_statement} label={`Copy the sink statement of hook ${hook.index}`} />
              </div>
              <pre class="code">{location.sink_statement}</pre>
            </div>
          )}
        </div>
      )}
    </article>
  );
}

function Audits({ hook }: { hook: Job["hooks"][number] }) {
  const found = new Map(hook.audit_results.map((r) => [r.audit, r]));
  return (
    <div class="audits">
      <h4>Audits before publishing</h4>
      <ul class="small" aria-label={`Audits of hook ${hook.index}`}>
        {hook.audits.map((audit, index) => {
          const result = found.get(index);
          return (
            <li key={index} data-audit={index}>
              <code>{result?.name ?? audit.kind}</code>{" "}
              {result
                ? <><Tone tone={result.passed ? "good" : "bad"}>{result.passed ? "passed" : "failed"}</Tone> observed {result.observed}, expected {result.expected} ({result.duration_ms} ms)</>
                : <span class="muted">runs when the job finishes</span>}
            </li>
          );
        })}
      </ul>
    </div>
  );
}

/** A commit a failed audit holds back: its staging is kept, and an operator publishes it anyway or discards it. */
function Quarantine({ job, onDecided }: { job: Job; onDecided: () => Promise<void> }) {
  const canOperate = useCan("operate_jobs");
  const [reason, setReason] = useState("");
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const held = job.actions.filter((a) => a.action === "commit" && a.state === "pending" && a.outcome === "quarantined");
  const decide = async (decision: "publish-anyway" | "give-up") => {
    setBusy(true);
    setProblem(undefined);
    try {
      for (const commit of held) {
        await unwrap(api.POST("/v1/jobs/{job}/actions/{action}/{decision}", {
          params: { path: { job: job.id, action: commit.id, decision } },
          body: reason.trim() ? { reason: reason.trim() } : {},
        }));
      }
      await onDecided();
    } catch (e) {
      setProblem(e instanceof ApiProblem ? e : undefined);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="notice notice-bad" role="region" aria-label="Quarantined">
      <strong>A failed audit holds the table back</strong>
      <p>
        The staging is kept for inspection until <Time at={job.quarantined_until ?? ""} />, then discarded.
        Readers see the table as it was.
      </p>
      {held.map((a) => <p key={a.id} class="pre-line small">{a.last_error}</p>)}
      {canOperate && (
        <div class="quarantine-decision">
          <label class="small" for="quarantine-reason">Reason (shown in the job's events)</label>
          <input id="quarantine-reason" type="text" maxLength={1000} value={reason}
            onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
          <button type="button" class="button small" disabled={busy} onClick={() => void decide("publish-anyway")}>Publish anyway</button>{" "}
          <button type="button" class="button small danger" disabled={busy} onClick={() => void decide("give-up")}>Discard</button>
        </div>
      )}
      <ProblemNotice problem={problem} />
    </div>
  );
}

function Actions({ job, onSettled }: { job: Job; onSettled: () => Promise<void> }) {
  const canOperate = useCan("operate_jobs");
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const [busy, setBusy] = useState<number | undefined>(undefined);
  if (job.actions.length === 0) return <p class="muted">No actions: nothing to stage, publish or discard yet.</p>;

  const settle = async (action: number, decision: "retry" | "give-up") => {
    setBusy(action);
    setProblem(undefined);
    try {
      await unwrap(api.POST("/v1/jobs/{job}/actions/{action}/{decision}", {
        params: { path: { job: job.id, action, decision } },
      }));
      await onSettled();
    } catch (e) {
      setProblem(e instanceof ApiProblem ? e : undefined);
    } finally {
      setBusy(undefined);
    }
  };

  return (
    <>
      <ProblemNotice problem={problem} />
      <div class="table-wrap">
        <table class="actions-table">
          <caption class="visually-hidden">The job's actions, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">#</th><th scope="col">Hook</th><th scope="col">Action</th><th scope="col">On</th>
              <th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Took</th><th scope="col">Result</th><th scope="col">Error</th>
              {canOperate && <th scope="col"><span class="visually-hidden">Operator</span></th>}
            </tr>
          </thead>
          <tbody>
            {job.actions.map((a) => {
              // As ctasd decides: not done, not running, not followed by a later action of its hook;
              // a commit whose staging was discarded has nothing left to publish, so no retry.
              const overtaken = job.actions.some((later) => later.hook === a.hook && later.id > a.id);
              const stuck = a.state !== "done" && !a.in_progress && !overtaken;
              const retryable = stuck && a.outcome !== "discarded" && a.outcome !== "vetoed";
              return (
                <tr key={a.id} data-action={a.id}>
                  <td>{a.id}</td>
                  <td>{a.hook}</td>
                  <td><strong>{a.action}</strong></td>
                  <td><StatusBadge status={a.trigger} /></td>
                  <td><Tone tone={a.state === "done" ? "good" : a.state === "failed" ? "bad" : "active"}>{a.in_progress ? "running" : a.state}</Tone></td>
                  <td>{a.attempts}</td>
                  <td class="nowrap" data-took>{a.state === "pending" ? <span class="muted">—</span> : duration(between(a.created_at, a.updated_at))}</td>
                  <td>{a.outcome ?? <span class="muted">—</span>}</td>
                  <td class="pre-line small">{a.last_error ?? ""}</td>
                  {canOperate && (
                    <td class="nowrap">
                      {stuck && (
                        <>
                          {retryable ? (
                            <>
                              <button type="button" class="button small" disabled={busy === a.id} onClick={() => void settle(a.id, "retry")}
                                aria-label={`Retry action ${a.id}`}>Retry</button>{" "}
                            </>
                          ) : (
                            <span class="muted small why-not">No retry: its staging was discarded, nothing is left to publish. </span>
                          )}
                          <button type="button" class="button small danger" disabled={busy === a.id} onClick={() => void settle(a.id, "give-up")}
                            aria-label={`Give up action ${a.id}`}>Give up</button>
                        </>
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}
