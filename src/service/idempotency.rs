//! Idempotency keys as a use case: a POST retried with the same key gets
//! the first answer again for the key's lifetime, instead of a second job
//! or a 409 for a catalog its first attempt created.

use std::time::Duration;

use chrono::Utc;

use super::{ServiceError, Services};
use crate::store::KeyUse;
pub use crate::store::{KeyClaim, StoredAnswer};

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
        let before = |age: Duration| now_ms - i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        let key_use = KeyUse {
            caller,
            key,
            request,
            now_ms,
        };
        Ok(self
            .store
            .claim_idempotency_key(&key_use, before(lifetime), before(abandoned_after))
            .await?)
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
