-- Jobs are listed newest first, a page at a time (keyset on creation time
-- and id), optionally by status.
CREATE INDEX jobs_newest_first ON jobs (created_at, id);
CREATE INDEX jobs_by_status_newest_first ON jobs (status, created_at, id);
