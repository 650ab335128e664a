// The dashboard in a real Chromium (Debian's, through playwright-core)
// against a live ctasd that requires tokens: sign in, register a catalog
// through the form (and see an unsupported option refused next to its
// field), follow a batch job from CREATED to FINISHED while this test
// reports its statuses over HTTP, without a reload, and find the published
// table in the catalog's browse view and on disk. Chromium resolves no host
// but loopback, and every request the pages make is checked to go to ctasd.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through .ci/ui`);
  return value;
};
const BASE = env("CTASD_UI_BASE_URL");
const ADMIN = env("CTASD_UI_ADMIN_TOKEN");
const READER = env("CTASD_UI_READER_TOKEN");
const WAREHOUSE = env("CTASD_UI_WAREHOUSE");
const SHOTS = env("CTASD_UI_SCREENSHOTS");
const LIVE = { timeout: 15_000 };

let browser;
const foreignRequests = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: env("CTASD_UI_CHROMIUM"),
    // The network is cut: no name resolves but loopback.
    args: ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
  });
});

after(async () => {
  await browser?.close();
  assert.deepEqual(foreignRequests, [], "every request of the dashboard goes to ctasd");
});

async function open(path, { width = 1280, height = 800 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.on("request", (request) => {
    if (!request.url().startsWith(BASE) && !request.url().startsWith("data:")) foreignRequests.push(request.url());
  });
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(BASE + path);
  return { page, context, errors };
}

async function signIn(page, token) {
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("signed in as").waitFor(LIVE);
}

async function call(method, path, body, token = ADMIN) {
  const response = await fetch(BASE + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

const shot = (page, name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

test("the dashboard asks for a token, refuses a wrong one and shows a reader no write buttons", async () => {
  const { page, context, errors } = await open("/ui/catalogs");
  await page.getByRole("heading", { name: "Sign in to ctasd" }).waitFor(LIVE);
  await shot(page, "sign-in");

  await page.getByLabel("Token").fill("ctasd_not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("ctasd does not accept this token").waitFor(LIVE);

  await signIn(page, READER);
  assert.match(await page.locator(".caller").innerText(), /viewer[\s\S]*reader/);
  await page.getByRole("heading", { name: "Catalogs" }).waitFor(LIVE);
  assert.equal(await page.getByRole("link", { name: "Register a catalog", exact: true }).count(), 0);

  // Kept for the browser session: a reload does not ask again.
  await page.reload();
  await page.getByText("signed in as").waitFor(LIVE);
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in to ctasd" }).waitFor(LIVE);
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "signing out forgets the token");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a catalog registered through the form, an unsupported option refused next to its field", async () => {
  const { page, context, errors } = await open("/ui/catalogs");
  await signIn(page, ADMIN);
  await page.getByText("No catalogs yet").waitFor(LIVE);
  await page.getByRole("link", { name: "Register a catalog", exact: true }).click();

  await page.getByLabel("Name").fill("wh");
  await page.getByLabel("Type").selectOption("filesystem");
  // The form is built from GET /v1/catalog-types: one field per option.
  await page.getByLabel("path").fill(WAREHOUSE);
  assert.equal(await page.getByLabel("default-database").getAttribute("placeholder"), "default");
  await page.getByRole("button", { name: "Add an option" }).click();
  await page.getByLabel("Key 1").fill("compression");
  await page.getByLabel("Value 1").fill("zstd");
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea")]
      .filter((field) => field.labels.length === 0 && !field.getAttribute("aria-label"))
      .map((field) => field.outerHTML));
  assert.deepEqual(unlabelled, [], "every form field has a label");
  await page.getByRole("button", { name: "Register" }).click();

  const keyField = page.getByLabel("Key 1");
  await page.locator(".extra-row .field-error", { hasText: "unsupported option" }).waitFor(LIVE);
  assert.equal(await keyField.getAttribute("aria-invalid"), "true");
  const describedBy = (await keyField.getAttribute("aria-describedby")) ?? "";
  const errorId = describedBy.split(" ").find((id) => id.startsWith("extra-error"));
  assert.match(await page.locator(`#${errorId}`).innerText(), /unsupported option/);
  await shot(page, "register-field-error");
  assert.equal((await call("GET", "/v1/catalogs/wh")).status, 404, "nothing registered");

  await page.getByRole("button", { name: "Remove option compression" }).click();
  await page.getByRole("button", { name: "Register" }).click();
  await page.getByRole("heading", { name: "catalog wh" }).waitFor(LIVE);
  const stored = await call("GET", "/v1/catalogs/wh");
  assert.equal(stored.status, 200);
  assert.equal(stored.body.options.path, WAREHOUSE);
  assert.ok(existsSync(join(WAREHOUSE, "default")), "opening the catalog made its default database");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a batch job followed live from CREATED to FINISHED, its table then in browse and on disk", async () => {
  const submitted = await call("POST", "/v1/jobs", {
    name: "daily totals",
    mode: "batch",
    hooks: [{
      kind: "create_table_as",
      target: { catalog: "wh", table: "daily_totals" },
      table: { columns: [{ name: "day", type: "DATE NOT NULL" }, { name: "total", type: "DECIMAL(12, 2)" }] },
    }],
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  const job = submitted.body;

  const { page, context, errors } = await open(`/ui/jobs/${job.id}`);
  await signIn(page, ADMIN);
  await page.getByRole("heading", { name: "job daily totals" }).waitFor(LIVE);
  let navigations = 0;
  page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) navigations += 1; });
  await page.evaluate(() => { window.__sameDocument = true; });

  const statusShown = (status) => page.locator(`.status-line [data-status="${status}"]`).waitFor(LIVE);
  await statusShown("INITIALIZING");
  const sink = page.locator(".copyable pre");
  assert.match(await sink.innerText(), /CREATE TEMPORARY TABLE/);

  for (const status of ["CREATED", "RUNNING", "FINISHED"]) {
    const reported = await call("PUT", `/v1/jobs/${job.id}/status`, { status });
    assert.equal(reported.status, 200, JSON.stringify(reported.body));
    if (status === "CREATED") {
      // The engine's part: rows in the staging directory ctasd made.
      const staging = reported.body.job.hooks[0].write_location.path;
      assert.ok(existsSync(staging), "CREATED made the staging directory");
      writeFileSync(join(staging, "part-0.csv"), "2026-12-01,10.50\n2026-12-02,7.25\n");
    }
    await statusShown(status);
    await page.locator(`.timeline [data-event-status="${status}"]`).waitFor(LIVE);
  }
  await page.locator(".status-line", { hasText: "settled" }).waitFor(LIVE);
  await page.locator("tr[data-action]", { hasText: "committed" }).waitFor(LIVE);
  await page.locator(".status-line .headline", { hasText: "Finished, published" }).waitFor(LIVE);
  // Durations as Flink's web UI writes them: the job's, each status's, each action's.
  assert.match(await page.locator("[data-duration]").textContent(), /^\d+( ms|s|m \d+s)$/);
  await page.locator(".timeline-status .lasted", { hasText: "lasted" }).first().waitFor(LIVE);
  assert.match(await page.locator("tr[data-action] [data-took]").first().textContent(), /^\d+( ms|s)$/);
  // The staging became the table: its write location is marked gone, its sink statement no longer offered.
  await page.locator(".write-location h4", { hasText: "gone: published as the table" }).waitFor(LIVE);
  assert.equal(await page.getByRole("button", { name: /^Copy the sink statement/ }).count(), 0);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was not reloaded");
  assert.equal(navigations, 0, "the page did not navigate");
  await shot(page, "job-finished");

  const published = join(WAREHOUSE, "default", "daily_totals");
  assert.ok(readdirSync(published).includes("part-0.csv"), "the rows were published");
  assert.ok(!readdirSync(join(WAREHOUSE, "default")).some((d) => d.startsWith("_ctasd_stg_")), "the staging is gone");

  // The header counts the finished job.
  await page.locator('[data-count="FINISHED"]', { hasText: "1" }).waitFor(LIVE);

  await page.getByRole("link", { name: "wh", exact: true }).first().click();
  await page.getByRole("heading", { name: "catalog wh" }).waitFor(LIVE);
  const table = page.locator('[data-database="default"] [data-table="daily_totals"]');
  await table.waitFor(LIVE);
  await table.click();
  await page.locator("caption", { hasText: "default.daily_totals" }).waitFor(LIVE);
  await page.locator("td", { hasText: "decimal(12, 2)" }).or(page.locator("td", { hasText: "DECIMAL(12, 2)" })).first().waitFor(LIVE);
  await page.locator("tr[data-job]", { hasText: "daily totals" }).waitFor(LIVE);
  await shot(page, "catalog-browse");
  assert.deepEqual(errors, []);
  await context.close();
});

test("jobs list: newest first, filtered by status, searched by name or id, paged", async () => {
  const ids = [];
  for (let i = 0; i < 27; i += 1) {
    const submitted = await call("POST", "/v1/jobs", {
      name: `load ${String(i).padStart(2, "0")}`,
      mode: "streaming",
      hooks: [{ kind: "create_table_as", target: { catalog: "wh", table: `load_${i}` }, table: { columns: [{ name: "n", type: "INT" }] } }],
    });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    ids.push(submitted.body.id);
  }
  const { page, context, errors } = await open("/ui/jobs");
  await signIn(page, ADMIN);
  const firstRow = page.locator("tr[data-job]").first();
  await firstRow.waitFor(LIVE);
  // The overview's charts, drawn from the jobs themselves: the 27 just
  // submitted count in the last hour's bar; the batch job published earlier
  // has its time from FINISHED to published.
  const perHour = page.locator('figure[data-chart="jobs-per-hour"]');
  await perHour.locator("rect.bar-running").last().waitFor(LIVE);
  const running = await perHour.locator("rect.bar-running title").last().textContent();
  assert.ok(Number(running.split(" ")[0]) >= 27, running);
  const publishing = page.locator('figure[data-chart="publish-times"] figcaption');
  assert.match(await publishing.textContent(), /FINISHED to published, last \d+ batch jobs \(median \d+( ms|s|m \d+s)\)/);
  assert.equal(await firstRow.getAttribute("data-job"), ids[26], "newest first");
  assert.equal(await page.locator("tr[data-job]").count(), 25);

  await page.getByRole("button", { name: "Older" }).click();
  await page.getByText("page 2").waitFor(LIVE);
  await page.locator("tr[data-job]", { hasText: "daily totals" }).waitFor(LIVE);
  await page.getByRole("button", { name: "Newer" }).click();
  await page.getByText("page 1").waitFor(LIVE);

  await page.getByLabel("Status").selectOption("FINISHED");
  await page.waitForURL(/status=FINISHED/);
  await page.locator("tr[data-job]", { hasText: "daily totals" }).waitFor(LIVE);
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 1);

  await page.getByLabel("Status").selectOption("");
  await page.getByLabel("Search by name or id").fill("LOAD 1");
  await page.waitForURL(/search=LOAD/);
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 10);

  await page.getByLabel("Search by name or id").fill(ids[3].slice(0, 12));
  await page.waitForFunction((id) => {
    const rows = document.querySelectorAll("tr[data-job]");
    return rows.length === 1 && rows[0].getAttribute("data-job") === id;
  }, ids[3]);

  await page.getByLabel("Search by name or id").fill("no such job anywhere");
  await page.getByText("No job matches").waitFor(LIVE);
  assert.deepEqual(errors, []);
  await context.close();
});

test("an operator retries a failed commit and gives it up from the job's page", async () => {
  const submitted = await call("POST", "/v1/jobs", {
    name: "broken totals",
    mode: "batch",
    hooks: [{ kind: "create_table_as", target: { catalog: "wh", table: "broken_totals" }, table: { columns: [{ name: "n", type: "INT" }] } }],
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  const job = submitted.body;
  const created = await call("PUT", `/v1/jobs/${job.id}/status`, { status: "CREATED" });
  // Someone removes the staging behind ctasd's back: the commit cannot publish it.
  rmSync(created.body.job.hooks[0].write_location.path, { recursive: true });
  await call("PUT", `/v1/jobs/${job.id}/status`, { status: "RUNNING" });
  await call("PUT", `/v1/jobs/${job.id}/status`, { status: "FINISHED" });

  const { page, context, errors } = await open(`/ui/jobs/${job.id}`);
  await signIn(page, ADMIN);
  const commit = page.locator("tr[data-action]", { hasText: "commit" });
  await commit.waitFor(LIVE);
  // What happened, in words, and why first.
  await page.locator(".status-line .headline", { hasText: "Finished, not published" }).waitFor(LIVE);
  await page.locator(".notice-bad strong", { hasText: "Why nothing was published" }).waitFor(LIVE);
  const attempts = async () => Number(await commit.locator("td").nth(5).innerText());
  const before = await attempts();
  await page.getByRole("button", { name: /^Retry action/ }).click();
  // The retry shows on the page by itself: one more attempt.
  for (const deadline = Date.now() + LIVE.timeout; (await attempts()) <= before; ) {
    assert.ok(Date.now() < deadline, "the retried attempt appears");
    await page.waitForTimeout(200);
  }
  await page.locator(".timeline-intervention", { hasText: "retry" }).waitFor(LIVE);

  await page.getByRole("button", { name: /^Give up action/ }).click();
  await page.locator(".timeline-intervention", { hasText: "give up" }).waitFor(LIVE);
  await page.locator(".status-line", { hasText: "failed" }).waitFor(LIVE);
  await page.locator("tr[data-action]", { hasText: "aborted" }).waitFor(LIVE);
  // Overtaken by the abort: nothing is left to retry or give up.
  await page.waitForFunction(() => !document.querySelector('button[aria-label^="Retry action"]'), null, LIVE);
  await shot(page, "job-given-up");
  const after = await call("GET", `/v1/jobs/${job.id}`);
  const commitAction = after.body.actions.find((a) => a.action === "commit");
  assert.equal(commitAction.state, "failed", JSON.stringify(commitAction));
  assert.ok(!existsSync(join(WAREHOUSE, "default", "broken_totals")), "nothing was published");
  assert.deepEqual(errors, []);
  await context.close();

  // A reader sees the same page without the operator's buttons.
  const asReader = await open(`/ui/jobs/${job.id}`);
  await signIn(asReader.page, READER);
  await asReader.page.locator("tr[data-action]", { hasText: "commit" }).waitFor(LIVE);
  assert.equal(await asReader.page.getByRole("button", { name: /^(Retry|Give up) action/ }).count(), 0);
  await asReader.context.close();
});

test("a commit whose staging was discarded offers no retry, says why, and marks its write location gone", async () => {
  const submitted = await call("POST", "/v1/jobs", {
    name: "clashing totals", mode: "batch",
    hooks: [{ kind: "create_table_as", target: { catalog: "wh", table: "clashing_totals" },
              table: { columns: [{ name: "n", type: "INT" }], options: { format: "csv" } } }],
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  const job = submitted.body;
  await call("PUT", `/v1/jobs/${job.id}/status`, { status: "CREATED" });
  // Someone else makes a table of that name first: the commit cannot publish, and discards its staging.
  mkdirSync(join(WAREHOUSE, "default", "clashing_totals"));
  writeFileSync(join(WAREHOUSE, "default", "clashing_totals", "theirs.csv"), "1\n");
  await call("PUT", `/v1/jobs/${job.id}/status`, { status: "FINISHED" });
  const after = await call("GET", `/v1/jobs/${job.id}`);
  const commit = after.body.actions.find((a) => a.action === "commit");
  assert.equal(commit.outcome, "discarded", JSON.stringify(commit));

  const { page, context, errors } = await open(`/ui/jobs/${job.id}`);
  await signIn(page, ADMIN);
  const row = page.locator("tr[data-action]", { hasText: "discarded" });
  await row.getByText("No retry: its staging was discarded").waitFor(LIVE);
  assert.equal(await row.getByRole("button", { name: /^Retry action/ }).count(), 0);
  await page.locator(".status-line .headline", { hasText: "Finished, not published" }).waitFor(LIVE);
  await page.locator(".write-location h4", { hasText: "gone: discarded" }).waitFor(LIVE);
  await shot(page, "job-discarded");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a failed audit holds a table back: the job's page shows why, and an operator publishes it anyway", async () => {
  const submitted = await call("POST", "/v1/jobs", {
    name: "audited notes",
    mode: "batch",
    hooks: [{
      kind: "create_table_as",
      target: { catalog: "wh", table: "audited_notes" },
      table: { columns: [{ name: "id", type: "BIGINT" }, { name: "note", type: "STRING" }], options: { format: "csv" } },
      audits: [{ kind: "row_count", min: 1 }, { kind: "not_null", columns: ["note"] }],
    }],
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  const job = submitted.body;
  const created = await call("PUT", `/v1/jobs/${job.id}/status`, { status: "CREATED" });
  writeFileSync(join(created.body.job.hooks[0].write_location.path, "part-0.csv"), "1,\n2,kept\n");
  const finished = await call("PUT", `/v1/jobs/${job.id}/status`, { status: "FINISHED" });
  assert.equal(finished.body.job.settlement, "quarantined", JSON.stringify(finished.body));

  const { page, context, errors } = await open(`/ui/jobs/${job.id}`);
  await signIn(page, ADMIN);
  const held = page.getByRole("region", { name: "Quarantined" });
  await held.waitFor(LIVE);
  await held.getByText("not_null(note)").first().waitFor(LIVE);
  await page.locator(".status-line", { hasText: "quarantined" }).waitFor(LIVE);
  await page.locator('[data-audit="1"]', { hasText: "failed" }).waitFor(LIVE);
  await page.locator('.timeline-audit[data-audit-passed="false"]').waitFor(LIVE);
  assert.ok(!existsSync(join(WAREHOUSE, "default", "audited_notes")), "readers see no table");
  await shot(page, "job-quarantined");

  await page.getByLabel("Reason (shown in the job's events)").fill("one empty note is fine");
  await page.getByRole("button", { name: "Publish anyway" }).click();
  await page.locator(".status-line", { hasText: "settled" }).waitFor(LIVE);
  await page.locator("tr[data-action]", { hasText: "committed" }).waitFor(LIVE);
  await page.locator(".timeline-intervention", { hasText: "one empty note is fine" }).waitFor(LIVE);
  assert.equal(await held.count(), 0, "the quarantine notice is gone");
  assert.ok(readdirSync(join(WAREHOUSE, "default", "audited_notes")).includes("part-0.csv"), "published");
  await shot(page, "job-published-anyway");
  assert.deepEqual(errors, []);
  await context.close();
});

test("an operator sees subscriptions and their deliveries, and sends a parked one again", async () => {
  // A receiver that refuses until told otherwise, and one attempt: every
  // delivery parks.
  let accepting = false;
  const taken = [];
  const receiver = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      if (accepting) taken.push(JSON.parse(body));
      response.writeHead(accepting ? 200 : 500).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  const subscribed = await call("POST", "/v1/subscriptions", { name: "lineage", url, events: ["table.published"], max_attempts: 1 });
  assert.equal(subscribed.status, 201, JSON.stringify(subscribed.body));
  const submitted = await call("POST", "/v1/jobs", {
    name: "announced", mode: "batch",
    hooks: [{ kind: "create_table_as", target: { catalog: "wh", table: "announced" },
              table: { columns: [{ name: "id", type: "BIGINT" }], options: { format: "csv" } } }],
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  await call("PUT", `/v1/jobs/${submitted.body.id}/status`, { status: "CREATED" });
  await call("PUT", `/v1/jobs/${submitted.body.id}/status`, { status: "FINISHED" });

  const { page, context, errors } = await open("/ui/events");
  await signIn(page, ADMIN);
  await page.getByRole("link", { name: "lineage" }).click();
  await page.getByRole("heading", { name: "subscription lineage" }).waitFor(LIVE);
  await page.getByRole("button", { name: "parked" }).click();
  // This job's delivery (another job's table may have been published just before).
  const ofJob = { has: page.locator(`a[href$="/jobs/${submitted.body.id}"]`) };
  const row = page.locator("tr", { hasText: "table.published", ...ofJob });
  await row.getByText("the receiver answered 500").waitFor(LIVE);
  await shot(page, "subscription-parked");

  accepting = true;
  await row.getByRole("button", { name: "Redeliver" }).click();
  await page.getByRole("button", { name: "delivered" }).click();
  await page.locator("tr", { hasText: "table.published", ...ofJob }).getByText("delivered").waitFor(LIVE);
  assert.equal(taken.filter((e) => e.job.id === submitted.body.id).length, 1, "the receiver took it once");
  assert.ok(taken.every((e) => e.type === "table.published"));
  assert.deepEqual(errors, []);
  await context.close();
  receiver.close();
});

test("a catalog altered through its form; in use, it cannot be dropped: the refusal is shown in the confirmation", async () => {
  const { page, context, errors } = await open("/ui/catalogs/wh");
  await signIn(page, ADMIN);
  await page.getByRole("heading", { name: "catalog wh" }).waitFor(LIVE);
  await page.getByRole("button", { name: "Alter" }).click();
  await page.getByLabel("Comment").fill("the dashboard's warehouse");
  await page.getByRole("button", { name: "Save" }).click();
  await page.locator(".facts dd", { hasText: "the dashboard's warehouse" }).waitFor(LIVE);
  assert.equal((await call("GET", "/v1/catalogs/wh")).body.comment, "the dashboard's warehouse");

  await page.getByRole("button", { name: "Drop" }).click();
  const dialog = page.getByRole("dialog", { name: "Drop catalog wh?" });
  await dialog.waitFor(LIVE);
  await dialog.getByRole("button", { name: "Drop catalog" }).click();
  await dialog.getByText("The catalog is in use").waitFor(LIVE);
  await shot(page, "drop-in-use");
  assert.equal((await call("GET", "/v1/catalogs/wh")).status, 200, "the catalog is still there");
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden", ...LIVE });
  assert.deepEqual(errors, []);
  await context.close();
});

test("readable at phone width, and the keyboard reaches the navigation first", async () => {
  const { page, context, errors } = await open("/ui/jobs", { width: 390, height: 844 });
  await signIn(page, READER);
  await page.locator("tr[data-job]").first().waitFor(LIVE);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page fits a phone's width (overflows by ${overflow}px)`);
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
  await shot(page, "jobs-phone");
  assert.deepEqual(errors, []);
  await context.close();
});
