//! The `CREATE TABLE` a table definition becomes runs on the real databases,
//! and the table it makes holds exactly the physical columns.

use ctasd::catalog::jdbc::mysql::MySql;
use ctasd::catalog::jdbc::postgres::Postgres;
use ctasd::catalog::jdbc::sqlite::Sqlite;
use ctasd::catalog::jdbc::{Dialect, Shape};
use ctasd::domain::flink::table::TableDefinition;
use serde_json::json;

use crate::helpers::{
    TestApp, TestMysql, TestPostgres, mysql_options, postgres_options, sqlite_database,
};

fn orders() -> TableDefinition {
    let table: TableDefinition = serde_json::from_value(json!({
        "columns": [
            {"name": "id", "type": "BIGINT NOT NULL", "comment": "order id"},
            {"name": "amount", "type": "DECIMAL(10, 2)"},
            {"name": "note", "type": "VARCHAR(20)"},
            {"name": "we\"ird `name`", "type": "STRING"},
            {"name": "ts", "type": "TIMESTAMP(3)"},
            {"name": "flag", "type": "BOOLEAN NOT NULL"},
            {"name": "day", "type": "STRING", "expr": "DATE_FORMAT(ts, 'yyyy-MM-dd')"},
            {"name": "offset", "type": "BIGINT", "metadata": "offset", "virtual": true}
        ],
        "primary_key": {"name": "pk", "columns": ["id"]},
        "partition_keys": ["day"],
        "options": {"connector": "jdbc"}
    }))
    .unwrap();
    table.validate().unwrap();
    table
}

/// The statements that create `orders` as published, as one script.
fn ddl(dialect: &dyn Dialect) -> String {
    let name = dialect.quote("orders").unwrap();
    dialect
        .create_table(&name, &orders(), Shape::published())
        .unwrap()
        .join(";\n")
}

const PHYSICAL: [&str; 6] = ["id", "amount", "note", "we\"ird `name`", "ts", "flag"];

async fn assert_browsed_columns(app: &TestApp, catalog: &str, database: &str) {
    let reply = app
        .get(&format!(
            "/v1/catalogs/{catalog}/databases/{database}/tables/orders"
        ))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let columns = reply.body["columns"].as_array().unwrap();
    let names: Vec<&str> = columns
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names, PHYSICAL,
        "computed and virtual metadata columns are not created"
    );
    let nullable: Vec<bool> = columns
        .iter()
        .map(|c| c["nullable"].as_bool().unwrap())
        .collect();
    assert_eq!(nullable, [false, true, true, true, true, false]);
}

#[tokio::test]
async fn the_generated_ddl_creates_the_table_in_postgres() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    pg.execute(&ddl(&Postgres)).await;
    let app = TestApp::spawn().await;
    app.register("pg", postgres_options(&pg)).await;

    assert_browsed_columns(&app, "pg", &pg.database).await;
    let reply = app
        .get(&format!(
            "/v1/catalogs/pg/databases/{}/tables/orders",
            pg.database
        ))
        .await;
    assert_eq!(reply.body["columns"][1]["data_type"], "numeric(10,2)");
    assert_eq!(
        reply.body["columns"][4]["data_type"],
        "timestamp(3) without time zone"
    );
}

#[tokio::test]
async fn the_generated_ddl_creates_the_table_in_mariadb() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    my.execute(&ddl(&MySql)).await;
    let app = TestApp::spawn().await;
    app.register("my", mysql_options(&my)).await;

    assert_browsed_columns(&app, "my", &my.database).await;
    let reply = app
        .get(&format!(
            "/v1/catalogs/my/databases/{}/tables/orders",
            my.database
        ))
        .await;
    assert_eq!(reply.body["columns"][3]["data_type"], "longtext");
    assert_eq!(reply.body["columns"][4]["data_type"], "datetime(3)");
}

#[tokio::test]
async fn the_generated_ddl_creates_the_table_in_sqlite() {
    let app = TestApp::spawn().await;
    let dir = app.scratch("lite");
    sqlite_database(&dir, "main", &ddl(&Sqlite)).await;
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "main"});
    app.register("lite", options).await;

    assert_browsed_columns(&app, "lite", "main").await;
}

#[test]
fn a_primary_key_on_an_unbounded_string_is_refused_for_mysql_naming_the_column() {
    let mut table = orders();
    table.primary_key.as_mut().unwrap().columns = vec!["we\"ird `name`".into()];
    let error = MySql.check_table("t", &table).unwrap_err().to_string();
    assert!(error.starts_with("column 'we\"ird `name`'"), "{error}");
    assert!(Postgres.check_table("t", &table).is_ok());
}
