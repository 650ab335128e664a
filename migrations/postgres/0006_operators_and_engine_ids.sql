-- What operators decided about stuck or failed actions (retry now, give
-- up), shown among the job's events.
CREATE TABLE job_interventions (
    id        BIGSERIAL PRIMARY KEY,
    job_id    TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    action_id BIGINT NOT NULL,
    decision  TEXT NOT NULL CHECK (decision IN ('retry', 'give_up')),
    at        TIMESTAMPTZ NOT NULL
);

CREATE INDEX job_interventions_by_job ON job_interventions (job_id, id);

-- The engine's own id for the job (Flink's JobID), so clients need no map.
ALTER TABLE jobs ADD COLUMN engine_job_id TEXT;
CREATE UNIQUE INDEX jobs_by_engine_job_id ON jobs (engine_job_id) WHERE engine_job_id IS NOT NULL;
