//! Start-up and shutdown.
//!
//! Start-up order: data directory → secret keys → tokens → bind (alive,
//! not ready) → store (connect, migrate; tried again with backoff while it
//! cannot be reached) → catalog types → services → ready. Registered
//! catalogs are reopened in the background after that, so one unreachable
//! database never delays start.

mod connections;
mod keep_alive;
mod starting;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::api::{self, AppState};
use crate::background::{Background, KeyLifetimes};
use crate::catalog::installation::Installation;
use crate::catalog::{LiveCatalogs, ProtectedPaths};
use crate::config::{ServeSettings, StoreSettings};
use crate::hooks::HookRunner;
use crate::service::Services;
use crate::store::{self, Keyring, Store};

/// Opens the store named by the settings, with its keyring. Does not migrate.
pub async fn open_store(settings: &StoreSettings) -> anyhow::Result<Arc<dyn Store>> {
    let keyring = open_keyring(settings)?;
    let store = store::connect(settings.database_url(), &settings.data_dir, keyring).await?;
    Ok(store)
}

/// The data directory, made private, and the keys that seal the store's
/// secrets: the key file there, created on first start, unless keys are
/// given.
fn open_keyring(settings: &StoreSettings) -> anyhow::Result<Arc<Keyring>> {
    create_private_dir(&settings.data_dir)?;
    let keyring = match &settings.secret_key {
        Some(spec) => Keyring::parse(spec)?,
        None => {
            let path = settings.secret_key_file();
            warn_if_readable_by_others(&path, "secret key file");
            let (keyring, created) = Keyring::load_or_create(&path)?;
            if created {
                tracing::warn!(
                    path = %path.display(),
                    key_id = keyring.active_key_id(),
                    "generated a new secret key for sealing catalog secrets; back it up, \
                     or set CTASD_SECRET_KEY in production"
                );
            }
            keyring
        }
    };
    Ok(Arc::new(keyring))
}

/// The data directory, created if missing, readable by this user only
/// (0700): it holds the store and the key that opens the store's secrets.
fn create_private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create data directory '{}'", dir.display()))?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).with_context(
            || {
                format!(
                    "cannot make data directory '{}' private (0700)",
                    dir.display()
                )
            },
        )?;
        tracing::info!(dir = %dir.display(), was = format!("{mode:o}"), "data directory made private (0700)");
    }
    Ok(())
}

/// Warns when a file of secrets can be read by other users.
fn warn_if_readable_by_others(path: &std::path::Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "the {what} can be read or written by other users; make it 0600"
        );
    }
}

/// `ctasd migrate`.
pub async fn migrate(settings: &StoreSettings) -> anyhow::Result<()> {
    let store = open_store(settings).await?;
    store.migrate().await?;
    tracing::info!(store = %store.describe(), "migrations applied");
    if let Some(missing) = reseal(store.as_ref()).await? {
        anyhow::bail!("{missing}");
    }
    Ok(())
}

/// A server running in this process.
pub struct RunningServer {
    pub addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
    background: Background,
    warm_up: JoinHandle<()>,
}

impl RunningServer {
    /// Stops accepting, lets requests in flight finish, lets the resumer
    /// and the engine watcher finish the round they are in, and waits.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let _ = self.task.await;
        self.background.stop().await;
        // Catalogs still being opened are let go: a stopped server holds
        // nothing of its store (a SQLite store is free for the next one).
        self.warm_up.abort();
        let _ = self.warm_up.await;
    }
}

/// Binds the port and serves at once (alive, not ready), reaches the
/// store, prepares everything, and returns once the service itself serves.
pub async fn start(settings: ServeSettings) -> anyhow::Result<RunningServer> {
    let keyring = open_keyring(&settings.store)?;
    let tokens = Arc::new(load_tokens(&settings)?);
    let engine_hosts = crate::engine::AllowedHosts::parse(&settings.engine_allowed_hosts)
        .map_err(|e| anyhow::anyhow!("--engine-allowed-hosts: {e}"))?;
    let listener = TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("cannot listen on {}", settings.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "ctasd listening");
    let waiting = starting::Waiting::default();
    let (current_app, app) = watch::channel(waiting.router());
    let limits = connections::ConnectionLimits {
        max_connections: connections::connections_that_fit(settings.max_connections),
        header_read_timeout: Duration::from_secs(settings.header_read_timeout_secs),
        idle_timeout: Duration::from_secs(settings.idle_timeout_secs),
        drain_timeout: settings.request_timeout() + Duration::from_secs(5),
    };
    let (shutdown, signal) = oneshot::channel::<()>();
    let task = tokio::spawn(connections::serve(
        listener,
        starting::switchable(app),
        limits,
        async {
            let _ = signal.await;
        },
    ));
    let store = match starting::reach_store(&settings.store, keyring, &waiting).await {
        Ok(store) => store,
        Err(error) => {
            let _ = shutdown.send(());
            let _ = task.await;
            return Err(error);
        }
    };
    let protected = Arc::new(protected_paths(&settings, store.as_ref())?);
    let installation = Installation::new(store.installation().await?);
    let catalogs = Arc::new(LiveCatalogs::new(crate::catalog::builtin::registry(
        protected,
        installation,
    )));
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let hooks = Arc::new(HookRunner::new(
        store.clone(),
        catalogs.clone(),
        metrics.clone(),
    ));
    #[cfg(feature = "crash-points")]
    if let Some(kill_at) = settings.fault_kill_at {
        crate::fault::arm(kill_at);
    }
    let services = Arc::new(
        Services::new(store.clone(), catalogs, hooks.clone(), metrics)
            .with_engine_hosts(engine_hosts)
            .with_missing_keys(reseal(store.as_ref()).await?),
    );
    // The waiting router gives way; every later request reaches the service.
    let _waiting = current_app.send_replace(api::router(
        AppState::new(services.clone()),
        &settings,
        tokens,
    ));
    tracing::info!(%addr, store = %store.describe(), "ctasd ready");
    // Resumes actions left unfinished by a crash and retries failed
    // attempts, follows the jobs of registered engines, and purges jobs
    // that ended long ago.
    let keys = KeyLifetimes {
        lifetime: Duration::from_secs(settings.idempotency_key_lifetime_secs),
        abandoned_after: api::idempotency::CLAIM_LEASE,
    };
    let background = Background::start(
        services.clone(),
        hooks,
        keys,
        settings.ended_job_retention(),
    );
    let warm_up = tokio::spawn(async move { services.warm_up_catalogs().await });
    Ok(RunningServer {
        addr,
        shutdown,
        task,
        background,
        warm_up,
    })
}

/// Seals every secret again under the active key, and says which keys the
/// store still needs that are not given (logged, and then `/readyz`'s
/// answer until they are given again).
async fn reseal(store: &dyn Store) -> anyhow::Result<Option<String>> {
    let resealed = store.reseal().await?;
    if resealed.moved > 0 {
        tracing::info!(
            moved = resealed.moved,
            "secrets sealed again under the active key; keys only they used can be removed"
        );
    }
    let missing = resealed.missing_keys();
    if let Some(missing) = &missing {
        tracing::error!(%missing, "secrets in the store are sealed with keys that are not given");
    }
    Ok(missing)
}

/// ctasd's own data directory and files, which no catalog may point at.
fn protected_paths(settings: &ServeSettings, store: &dyn Store) -> anyhow::Result<ProtectedPaths> {
    let mut files = store.local_files();
    if settings.store.secret_key.is_none() {
        files.push(settings.store.secret_key_file());
    }
    files.extend(settings.tokens_file.clone());
    ProtectedPaths::of_ctasd(&settings.store.data_dir, &files)
        .context("cannot resolve ctasd's own data directory and files")
}

/// Tokens from the file and the environment. Without any, refuses to listen
/// beyond loopback unless the operator said so explicitly.
fn load_tokens(settings: &ServeSettings) -> anyhow::Result<api::auth::Tokens> {
    let mut spec = String::new();
    if let Some(path) = &settings.tokens_file {
        warn_if_readable_by_others(path, "tokens file");
        spec = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read tokens file '{}'", path.display()))?;
    }
    if let Some(tokens) = &settings.tokens {
        use secrecy::ExposeSecret;
        spec.push('\n');
        spec.push_str(tokens.expose_secret());
    }
    let tokens = api::auth::Tokens::parse(&secrecy::SecretString::from(spec))?;
    if tokens.is_empty() {
        if !settings.listen.ip().is_loopback() && !settings.insecure_no_auth {
            anyhow::bail!(
                "refusing to listen on {} without tokens: configure CTASD_TOKENS or CTASD_TOKENS_FILE \
                 (create tokens with `ctasd token`), or pass --insecure-no-auth",
                settings.listen
            );
        }
        tracing::warn!(
            "no tokens configured: every request is allowed; keep ctasd on loopback or configure tokens"
        );
    }
    Ok(tokens)
}

/// `ctasd serve`: runs until SIGINT or SIGTERM.
pub async fn serve_until_signal(settings: ServeSettings) -> anyhow::Result<()> {
    let server = start(settings).await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    server.stop().await;
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
