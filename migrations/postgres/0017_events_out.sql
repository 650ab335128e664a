-- Events out. The outbox is written by the ledger's own writes, inside
-- their transactions (these triggers), so an event exists exactly when
-- what it tells of was committed: a rolled-back commit announces nothing.
-- Each row keeps what the event needs as it was then; the fan-out turns
-- rows into deliveries, one per subscription that wants them, and deletes
-- them.
CREATE TABLE outbox (
    id          BIGSERIAL PRIMARY KEY,
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('status', 'action', 'intervention', 'audits')),
    hook_index  BIGINT,
    from_status TEXT,
    to_status   TEXT,
    action_id   BIGINT,
    action      TEXT,
    state       TEXT,
    outcome     TEXT,
    detail      TEXT,
    actor       TEXT,
    at          TIMESTAMPTZ
);

CREATE FUNCTION outbox_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (job_id, kind, from_status, to_status, detail, at)
    VALUES (NEW.job_id, 'status', NEW.from_status, NEW.to_status, NEW.failure, NEW.at);
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_status AFTER INSERT ON job_transitions
    FOR EACH ROW EXECUTE FUNCTION outbox_status();

CREATE FUNCTION outbox_action() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (job_id, kind, hook_index, action_id, action, state, outcome, detail, at)
    VALUES (NEW.job_id, 'action', NEW.hook_index, NEW.id, NEW.action, NEW.state, NEW.outcome,
            NEW.last_error, NEW.updated_at);
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_action AFTER UPDATE OF state, outcome ON actions
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state OR NEW.outcome IS DISTINCT FROM OLD.outcome)
    EXECUTE FUNCTION outbox_action();

CREATE FUNCTION outbox_intervention() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (job_id, kind, action_id, outcome, detail, actor, at)
    VALUES (NEW.job_id, 'intervention', NEW.action_id, NEW.decision, NEW.reason, NEW.decided_by, NEW.at);
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_intervention AFTER INSERT ON job_interventions
    FOR EACH ROW EXECUTE FUNCTION outbox_intervention();

CREATE FUNCTION outbox_audits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (job_id, kind, hook_index, detail)
    VALUES (NEW.job_id, 'audits', NEW.hook_index, NEW.audit_results);
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_audits AFTER UPDATE OF audit_results ON hooks
    FOR EACH ROW EXECUTE FUNCTION outbox_audits();

-- Who wants which events, where, signed with which (sealed) secret.
CREATE TABLE subscriptions (
    name          TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    format        TEXT NOT NULL,
    events        TEXT NOT NULL, -- JSON array of event types
    catalogs      TEXT NOT NULL, -- JSON array; empty: every catalog
    engines       TEXT NOT NULL, -- JSON array; empty: every engine, and none
    sealed_secret TEXT NOT NULL,
    max_attempts  BIGINT NOT NULL,
    comment       TEXT,
    version       BIGINT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

-- One event for one subscription: its body fixed when it was fanned out,
-- so every attempt sends the same bytes under the same webhook-id.
CREATE TABLE deliveries (
    id           BIGSERIAL PRIMARY KEY,
    subscription TEXT NOT NULL REFERENCES subscriptions (name) ON DELETE CASCADE,
    dedupe_key   TEXT NOT NULL,
    job_id       TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    event_type   TEXT NOT NULL,
    body         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'parked')),
    attempts     BIGINT NOT NULL DEFAULT 0,
    not_before   BIGINT NOT NULL, -- unix milliseconds
    lease_until  BIGINT,
    last_error   TEXT,
    last_status  BIGINT,
    created_at   TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    UNIQUE (subscription, dedupe_key)
);

CREATE INDEX deliveries_due ON deliveries (not_before) WHERE state = 'pending';
CREATE INDEX deliveries_in_order ON deliveries (subscription, job_id, id) WHERE state = 'pending';
CREATE INDEX deliveries_by_subscription ON deliveries (subscription, id);
