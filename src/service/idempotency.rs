//! Idempotency keys as a use case: a POST retried with the same key gets
//! the first answer again for the key's lifetime, instead of a second job
//! or a 409 for a catalog its first attempt created. Keys past their
//! lifetime are purged by the background, not by the requests.

use std::time::Duration;

use chrono::Utc;

use super::{ServiceError, Services};
use crate::store::KeyUse;
pub use crate::store::{KeyClaim, StoredAnswer};

/// Keys deleted by one statement of a purge, at most.
const KEY_PURGE_BATCH: i64 = 1_000;

impl Services {
    /// Claims `key` for `caller`'s request (`request` is its digest). A key
    /// lives for `lifetime`; a claim left unanswered for `abandoned_after`
    /// (its process died mid-request) is given up.
    pub async fn claim_idempotency_key(
        &self,
        caller: &str,
        key: &str,
        request: &str,
        lifetime: Duration,
        abandoned_after: Duration,
    ) -> Result<KeyClaim, ServiceError> {
        let now_ms = Utc::now().timestamp_millis();
        let key_use = KeyUse {
            caller,
            key,
            request,
            now_ms,
        };
        Ok(self
            .store
            .claim_idempotency_key(
                &key_use,
                ms_before(now_ms, lifetime),
                ms_before(now_ms, abandoned_after),
            )
            .await?)
    }

    /// Deletes the keys older than `lifetime` and the claims unanswered
    /// for `abandoned_after`, a batch per statement, so that no statement
    /// holds the store's writer for long; how many.
    pub async fn purge_idempotency_keys(
        &self,
        lifetime: Duration,
        abandoned_after: Duration,
    ) -> Result<u64, ServiceError> {
        let now_ms = Utc::now().timestamp_millis();
        let (expired_before, abandoned_before) = (
            ms_before(now_ms, lifetime),
            ms_before(now_ms, abandoned_after),
        );
        let mut purged = 0;
        loop {
            let batch = self
                .store
                .purge_idempotency_keys(expired_before, abandoned_before, KEY_PURGE_BATCH)
                .await?;
            purged += batch;
            // Fewer than one statement's worth in all: neither kind is left.
            if batch < KEY_PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }

    pub async fn renew_idempotency_claim(
        &self,
        caller: &str,
        key: &str,
    ) -> Result<(), ServiceError> {
        let now_ms = Utc::now().timestamp_millis();
        Ok(self
            .store
            .renew_idempotency_claim(caller, key, now_ms)
            .await?)
    }

    pub async fn finish_idempotency_key(
        &self,
        caller: &str,
        key: &str,
        answer: Option<&StoredAnswer>,
    ) -> Result<(), ServiceError> {
        Ok(self
            .store
            .finish_idempotency_key(caller, key, answer)
            .await?)
    }
}

/// The time `age` before `now_ms` (unix milliseconds).
fn ms_before(now_ms: i64, age: Duration) -> i64 {
    now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}
