-- Statuses a reporter passed over are recorded as inferred, with the
-- engine's own time for each status when the report carries it.
ALTER TABLE job_transitions ADD COLUMN inferred INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_transitions ADD COLUMN engine_at TEXT;

-- When the job last moved: the actions that move recorded carry the same
-- time, so a repeated report answers with the same actions.
ALTER TABLE jobs ADD COLUMN moved_at TEXT;
UPDATE jobs SET moved_at = updated_at;
