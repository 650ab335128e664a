-- This installation's id, made once: ctasd writes it into every marker it
-- leaves in a target (a staging's comment, a table directory's marker), so
-- a marker another installation wrote (two stores on one database or
-- warehouse, a client-chosen job id reused) is told apart from its own.
ALTER TABLE ctasd_store ADD COLUMN installation TEXT NOT NULL DEFAULT '';
UPDATE ctasd_store SET installation = replace(gen_random_uuid()::text, '-', '');
