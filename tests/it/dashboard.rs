//! What the dashboard needs from the server: its assets from inside the
//! binary (the same files as `ui/dist`), routes of the app answered with
//! its page, the caller's permissions (`/v1/whoami`), the header's counts
//! (`/v1/overview`) and the jobs list's search. The pages themselves are
//! tested in Chromium by `.ci/ui`.

use std::collections::BTreeSet;
use std::path::Path;

use ctasd::api::auth::{Role, generate};
use ctasd::domain::job::JobStatus::*;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestPostgres};

fn files_under(root: &Path, dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(root, &path, found);
        } else {
            found.insert(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

#[tokio::test]
async fn the_dashboard_is_served_from_the_binary_as_ui_dist_holds_it() {
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/dist");
    let mut built = BTreeSet::new();
    files_under(&dist, &dist, &mut built);
    let embedded: BTreeSet<String> = ctasd::api::ui::asset_paths()
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        embedded, built,
        "src/api/ui.rs embeds every file of ui/dist"
    );

    // With tokens required: the assets hold no data and need none.
    let (_, line) = generate("someone", Role::Reader);
    let app = TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(line))).await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for path in ["/", "/ui"] {
        let reply = no_redirects.get(app.url(path)).send().await.unwrap();
        assert_eq!(reply.status(), 308, "{path}");
        assert_eq!(reply.headers()["location"], "/ui/", "{path}");
    }
    for asset in &embedded {
        let reply = app
            .client
            .get(app.url(&format!("/ui/{asset}")))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{asset}");
        let headers = reply.headers().clone();
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("script-src 'self'"),
            "{asset}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let body = reply.bytes().await.unwrap();
        assert_eq!(body, std::fs::read(dist.join(asset)).unwrap(), "{asset}");

        // Asked again with its tag: not sent again.
        let again = app
            .client
            .get(app.url(&format!("/ui/{asset}")))
            .header("if-none-match", &headers["etag"])
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{asset}");
    }

    let page = app.client.get(app.url("/ui/")).send().await.unwrap();
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let html = page.text().await.unwrap();
    assert!(html.contains("<div id=\"app\">"), "{html}");
    for script in html.split("src=\"").skip(1) {
        let source = script.split('"').next().unwrap();
        assert!(source.starts_with("/ui/"), "{source} comes from ctasd");
    }
    // A route of the app (a reload on a job's page) answers the page.
    let route = app
        .client
        .get(app.url("/ui/jobs/0011"))
        .send()
        .await
        .unwrap();
    assert_eq!(route.status(), 200);
    assert_eq!(route.text().await.unwrap(), html);
    // A missing asset is a 404, not the page.
    let missing = app
        .client
        .get(app.url("/ui/assets/nothing.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.headers()["content-type"],
        "application/problem+json"
    );
}

#[tokio::test]
async fn whoami_tells_a_token_its_role_and_permissions() {
    let (reader, reader_line) = generate("viewer", Role::Reader);
    let (admin, admin_line) = generate("boss", Role::Admin);
    let config = format!("{reader_line},{admin_line}");
    let app = TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(config))).await;
    let whoami = |token: &SecretString| {
        app.client
            .get(app.url("/v1/whoami"))
            .bearer_auth(token.expose_secret())
            .send()
    };

    let seen: Value = whoami(&reader).await.unwrap().json().await.unwrap();
    assert_eq!(seen["name"], "viewer");
    assert_eq!(seen["role"], "reader");
    assert_eq!(seen["tokens_required"], true);
    assert_eq!(
        seen["permissions"],
        json!([
            "authenticated",
            "read_catalogs",
            "read_engines",
            "read_jobs"
        ])
    );
    let seen: Value = whoami(&admin).await.unwrap().json().await.unwrap();
    assert_eq!(seen["role"], "admin");
    assert_eq!(seen["permissions"].as_array().unwrap().len(), 11);
    let anonymous = app.get("/v1/whoami").await;
    anonymous.assert_problem(401, "UNAUTHENTICATED");

    let open = TestApp::spawn().await;
    let seen = open.get("/v1/whoami").await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body["name"], Value::Null);
    assert_eq!(seen.body["role"], "admin");
    assert_eq!(seen.body["tokens_required"], false);
    assert!(
        seen.body["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("manage_catalogs"))
    );
}

fn job(name: &str, table: &str) -> Value {
    json!({"name": name, "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "mem", "table": table},
        "table": {"columns": [{"name": "n", "type": "INT"}]}}]})
}

fn counts(overview: &Value) -> Vec<(String, i64)> {
    overview["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["status"].as_str().unwrap().to_owned(),
                c["jobs"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn overview_counts_jobs_by_status_and_the_ledger(app: TestApp) {
    let registered = app
        .register("mem", json!({"type": "generic_in_memory"}))
        .await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    let empty = app.get("/v1/overview").await;
    assert_eq!(empty.status, 200, "{}", empty.text);
    let all: Vec<String> = ctasd::domain::job::JobStatus::ALL
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    let listed: Vec<String> = counts(&empty.body).into_iter().map(|(s, _)| s).collect();
    assert_eq!(listed, all, "every status, in Flink's order");
    assert!(counts(&empty.body).iter().all(|(_, n)| *n == 0));

    let first = app.submit(&job("a", "a")).await;
    let second = app.submit(&job("b", "b")).await;
    app.submit(&job("c", "c")).await;
    app.report_all(&first.id, &[Created, Running, Finished])
        .await;
    app.report(&second.id, Created).await;

    let seen = app.get("/v1/overview").await;
    let nonzero: Vec<(String, i64)> = counts(&seen.body)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        nonzero,
        vec![
            ("INITIALIZING".to_owned(), 1),
            ("CREATED".to_owned(), 1),
            ("FINISHED".to_owned(), 1)
        ]
    );
    assert_eq!(seen.body["pending_actions"], 0, "{}", seen.text);
    assert_eq!(seen.body["failed_actions"], 0, "{}", seen.text);
}

#[tokio::test]
async fn overview_counts_jobs_by_status_on_sqlite() {
    overview_counts_jobs_by_status_and_the_ledger(TestApp::spawn().await).await;
}

#[tokio::test]
async fn overview_counts_jobs_by_status_on_postgres() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    overview_counts_jobs_by_status_and_the_ledger(TestApp::spawn_with(Some(&store.url)).await)
        .await;
}

/// Every byte but letters and digits as `%XX`.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => char::from(b).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// The ids of the jobs `search` finds, newest first.
async fn found(app: &TestApp, search: &str) -> Vec<String> {
    let reply = app
        .get(&format!("/v1/jobs?search={}", percent_encoded(search)))
        .await;
    assert_eq!(reply.status, 200, "{search}: {}", reply.text);
    reply.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn jobs_are_found_by_name_or_id_prefix(app: TestApp) {
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let underscored = app.submit(&job("Daily_Totals", "t1")).await;
    let percent = app.submit(&job("daily 100% done", "t2")).await;
    let hourly = app.submit(&job("hourly", "t3")).await;
    let backslash = app.submit(&job(r"back\slash", "t4")).await;

    assert_eq!(
        found(&app, "DAILY").await,
        vec![percent.id.clone(), underscored.id.clone()],
        "newest first, any case"
    );
    // LIKE's wildcards are searched for as themselves.
    assert_eq!(found(&app, "_").await, vec![underscored.id.clone()]);
    assert_eq!(found(&app, "%").await, vec![percent.id.clone()]);
    assert_eq!(found(&app, r"\").await, vec![backslash.id.clone()]);
    assert_eq!(
        found(&app, &hourly.id[..10]).await,
        vec![hourly.id.clone()],
        "an id's prefix"
    );
    assert_eq!(
        found(&app, &hourly.id[3..12]).await,
        Vec::<String>::new(),
        "ids match from their start"
    );
    assert_eq!(found(&app, "weekly").await, Vec::<String>::new());
    // With the other filters.
    app.report(&hourly.id, Created).await;
    let reply = app.get("/v1/jobs?search=ly&status=CREATED").await;
    assert_eq!(
        reply.body["jobs"].as_array().unwrap().len(),
        1,
        "{}",
        reply.text
    );
    assert_eq!(reply.body["jobs"][0]["id"], hourly.id.as_str());

    let long = "x".repeat(201);
    app.get(&format!("/v1/jobs?search={long}"))
        .await
        .assert_problem(400, "QUERY_INVALID");
}

#[tokio::test]
async fn jobs_are_found_by_name_or_id_prefix_on_sqlite() {
    jobs_are_found_by_name_or_id_prefix(TestApp::spawn().await).await;
}

#[tokio::test]
async fn jobs_are_found_by_name_or_id_prefix_on_postgres() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    jobs_are_found_by_name_or_id_prefix(TestApp::spawn_with(Some(&store.url)).await).await;
}

/// A finished job read again and again is answered from what was rendered
/// (same body, same tag) until it changes, on this replica or another.
#[tokio::test]
async fn a_job_at_rest_is_answered_as_rendered_until_it_changes_on_any_replica() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let first = TestApp::spawn_with(Some(&store.url)).await;
    let second = first.sibling().await;
    first
        .register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let id = first.submit(&job("kept", "kept")).await.id;
    first.report_all(&id, &[Created, Running, Finished]).await;

    let path = format!("/v1/jobs/{id}");
    let read = first.get(&path).await;
    let again = first.get(&path).await;
    assert_eq!(again.text, read.text);
    assert_eq!(again.headers["etag"], read.headers["etag"]);
    assert_eq!(read.body["engine_job_id"], Value::Null);

    // Changed through the other replica: the first answers the change.
    let patched = second
        .patch(&path, &json!({"engine_job_id": "a1b2c3"}))
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    let after = first.get(&path).await;
    assert_eq!(after.body["engine_job_id"], "a1b2c3", "{}", after.text);
    assert_ne!(after.headers["etag"], read.headers["etag"]);

    // Deleted (as retention does): gone on both.
    let purged = ctasd::server::open_store(&first.settings().store)
        .await
        .unwrap()
        .purge_ended_jobs(chrono::Utc::now() + chrono::Duration::days(1), 10)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    first.get(&path).await.assert_problem(404, "JOB_NOT_FOUND");
    second.get(&path).await.assert_problem(404, "JOB_NOT_FOUND");
}

/// On SQLite the process is the store's only user: a job at rest is
/// answered with no read of the store, and a change made through this
/// process is answered at once.
#[tokio::test]
async fn a_job_at_rest_on_sqlite_is_answered_as_rendered_until_this_process_changes_it() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let id = app.submit(&job("kept", "kept")).await.id;
    app.report_all(&id, &[Created, Running, Finished]).await;
    let path = format!("/v1/jobs/{id}");
    let read = app.get(&path).await;
    assert_eq!(app.get(&path).await.text, read.text);

    let patched = app.patch(&path, &json!({"engine_job_id": "d4e5f6"})).await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    let after = app.get(&path).await;
    assert_eq!(after.body["engine_job_id"], "d4e5f6", "{}", after.text);
    assert_ne!(after.headers["etag"], read.headers["etag"]);
    assert_eq!(app.get(&path).await.text, after.text);
}

/// Reads of kept jobs that arrive together are checked together: each
/// still answers its own job, and a change made on another replica before
/// the reads is seen by every one of them.
#[tokio::test]
async fn concurrent_reads_of_jobs_at_rest_each_answer_their_own_job_as_it_stands() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let first = TestApp::spawn_with(Some(&store.url)).await;
    let second = first.sibling().await;
    first
        .register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let mut ids = Vec::new();
    for n in 0..4 {
        let name = format!("kept{n}");
        let id = first.submit(&job(&name, &name)).await.id;
        first.report_all(&id, &[Created, Running, Finished]).await;
        assert_eq!(first.get(&format!("/v1/jobs/{id}")).await.status, 200);
        ids.push(id);
    }
    let patched = second
        .patch(
            &format!("/v1/jobs/{}", ids[0]),
            &json!({"engine_job_id": "f00d"}),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);

    let reads: Vec<_> = (0..64)
        .map(|n| {
            let (client, url, id) = (
                first.client.clone(),
                first.url(&format!("/v1/jobs/{}", ids[n % 4])),
                ids[n % 4].clone(),
            );
            tokio::spawn(async move {
                let body: Value = client.get(url).send().await.unwrap().json().await.unwrap();
                (id, body)
            })
        })
        .collect();
    for read in reads {
        let (id, body) = read.await.unwrap();
        assert_eq!(body["id"], id.as_str(), "{body}");
        let expected = if id == ids[0] {
            json!("f00d")
        } else {
            Value::Null
        };
        assert_eq!(body["engine_job_id"], expected, "{body}");
    }
}
