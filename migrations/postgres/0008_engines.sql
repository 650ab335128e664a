-- Engines ctasd watches jobs on (a Flink cluster's REST URL), with what it
-- last saw of each, and which replica polls it until when (unix ms).
CREATE TABLE engines (
    name                    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind                    TEXT        NOT NULL CHECK (kind IN ('flink')),
    url                     TEXT        NOT NULL,
    history_url             TEXT,
    poll_interval_ms        BIGINT      NOT NULL,
    missing_job_grace_s     BIGINT      NOT NULL,
    max_requests_per_second BIGINT      NOT NULL,
    comment                 TEXT,
    version                 BIGINT      NOT NULL,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,
    reachability            TEXT        NOT NULL DEFAULT 'unknown',
    reachability_since      TIMESTAMPTZ,
    checked_at              TIMESTAMPTZ,
    last_error              TEXT,
    engine_version          TEXT,
    poller                  TEXT,
    poll_lease_until        BIGINT
);

-- The engine a job runs on, and the latest engine time applied to it (unix
-- ms): an observation no newer than that is stale and changes nothing.
ALTER TABLE jobs ADD COLUMN engine TEXT;
ALTER TABLE jobs ADD COLUMN engine_applied_until BIGINT;
CREATE INDEX jobs_by_engine ON jobs (engine, status) WHERE engine IS NOT NULL;

-- What the watcher last saw of each watched job.
CREATE TABLE job_watches (
    job_id         TEXT NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    engine_status  TEXT,
    first_seen_at  TIMESTAMPTZ,
    last_seen_at   TIMESTAMPTZ,
    missing_since  TIMESTAMPTZ,
    note           TEXT,
    examined_until BIGINT,
    updated_at     TIMESTAMPTZ NOT NULL
);
