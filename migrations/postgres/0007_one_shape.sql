-- One shape for both stores, so that every query is written once: JSON as
-- text (nothing queries inside it), indexes and counters as BIGINT, and the
-- times the ledger compares (when an action is due, until when it is leased)
-- as unix milliseconds.
ALTER TABLE catalogs
    ALTER COLUMN options TYPE TEXT USING options::text,
    ALTER COLUMN sealed_options TYPE TEXT USING sealed_options::text;

ALTER TABLE hooks
    ALTER COLUMN hook_index TYPE BIGINT,
    ALTER COLUMN table_properties TYPE TEXT USING table_properties::text,
    ALTER COLUMN catalog_options TYPE TEXT USING catalog_options::text,
    ALTER COLUMN catalog_sealed_options TYPE TEXT USING catalog_sealed_options::text;

ALTER TABLE actions
    ALTER COLUMN hook_index TYPE BIGINT,
    ALTER COLUMN attempts TYPE BIGINT,
    ALTER COLUMN not_before TYPE BIGINT USING (extract(epoch FROM not_before) * 1000)::bigint,
    ALTER COLUMN lease_until TYPE BIGINT USING (extract(epoch FROM lease_until) * 1000)::bigint;
