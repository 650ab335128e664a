// Catalogs: the list; a catalog's options (secrets masked by ctasd), its
// databases and tables, the jobs that use it, alter and drop; and the
// register form, drawn from GET /v1/catalog-types, with ctasd's validation
// errors next to the fields they name.
import { useState } from "preact/hooks";
import { api, ApiProblem, type Catalog, type CatalogType, idempotencyKey, unwrap } from "../api";
import { Confirm, Empty, Link, Loading, ProblemNotice, Time } from "../components";
import { usePoll } from "../poll";
import { navigate } from "../router";
import { useCan } from "../session";
import { JobTable } from "./jobs";

export function CatalogList() {
  const canManage = useCan("manage_catalogs");
  const { data, problem } = usePoll(() => unwrap(api.GET("/v1/catalogs", { params: { query: { page_size: 1000 } } })), 5000, []);
  return (
    <section>
      <div class="page-head">
        <h1>Catalogs</h1>
        {canManage && <Link class="button primary" href="/catalogs/new">Register a catalog</Link>}
      </div>
      <ProblemNotice problem={problem} />
      {!data && !problem && <Loading what="catalogs" />}
      {data && data.catalogs.length === 0 && (
        <Empty title="No catalogs yet">
          {canManage
            ? <p>Register one to give jobs a place to create tables: <Link href="/catalogs/new">register a catalog</Link>.</p>
            : <p>Someone with the operator or admin role registers catalogs; they appear here.</p>}
        </Empty>
      )}
      {data && data.catalogs.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Registered catalogs</caption>
            <thead>
              <tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Comment</th><th scope="col">Registered</th></tr>
            </thead>
            <tbody>
              {data.catalogs.map((c) => (
                <tr key={c.name}>
                  <th scope="row"><Link href={`/catalogs/${encodeURIComponent(c.name)}`}>{c.name}</Link></th>
                  <td><code>{c.type}</code></td>
                  <td>{c.comment ?? <span class="muted">—</span>}</td>
                  <td><Time at={c.created_at} /></td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.next_page_token && <p class="muted small">Showing the first 1000 catalogs.</p>}
        </div>
      )}
    </section>
  );
}

/** One extra option row: a key the type's list may not have, and its value. */
interface ExtraOption {
  id: number;
  key: string;
  value: string;
}

let nextRowId = 1;

export function RegisterCatalog() {
  const types = usePoll(() => unwrap(api.GET("/v1/catalog-types")), 0, []);
  const [name, setName] = useState("");
  const [typeName, setTypeName] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const [extras, setExtras] = useState<ExtraOption[]>([]);
  const [comment, setComment] = useState("");
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  if (!useCan("manage_catalogs")) {
    return <section><h1>Register a catalog</h1><p>Your role may not register catalogs.</p></section>;
  }
  const catalogTypes = types.data?.catalog_types ?? [];
  const chosen: CatalogType | undefined = catalogTypes.find((t) => t.type === typeName);
  const fields = chosen?.options.filter((o) => o.key !== "type") ?? [];

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    const options: Record<string, string> = {};
    if (typeName) options.type = typeName;
    for (const option of fields) {
      const value = values[option.key];
      if (value !== undefined && value !== "") options[option.key] = value;
    }
    for (const extra of extras) if (extra.key.trim()) options[extra.key.trim()] = extra.value;
    try {
      const body = comment ? { name, options, comment } : { name, options };
      const created = await unwrap(
        api.POST("/v1/catalogs", { body, params: { header: { "Idempotency-Key": idempotencyKey() } } }),
      );
      navigate(`/catalogs/${encodeURIComponent(created.name)}`);
    } catch (e) {
      setProblem(e instanceof ApiProblem ? e : undefined);
    } finally {
      setBusy(false);
    }
  };

  const fieldError = (field: string) => problem?.fieldError(field);
  const named = new Set(["name", "comment", "options.type", ...fields.map((o) => `options.${o.key}`), ...extras.map((x) => `options.${x.key.trim()}`)]);
  const unplaced = problem?.problem.errors?.filter((e) => !named.has(e.field)) ?? [];

  return (
    <section>
      <h1>Register a catalog</h1>
      <ProblemNotice problem={types.problem} />
      {problem && (
        <div class="notice notice-bad" role="alert">
          <strong>ctasd did not register the catalog</strong>
          {problem.problem.errors?.length
            ? <p>Fix the fields marked below.</p>
            : <p class="pre-line">{problem.problem.detail}</p>}
          {unplaced.map((e) => <p key={e.field}><code>{e.field}</code>: {e.message}</p>)}
        </div>
      )}
      <form onSubmit={submit} noValidate class="form">
        <TextField id="catalog-name" label="Name" required value={name} onInput={setName} error={fieldError("name")}
          hint="Letters, digits, _ and -; starts with a letter; at most 64 characters." />
        <div class="field">
          <label for="catalog-type">Type <span class="required" aria-hidden="true">*</span></label>
          <select id="catalog-type" required value={typeName}
            aria-invalid={fieldError("options.type") ? "true" : undefined}
            aria-describedby="catalog-type-hint catalog-type-error"
            onChange={(e) => { setTypeName(e.currentTarget.value); setValues({}); }}>
            <option value="">Choose a type…</option>
            {catalogTypes.map((t) => <option key={t.type} value={t.type}>{t.type}</option>)}
          </select>
          <p id="catalog-type-hint" class="hint">{chosen?.description ?? "The factory that opens the catalog; its options appear below."}</p>
          <FieldError id="catalog-type-error" message={fieldError("options.type")} />
        </div>
        {chosen && (
          <fieldset>
            <legend>Options of <code>{chosen.type}</code></legend>
            {fields.map((option) => (
              <TextField
                key={option.key}
                id={`option-${option.key}`}
                label={option.key}
                required={option.required}
                secret={option.sensitive}
                value={values[option.key] ?? ""}
                placeholder={option.default ?? ""}
                onInput={(v) => setValues({ ...values, [option.key]: v })}
                error={fieldError(`options.${option.key}`)}
                hint={[
                  option.description,
                  option.default !== null ? `Default: ${option.default}.` : "",
                  option.sensitive ? "Secret: encrypted at rest and shown as ****** afterwards." : "",
                  option.required ? "" : "Optional.",
                ].filter(Boolean).join(" ")}
              />
            ))}
          </fieldset>
        )}
        <ExtraOptions rows={extras} setRows={setExtras} fieldError={fieldError} />
        <TextField id="catalog-comment" label="Comment" value={comment} onInput={setComment} error={fieldError("comment")} hint="Optional." />
        <div class="actions">
          <button type="submit" class="button primary" disabled={busy}>{busy ? "Registering…" : "Register"}</button>
          <Link class="button" href="/catalogs">Cancel</Link>
        </div>
      </form>
    </section>
  );
}

function ExtraOptions(props: { rows: ExtraOption[]; setRows: (rows: ExtraOption[]) => void; fieldError: (field: string) => string | undefined }) {
  const { rows, setRows } = props;
  const update = (id: number, change: Partial<ExtraOption>) => setRows(rows.map((r) => (r.id === id ? { ...r, ...change } : r)));
  return (
    <fieldset>
      <legend>Other options</legend>
      <p class="hint">Options the type's list does not show, as Flink's catalog DDL would pass them.</p>
      {rows.map((row, i) => {
        const error = props.fieldError(`options.${row.key.trim()}`);
        return (
          <div class="extra-row" key={row.id}>
            <div class="field">
              <label for={`extra-key-${row.id}`}>Key {i + 1}</label>
              <input id={`extra-key-${row.id}`} value={row.key} onInput={(e) => update(row.id, { key: e.currentTarget.value })}
                aria-invalid={error ? "true" : undefined} aria-describedby={`extra-error-${row.id}`} />
            </div>
            <div class="field">
              <label for={`extra-value-${row.id}`}>Value {i + 1}</label>
              <input id={`extra-value-${row.id}`} value={row.value} onInput={(e) => update(row.id, { value: e.currentTarget.value })} />
            </div>
            <button type="button" class="button small" onClick={() => setRows(rows.filter((r) => r.id !== row.id))}
              aria-label={`Remove option ${row.key || i + 1}`}>Remove</button>
            <FieldError id={`extra-error-${row.id}`} message={error} />
          </div>
        );
      })}
      <button type="button" class="button small" onClick={() => setRows([...rows, { id: nextRowId++, key: "", value: "" }])}>
        Add an option
      </button>
    </fieldset>
  );
}

function TextField(props: {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  required?: boolean;
  secret?: boolean;
  placeholder?: string;
  hint?: string;
  error?: string | undefined;
}) {
  const hintId = `${props.id}-hint`;
  const errorId = `${props.id}-error`;
  return (
    <div class="field">
      <label for={props.id}>
        {props.label} {props.required && <span class="required" aria-hidden="true">*</span>}
        {props.secret && <span class="badge tone-muted">secret</span>}
      </label>
      <input
        id={props.id}
        name={props.id}
        type={props.secret ? "password" : "text"}
        autoComplete={props.secret ? "new-password" : "off"}
        required={props.required}
        value={props.value}
        placeholder={props.placeholder}
        onInput={(e) => props.onInput(e.currentTarget.value)}
        aria-invalid={props.error ? "true" : undefined}
        aria-describedby={`${hintId} ${errorId}`}
      />
      {props.hint && <p id={hintId} class="hint">{props.hint}</p>}
      <FieldError id={errorId} message={props.error} />
    </div>
  );
}

function FieldError({ id, message }: { id: string; message: string | undefined }) {
  return <p id={id} class="field-error" aria-live="polite">{message ?? ""}</p>;
}

async function loadCatalog(name: string): Promise<{ catalog: Catalog; etag: string | null }> {
  const answer = api.GET("/v1/catalogs/{catalog}", { params: { path: { catalog: name } } });
  const catalog = await unwrap(answer);
  return { catalog, etag: (await answer).response.headers.get("etag") };
}

export function CatalogPage({ name }: { name: string }) {
  const canManage = useCan("manage_catalogs");
  const loaded = usePoll(() => loadCatalog(name), 5000, [name]);
  const [altering, setAltering] = useState(false);

  if (loaded.problem?.status === 404) {
    return (
      <section>
        <h1>{name}</h1>
        <Empty title="No such catalog">
          <p>ctasd has no catalog named <code>{name}</code>; it may have been dropped. See <Link href="/catalogs">the catalogs</Link>.</p>
        </Empty>
      </section>
    );
  }
  if (!loaded.data) return <section><h1>{name}</h1><ProblemNotice problem={loaded.problem} />{!loaded.problem && <Loading what="the catalog" />}</section>;
  const { catalog, etag } = loaded.data;
  return (
    <section>
      <div class="page-head">
        <h1><span class="muted">catalog</span> {catalog.name}</h1>
        {canManage && !altering && (
          <div class="actions">
            <button type="button" class="button" onClick={() => setAltering(true)}>Alter</button>
            <DropCatalog name={catalog.name} etag={etag} />
          </div>
        )}
      </div>
      <ProblemNotice problem={loaded.problem} />
      <dl class="facts">
        <dt>Type</dt><dd><code>{catalog.type}</code></dd>
        <dt>Comment</dt><dd>{catalog.comment ?? <span class="muted">—</span>}</dd>
        <dt>Registered</dt><dd><Time at={catalog.created_at} /></dd>
        <dt>Changed</dt><dd><Time at={catalog.updated_at} /></dd>
      </dl>
      {altering
        ? <AlterCatalog catalog={catalog} etag={etag} onDone={() => { setAltering(false); void loaded.reload(); }} />
        : <Options options={catalog.options} />}
      <Browse catalog={catalog.name} />
      <h2>Jobs that use it</h2>
      <CatalogJobs catalog={catalog.name} />
    </section>
  );
}

function Options({ options }: { options: Record<string, string> }) {
  return (
    <>
      <h2>Options</h2>
      <div class="table-wrap">
        <table class="options">
          <thead><tr><th scope="col">Key</th><th scope="col">Value</th></tr></thead>
          <tbody>
            {Object.entries(options).sort(([a], [b]) => a.localeCompare(b)).map(([key, value]) => (
              <tr key={key}><th scope="row"><code>{key}</code></th><td><code>{value}</code></td></tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** ALTER CATALOG: set options, reset options, change the comment, against the version read. */
function AlterCatalog({ catalog, etag, onDone }: { catalog: Catalog; etag: string | null; onDone: () => void }) {
  const keys = Object.keys(catalog.options).filter((k) => k !== "type").sort();
  const [values, setValues] = useState<Record<string, string>>({});
  const [reset, setReset] = useState<Set<string>>(new Set());
  const [extras, setExtras] = useState<ExtraOption[]>([]);
  const [comment, setComment] = useState(catalog.comment ?? "");
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const set: Record<string, string> = {};
    for (const [key, value] of Object.entries(values)) if (value !== "" && !reset.has(key)) set[key] = value;
    for (const extra of extras) if (extra.key.trim()) set[extra.key.trim()] = extra.value;
    const body = { set, reset: [...reset], ...(comment !== (catalog.comment ?? "") ? { comment } : {}) };
    setBusy(true);
    try {
      await unwrap(api.PATCH("/v1/catalogs/{catalog}", {
        params: { path: { catalog: catalog.name }, header: { "If-Match": etag } },
        body,
      }));
      onDone();
    } catch (e) {
      setProblem(e instanceof ApiProblem ? e : undefined);
    } finally {
      setBusy(false);
    }
  };
  const fieldError = (field: string) => problem?.fieldError(field);
  return (
    <form onSubmit={submit} noValidate class="form">
      <h2>Alter the catalog</h2>
      {problem && (
        <div class="notice notice-bad" role="alert">
          <strong>{problem.status === 412 ? "The catalog changed meanwhile" : "ctasd did not alter the catalog"}</strong>
          <p class="pre-line">{problem.status === 412 ? "Someone else changed it after this page read it. Cancel to see the new version, then alter again." : problem.problem.detail}</p>
        </div>
      )}
      <p class="hint">Leave a value empty to keep it (secrets are never shown: type a new one to replace it).</p>
      {keys.map((key) => {
        const secret = catalog.options[key] === "******";
        return (
          <div class="alter-row" key={key}>
            <TextField id={`alter-${key}`} label={key} secret={secret} value={values[key] ?? ""}
              placeholder={secret ? "unchanged" : catalog.options[key] ?? ""}
              onInput={(v) => setValues({ ...values, [key]: v })} error={fieldError(`set.${key}`) ?? fieldError(`options.${key}`)} />
            <label class="checkbox">
              <input type="checkbox" checked={reset.has(key)} onChange={(e) => {
                const next = new Set(reset);
                if (e.currentTarget.checked) next.add(key); else next.delete(key);
                setReset(next);
              }} />
              Reset {key}
            </label>
          </div>
        );
      })}
      <ExtraOptions rows={extras} setRows={setExtras} fieldError={(f) => fieldError(f.replace(/^options\./, "set.")) ?? fieldError(f)} />
      <TextField id="alter-comment" label="Comment" value={comment} onInput={setComment} hint="An empty comment clears it." />
      <div class="actions">
        <button type="submit" class="button primary" disabled={busy}>Save</button>
        <button type="button" class="button" onClick={onDone}>Cancel</button>
      </div>
    </form>
  );
}

function DropCatalog({ name, etag }: { name: string; etag: string | null }) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const drop = async () => {
    setBusy(true);
    try {
      await unwrap(api.DELETE("/v1/catalogs/{catalog}", {
        params: { path: { catalog: name }, header: { "If-Match": etag } },
      }));
      setOpen(false);
      navigate("/catalogs");
    } catch (e) {
      setProblem(e instanceof ApiProblem ? e : undefined);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="button danger" onClick={() => { setProblem(undefined); setOpen(true); }}>Drop</button>
      <Confirm open={open} title={`Drop catalog ${name}?`} confirmLabel="Drop catalog" danger busy={busy}
        onConfirm={() => void drop()} onCancel={() => setOpen(false)}>
        <p>ctasd forgets the catalog and its options. Tables it created stay where they are.</p>
        <ProblemNotice problem={problem} title={problem?.status === 409 ? "The catalog is in use" : undefined} />
      </Confirm>
    </>
  );
}

/** The catalog's databases; a database's tables load when it is opened, a table's columns when chosen. */
function Browse({ catalog }: { catalog: string }) {
  const databases = usePoll(
    () => unwrap(api.GET("/v1/catalogs/{catalog}/databases", { params: { path: { catalog } } })),
    10000,
    [catalog],
  );
  return (
    <>
      <h2>Browse</h2>
      <ProblemNotice problem={databases.problem} title="ctasd could not open the catalog" />
      {!databases.data && !databases.problem && <Loading what="databases" />}
      {databases.data?.databases.length === 0 && <Empty title="No databases">The catalog has no databases yet.</Empty>}
      <ul class="browse">
        {databases.data?.databases.map((db) => (
          <li key={db.name}><DatabaseTables catalog={catalog} database={db.name} isDefault={db.default} /></li>
        ))}
      </ul>
    </>
  );
}

function DatabaseTables({ catalog, database, isDefault }: { catalog: string; database: string; isDefault: boolean }) {
  const [open, setOpen] = useState(isDefault);
  return (
    <details open={open} onToggle={(e) => setOpen(e.currentTarget.open)} data-database={database}>
      <summary>{database} {isDefault && <span class="badge tone-muted">default</span>}</summary>
      {open && <TableList catalog={catalog} database={database} />}
    </details>
  );
}

function TableList({ catalog, database }: { catalog: string; database: string }) {
  const tables = usePoll(
    () => unwrap(api.GET("/v1/catalogs/{catalog}/databases/{database}/tables", { params: { path: { catalog, database } } })),
    5000,
    [catalog, database],
  );
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  if (tables.problem) return <ProblemNotice problem={tables.problem} />;
  if (!tables.data) return <Loading what="tables" />;
  if (tables.data.tables.length === 0) return <p class="muted">No tables in {database}.</p>;
  return (
    <>
      <ul class="tables" aria-label={`Tables in ${database}`}>
        {tables.data.tables.map((t) => (
          <li key={t.name}>
            <button type="button" class="link" aria-expanded={chosen === t.name} data-table={t.name}
              onClick={() => setChosen(chosen === t.name ? undefined : t.name)}>{t.name}</button>
          </li>
        ))}
      </ul>
      {chosen && <TableColumns catalog={catalog} database={database} table={chosen} />}
    </>
  );
}

function TableColumns({ catalog, database, table }: { catalog: string; database: string; table: string }) {
  const loaded = usePoll(
    () => unwrap(api.GET("/v1/catalogs/{catalog}/databases/{database}/tables/{table}", { params: { path: { catalog, database, table } } })),
    0,
    [catalog, database, table],
  );
  if (loaded.problem) return <ProblemNotice problem={loaded.problem} />;
  if (!loaded.data) return <Loading what="columns" />;
  return (
    <div class="table-wrap">
      <table>
        <caption>{database}.{table}</caption>
        <thead><tr><th scope="col">Column</th><th scope="col">Type</th><th scope="col">Nullable</th></tr></thead>
        <tbody>
          {loaded.data.columns.map((c) => (
            <tr key={c.name}><th scope="row"><code>{c.name}</code></th><td><code>{c.data_type}</code></td><td>{c.nullable ? "yes" : "no"}</td></tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function CatalogJobs({ catalog }: { catalog: string }) {
  const jobs = usePoll(
    () => unwrap(api.GET("/v1/jobs", { params: { query: { catalog, page_size: 20 } } })),
    5000,
    [catalog],
  );
  if (jobs.problem) return <ProblemNotice problem={jobs.problem} />;
  if (!jobs.data) return <Loading what="jobs" />;
  if (jobs.data.jobs.length === 0) return <Empty title="No jobs">No job has a hook on this catalog yet.</Empty>;
  return (
    <>
      <JobTable jobs={jobs.data.jobs} caption={`Jobs with a hook on ${catalog}`} />
      {jobs.data.next_page_token && <p><Link href={`/jobs?catalog=${encodeURIComponent(catalog)}`}>All jobs on {catalog}</Link></p>}
    </>
  );
}
