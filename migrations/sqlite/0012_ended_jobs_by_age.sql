-- Retention deletes the jobs that ended longer ago than it keeps, a batch
-- at a time: each batch finds them here rather than among every job. The
-- list of statuses is the one the purge names, in the same order.
CREATE INDEX ended_jobs_by_age ON jobs (updated_at)
    WHERE status IN ('FAILED', 'CANCELED', 'FINISHED');
