-- The watcher reads an engine's watched jobs whole now and then, a page at
-- a time in the order of their ids: each page is a range of this index.
CREATE INDEX watched_jobs_by_id ON jobs (engine, id) WHERE engine IS NOT NULL;
