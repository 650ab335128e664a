-- Statuses a reporter passed over are recorded as inferred, with the
-- engine's own time for each status when the report carries it.
ALTER TABLE job_transitions ADD COLUMN inferred BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE job_transitions ADD COLUMN engine_at TIMESTAMPTZ;

-- When the job last moved: the actions that move recorded carry the same
-- time, so a repeated report answers with the same actions.
ALTER TABLE jobs ADD COLUMN moved_at TIMESTAMPTZ;
UPDATE jobs SET moved_at = updated_at;
