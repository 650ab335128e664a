-- A hook's table options whose keys are secrets, each sealed like a
-- catalog's; table_properties keeps the rest.
ALTER TABLE hooks ADD COLUMN sealed_table_properties TEXT NOT NULL DEFAULT '{}';
