//! The PostgreSQL store, for production and for several replicas sharing one
//! database. Names sort with `COLLATE "C"` so that keyset pages match
//! SQLite's bytewise order; transactions lock the job row they change
//! (`FOR UPDATE`), and claims pass over rows another claim holds
//! (`SKIP LOCKED`), so replicas never run one action twice at once.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};
use sqlx::{Connection, Transaction};

use super::sql::{Backend, Dialect, SqlStore, sql_over};
use super::{Keyring, OpenStoreError, StoreError};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

static DIALECT: Dialect = Dialect {
    for_update: " FOR UPDATE",
    for_share: " FOR SHARE",
    skip_locked: " FOR UPDATE SKIP LOCKED",
    in_list: |column, param| format!("{column} = ANY(${param})"),
    through_index: |_| String::new(),
    one_statement_jobs: true,
};

/// How long a connection may sit idle and still be used unchecked.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The store for production and replicas.
pub type PostgresStore = SqlStore<PostgresBackend>;

pub struct PostgresBackend {
    pool: PgPool,
    description: String,
}

impl PostgresStore {
    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, OpenStoreError> {
        // Never log the URL itself: it may carry a password.
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            OpenStoreError::InvalidUrl(
                "expected postgres://user[:password]@host[:port]/database".into(),
            )
        })?;
        let description = format!(
            "PostgreSQL at {}:{}, database '{}'",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("(default)")
        );
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            // A connection idle a while is checked before use (the server
            // may have gone away meanwhile); one in steady use is not: a
            // round trip before each statement would double the cost of
            // the shortest. A broken one fails its statement (503) and is
            // dropped.
            .test_before_acquire(false)
            .before_acquire(|connection, held| {
                Box::pin(async move {
                    if held.idle_for > CHECK_AFTER_IDLE {
                        connection.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        Ok(Self::new(PostgresBackend { pool, description }, keyring))
    }
}

/// A list binds as a PostgreSQL array.
fn as_array<T: Clone>(values: &[T]) -> Result<Vec<T>, sqlx::error::BoxDynError> {
    Ok(values.to_vec())
}

sql_over!(Postgres, PgPool, DIALECT, as_array, str::to_owned);

impl Backend for PostgresBackend {
    type Pool = PgPool;
    type Tx = Transaction<'static, Postgres>;
    /// Replicas share the store: their leases are left to run out.
    const SOLE_PROCESS: bool = false;

    fn pool(&self) -> PgPool {
        self.pool.clone()
    }

    async fn begin(&self) -> Result<Self::Tx, sqlx::Error> {
        self.pool.begin().await
    }

    async fn commit(tx: Self::Tx) -> Result<(), sqlx::Error> {
        tx.commit().await
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn local_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    fn migrations(&self) -> usize {
        MIGRATOR.iter().count()
    }

    fn pool_use(&self) -> super::sql::PoolUse {
        super::sql::PoolUse::of(&self.pool)
    }

    fn table_names(&self) -> &'static str {
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()"
    }
}
