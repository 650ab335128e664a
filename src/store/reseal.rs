//! Moving every sealed value to the active key, so an old key can be
//! removed: catalogs' secrets, the catalog snapshots and secret table
//! options of jobs' hooks, subscriptions' signing secrets, and kept
//! idempotent answers. Each row is written
//! back only if it still holds what was read (a change made meanwhile
//! wins, sealed under the active key already), so replicas starting
//! together and requests in flight lose nothing. A value sealed with a key
//! that is no longer given is left as it is, and reported with the key's id
//! and where it is.

use std::collections::BTreeMap;

use super::StoreError;
use super::secrets::{Keyring, SealError, sealed_with};
use super::sql::{Backend, Query, Sql, SqlStore};

/// Hooks read per round trip.
const HOOKS_PER_READ: i64 = 500;
/// Places named per missing key; past it, only counted.
const PLACES_NAMED: usize = 5;

/// What a reseal did and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Values sealed again under the active key.
    pub moved: u64,
    /// Values that no key given can open, by the id of the key that sealed
    /// them: a few places each, and how many values in all.
    pub unopenable: BTreeMap<String, Unopenable>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unopenable {
    pub places: Vec<String>,
    pub values: u64,
}

impl Resealed {
    fn cannot_open(&mut self, sealed: &str, place: impl FnOnce() -> String) {
        let key_id = sealed_with(sealed).unwrap_or("(malformed)").to_owned();
        let entry = self.unopenable.entry(key_id).or_default();
        entry.values += 1;
        if entry.places.len() < PLACES_NAMED {
            let place = place();
            if !entry.places.contains(&place) {
                entry.places.push(place);
            }
        }
    }

    /// What an operator reads: each key no longer given, and where values
    /// sealed with it are; `None` when every value opens.
    pub fn missing_keys(&self) -> Option<String> {
        if self.unopenable.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .unopenable
            .iter()
            .map(|(key_id, found)| {
                format!(
                    "{} value(s) sealed with key '{key_id}', which is not given ({})",
                    found.values,
                    found.places.join(", ")
                )
            })
            .collect();
        Some(format!(
            "{}; give the key again (after the active one in --secret-key) and restart, \
             or register the catalogs anew",
            each.join("; ")
        ))
    }
}

/// A JSON map of sealed values (`{option: sealed}`) with every value under
/// the active key; `None` when nothing had to move.
fn resealed_map(
    keyring: &Keyring,
    json: &str,
    report: &mut Resealed,
    place: &dyn Fn() -> String,
) -> Result<Option<String>, StoreError> {
    let mut map: BTreeMap<String, String> = serde_json::from_str(json).map_err(|e| {
        StoreError::Internal(format!("unreadable sealed values in {}: {e}", place()))
    })?;
    let mut moved = 0;
    for (option, sealed) in map.iter_mut() {
        match keyring.reseal(option, sealed) {
            Ok(Some(again)) => {
                *sealed = again;
                moved += 1;
            }
            Ok(None) => {}
            Err(SealError::UnknownKey(_)) => report.cannot_open(sealed, place),
            Err(e) => return Err(StoreError::Internal(format!("{}: {e}", place()))),
        }
    }
    if moved == 0 {
        return Ok(None);
    }
    report.moved += moved;
    Ok(Some(
        serde_json::to_string(&map).expect("a map of strings serializes"),
    ))
}

impl<B: Backend> SqlStore<B> {
    pub(crate) async fn reseal_all(&self) -> Result<Resealed, StoreError> {
        let mut report = Resealed::default();
        self.reseal_catalogs(&mut report).await?;
        self.reseal_hooks(&mut report).await?;
        self.reseal_subscriptions(&mut report).await?;
        self.reseal_answers(&mut report).await?;
        Ok(report)
    }

    async fn reseal_catalogs(&self, report: &mut Resealed) -> Result<(), StoreError> {
        let mut pool = self.pool();
        let rows: Vec<(String, String)> = pool
            .rows(Query::new(
                "SELECT name, sealed_options FROM catalogs WHERE sealed_options <> '{}'",
            ))
            .await?;
        for (name, sealed) in rows {
            let place = || format!("catalog '{name}'");
            if let Some(again) = resealed_map(&self.keyring, &sealed, report, &place)? {
                pool.execute(
                    Query::new(
                        "UPDATE catalogs SET sealed_options = $3 \
                         WHERE name = $1 AND sealed_options = $2",
                    )
                    .text(&name)
                    .text(&sealed)
                    .text(&again),
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn reseal_hooks(&self, report: &mut Resealed) -> Result<(), StoreError> {
        let mut pool = self.pool();
        let (mut after_job, mut after_hook) = (String::new(), -1i64);
        loop {
            let rows: Vec<(String, i64, String, String)> = pool
                .rows(
                    Query::new(
                        "SELECT job_id, hook_index, catalog_sealed_options, sealed_table_properties \
                         FROM hooks \
                         WHERE (job_id > $1 OR (job_id = $1 AND hook_index > $2)) \
                           AND (catalog_sealed_options <> '{}' OR sealed_table_properties <> '{}') \
                         ORDER BY job_id, hook_index LIMIT CAST($3 AS BIGINT)",
                    )
                    .text(&after_job)
                    .int(after_hook)
                    .int(HOOKS_PER_READ),
                )
                .await?;
            let Some((last_job, last_hook, _, _)) = rows.last() else {
                return Ok(());
            };
            (after_job, after_hook) = (last_job.clone(), *last_hook);
            for (job, hook, catalog_sealed, table_sealed) in &rows {
                let place = || format!("job {job} hook {hook}");
                let catalog = resealed_map(&self.keyring, catalog_sealed, report, &place)?;
                let table = resealed_map(&self.keyring, table_sealed, report, &place)?;
                if catalog.is_none() && table.is_none() {
                    continue;
                }
                pool.execute(
                    Query::new(
                        "UPDATE hooks SET catalog_sealed_options = $5, sealed_table_properties = $6 \
                         WHERE job_id = $1 AND hook_index = $2 \
                           AND catalog_sealed_options = $3 AND sealed_table_properties = $4",
                    )
                    .text(job)
                    .int(*hook)
                    .text(catalog_sealed)
                    .text(table_sealed)
                    .text(catalog.as_deref().unwrap_or(catalog_sealed))
                    .text(table.as_deref().unwrap_or(table_sealed)),
                )
                .await?;
            }
        }
    }

    async fn reseal_subscriptions(&self, report: &mut Resealed) -> Result<(), StoreError> {
        let mut pool = self.pool();
        let rows: Vec<(String, String)> = pool
            .rows(Query::new("SELECT name, sealed_secret FROM subscriptions"))
            .await?;
        for (name, sealed) in rows {
            match self.keyring.reseal(super::events::SECRET_KEY, &sealed) {
                Ok(Some(again)) => {
                    pool.execute(
                        Query::new(
                            "UPDATE subscriptions SET sealed_secret = $3 \
                             WHERE name = $1 AND sealed_secret = $2",
                        )
                        .text(&name)
                        .text(&sealed)
                        .text(&again),
                    )
                    .await?;
                    report.moved += 1;
                }
                Ok(None) => {}
                Err(SealError::UnknownKey(_)) => {
                    report.cannot_open(&sealed, || format!("subscription '{name}'"))
                }
                Err(e) => {
                    return Err(StoreError::Internal(format!("subscription '{name}': {e}")));
                }
            }
        }
        Ok(())
    }

    async fn reseal_answers(&self, report: &mut Resealed) -> Result<(), StoreError> {
        let mut pool = self.pool();
        let rows: Vec<(String, String, String)> = pool
            .rows(Query::new(
                "SELECT caller, key, body FROM idempotency_keys WHERE body LIKE 'v1.%'",
            ))
            .await?;
        for (caller, key, body) in rows {
            let bound = super::idempotency::sealed_for(&caller, &key);
            match self.keyring.reseal(&bound, &body) {
                Ok(Some(again)) => {
                    pool.execute(
                        Query::new(
                            "UPDATE idempotency_keys SET body = $4 \
                             WHERE caller = $1 AND key = $2 AND body = $3",
                        )
                        .text(&caller)
                        .text(&key)
                        .text(&body)
                        .text(&again),
                    )
                    .await?;
                    report.moved += 1;
                }
                Ok(None) => {}
                // Kept a day at most: an answer no key opens is reported
                // when it is asked for, and never blocks a key's removal.
                Err(_) => {}
            }
        }
        Ok(())
    }
}
