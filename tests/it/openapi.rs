//! The committed OpenAPI document is the one the code generates.

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = ctasd::api::openapi_json();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
            .unwrap_or_default();
    assert!(
        committed.trim_end() == generated.trim_end(),
        "openapi/openapi.json is out of date; regenerate it with:\n    cargo run -- openapi > openapi/openapi.json"
    );
}

#[test]
fn the_document_is_openapi_3_1_and_documents_every_route_with_problem_errors() {
    let document: serde_json::Value = serde_json::from_str(&ctasd::api::openapi_json()).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = document["paths"].as_object().unwrap();
    for path in [
        "/v1/catalog-types",
        "/v1/catalogs",
        "/v1/catalogs/{catalog}",
        "/v1/catalogs/{catalog}/databases",
        "/v1/catalogs/{catalog}/databases/{database}/tables",
        "/v1/catalogs/{catalog}/databases/{database}/tables/{table}",
        "/v1/jobs",
        "/v1/jobs/{job}",
        "/v1/jobs/{job}/status",
        "/v1/jobs/{job}/events",
        "/healthz",
        "/readyz",
    ] {
        assert!(paths.contains_key(path), "{path} is not documented");
    }
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            let open = ["/healthz", "/readyz", "/v1/version"].contains(&path.as_str());
            assert_eq!(
                operation["security"],
                if open {
                    serde_json::json!([])
                } else {
                    serde_json::json!([{"bearer": []}])
                },
                "{method} {path}: declared security"
            );
            for status in ["401", "403"] {
                assert_eq!(
                    responses.contains_key(status),
                    !open,
                    "{method} {path}: {status}"
                );
            }
            assert!(responses.contains_key("431"), "{method} {path}: 431");
            assert!(
                responses.contains_key("default"),
                "{method} {path}: default"
            );
            for (status, response) in responses {
                let response = resolve(&document, response);
                if status.starts_with('4') || status.starts_with('5') || status == "default" {
                    assert!(
                        response["content"]["application/problem+json"].is_object(),
                        "{method} {path} {status} is not problem+json"
                    );
                }
            }
        }
    }
}

/// A `$ref` into the document, followed; anything else as it is.
fn resolve<'a>(
    document: &'a serde_json::Value,
    value: &'a serde_json::Value,
) -> &'a serde_json::Value {
    match value["$ref"].as_str() {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("a local reference");
            document
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{reference} resolves"))
        }
        None => value,
    }
}

#[test]
fn the_document_gives_generators_named_types_plain_maps_and_verb_first_operations() {
    let document: serde_json::Value = serde_json::from_str(&ctasd::api::openapi_json()).unwrap();
    let schemas = &document["components"]["schemas"];

    let event = &schemas["JobEvent"];
    assert_eq!(event["discriminator"]["propertyName"], "kind");
    for (kind, schema) in [("status", "StatusEvent"), ("action", "ActionEvent")] {
        assert_eq!(
            event["discriminator"]["mapping"][kind],
            format!("#/components/schemas/{schema}")
        );
        assert!(
            schemas[schema]["properties"]["kind"].is_object(),
            "{schema}"
        );
    }

    // Every string map is the one StringMap (a plain dict in clients): no
    // other schema holds a map of strings of its own.
    let mut string_maps = Vec::new();
    find_string_maps(&document, "#", &mut string_maps);
    assert_eq!(string_maps, ["#/components/schemas/StringMap"]);
    for (schema, field) in [
        ("RegisterCatalog", "options"),
        ("Catalog", "options"),
        ("AlterCatalog", "set"),
        ("Table", "options"),
    ] {
        assert_eq!(
            schemas[schema]["properties"][field]["$ref"], "#/components/schemas/StringMap",
            "{schema}.{field}"
        );
    }
    assert!(schemas["StringMap"].get("type").is_none());

    // Responses list what the server always sends; requests have no `null`.
    let catalog = &schemas["Catalog"];
    for field in [
        "name",
        "type",
        "options",
        "comment",
        "created_at",
        "updated_at",
    ] {
        assert!(
            catalog["required"]
                .as_array()
                .unwrap()
                .contains(&field.into()),
            "Catalog.{field} is required"
        );
    }
    for request in [
        "RegisterCatalog",
        "AlterCatalog",
        "SubmitJob",
        "SubmitHook",
        "RegisterEngine",
        "StatusReport",
    ] {
        let properties = schemas[request]["properties"].as_object().unwrap();
        for (field, property) in properties {
            assert!(
                !property.to_string().contains("\"null\""),
                "{request}.{field} accepts null: {property}"
            );
        }
    }
    assert!(
        schemas["ActionOutcome"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"already_committed".into())
    );
    assert!(
        schemas["CatalogTypeName"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"jdbc".into())
    );
    assert!(
        schemas["ProblemCode"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"TRANSITION_ILLEGAL".into())
    );
    assert!(schemas["Problem"]["properties"]["legal_next"].is_object());

    let verbs = [
        "list",
        "get",
        "register",
        "alter",
        "drop",
        "submit",
        "update",
        "report",
        "settle",
        "check",
        "run",
        "redeliver",
    ];
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap();
            assert!(
                verbs.iter().any(|verb| id.starts_with(&format!("{verb}_"))),
                "{method} {path}: operationId {id} is not verb-first"
            );
        }
    }
}

#[tokio::test]
async fn the_server_serves_its_document_interactive_docs_from_its_own_assets_and_its_version() {
    let app = crate::helpers::TestApp::spawn().await;

    let served = app.get("/openapi.json").await;
    let generated: serde_json::Value = serde_json::from_str(&ctasd::api::openapi_json()).unwrap();
    assert_eq!(served.body, generated, "/openapi.json is the document");

    let page = app.client.get(app.url("/docs/")).send().await.unwrap();
    let header = |name: &str| {
        page.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(header("x-frame-options"), "DENY");
    assert_eq!(header("x-content-type-options"), "nosniff");
    let policy = header("content-security-policy");
    assert!(
        policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'self';"),
        "{policy}"
    );
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("<div id=\"swagger-ui\">"), "{html}");
    // Every asset the page loads comes from this server: no network needed.
    let assets: Vec<&str> = html
        .split(['"', '\''])
        .filter(|part| part.starts_with("./") || part.ends_with(".css") || part.ends_with(".js"))
        .collect();
    assert!(assets.len() >= 4, "{assets:?}");
    for asset in assets {
        assert!(!asset.contains("//"), "{asset} is not served from ctasd");
        let reply = app
            .client
            .get(app.url(&format!("/docs/{}", asset.trim_start_matches("./"))))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{asset}");
        assert!(!reply.bytes().await.unwrap().is_empty(), "{asset}");
    }
    let initializer = app.get("/docs/swagger-initializer.js").await.text;
    assert!(
        initializer.contains("\"url\": \"/openapi.json\""),
        "{initializer}"
    );

    let version = app.get("/v1/version").await;
    assert_eq!(version.body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(version.body["name"], "ctasd");
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text_and_move_when_jobs_move() {
    use ctasd::domain::job::JobStatus::{Created, Finished, Running};

    let app = crate::helpers::TestApp::spawn().await;
    app.register("mem", serde_json::json!({"type": "generic_in_memory"}))
        .await;
    let before = samples(&app.get("/metrics").await.text);
    let job = app
        .submit(&serde_json::json!({
            "name": "measured", "mode": "batch",
            "hooks": [{"kind": "create_table_as", "target": {"catalog": "mem", "table": "t"},
                       "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]
        }))
        .await;
    app.report_all(&job.id, &[Created, Running, Finished]).await;

    let scraped = app.get("/metrics").await;
    assert_eq!(scraped.status, 200);
    assert!(
        scraped
            .content_type
            .starts_with("text/plain; version=0.0.4")
    );
    let after = samples(&scraped.text);
    let moved = |name: &str| {
        after.get(name).copied().unwrap_or(0.0) - before.get(name).copied().unwrap_or(0.0)
    };
    assert_eq!(
        moved("ctasd_job_transitions_total{status=\"FINISHED\"}"),
        1.0
    );
    assert_eq!(
        moved("ctasd_job_transitions_total{status=\"INITIALIZING\"}"),
        1.0
    );
    assert_eq!(
        moved("ctasd_actions_total{action=\"commit\",result=\"committed\"}"),
        1.0
    );
    assert_eq!(
        moved("ctasd_actions_total{action=\"begin\",result=\"staged\"}"),
        1.0
    );
    assert_eq!(
        moved(
            "ctasd_http_requests_total{method=\"PUT\",route=\"/v1/jobs/{job}/status\",status=\"200\"}"
        ),
        3.0
    );
    assert!(
        moved("ctasd_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/jobs\"}")
            >= 1.0
    );
    assert_eq!(after["ctasd_actions{state=\"pending\"}"], 0.0);
    assert!(after["ctasd_store_connections{state=\"max\"}"] >= 1.0);
}

/// Every sample of a Prometheus text page by its name and labels; a line
/// that is neither a comment nor `name{labels} value` fails the test.
fn samples(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {line}"));
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("not a number: {line}"));
            (series.to_owned(), value)
        })
        .collect()
}

/// `/docs` in a real headless Chromium that can resolve no host but
/// ctasd's: the page renders every operation from the binary's own assets.
#[tokio::test]
async fn the_docs_page_renders_in_chromium_with_no_network() {
    let Ok(chromium) = std::env::var("CTASD_TEST_CHROMIUM") else {
        crate::helpers::skipped("Chromium test skipped because CTASD_TEST_CHROMIUM is not set");
        return;
    };
    let app = crate::helpers::TestApp::spawn().await;
    let profile = tempfile::tempdir().unwrap();
    let url = app.url("/docs/");
    let rendered = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=15000",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
            &url,
        ])
        .output()
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&rendered.stdout);

    for path in [
        "/v1/catalogs",
        "/v1/jobs/{job}/status",
        "/v1/statements",
        "/metrics",
    ] {
        assert!(
            dom.contains(&format!("data-path=\"{path}\"")),
            "{path} is not rendered; the page was:\n{}",
            &dom[..dom.len().min(2000)]
        );
    }
}

/// Where in `value` a schema is a map of strings (`additionalProperties`
/// of type string), as JSON pointers.
fn find_string_maps(value: &serde_json::Value, at: &str, found: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(fields) => {
            if fields.get("additionalProperties") == Some(&serde_json::json!({"type": "string"})) {
                found.push(at.to_owned());
            }
            for (key, child) in fields {
                find_string_maps(child, &format!("{at}/{key}"), found);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_string_maps(child, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}
