//! Idempotency keys: the first answer to a POST, kept so that a retry of
//! the same request gets it again instead of doing the work twice. Written
//! once for both backends; expired keys are taken over by a new claim and
//! purged in batches on a timer, never on a request's path. An
//! answer is kept sealed, like a secret: whatever it quotes (a statement's
//! text, a target's words) is never in the store in plain text.

use async_trait::async_trait;

use super::secrets::is_sealed;
use super::sql::{Backend, Query, Sql, SqlStore};
use super::{IdempotencyStore, StoreError};

/// An answer kept for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub body: String,
}

/// What a request with a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key is new (or expired): this request runs, and its answer is kept.
    Claimed,
    /// A request with this key runs right now.
    Running,
    /// The key was used for a different request.
    Mismatch,
    /// The key's first answer.
    Replay(StoredAnswer),
    /// The key's first answer, which cannot be opened (why): sealed with a
    /// key this server is no longer given, or damaged.
    Unreadable(String),
}

/// What a kept answer's seal is bound to: its caller and key, so an answer
/// cannot be moved to another key.
pub(super) fn sealed_for(caller: &str, key: &str) -> String {
    format!("idempotent answer\0{caller}\0{key}")
}

/// Who used a key, with what, when (unix milliseconds).
pub struct KeyUse<'a> {
    pub caller: &'a str,
    pub key: &'a str,
    pub request: &'a str,
    pub now_ms: i64,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    request: String,
    status: Option<i64>,
    content_type: Option<String>,
    location: Option<String>,
    body: Option<String>,
}

#[async_trait]
impl<B: Backend> IdempotencyStore for SqlStore<B> {
    async fn claim_idempotency_key(
        &self,
        key: &KeyUse<'_>,
        expired_before_ms: i64,
        abandoned_before_ms: i64,
    ) -> Result<KeyClaim, StoreError> {
        let mut pool = self.pool();
        // An expired key, or a claim whose request never finished (its
        // process died: nobody waits for that answer any more), is taken
        // over in place; the purge of such rows runs on a timer, so a claim
        // costs the same however many keys are kept.
        let inserted = pool
            .execute(
                Query::new(
                    "INSERT INTO idempotency_keys (caller, key, request, created_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (caller, key) DO UPDATE SET \
                     request = excluded.request, status = NULL, content_type = NULL, \
                     location = NULL, body = NULL, created_at = excluded.created_at \
                     WHERE idempotency_keys.created_at < $5 \
                     OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < $6)",
                )
                .text(key.caller)
                .text(key.key)
                .text(key.request)
                .int(key.now_ms)
                .int(expired_before_ms)
                .int(abandoned_before_ms),
            )
            .await?;
        if inserted == 1 {
            return Ok(KeyClaim::Claimed);
        }
        let row: Option<KeyRow> = pool
            .row(
                Query::new(
                    "SELECT request, status, content_type, location, body FROM idempotency_keys \
                     WHERE caller = $1 AND key = $2",
                )
                .text(key.caller)
                .text(key.key),
            )
            .await?;
        Ok(match row {
            // Finished and purged in between: as good as running.
            None => KeyClaim::Running,
            Some(row) if row.request != key.request => KeyClaim::Mismatch,
            Some(KeyRow { status: None, .. }) => KeyClaim::Running,
            Some(row) => {
                let kept = row.body.unwrap_or_default();
                let body = if is_sealed(&kept) {
                    match self.keyring.open(&sealed_for(key.caller, key.key), &kept) {
                        Ok(body) => body,
                        Err(e) => return Ok(KeyClaim::Unreadable(e.to_string())),
                    }
                } else {
                    // Kept before answers were sealed.
                    kept
                };
                KeyClaim::Replay(StoredAnswer {
                    status: row
                        .status
                        .and_then(|s| u16::try_from(s).ok())
                        .unwrap_or(500),
                    content_type: row.content_type,
                    location: row.location,
                    body,
                })
            }
        })
    }

    /// An unanswered claim's `created_at` is the time it was last renewed.
    async fn renew_idempotency_claim(
        &self,
        caller: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.pool()
            .execute(
                Query::new(
                    "UPDATE idempotency_keys SET created_at = $3 \
                     WHERE caller = $1 AND key = $2 AND status IS NULL",
                )
                .text(caller)
                .text(key)
                .int(now_ms),
            )
            .await?;
        Ok(())
    }

    async fn finish_idempotency_key(
        &self,
        caller: &str,
        key: &str,
        answer: Option<&StoredAnswer>,
    ) -> Result<(), StoreError> {
        let sealed;
        let query = match answer {
            Some(answer) => Query::new(
                "UPDATE idempotency_keys SET status = $3, content_type = $4, location = $5, \
                 body = $6 WHERE caller = $1 AND key = $2",
            )
            .text(caller)
            .text(key)
            .int(i64::from(answer.status))
            .opt_text(answer.content_type.as_deref())
            .opt_text(answer.location.as_deref())
            .text({
                sealed = self.keyring.seal(&sealed_for(caller, key), &answer.body);
                &sealed
            }),
            None => Query::new("DELETE FROM idempotency_keys WHERE caller = $1 AND key = $2")
                .text(caller)
                .text(key),
        };
        self.pool().execute(query).await?;
        Ok(())
    }

    async fn purge_idempotency_keys(
        &self,
        expired_before_ms: i64,
        abandoned_before_ms: i64,
        batch: i64,
    ) -> Result<u64, StoreError> {
        // Each statement a range of its own index (by age; unanswered by
        // age), so a purge visits only what it deletes.
        let mut pool = self.pool();
        let expired = pool
            .execute(
                Query::new(
                    "DELETE FROM idempotency_keys WHERE (caller, key) IN (SELECT caller, key \
                     FROM idempotency_keys WHERE created_at < $1 LIMIT CAST($2 AS BIGINT))",
                )
                .int(expired_before_ms)
                .int(batch),
            )
            .await?;
        let abandoned = pool
            .execute(
                Query::new(
                    "DELETE FROM idempotency_keys WHERE (caller, key) IN (SELECT caller, key \
                     FROM idempotency_keys WHERE status IS NULL AND created_at < $1 LIMIT CAST($2 AS BIGINT))",
                )
                .int(abandoned_before_ms)
                .int(batch),
            )
            .await?;
        Ok(expired + abandoned)
    }
}
