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
            let open = path == "/healthz" || path == "/readyz";
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
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        response["content"]["application/problem+json"].is_object(),
                        "{method} {path} {status} is not problem+json"
                    );
                }
            }
        }
    }
}
