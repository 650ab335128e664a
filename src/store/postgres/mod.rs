//! The PostgreSQL store, for production and for several replicas sharing one
//! database. Names sort with `COLLATE "C"` so that keyset pages match
//! SQLite's bytewise order; transactions lock the job row they change
//! (`FOR UPDATE`), and claims pass over rows another claim holds
//! (`SKIP LOCKED`), so replicas never run one action twice at once.
//! Transactions take their connections from sqlx's pool; statements run on
//! their own, most requests, from [`AutocommitConnections`]
//! (`autocommit.rs`), and status reports that plan no action are moved
//! many at a time in one statement (`quiet_moves.rs`): the two fast paths
//! only PostgreSQL has (docs/fast-paths.md).

mod autocommit;
mod quiet_moves;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};
use sqlx::{Connection, Transaction};

use crate::store::sql::{Backend, Dialect, SqlStore, sql_over};
use crate::store::{Keyring, OpenStoreError, StoreError};
pub use autocommit::AutocommitConnections;
use autocommit::{ACQUIRE_TIMEOUT, CHECK_AFTER_IDLE, MOST_AUTOCOMMIT};
pub(crate) use quiet_moves::QuietMoves;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

static DIALECT: Dialect = Dialect {
    for_update: " FOR UPDATE",
    for_share: " FOR SHARE",
    skip_locked: " FOR UPDATE SKIP LOCKED",
    in_list: |column, param| format!("{column} = ANY(${param})"),
    through_index: |_| String::new(),
    one_statement_jobs: true,
};

/// The store for production and replicas.
pub type PostgresStore = SqlStore<PostgresBackend>;

pub struct PostgresBackend {
    pool: PgPool,
    autocommit: AutocommitConnections,
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
            .acquire_timeout(ACQUIRE_TIMEOUT)
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
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        let autocommit = AutocommitConnections::new(options);
        Ok(Self::new(
            PostgresBackend {
                pool,
                autocommit,
                description,
            },
            keyring,
        ))
    }
}

/// A list binds as a PostgreSQL array.
fn as_array<T: Clone>(values: &[T]) -> Result<Vec<T>, sqlx::error::BoxDynError> {
    Ok(values.to_vec())
}

sql_over!(Postgres, PgPool, DIALECT, as_array, str::to_owned);

impl super::sql::Sql for AutocommitConnections {
    fn dialect(&self) -> &'static Dialect {
        &DIALECT
    }

    async fn rows<T: crate::store::sql::Decodable>(
        &mut self,
        query: crate::store::sql::Query<'_>,
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut taken = self.take().await?;
        let outcome = rows(taken.connection(), query).await;
        taken.ended(&outcome);
        outcome
    }

    async fn execute(&mut self, query: crate::store::sql::Query<'_>) -> Result<u64, sqlx::Error> {
        let mut taken = self.take().await?;
        let outcome = execute(taken.connection(), query).await;
        taken.ended(&outcome);
        outcome
    }
}

impl Backend for PostgresBackend {
    type Pool = AutocommitConnections;
    type Tx = Transaction<'static, Postgres>;
    /// Replicas share the store: their leases are left to run out.
    const SOLE_PROCESS: bool = false;

    fn pool(&self) -> AutocommitConnections {
        self.autocommit.clone()
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

    fn pool_use(&self) -> crate::store::sql::PoolUse {
        let pooled = crate::store::sql::PoolUse::of(&self.pool);
        let (in_use, idle) = self.autocommit.usage();
        crate::store::sql::PoolUse {
            in_use: pooled.in_use + in_use,
            idle: pooled.idle + idle,
            max: pooled.max + MOST_AUTOCOMMIT as u64,
        }
    }

    fn table_names(&self) -> &'static str {
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()"
    }
}
