-- Every status a job reached, written in the transition's own transaction.
CREATE TABLE job_transitions (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    from_status TEXT,
    to_status   TEXT    NOT NULL,
    failure     TEXT,
    at          TEXT    NOT NULL
) STRICT;

CREATE INDEX job_transitions_by_job ON job_transitions (job_id, id);
CREATE INDEX jobs_by_status ON jobs (status, id);
