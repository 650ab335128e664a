-- Every status a job reached, written in the transition's own transaction.
CREATE TABLE job_transitions (
    id          BIGSERIAL   PRIMARY KEY,
    job_id      TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    from_status TEXT,
    to_status   TEXT        NOT NULL,
    failure     TEXT,
    at          TIMESTAMPTZ NOT NULL
);

CREATE INDEX job_transitions_by_job ON job_transitions (job_id, id);
CREATE INDEX jobs_by_status ON jobs (status, id);
