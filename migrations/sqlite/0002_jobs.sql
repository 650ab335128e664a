-- Jobs, their hooks (each with the catalog snapshot it uses, secrets sealed),
-- and the ledger of actions: written in the same transaction as the status
-- change that implies them, so a crash loses none and repeats none.
CREATE TABLE jobs (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    mode        TEXT    NOT NULL CHECK (mode IN ('streaming', 'batch')),
    status      TEXT    NOT NULL,
    statement   TEXT,
    failure     TEXT,
    fingerprint TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
) STRICT;

CREATE TABLE hooks (
    job_id                  TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    hook_index              INTEGER NOT NULL,
    kind                    TEXT    NOT NULL,
    catalog                 TEXT    NOT NULL,
    database_name           TEXT    NOT NULL,
    table_name              TEXT    NOT NULL,
    if_not_exists           INTEGER NOT NULL,
    skipped                 INTEGER NOT NULL,
    table_properties        TEXT    NOT NULL CHECK (json_valid(table_properties)),
    catalog_options         TEXT    NOT NULL CHECK (json_valid(catalog_options)),
    catalog_sealed_options  TEXT    NOT NULL CHECK (json_valid(catalog_sealed_options)),
    catalog_comment         TEXT,
    PRIMARY KEY (job_id, hook_index)
) STRICT;

CREATE INDEX hooks_by_catalog ON hooks (catalog, job_id);

CREATE TABLE actions (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id       TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    hook_index   INTEGER NOT NULL,
    action       TEXT    NOT NULL,
    trigger      TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    outcome      TEXT,
    not_before   INTEGER NOT NULL, -- unix milliseconds: compared, never shown
    lease_until  INTEGER,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL
) STRICT;

CREATE INDEX actions_pending ON actions (state, not_before) WHERE state = 'pending';
CREATE INDEX actions_by_job ON actions (job_id, id);
