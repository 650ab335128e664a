-- Registered catalogs. Sensitive option values never appear in `options`:
-- they are sealed (AEAD, with the key id) in `sealed_options`.
CREATE TABLE catalogs (
    name           TEXT    NOT NULL PRIMARY KEY,
    options        TEXT    NOT NULL CHECK (json_valid(options)),
    sealed_options TEXT    NOT NULL CHECK (json_valid(sealed_options)),
    comment        TEXT,
    version        INTEGER NOT NULL,
    created_at     TEXT    NOT NULL,
    updated_at     TEXT    NOT NULL
) STRICT;
