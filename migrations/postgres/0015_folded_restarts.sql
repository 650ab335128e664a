-- Restart cycles (RESTARTING and the statuses that followed it) folded out
-- of a job's history, which keeps only its latest ones: a streaming job in
-- a restart loop never ends, so retention never reaches it.
ALTER TABLE jobs ADD COLUMN folded_restarts BIGINT NOT NULL DEFAULT 0;
