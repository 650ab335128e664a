-- Keys whose first request never answered (its process died), by age: the
-- purge before each keyed POST finds them without visiting the answered
-- ones, so its cost does not grow with the keys kept.
CREATE INDEX idempotency_keys_unanswered ON idempotency_keys (created_at) WHERE status IS NULL;
