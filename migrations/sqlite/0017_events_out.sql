-- Events out. The outbox is written by the ledger's own writes, inside
-- their transactions (these triggers), so an event exists exactly when
-- what it tells of was committed: a rolled-back commit announces nothing.
-- Each row keeps what the event needs as it was then; the fan-out turns
-- rows into deliveries, one per subscription that wants them, and deletes
-- them.
CREATE TABLE outbox (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL CHECK (kind IN ('status', 'action', 'intervention', 'audits')),
    hook_index  INTEGER,
    from_status TEXT,
    to_status   TEXT,
    action_id   INTEGER,
    action      TEXT,
    state       TEXT,
    outcome     TEXT,
    detail      TEXT,
    actor       TEXT,
    at          TEXT
) STRICT;

CREATE TRIGGER outbox_status AFTER INSERT ON job_transitions BEGIN
    INSERT INTO outbox (job_id, kind, from_status, to_status, detail, at)
    VALUES (NEW.job_id, 'status', NEW.from_status, NEW.to_status, NEW.failure, NEW.at);
END;

CREATE TRIGGER outbox_action AFTER UPDATE OF state, outcome ON actions
WHEN NEW.state IS NOT OLD.state OR NEW.outcome IS NOT OLD.outcome BEGIN
    INSERT INTO outbox (job_id, kind, hook_index, action_id, action, state, outcome, detail, at)
    VALUES (NEW.job_id, 'action', NEW.hook_index, NEW.id, NEW.action, NEW.state, NEW.outcome,
            NEW.last_error, NEW.updated_at);
END;

CREATE TRIGGER outbox_intervention AFTER INSERT ON job_interventions BEGIN
    INSERT INTO outbox (job_id, kind, action_id, outcome, detail, actor, at)
    VALUES (NEW.job_id, 'intervention', NEW.action_id, NEW.decision, NEW.reason, NEW.decided_by, NEW.at);
END;

CREATE TRIGGER outbox_audits AFTER UPDATE OF audit_results ON hooks BEGIN
    INSERT INTO outbox (job_id, kind, hook_index, detail)
    VALUES (NEW.job_id, 'audits', NEW.hook_index, NEW.audit_results);
END;

-- Who wants which events, where, signed with which (sealed) secret.
CREATE TABLE subscriptions (
    name          TEXT    NOT NULL PRIMARY KEY,
    url           TEXT    NOT NULL,
    format        TEXT    NOT NULL,
    events        TEXT    NOT NULL, -- JSON array of event types
    catalogs      TEXT    NOT NULL, -- JSON array; empty: every catalog
    engines       TEXT    NOT NULL, -- JSON array; empty: every engine, and none
    sealed_secret TEXT    NOT NULL,
    max_attempts  INTEGER NOT NULL,
    comment       TEXT,
    version       INTEGER NOT NULL,
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL
) STRICT;

-- One event for one subscription: its body fixed when it was fanned out,
-- so every attempt sends the same bytes under the same webhook-id.
CREATE TABLE deliveries (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    subscription TEXT    NOT NULL REFERENCES subscriptions (name) ON DELETE CASCADE,
    dedupe_key   TEXT    NOT NULL,
    job_id       TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    event_type   TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'parked')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   INTEGER NOT NULL, -- unix milliseconds
    lease_until  INTEGER,
    last_error   TEXT,
    last_status  INTEGER,
    created_at   TEXT    NOT NULL,
    delivered_at TEXT,
    UNIQUE (subscription, dedupe_key)
) STRICT;

CREATE INDEX deliveries_due ON deliveries (not_before) WHERE state = 'pending';
CREATE INDEX deliveries_in_order ON deliveries (subscription, job_id, id) WHERE state = 'pending';
CREATE INDEX deliveries_by_subscription ON deliveries (subscription, id);
