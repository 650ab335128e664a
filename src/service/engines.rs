//! Engines: register, alter and drop (validate → reach the cluster →
//! persist, so a stored engine is one that answered as Flink once), and
//! read them with how many unfinished jobs each watches.

use std::collections::HashMap;

use chrono::Utc;

use super::{ServiceError, Services};
use crate::domain::EngineName;
use crate::domain::engine::{
    EngineDescriptor, EngineKind, EngineObservation, EngineRecord, EngineSettingError,
    EngineSettings, EngineUrl, Reachability,
};
use crate::engine::FlinkClient;
use crate::store::StoreError;

const MAX_COMMENT_LEN: usize = 2048;

/// An engine and the unfinished jobs it watches.
pub struct EngineWithJobs {
    pub engine: EngineRecord,
    pub watched_jobs: u64,
}

/// What a registration did.
pub enum EngineRegistration {
    Created(EngineWithJobs),
    /// `if_not_exists`, and the name was taken: the engine as it is.
    Existing(EngineWithJobs),
}

/// A change to an engine: each field present replaces the current value
/// (`Some(None)` clears an optional one).
#[derive(Debug, Clone, Default)]
pub struct EngineAlteration {
    pub url: Option<String>,
    pub history_url: Option<Option<String>>,
    pub poll_interval_ms: Option<u64>,
    pub missing_job_grace_seconds: Option<u64>,
    pub max_requests_per_second: Option<u64>,
    pub comment: Option<Option<String>>,
}

/// The request's settings, as given.
pub struct EngineRequest {
    pub name: String,
    pub kind: EngineKind,
    pub url: String,
    pub history_url: Option<String>,
    pub poll_interval_ms: Option<u64>,
    pub missing_job_grace_seconds: Option<u64>,
    pub max_requests_per_second: Option<u64>,
    pub comment: Option<String>,
}

fn check_comment(comment: &Option<String>) -> Result<(), ServiceError> {
    match comment {
        Some(c) if c.chars().count() > MAX_COMMENT_LEN => {
            Err(EngineSettingError::CommentTooLong.into())
        }
        _ => Ok(()),
    }
}

impl Services {
    pub async fn register_engine(
        &self,
        request: EngineRequest,
        if_not_exists: bool,
    ) -> Result<EngineRegistration, ServiceError> {
        let name =
            EngineName::parse(&request.name).map_err(|e| ServiceError::name_invalid("name", e))?;
        let settings = EngineSettings::new(
            &request.url,
            request.history_url.as_deref(),
            request.poll_interval_ms,
            request.missing_job_grace_seconds,
            request.max_requests_per_second,
        )?;
        check_comment(&request.comment)?;
        if if_not_exists && self.store.get_engine(&name).await?.is_some() {
            return Ok(EngineRegistration::Existing(self.engine(&name).await?));
        }
        let seen = self.reach(&settings).await?;
        let descriptor = EngineDescriptor {
            name,
            kind: request.kind,
            settings,
            comment: request.comment,
        };
        match self.store.insert_engine(&descriptor, &seen).await {
            Ok(engine) => {
                tracing::info!(engine = %engine.descriptor.name, url = engine.descriptor.settings.url.as_str(), "engine registered");
                Ok(EngineRegistration::Created(EngineWithJobs {
                    engine,
                    watched_jobs: 0,
                }))
            }
            Err(StoreError::EngineExists(_)) if if_not_exists => Ok(EngineRegistration::Existing(
                self.engine(&descriptor.name).await?,
            )),
            Err(error) => Err(error.into()),
        }
    }

    pub async fn engine(&self, name: &EngineName) -> Result<EngineWithJobs, ServiceError> {
        let engine =
            self.store
                .get_engine(name)
                .await?
                .ok_or_else(|| ServiceError::EngineNotFound {
                    name: name.to_string(),
                    field: None,
                })?;
        let counts = self.watched_counts().await?;
        Ok(EngineWithJobs {
            watched_jobs: counts.get(name.as_str()).copied().unwrap_or(0),
            engine,
        })
    }

    pub async fn list_engines(
        &self,
        after: Option<&EngineName>,
        limit: u32,
    ) -> Result<Vec<EngineWithJobs>, ServiceError> {
        let engines = self.store.list_engines(after, limit).await?;
        let counts = self.watched_counts().await?;
        Ok(engines
            .into_iter()
            .map(|engine| EngineWithJobs {
                watched_jobs: counts
                    .get(engine.descriptor.name.as_str())
                    .copied()
                    .unwrap_or(0),
                engine,
            })
            .collect())
    }

    /// A change of where the engine is reached is checked against the
    /// cluster as a registration is.
    pub async fn alter_engine(
        &self,
        name: &EngineName,
        alteration: EngineAlteration,
    ) -> Result<EngineWithJobs, ServiceError> {
        let current = self.engine(name).await?.engine;
        let was = &current.descriptor.settings;
        let millis = |d: std::time::Duration| d.as_millis() as u64;
        let history = match &alteration.history_url {
            Some(new) => new.clone(),
            None => was.history_url.as_ref().map(|u| u.as_str().to_owned()),
        };
        let settings = EngineSettings::new(
            alteration.url.as_deref().unwrap_or(was.url.as_str()),
            history.as_deref(),
            Some(
                alteration
                    .poll_interval_ms
                    .unwrap_or(millis(was.poll_interval)),
            ),
            Some(
                alteration
                    .missing_job_grace_seconds
                    .unwrap_or(was.missing_job_grace.as_secs()),
            ),
            Some(
                alteration
                    .max_requests_per_second
                    .unwrap_or(u64::from(was.max_requests_per_second)),
            ),
        )?;
        let comment = alteration
            .comment
            .unwrap_or_else(|| current.descriptor.comment.clone());
        check_comment(&comment)?;
        let moved = settings.url != was.url || settings.history_url != was.history_url;
        let seen = if moved {
            self.reach(&settings).await?
        } else {
            current.observation.clone()
        };
        let descriptor = EngineDescriptor {
            settings,
            comment,
            ..current.descriptor.clone()
        };
        let engine = self
            .store
            .update_engine(&descriptor, &seen, current.version)
            .await?;
        tracing::info!(engine = %name, "engine altered");
        self.engine(&engine.descriptor.name).await
    }

    /// DROP ENGINE; `false` when there was none.
    pub async fn drop_engine(&self, name: &EngineName) -> Result<bool, ServiceError> {
        let dropped = self.store.delete_engine(name).await?;
        if dropped {
            tracing::info!(engine = %name, "engine dropped");
        }
        Ok(dropped)
    }

    /// A client for the engine at `url`.
    pub(crate) fn flink(&self, url: &EngineUrl) -> FlinkClient {
        FlinkClient::new(self.engines_http.clone(), url.clone())
    }

    /// Asks the cluster (and its HistoryServer) for its version: an engine
    /// is stored only once it answered as Flink.
    /// Whatever kept it from answering (a closed port, a database, another
    /// HTTP service) is one neutral refusal, so registrations cannot map
    /// what else listens on ctasd's network; the cause is logged.
    async fn reach(&self, settings: &EngineSettings) -> Result<EngineObservation, ServiceError> {
        let mut endpoints = vec![("url", &settings.url)];
        endpoints.extend(settings.history_url.as_ref().map(|h| ("history_url", h)));
        for (field, url) in &endpoints {
            if !self.engines_http.allows(url) {
                return Err(EngineSettingError::HostNotAllowed { field }.into());
            }
        }
        let mut version = String::new();
        for (field, url) in endpoints {
            let answered = self.flink(url).version().await.map_err(|cause| {
                tracing::info!(%cause, field, "an engine URL did not answer as Flink");
                ServiceError::EngineUnreachable(format!(
                    "{field}: {} is not a Flink REST endpoint ctasd can reach \
                     (GET /config did not answer as Flink does)",
                    url.as_str()
                ))
            })?;
            if field == "url" {
                version = answered;
            }
        }
        let now = Utc::now();
        Ok(EngineObservation {
            reachability: Reachability::Reachable,
            since: Some(now),
            checked_at: Some(now),
            last_error: None,
            version: Some(version),
        })
    }

    async fn watched_counts(&self) -> Result<HashMap<String, u64>, ServiceError> {
        Ok(self.store.watched_counts().await?.into_iter().collect())
    }
}
