-- Engines ctasd watches jobs on (a Flink cluster's REST URL), with what it
-- last saw of each, and which replica polls it until when (unix ms).
CREATE TABLE engines (
    name                    TEXT    NOT NULL PRIMARY KEY,
    kind                    TEXT    NOT NULL CHECK (kind IN ('flink')),
    url                     TEXT    NOT NULL,
    history_url             TEXT,
    poll_interval_ms        INTEGER NOT NULL,
    missing_job_grace_s     INTEGER NOT NULL,
    max_requests_per_second INTEGER NOT NULL,
    comment                 TEXT,
    version                 INTEGER NOT NULL,
    created_at              TEXT    NOT NULL,
    updated_at              TEXT    NOT NULL,
    reachability            TEXT    NOT NULL DEFAULT 'unknown',
    reachability_since      TEXT,
    checked_at              TEXT,
    last_error              TEXT,
    engine_version          TEXT,
    poller                  TEXT,
    poll_lease_until        INTEGER
) STRICT;

-- The engine a job runs on, and the latest engine time applied to it (unix
-- ms): an observation no newer than that is stale and changes nothing.
ALTER TABLE jobs ADD COLUMN engine TEXT;
ALTER TABLE jobs ADD COLUMN engine_applied_until INTEGER;
CREATE INDEX jobs_by_engine ON jobs (engine, status) WHERE engine IS NOT NULL;

-- What the watcher last saw of each watched job.
CREATE TABLE job_watches (
    job_id         TEXT NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    engine_status  TEXT,
    first_seen_at  TEXT,
    last_seen_at   TEXT,
    missing_since  TEXT,
    note           TEXT,
    examined_until INTEGER,
    updated_at     TEXT NOT NULL
) STRICT;
