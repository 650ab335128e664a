-- Jobs, their hooks (each with the catalog snapshot it uses, secrets sealed),
-- and the ledger of actions: written in the same transaction as the status
-- change that implies them, so a crash loses none and repeats none. Replicas
-- claim due actions with leases (FOR UPDATE SKIP LOCKED).
CREATE TABLE jobs (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name        TEXT        NOT NULL,
    mode        TEXT        NOT NULL CHECK (mode IN ('streaming', 'batch')),
    status      TEXT        NOT NULL,
    statement   TEXT,
    failure     TEXT,
    fingerprint TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE hooks (
    job_id                  TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    hook_index              INTEGER NOT NULL,
    kind                    TEXT    NOT NULL,
    catalog                 TEXT    NOT NULL,
    database_name           TEXT    NOT NULL,
    table_name              TEXT    NOT NULL,
    if_not_exists           BOOLEAN NOT NULL,
    skipped                 BOOLEAN NOT NULL,
    table_properties        JSONB   NOT NULL,
    catalog_options         JSONB   NOT NULL,
    catalog_sealed_options  JSONB   NOT NULL,
    catalog_comment         TEXT,
    PRIMARY KEY (job_id, hook_index)
);

CREATE INDEX hooks_by_catalog ON hooks (catalog, job_id);

CREATE TABLE actions (
    id           BIGSERIAL   PRIMARY KEY,
    job_id       TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    hook_index   INTEGER     NOT NULL,
    action       TEXT        NOT NULL,
    trigger      TEXT        NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
    attempts     INTEGER     NOT NULL DEFAULT 0,
    last_error   TEXT,
    outcome      TEXT,
    not_before   TIMESTAMPTZ NOT NULL,
    lease_until  TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

CREATE INDEX actions_pending ON actions (not_before) WHERE state = 'pending';
CREATE INDEX actions_by_job ON actions (job_id, id);
