-- A poll of an engine reads only the watched jobs that changed since its
-- previous poll (a status report, a new submission), not every one.
CREATE INDEX watched_jobs_by_change ON jobs (engine, updated_at) WHERE engine IS NOT NULL;
