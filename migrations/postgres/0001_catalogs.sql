-- Registered catalogs. Sensitive option values never appear in `options`:
-- they are sealed (AEAD, with the key id) in `sealed_options`.
-- Names sort bytewise (COLLATE "C") so keyset pages match SQLite's order.
CREATE TABLE catalogs (
    name           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    options        JSONB       NOT NULL,
    sealed_options JSONB       NOT NULL,
    comment        TEXT,
    version        BIGINT      NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
