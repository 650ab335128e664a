-- Write–audit–publish: the audits each hook declared and what their last
-- run found (JSON arrays), the job's policy for a failed audit, a commit an
-- operator chose to publish in spite of its audits, and who decided what,
-- and why.
ALTER TABLE hooks ADD COLUMN audits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE hooks ADD COLUMN audit_results TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN on_audit_failure TEXT NOT NULL DEFAULT 'quarantine';
ALTER TABLE jobs ADD COLUMN quarantine_seconds INTEGER NOT NULL DEFAULT 86400;
ALTER TABLE actions ADD COLUMN audits_waived INTEGER NOT NULL DEFAULT 0;

-- A decision may now publish a vetoed staging anyway; SQLite changes a
-- CHECK only by building the table again.
CREATE TABLE job_interventions_new (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    action_id  INTEGER NOT NULL,
    decision   TEXT NOT NULL CHECK (decision IN ('retry', 'give_up', 'publish_anyway')),
    at         TEXT NOT NULL,
    decided_by TEXT,
    reason     TEXT
) STRICT;
INSERT INTO job_interventions_new (id, job_id, action_id, decision, at)
    SELECT id, job_id, action_id, decision, at FROM job_interventions;
DROP TABLE job_interventions;
ALTER TABLE job_interventions_new RENAME TO job_interventions;
CREATE INDEX job_interventions_by_job ON job_interventions (job_id, id);
