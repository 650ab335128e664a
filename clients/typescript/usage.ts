// A batch lifecycle through openapi-fetch with the types openapi-typescript
// generates from openapi/openapi.json (into generated/, not committed):
// register an in-memory catalog, submit a batch job, report CREATED,
// RUNNING, FINISHED, and find the published table. `.ci/clients`
// type-checks it with `tsc --strict` and runs it against a live server.
//
// Usage: node build/usage.js <base-url> <token>

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/ctasd.js";

type JobStatus = components["schemas"]["JobStatus"];
type Problem = components["schemas"]["Problem"];

const [baseUrl, token] = process.argv.slice(2);
if (!baseUrl || !token) {
  throw new Error("usage: node build/usage.js <base-url> <token>");
}
const ctasd = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${token}` } });

function fail(problem: Problem | undefined, what: string): never {
  throw new Error(`${what}: ${problem?.status} ${problem?.code}: ${problem?.detail}`);
}

async function report(job: string, status: JobStatus) {
  const { data, error } = await ctasd.PUT("/v1/jobs/{job}/status", {
    params: { path: { job } },
    body: { status },
  });
  return data ?? fail(error, `report ${status}`);
}

const registered = await ctasd.POST("/v1/catalogs", {
  body: { name: "mem", options: { type: "generic_in_memory" } },
});
if (registered.error) fail(registered.error, "register");

const submitted = await ctasd.POST("/v1/jobs", {
  body: {
    name: "typed lifecycle",
    mode: "batch",
    hooks: [
      {
        kind: "create_table_as",
        target: { catalog: "mem", table: "daily" },
        table: { columns: [{ name: "day", type: "DATE NOT NULL" }] },
      },
    ],
  },
});
const job = submitted.data ?? fail(submitted.error, "submit");

await report(job.id, "CREATED");
await report(job.id, "RUNNING");
const finished = await report(job.id, "FINISHED");
const outcomes = finished.actions_taken.map((action) => action.outcome);
if (outcomes.join() !== "committed") throw new Error(`outcomes: ${outcomes.join()}`);

const events = await ctasd.GET("/v1/jobs/{job}/events", { params: { path: { job: job.id } } });
const statuses = (events.data ?? fail(events.error, "events")).events.flatMap((event) =>
  event.kind === "status" ? [event.to] : [],
);
if (statuses.join() !== "INITIALIZING,CREATED,RUNNING,FINISHED") throw new Error(`statuses: ${statuses.join()}`);

const tables = await ctasd.GET("/v1/catalogs/{catalog}/databases/{database}/tables", {
  params: { path: { catalog: "mem", database: "default" } },
});
const names = (tables.data ?? fail(tables.error, "tables")).tables.map((table) => table.name);
if (!names.includes("daily")) throw new Error(`tables: ${names.join()}`);

console.log(`typescript client: job ${job.id} published mem.default.daily`);
