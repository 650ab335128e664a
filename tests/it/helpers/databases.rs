//! Databases made for one test and dropped after it: PostgreSQL and
//! MariaDB on the servers the environment names (skipped, loudly, when it
//! names none), SQLite files, and a store opened directly.

use std::path::Path;
use std::sync::Arc;

use ctasd::store::{Keyring, Store};
use serde_json::{Value, json};
use sqlx::Connection;

use super::SECRET;

pub fn postgres_url() -> Option<String> {
    service_url("CTASD_TEST_POSTGRES_URL", "PostgreSQL")
}

pub fn mysql_url() -> Option<String> {
    service_url("CTASD_TEST_MYSQL_URL", "MariaDB/MySQL")
}

fn service_url(variable: &str, service: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            super::skipped(&format!(
                "{service} test skipped because {variable} is not set"
            ));
            None
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// Replace the database of a `scheme://authority/database` URL.
fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url
        .rsplit_once('/')
        .expect("a database URL names a database");
    format!("{base}/{database}")
}

fn run_blocking_cleanup(cleanup: impl std::future::Future<Output = ()> + Send + 'static) {
    // Drop cannot await; run the cleanup on a runtime of its own, on a thread
    // of its own, so it works inside and outside a Tokio runtime.
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cleanup)
    })
    .join();
}

/// A PostgreSQL database made for one test and dropped after it.
pub struct TestPostgres {
    admin_url: String,
    pub database: String,
    pub url: String,
}

impl TestPostgres {
    pub async fn create() -> Option<Self> {
        Self::create_named(&unique("ctasd_test")).await
    }

    /// A database with exactly this name (which should be unique), for
    /// names that are themselves the test.
    pub async fn create_named(database: &str) -> Option<Self> {
        let admin_url = postgres_url()?;
        let database = database.to_owned();
        let mut admin = sqlx::PgConnection::connect(&admin_url)
            .await
            .expect("connect to test PostgreSQL");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{}\"",
            database.replace('"', "\"\"")
        )))
        .execute(&mut admin)
        .await
        .unwrap();
        let url = with_database(
            &admin_url,
            &database
                .replace('?', "%3F")
                .replace('&', "%26")
                .replace('=', "%3D"),
        );
        Some(Self {
            admin_url,
            database,
            url,
        })
    }

    pub async fn connect(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.url).await.unwrap()
    }

    pub async fn execute(&self, sql: &str) {
        let mut conn = self.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    }

    /// `host:port` of the server, for jdbc base URLs.
    pub fn host_port(&self) -> String {
        let after_at = self
            .admin_url
            .rsplit_once('@')
            .map(|(_, r)| r)
            .unwrap_or(&self.admin_url);
        let after_scheme = after_at
            .rsplit_once("//")
            .map(|(_, r)| r)
            .unwrap_or(after_at);
        after_scheme.split('/').next().unwrap().to_owned()
    }

    pub fn username(&self) -> String {
        let rest = self.admin_url.split_once("//").unwrap().1;
        let userinfo = rest.split_once('@').map(|(u, _)| u).unwrap_or("postgres");
        userinfo.split(':').next().unwrap().to_owned()
    }
}

/// A PostgreSQL role with [`SECRET`] as password, allowed to connect to a
/// test database and create tables in its `public` schema; dropped after
/// the test (roles belong to the whole server).
pub struct TestRole {
    admin_url: String,
    database_url: String,
    pub name: String,
}

impl TestPostgres {
    pub async fn limited_role(&self) -> TestRole {
        let name = unique("ctasd_role");
        self.execute(&format!(
            "CREATE ROLE \"{name}\" LOGIN PASSWORD '{SECRET}'; \
             GRANT CONNECT ON DATABASE \"{db}\" TO \"{name}\"; \
             GRANT USAGE, CREATE ON SCHEMA public TO \"{name}\"",
            db = self.database
        ))
        .await;
        TestRole {
            admin_url: self.admin_url.clone(),
            database_url: self.url.clone(),
            name,
        }
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let (admin_url, database_url, name) = (
            self.admin_url.clone(),
            self.database_url.clone(),
            self.name.clone(),
        );
        run_blocking_cleanup(async move {
            if let Ok(mut db) = sqlx::PgConnection::connect(&database_url).await {
                let sql = format!("DROP OWNED BY \"{name}\"");
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut db)
                    .await;
            }
            if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                let sql = format!("DROP ROLE IF EXISTS \"{name}\"");
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await;
            }
        });
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let database = self.database.clone();
        run_blocking_cleanup(async move {
            if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                let sql = format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)");
                let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await;
            }
        });
    }
}

/// A MariaDB database, and a user whose password is [`SECRET`], made for one
/// test and dropped after it.
pub struct TestMysql {
    admin_url: String,
    pub database: String,
    pub user: String,
}

impl TestMysql {
    pub async fn create() -> Option<Self> {
        let admin_url = mysql_url()?;
        let database = unique("ctasd_test");
        let user = unique("ctasd").chars().take(30).collect::<String>();
        let mut admin = sqlx::MySqlConnection::connect(&admin_url)
            .await
            .expect("connect to test MariaDB");
        for sql in [
            format!("CREATE DATABASE `{database}`"),
            format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{SECRET}'"),
            format!("GRANT ALL ON `{database}`.* TO '{user}'@'%'"),
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        Some(Self {
            admin_url,
            database,
            user,
        })
    }

    pub async fn connect(&self) -> sqlx::MySqlConnection {
        let url = with_database(&self.admin_url, &self.database);
        sqlx::MySqlConnection::connect(&url).await.unwrap()
    }

    pub async fn execute(&self, sql: &str) {
        let mut conn = self.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    }

    pub fn host_port(&self) -> String {
        let rest = self.admin_url.split_once("//").unwrap().1;
        let after_at = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
        after_at.split('/').next().unwrap().to_owned()
    }
}

impl Drop for TestMysql {
    fn drop(&mut self) {
        let (admin_url, database, user) = (
            self.admin_url.clone(),
            self.database.clone(),
            self.user.clone(),
        );
        run_blocking_cleanup(async move {
            if let Ok(mut admin) = sqlx::MySqlConnection::connect(&admin_url).await {
                for sql in [
                    format!("DROP DATABASE IF EXISTS `{database}`"),
                    format!("DROP USER IF EXISTS '{user}'@'%'"),
                ] {
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await;
                }
            }
        });
    }
}

/// jdbc options for a [`TestPostgres`] database, with [`SECRET`] as password.
pub fn postgres_options(pg: &TestPostgres) -> Value {
    json!({
        "type": "jdbc",
        "base-url": format!("jdbc:postgresql://{}", pg.host_port()),
        "default-database": pg.database,
        "username": pg.username(),
        "password": SECRET,
    })
}

pub fn mysql_options(my: &TestMysql) -> Value {
    json!({
        "type": "jdbc",
        "base-url": format!("jdbc:mariadb://{}", my.host_port()),
        "default-database": my.database,
        "username": my.user,
        "password": SECRET,
    })
}

/// A SQLite database file `<dir>/<name>.db` with the given DDL applied.
pub async fn sqlite_database(dir: &Path, name: &str, ddl: &str) {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.join(format!("{name}.db")))
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// A store opened directly (no server), migrated, for the conformance suite.
pub async fn open_store(
    database_url: Option<&str>,
    data_dir: &Path,
    keyring: Keyring,
) -> Arc<dyn Store> {
    let store = ctasd::store::connect(database_url, data_dir, Arc::new(keyring))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

pub fn fresh_keyring() -> Keyring {
    Keyring::parse(&ctasd::store::secrets::generate_key_spec()).unwrap()
}
