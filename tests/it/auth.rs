//! Every documented route × every role: allowed or refused (401/403,
//! problem+json) as the roles say; health checks need nothing.

use ctasd::api::auth::{Role, generate};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::helpers::{Reply, TestApp};

const ROLES: [Role; 4] = [Role::Reader, Role::Engine, Role::Operator, Role::Admin];

/// Who may call `method path`, as the roles are described to users.
fn allowed(method: &str, path: &str) -> Vec<Role> {
    use Role::*;
    let read = method == "GET";
    if path == "/healthz" || path == "/readyz" || path == "/v1/version" || path == "/metrics" {
        // Open, or (metrics) any valid token: a scraper needs no role.
        ROLES.to_vec()
    } else if path == "/v1/whoami" {
        // Any valid token may ask what it may do.
        ROLES.to_vec()
    } else if path == "/v1/overview" {
        // Counts of jobs: whoever reads jobs.
        vec![Reader, Engine, Operator, Admin]
    } else if path == "/v1/statements" {
        // Who may read catalogs may send a statement; one that changes
        // them needs more (checked below).
        vec![Reader, Operator, Admin]
    } else if path.ends_with("/status") && method == "PUT" {
        vec![Engine, Admin]
    } else if path.starts_with("/v1/jobs/") && method == "PATCH" {
        vec![Engine, Operator, Admin]
    } else if path.starts_with("/v1/jobs") && read {
        vec![Reader, Engine, Operator, Admin]
    } else if path.starts_with("/v1/jobs") {
        vec![Operator, Admin]
    } else if path.starts_with("/v1/subscriptions") {
        // Subscriptions say where events go: operators' business, reads too.
        vec![Operator, Admin]
    } else if read {
        // Catalogs, catalog types and engines.
        vec![Reader, Operator, Admin]
    } else {
        vec![Operator, Admin]
    }
}

fn concrete(template: &str) -> String {
    template
        .replace("{catalog}", "mem")
        .replace("{database}", "default")
        .replace("{table}", "t")
        .replace("{job}", "00112233445566778899aabbccddeeff")
        .replace("{action}", "1")
        .replace("{decision}", "retry")
        .replace("{engine}", "flink")
        .replace("{subscription}", "hooks")
        .replace("{delivery}", "1")
}

async fn call(app: &TestApp, method: &str, path: &str, token: Option<&str>) -> Reply {
    let mut request = app.client.request(method.parse().unwrap(), app.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if method != "GET" && method != "DELETE" {
        request = request.json(&json!({}));
    }
    Reply::from(request.send().await.unwrap()).await
}

#[tokio::test]
async fn every_route_admits_exactly_the_roles_that_may_use_it() {
    let tokens: Vec<(Role, SecretString, String)> = ROLES
        .iter()
        .map(|role| {
            let (token, line) = generate(&format!("t-{role}"), *role);
            (*role, token, line)
        })
        .collect();
    let config = tokens
        .iter()
        .map(|(_, _, line)| line.clone())
        .collect::<Vec<_>>()
        .join(",");
    let app = TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(config))).await;
    let admin = tokens
        .iter()
        .find(|(r, _, _)| *r == Role::Admin)
        .unwrap()
        .1
        .expose_secret()
        .to_owned();
    let mem = app.client.post(app.url("/v1/catalogs")).bearer_auth(&admin);
    let created = mem
        .json(&json!({"name": "mem", "options": {"type": "generic_in_memory"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let document: serde_json::Value = serde_json::from_str(&ctasd::api::openapi_json()).unwrap();
    let mut checked = 0;

    for (template, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let (method, path) = (method.to_uppercase(), concrete(template));
            let may = allowed(&method, &path);
            let open = may.len() == ROLES.len()
                && (path == "/healthz" || path == "/readyz" || path == "/v1/version");
            let open = open && path != "/metrics";

            let anonymous = call(&app, &method, &path, None).await;
            let forged = call(&app, &method, &path, Some("ctasd_not-a-real-token")).await;
            if open {
                assert!(
                    anonymous.status.is_success(),
                    "{method} {path} should be open: {}",
                    anonymous.text
                );
            } else {
                anonymous.assert_problem(401, "UNAUTHENTICATED");
                assert_eq!(anonymous.headers["www-authenticate"], "Bearer");
                forged.assert_problem(401, "UNAUTHENTICATED");
            }
            for (role, token, _) in &tokens {
                let reply = call(&app, &method, &path, Some(token.expose_secret())).await;
                if may.contains(role) {
                    assert!(
                        reply.status != 401 && reply.status != 403,
                        "{role} should pass {method} {path}: {} {}",
                        reply.status,
                        reply.text
                    );
                } else {
                    reply.assert_problem(403, "FORBIDDEN");
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 4 * 15,
        "every route was walked ({checked} checks)"
    );
    call(&app, "GET", "/v2/nothing", None)
        .await
        .assert_problem(401, "UNAUTHENTICATED");
}

#[tokio::test]
async fn without_tokens_only_loopback_is_served_unless_insecure_is_explicit() {
    let dir = tempfile::tempdir().unwrap();
    let store = ctasd::config::StoreSettings::for_data_dir(dir.path());
    let mut settings = ctasd::config::ServeSettings::new("0.0.0.0:0".parse().unwrap(), store);

    let refused = ctasd::server::start(settings.clone())
        .await
        .err()
        .expect("refused");
    settings.insecure_no_auth = true;
    let served = ctasd::server::start(settings).await.unwrap();
    served.stop().await;

    assert!(
        refused
            .to_string()
            .contains("refusing to listen on 0.0.0.0:0 without tokens"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_reader_may_show_catalogs_by_statement_but_not_create_one() {
    let (reader, line) = generate("reader", Role::Reader);
    let app = TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(line))).await;
    let statement = |sql: &str| {
        app.client
            .post(app.url("/v1/statements"))
            .bearer_auth(reader.expose_secret())
            .json(&json!({ "statement": sql }))
            .send()
    };

    let shown = Reply::from(statement("SHOW CATALOGS").await.unwrap()).await;
    let created = Reply::from(
        statement("CREATE CATALOG mem WITH ('type' = 'generic_in_memory')")
            .await
            .unwrap(),
    )
    .await;

    assert_eq!(shown.status, 200, "{}", shown.text);
    created.assert_problem(403, "FORBIDDEN");
    assert!(created.detail().contains("may not change catalogs"));
    let listed = Reply::from(statement("SHOW CATALOGS").await.unwrap()).await;
    assert_eq!(listed.body["rows"], json!([]), "nothing was created");
}

#[tokio::test]
async fn a_dashboard_on_a_configured_origin_may_call_ctasd_and_others_may_not() {
    let (token, line) = generate("dash", Role::Reader);
    let app = TestApp::spawn_with_settings(|s| {
        s.tokens = Some(SecretString::from(line));
        s.cors_allowed_origins = vec!["https://dash.example".into()];
    })
    .await;
    let preflight = |origin: &'static str| {
        app.client
            .request(reqwest::Method::OPTIONS, app.url("/v1/jobs"))
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "authorization")
            .send()
    };

    let allowed = preflight("https://dash.example").await.unwrap();
    let other = preflight("https://evil.example").await.unwrap();
    let read = app
        .client
        .get(app.url("/v1/jobs"))
        .header("origin", "https://dash.example")
        .bearer_auth(token.expose_secret())
        .send()
        .await
        .unwrap();

    assert!(allowed.status().is_success());
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://dash.example"
    );
    assert!(
        allowed.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    assert!(other.headers().get("access-control-allow-origin").is_none());
    assert_eq!(read.status(), 200);
    assert_eq!(
        read.headers()["access-control-allow-origin"],
        "https://dash.example"
    );
    assert!(
        read.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("etag")
    );
}

#[tokio::test]
async fn an_engine_token_may_neither_report_nor_repoint_a_job_ctasd_watches() {
    let (engine, engine_line) = generate("flink", Role::Engine);
    let (admin, admin_line) = generate("root", Role::Admin);
    let lines = format!("{engine_line},{admin_line}");
    let app = TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(lines))).await;
    let app = app.authorized(admin.expose_secret());
    let flink = crate::helpers::StandInFlink::start().await;
    let registered = app
        .post("/v1/engines", &json!({"name": "flink", "url": flink.url}))
        .await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let hooks = json!([{"kind": "create_table_as", "target": {"catalog": "mem", "table": "t"},
        "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]);
    let watched = app
        .submit(&json!({"name": "w", "mode": "batch", "engine": "flink", "hooks": hooks}))
        .await;
    let reported = app
        .submit(&json!({"name": "r", "mode": "batch", "hooks": hooks}))
        .await;
    let as_engine = |method: &str, path: String, body: serde_json::Value| {
        let request = reqwest::Client::new()
            .request(method.parse().unwrap(), app.url(&path))
            .bearer_auth(engine.expose_secret())
            .json(&body);
        async move { Reply::from(request.send().await.unwrap()).await }
    };

    let finished = as_engine(
        "PUT",
        format!("/v1/jobs/{}/status", watched.id),
        json!({"status": "FINISHED"}),
    )
    .await;
    let repointed = as_engine(
        "PATCH",
        format!("/v1/jobs/{}", watched.id),
        json!({"engine_job_id": "0123456789abcdef0123456789abcdef"}),
    )
    .await;

    finished.assert_problem(409, "JOB_WATCHED");
    assert!(
        finished.detail().contains("engine 'flink'"),
        "{}",
        finished.text
    );
    repointed.assert_problem(409, "JOB_WATCHED");
    let job = app.get(&format!("/v1/jobs/{}", watched.id)).await.body;
    assert_ne!(job["status"], "FINISHED", "{job}");
    assert_eq!(job["engine_job_id"], watched.job["engine_job_id"], "{job}");
    // A job nobody watches is the engine token's to report.
    let own = as_engine(
        "PUT",
        format!("/v1/jobs/{}/status", reported.id),
        json!({"status": "CREATED"}),
    )
    .await;
    assert_eq!(own.status, 200, "{}", own.text);
}
