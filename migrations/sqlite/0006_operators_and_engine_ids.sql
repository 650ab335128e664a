-- What operators decided about stuck or failed actions (retry now, give
-- up), shown among the job's events.
CREATE TABLE job_interventions (
    id        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id    TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    action_id INTEGER NOT NULL,
    decision  TEXT NOT NULL CHECK (decision IN ('retry', 'give_up')),
    at        TEXT NOT NULL
) STRICT;

CREATE INDEX job_interventions_by_job ON job_interventions (job_id, id);

-- The engine's own id for the job (Flink's JobID), so clients need no map.
ALTER TABLE jobs ADD COLUMN engine_job_id TEXT;
CREATE UNIQUE INDEX jobs_by_engine_job_id ON jobs (engine_job_id) WHERE engine_job_id IS NOT NULL;
