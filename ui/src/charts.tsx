// Time as the Flink web UI shows it: durations in words ("3m 4s"), and the
// jobs overview's two small charts, drawn here as SVG from what ctasd
// already records (no external service): jobs submitted per hour over the
// last twelve hours by their status now, and how long each recently
// finished batch job took from FINISHED to its tables published.
import { api, type Job, unwrap } from "./api";
import { usePoll } from "./poll";

/** A duration as Flink's web UI writes one: `850 ms`, `12s`, `3m 4s`, `2h 5m`, `1d 3h`. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  const [d, h, m, sec] = [Math.floor(s / 86400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60, s % 60];
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${sec}s`;
  return `${sec}s`;
}

/** Milliseconds from `from` to `to` (now when absent). */
export function between(from: string, to?: string | null): number {
  return (to ? Date.parse(to) : Date.now()) - Date.parse(from);
}

/** How long a finished batch job took from FINISHED to published: its commits' span. */
export function publishLatency(job: Job): number | undefined {
  const commits = job.actions.filter((a) => a.action === "commit");
  if (job.mode !== "batch" || job.status !== "FINISHED" || commits.length === 0) return undefined;
  if (!commits.every((a) => a.state === "done")) return undefined;
  const start = Math.min(...commits.map((a) => Date.parse(a.created_at)));
  const end = Math.max(...commits.map((a) => Date.parse(a.updated_at)));
  return end - start;
}

type Band = "running" | "finished" | "failed" | "canceled";
const BANDS: Band[] = ["running", "finished", "failed", "canceled"];

function band(job: Job): Band {
  if (job.status === "FINISHED") return job.settlement === "failed" ? "failed" : "finished";
  if (job.status === "FAILED") return "failed";
  if (job.status === "CANCELED") return "canceled";
  return "running";
}

const HOURS = 12;

export function JobCharts() {
  const { data } = usePoll(() => unwrap(api.GET("/v1/jobs", { params: { query: { page_size: 500 } } })), 10_000, []);
  if (!data || data.jobs.length === 0) return null;
  const jobs = data.jobs;
  return (
    <div class="charts">
      <JobsPerHour jobs={jobs} />
      <PublishTimes jobs={jobs} />
    </div>
  );
}

function JobsPerHour({ jobs }: { jobs: Job[] }) {
  const hour = 3_600_000;
  const end = Math.ceil(Date.now() / hour) * hour;
  const counts = Array.from({ length: HOURS }, () => ({ running: 0, finished: 0, failed: 0, canceled: 0 }));
  for (const job of jobs) {
    const slot = HOURS - 1 - Math.floor((end - Date.parse(job.created_at)) / hour);
    const at = counts[slot];
    if (at) at[band(job)] += 1;
  }
  const most = Math.max(1, ...counts.map((c) => BANDS.reduce((sum, b) => sum + c[b], 0)));
  const [w, h, gap] = [24, 80, 4];
  const total = counts.reduce((sum, c) => sum + BANDS.reduce((s, b) => s + c[b], 0), 0);
  return (
    <figure class="chart" data-chart="jobs-per-hour">
      <figcaption>Jobs submitted per hour, last {HOURS} hours, by status now</figcaption>
      <svg viewBox={`0 0 ${HOURS * (w + gap)} ${h}`} role="img" aria-label={`${total} jobs submitted in the last ${HOURS} hours`}>
        {counts.map((c, i) => {
          let y = h;
          return BANDS.map((b) => {
            const height = (c[b] / most) * (h - 4);
            y -= height;
            return c[b] > 0 ? (
              <rect key={`${i}-${b}`} class={`bar bar-${b}`} x={i * (w + gap)} y={y} width={w} height={height}>
                <title>{`${c[b]} ${b}`}</title>
              </rect>
            ) : null;
          });
        })}
      </svg>
      <p class="legend small">
        {BANDS.map((b) => <span key={b}><i class={`swatch bar-${b}`} /> {b}</span>)}
      </p>
    </figure>
  );
}

function PublishTimes({ jobs }: { jobs: Job[] }) {
  const times = jobs
    .map((job) => ({ job, ms: publishLatency(job) }))
    .filter((t): t is { job: Job; ms: number } => t.ms !== undefined)
    .slice(0, 30)
    .reverse();
  if (times.length === 0) {
    return (
      <figure class="chart" data-chart="publish-times">
        <figcaption>FINISHED to published</figcaption>
        <p class="muted small">No batch job has published yet.</p>
      </figure>
    );
  }
  const sorted = times.map((t) => t.ms).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  const most = Math.max(1, ...sorted);
  const [w, h, gap] = [10, 80, 3];
  return (
    <figure class="chart" data-chart="publish-times">
      <figcaption>FINISHED to published, last {times.length} batch jobs (median {duration(median)})</figcaption>
      <svg viewBox={`0 0 ${times.length * (w + gap)} ${h}`} role="img" aria-label={`median ${duration(median)} from FINISHED to published`}>
        {times.map(({ job, ms }, i) => {
          const height = Math.max(2, (ms / most) * (h - 4));
          return (
            <rect key={job.id} class="bar bar-finished" x={i * (w + gap)} y={h - height} width={w} height={height}>
              <title>{`${job.name}: ${duration(ms)}`}</title>
            </rect>
          );
        })}
      </svg>
    </figure>
  );
}
