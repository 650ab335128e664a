-- Write–audit–publish: the audits each hook declared and what their last
-- run found (JSON arrays), the job's policy for a failed audit, a commit an
-- operator chose to publish in spite of its audits, and who decided what,
-- and why.
ALTER TABLE hooks ADD COLUMN audits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE hooks ADD COLUMN audit_results TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN on_audit_failure TEXT NOT NULL DEFAULT 'quarantine';
ALTER TABLE jobs ADD COLUMN quarantine_seconds BIGINT NOT NULL DEFAULT 86400;
ALTER TABLE actions ADD COLUMN audits_waived BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE job_interventions ADD COLUMN decided_by TEXT;
ALTER TABLE job_interventions ADD COLUMN reason TEXT;
ALTER TABLE job_interventions DROP CONSTRAINT job_interventions_decision_check;
ALTER TABLE job_interventions ADD CONSTRAINT job_interventions_decision_check
    CHECK (decision IN ('retry', 'give_up', 'publish_anyway'));
