//! Connections for the statements run on their own, kept here rather than
//! in sqlx's pool, which checks every connection given back with a round
//! trip. The plain way, sqlx's pool, serves transactions; see
//! docs/fast-paths.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::connection_lost;

/// How long a statement waits for a connection.
pub(super) const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection may sit idle and still be used unchecked.
pub(super) const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Most connections kept for statements run on their own.
pub(super) const MOST_AUTOCOMMIT: usize = 16;

/// Connections for the statements run on their own, outside any
/// transaction (most requests are one such statement), kept between
/// statements here rather than in sqlx's pool: the pool tests every
/// connection given back to it with a round trip, which for a request of
/// one statement costs as much again. A connection idle a while is checked
/// before use. One whose statement was abandoned midway is closed; one
/// whose statement failed other than in the database is closed with every
/// idle one (the server likely went away from them all), so that an
/// outage fails the statements under way, not the next ones as well.
#[derive(Clone)]
pub struct AutocommitConnections {
    shared: Arc<AutocommitShared>,
}

struct AutocommitShared {
    options: PgConnectOptions,
    idle: std::sync::Mutex<Vec<(PgConnection, Instant)>>,
    permits: Arc<Semaphore>,
}

/// One connection taken for one statement.
pub(super) struct Taken {
    connection: Option<PgConnection>,
    shared: Arc<AutocommitShared>,
    _permit: OwnedSemaphorePermit,
    keep: bool,
}

impl Taken {
    pub(super) fn connection(&mut self) -> &mut PgConnection {
        self.connection.as_mut().expect("taken with a connection")
    }

    /// Keeps the connection after a statement that ended as `outcome`, if
    /// it is as good as before.
    pub(super) fn ended<T>(&mut self, outcome: &Result<T, sqlx::Error>) {
        match outcome {
            Err(error) if connection_lost(error) => self.shared.idle().clear(),
            Ok(_) | Err(sqlx::Error::Database(_) | sqlx::Error::RowNotFound) => self.keep = true,
            // Anything else may leave the connection midway.
            Err(_) => {}
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let (true, Some(connection)) = (self.keep, self.connection.take()) {
            self.shared.idle().push((connection, Instant::now()));
        }
    }
}

impl AutocommitShared {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(PgConnection, Instant)>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AutocommitConnections {
    pub(super) fn new(options: PgConnectOptions) -> Self {
        Self {
            shared: Arc::new(AutocommitShared {
                options,
                idle: std::sync::Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(MOST_AUTOCOMMIT)),
            }),
        }
    }

    /// A connection, within [`ACQUIRE_TIMEOUT`]: waiting for a turn,
    /// checking an idle one and opening a new one all count.
    pub(super) async fn take(&self) -> Result<Taken, sqlx::Error> {
        tokio::time::timeout(ACQUIRE_TIMEOUT, self.take_unbounded())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    async fn take_unbounded(&self) -> Result<Taken, sqlx::Error> {
        let permit = self
            .shared
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let kept = self.shared.idle().pop();
            let Some((mut connection, since)) = kept else {
                break;
            };
            if since.elapsed() <= CHECK_AFTER_IDLE || connection.ping().await.is_ok() {
                return Ok(self.taken(connection, permit));
            }
        }
        let connection = PgConnection::connect_with(&self.shared.options).await?;
        Ok(self.taken(connection, permit))
    }

    fn taken(&self, connection: PgConnection, permit: OwnedSemaphorePermit) -> Taken {
        Taken {
            connection: Some(connection),
            shared: self.shared.clone(),
            _permit: permit,
            keep: false,
        }
    }

    /// Connections open: in use and idle.
    pub(super) fn usage(&self) -> (u64, u64) {
        let idle = self.shared.idle().len();
        let in_use = MOST_AUTOCOMMIT - self.shared.permits.available_permits();
        (in_use as u64, idle as u64)
    }
}
