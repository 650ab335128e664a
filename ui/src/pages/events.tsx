// Events out: the subscriptions (where ctasd posts its events, in which
// format, how their deliveries stand) and one subscription's deliveries,
// newest first, with the parked ones an operator sends again.
import { useState } from "preact/hooks";
import { api, ApiProblem, type Schemas, unwrap } from "../api";
import { Empty, Link, Loading, ProblemNotice, ShortId, Time, Tone } from "../components";
import { usePoll } from "../poll";
import { navigate, useLocation } from "../router";

type Delivery = Schemas["Delivery"];
type DeliveryState = Schemas["DeliveryState"];

const STATE_TONE: Record<DeliveryState, string> = { pending: "active", delivered: "good", parked: "bad" };

export function SubscriptionList() {
  const { data, problem } = usePoll(() => unwrap(api.GET("/v1/subscriptions")), 5000, []);
  return (
    <section>
      <div class="page-head">
        <h1>Event subscriptions</h1>
      </div>
      <ProblemNotice problem={problem} />
      {!data && !problem && <Loading what="subscriptions" />}
      {data && data.subscriptions.length === 0 && (
        <Empty title="No subscriptions yet">
          <p>
            Register one with <code>POST /v1/subscriptions</code> to have ctasd post signed events (tables published,
            stagings discarded, statuses, failures) or OpenLineage run events to a receiver.
          </p>
        </Empty>
      )}
      {data && data.subscriptions.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Event subscriptions</caption>
            <thead>
              <tr>
                <th scope="col">Name</th><th scope="col">Receiver</th><th scope="col">Format</th>
                <th scope="col">Events</th><th scope="col">Pending</th><th scope="col">Delivered</th><th scope="col">Parked</th>
              </tr>
            </thead>
            <tbody>
              {data.subscriptions.map((s) => (
                <tr key={s.name}>
                  <th scope="row"><Link href={`/events/${encodeURIComponent(s.name)}`}>{s.name}</Link></th>
                  <td><code>{s.url}</code></td>
                  <td>{s.format}</td>
                  <td class="small">{s.format === "openlineage" ? "run events" : s.events.join(", ")}</td>
                  <td>{s.deliveries.pending}</td>
                  <td>{s.deliveries.delivered}</td>
                  <td>{s.deliveries.parked > 0 ? <Tone tone="bad">{s.deliveries.parked}</Tone> : 0}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function SubscriptionPage({ name }: { name: string }) {
  const { query } = useLocation();
  const state = (query.get("state") ?? undefined) as DeliveryState | undefined;
  const subscription = usePoll(
    () => unwrap(api.GET("/v1/subscriptions/{subscription}", { params: { path: { subscription: name } } })),
    5000,
    [name],
  );
  const deliveries = usePoll(
    () => unwrap(api.GET("/v1/subscriptions/{subscription}/deliveries", {
      params: { path: { subscription: name }, query: { page_size: 100, ...(state ? { state } : {}) } },
    })),
    3000,
    [name, state],
  );
  const s = subscription.data;
  return (
    <section>
      <div class="page-head">
        <h1><span class="muted">subscription</span> {name}</h1>
      </div>
      <ProblemNotice problem={subscription.problem} />
      {s && (
        <dl class="facts">
          <dt>Receiver</dt><dd><code>{s.url}</code></dd>
          <dt>Format</dt><dd>{s.format}</dd>
          <dt>Events</dt><dd>{s.format === "openlineage" ? "OpenLineage run events" : s.events.join(", ")}</dd>
          {s.catalogs.length > 0 && <><dt>Catalogs</dt><dd>{s.catalogs.join(", ")}</dd></>}
          {s.engines.length > 0 && <><dt>Engines</dt><dd>{s.engines.join(", ")}</dd></>}
          <dt>Attempts</dt><dd>parked after {s.max_attempts} failed attempts</dd>
          <dt>Deliveries</dt>
          <dd>{s.deliveries.pending} pending · {s.deliveries.delivered} delivered · {s.deliveries.parked} parked</dd>
        </dl>
      )}
      <h2>Deliveries</h2>
      <nav class="filters" aria-label="Deliveries by state">
        {([undefined, "pending", "delivered", "parked"] as const).map((value) => (
          <button
            key={value ?? "all"}
            type="button"
            class="button small"
            aria-pressed={state === value}
            onClick={() => navigate(`/events/${encodeURIComponent(name)}${value ? `?state=${value}` : ""}`, true)}
          >
            {value ?? "all"}
          </button>
        ))}
      </nav>
      <ProblemNotice problem={deliveries.problem} />
      {!deliveries.data && !deliveries.problem && <Loading what="deliveries" />}
      {deliveries.data && (
        <DeliveryTable name={name} deliveries={deliveries.data.deliveries} onChanged={deliveries.reload} />
      )}
    </section>
  );
}

function DeliveryTable(props: { name: string; deliveries: Delivery[]; onChanged: () => Promise<void> }) {
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const [busy, setBusy] = useState<number | undefined>(undefined);
  if (props.deliveries.length === 0) return <p class="muted">No deliveries here yet.</p>;
  const redeliver = async (delivery: number) => {
    setBusy(delivery);
    setProblem(undefined);
    try {
      await unwrap(api.POST("/v1/subscriptions/{subscription}/deliveries/{delivery}/redeliver", {
        params: { path: { subscription: props.name, delivery } },
      }));
      await props.onChanged();
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
        <table>
          <caption class="visually-hidden">Deliveries, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Event</th><th scope="col">Job</th><th scope="col">State</th><th scope="col">Attempts</th>
              <th scope="col">Last error</th><th scope="col">Made</th><th scope="col"><span class="visually-hidden">Operator</span></th>
            </tr>
          </thead>
          <tbody>
            {props.deliveries.map((d) => (
              <tr key={d.id}>
                <th scope="row"><code>{d.event_type}</code></th>
                <td><Link href={`/jobs/${d.job_id}`}><ShortId id={d.job_id} /></Link></td>
                <td><Tone tone={STATE_TONE[d.state]}>{d.state}</Tone></td>
                <td>{d.attempts}</td>
                <td class="small">
                  {d.last_error ?? <span class="muted">—</span>}
                  {d.state === "pending" && d.next_attempt_at && d.attempts > 0 && <> · next <Time at={d.next_attempt_at} /></>}
                </td>
                <td><Time at={d.created_at} /></td>
                <td>
                  {d.state !== "pending" && (
                    <button type="button" class="button small" disabled={busy === d.id} onClick={() => redeliver(d.id)}>
                      Redeliver
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
