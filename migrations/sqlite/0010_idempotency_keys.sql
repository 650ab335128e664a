-- Answers to POSTs sent with an Idempotency-Key, replayed to a retry of the
-- same request for the key's lifetime; keys are per caller (token name).
CREATE TABLE idempotency_keys (
    caller       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request      TEXT    NOT NULL, -- digest of method, path, query and body
    status       INTEGER,          -- NULL while the first request runs
    content_type TEXT,
    location     TEXT,
    body         TEXT,
    created_at   INTEGER NOT NULL, -- unix milliseconds
    PRIMARY KEY (caller, key)
) STRICT;

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
