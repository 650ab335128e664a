//! Events out, as an integrator checks them: a real HTTP receiver gets
//! exactly the events it subscribed to, in order, each signed the Standard
//! Webhooks way with the subscription's secret; one that is down gets
//! every event once it is back; one that never answers well has its
//! deliveries parked, listed and redelivered; a commit that fails never
//! announces a published table. On a SQLite store and a PostgreSQL one
//! (the outbox is filled by each backend's triggers).

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Receiver, SECRET, TestApp, TestPostgres, sqlite_database};

/// A SQLite catalog `lite` in a scratch directory of the app.
async fn lite_catalog(app: &TestApp) -> std::path::PathBuf {
    let dir = app.scratch("lite");
    sqlite_database(&dir, "main", "SELECT 1").await;
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()),
                         "default-database": "main", "username": "someone", "password": SECRET});
    assert_eq!(app.register("lite", options).await.status, 201);
    dir
}

fn daily_job(table: &str) -> Value {
    json!({"name": "daily", "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "lite", "table": table},
        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]})
}

async fn subscribe(app: &TestApp, body: Value) -> Value {
    let created = app.post("/v1/subscriptions", &body).await;
    assert_eq!(created.status, 201, "{}", created.text);
    created.body
}

/// Submits a job onto `lite`, writes two rows into its staging and reports
/// it to FINISHED; its id.
async fn run_daily(app: &TestApp, dir: &std::path::Path, table: &str) -> String {
    let submitted = app.post("/v1/jobs", &daily_job(table)).await;
    assert_eq!(submitted.status, 201, "{}", submitted.text);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let staging = submitted.body["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    for status in ["CREATED", "RUNNING", "FINISHED"] {
        if status == "RUNNING" {
            let insert = format!("INSERT INTO \"{staging}\" VALUES (1), (2)");
            sqlite_database(dir, "main", &insert).await;
        }
        assert_eq!(app.put_status(&id, status).await.status, 200);
    }
    id
}

async fn a_receiver_gets_what_it_subscribed_to_in_order_and_signed(app: TestApp) {
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    let subscribed = subscribe(
        &app,
        json!({"name": "orchestrator", "url": receiver.url,
               "events": ["job.status_changed", "table.published"]}),
    )
    .await;
    let secret = subscribed["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{subscribed}");
    subscribe(
        &app,
        json!({"name": "other-catalogs", "url": elsewhere.url, "catalogs": ["other"]}),
    )
    .await;

    let id = run_daily(&app, &dir, "daily").await;

    // INITIALIZING (submission), CREATED, RUNNING, FINISHED, then the table.
    let taken = receiver.wait_for(5, Duration::from_secs(20)).await;
    let seen: Vec<(String, String)> = taken
        .iter()
        .map(|r| {
            let event = r.json();
            let what = match event["type"].as_str().unwrap() {
                "job.status_changed" => event["data"]["to"].as_str().unwrap().to_owned(),
                _ => event["data"]["target"]["table"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            };
            (event["type"].as_str().unwrap().to_owned(), what)
        })
        .collect();
    let expected = [
        ("job.status_changed", "INITIALIZING"),
        ("job.status_changed", "CREATED"),
        ("job.status_changed", "RUNNING"),
        ("job.status_changed", "FINISHED"),
        ("table.published", "daily"),
    ];
    assert_eq!(
        seen,
        expected.map(|(t, w)| (t.to_owned(), w.to_owned())),
        "exactly the events subscribed to, in order"
    );
    let now = chrono::Utc::now().timestamp();
    for request in &taken {
        assert!(request.verifies_with(&secret), "{request:?}");
        assert!(
            !request.verifies_with(&subscribed_other_secret()),
            "{request:?}"
        );
        assert_eq!(
            request.id,
            request.json()["id"],
            "webhook-id is the event's id"
        );
        assert!((now - request.timestamp).abs() < 60, "{request:?}");
        assert_eq!(request.json()["job"]["id"], id.as_str());
        assert!(
            !request.body.contains(SECRET),
            "an event carries the catalog's password"
        );
    }
    let published = taken[4].json();
    assert_eq!(published["data"]["outcome"], "committed", "{published}");
    assert_eq!(published["data"]["target"]["catalog"], "lite");
    let sequences: Vec<i64> = taken
        .iter()
        .map(|r| r.json()["sequence"].as_i64().unwrap())
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    assert!(
        !app.get("/v1/subscriptions/orchestrator")
            .await
            .text
            .contains(&secret)
    );
    assert!(!app.get("/v1/subscriptions").await.text.contains("whsec_"));

    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(elsewhere.requests().is_empty(), "filtered out by catalog");
    let counted = app.get("/v1/subscriptions/orchestrator").await;
    assert_eq!(
        counted.body["deliveries"]["delivered"], 5,
        "{}",
        counted.text
    );
    assert_eq!(receiver.requests().len(), 5, "each sent once");
}

/// A secret no subscription has.
fn subscribed_other_secret() -> String {
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()
}

#[tokio::test]
async fn a_receiver_gets_what_it_subscribed_to_in_order_and_signed_on_sqlite() {
    a_receiver_gets_what_it_subscribed_to_in_order_and_signed(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_receiver_gets_what_it_subscribed_to_in_order_and_signed_on_postgres() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    a_receiver_gets_what_it_subscribed_to_in_order_and_signed(
        TestApp::spawn_with(Some(&store.url)).await,
    )
    .await;
}

#[tokio::test]
async fn a_receiver_that_is_down_gets_every_event_once_it_is_back() {
    let app = TestApp::spawn().await;
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    receiver.set_down(true);
    subscribe(&app, json!({"name": "flaky", "url": receiver.url})).await;

    run_daily(&app, &dir, "daily").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let refused = receiver.requests();
    assert!(!refused.is_empty(), "ctasd tried while it was down");
    assert!(refused.iter().all(|r| r.status == 503));
    let waiting = app
        .get("/v1/subscriptions/flaky/deliveries?state=pending")
        .await;
    let first = &waiting.body["deliveries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(first["last_status"], 503, "{}", waiting.text);
    assert!(
        first["last_error"].as_str().unwrap().contains("503"),
        "{first}"
    );
    receiver.set_down(false);

    // Every event of the job: five status steps and begin/commit-related
    // ones (table.published), each taken once, in order.
    let taken = receiver.wait_for(5, Duration::from_secs(30)).await;
    let types: Vec<String> = taken
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types.len(), 5, "{types:?}");
    assert_eq!(types.last().unwrap(), "table.published", "{types:?}");
    let sequences: Vec<i64> = taken
        .iter()
        .map(|r| r.json()["sequence"].as_i64().unwrap())
        .collect();
    assert!(
        sequences.windows(2).all(|w| w[0] < w[1]),
        "in order: {sequences:?}"
    );
    let metrics = app.get("/metrics").await;
    assert!(
        metrics
            .text
            .contains("ctasd_event_deliveries{state=\"delivered\",subscription=\"flaky\"} 5"),
        "{}",
        metrics.text
    );
}

#[tokio::test]
async fn deliveries_that_keep_failing_are_parked_listed_and_redelivered() {
    let app = TestApp::spawn().await;
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    receiver.set_down(true);
    subscribe(
        &app,
        json!({"name": "broken", "url": receiver.url, "events": ["table.published"], "max_attempts": 2}),
    )
    .await;

    run_daily(&app, &dir, "daily").await;
    let mut parked = Value::Null;
    for _ in 0..100 {
        parked = app
            .get("/v1/subscriptions/broken/deliveries?state=parked")
            .await
            .body;
        if !parked["deliveries"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let delivery = parked["deliveries"][0].clone();
    assert_eq!(delivery["attempts"], 2, "{parked}");
    assert_eq!(delivery["event_type"], "table.published");
    assert_eq!(receiver.requests().len(), 2, "two attempts, then parked");
    let metrics = app.get("/metrics").await;
    assert!(
        metrics
            .text
            .contains("ctasd_event_deliveries_total{result=\"parked\"} 1"),
        "{}",
        metrics.text
    );

    receiver.set_down(false);
    let again = app
        .post(
            &format!(
                "/v1/subscriptions/broken/deliveries/{}/redeliver",
                delivery["id"]
            ),
            &json!({}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body["state"], "pending");
    let taken = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, delivery["event_id"], "the same webhook-id");
    let missing = app
        .post(
            "/v1/subscriptions/broken/deliveries/999999/redeliver",
            &json!({}),
        )
        .await;
    assert_eq!(missing.status, 404, "{}", missing.text);
    assert_eq!(missing.body["code"], "DELIVERY_NOT_FOUND");
}

#[tokio::test]
async fn a_commit_that_fails_never_announces_a_published_table() {
    let app = TestApp::spawn().await;
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    subscribe(
        &app,
        json!({"name": "watcher", "url": receiver.url,
               "events": ["table.published", "action.failed", "staging.discarded"]}),
    )
    .await;
    // A table of that name appears before the commit: it is not ctasd's,
    // so the commit fails and publishes nothing.
    let submitted = app.post("/v1/jobs", &daily_job("clash")).await;
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    app.put_status(&id, "CREATED").await;
    sqlite_database(&dir, "main", "CREATE TABLE clash (id BIGINT)").await;
    app.put_status(&id, "FINISHED").await;
    // A job that fails: its staging is discarded.
    let failed = app.post("/v1/jobs", &daily_job("never")).await;
    let failed_id = failed.body["id"].as_str().unwrap().to_owned();
    app.put_status(&failed_id, "CREATED").await;
    app.put_status(&failed_id, "FAILED").await;

    let taken = receiver.wait_for(2, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let events: Vec<(String, String)> = receiver
        .taken()
        .iter()
        .map(|r| {
            let event = r.json();
            (
                event["type"].as_str().unwrap().to_owned(),
                event["job"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(taken.len() >= 2, "{events:?}");
    assert!(
        !events.iter().any(|(t, _)| t == "table.published"),
        "nothing was published: {events:?}"
    );
    assert!(
        events.contains(&("staging.discarded".into(), failed_id)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(t, j)| j == &id && (t == "action.failed" || t == "staging.discarded")),
        "{events:?}"
    );
}

#[tokio::test]
async fn subscriptions_are_checked_and_kept_without_their_secret() {
    let app = TestApp::spawn().await;
    let refused = [
        (
            json!({"name": "a", "url": "https://x.example/hook"}),
            "url",
            "https",
        ),
        (json!({"name": "a", "url": "ftp://x"}), "url", "http://"),
        (
            json!({"name": "a", "url": "http://x/h", "events": []}),
            "events",
            "at least one",
        ),
        (
            json!({"name": "a", "url": "http://x/h", "secret": "hunter2"}),
            "secret",
            "whsec_",
        ),
        (
            json!({"name": "a", "url": "http://x/h", "max_attempts": 0}),
            "max_attempts",
            "between",
        ),
        (
            json!({"name": "a", "url": "http://x/h", "catalogs": ["no good"]}),
            "catalogs[0]",
            "catalog name",
        ),
    ];
    for (body, field, words) in refused {
        let reply = app.post("/v1/subscriptions", &body).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.text);
        assert_eq!(reply.body["errors"][0]["field"], field, "{}", reply.text);
        assert!(reply.text.contains(words), "{body}: {}", reply.text);
    }
    let unknown = app
        .post(
            "/v1/subscriptions",
            &json!({"name": "a", "url": "http://x/h", "events": ["job.exploded"]}),
        )
        .await;
    assert_eq!(unknown.status, 422, "{}", unknown.text);

    let given = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let created = app
        .post(
            "/v1/subscriptions",
            &json!({"name": "mine", "url": "http://x/h", "secret": given}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["secret"], given);
    assert_eq!(created.body["events"].as_array().unwrap().len(), 6);
    let again = app
        .post(
            "/v1/subscriptions",
            &json!({"name": "mine", "url": "http://x/h"}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text);
    let altered = app
        .patch(
            "/v1/subscriptions/mine",
            &json!({"events": ["table.published"], "comment": "prod"}),
        )
        .await;
    assert_eq!(altered.status, 200, "{}", altered.text);
    assert_eq!(altered.body["events"], json!(["table.published"]));
    assert!(!altered.text.contains("whsec_"));
    let listed = app.get("/v1/subscriptions").await;
    assert_eq!(listed.body["subscriptions"][0]["name"], "mine");
    assert_eq!(app.delete("/v1/subscriptions/mine").await.status, 204);
    assert_eq!(app.get("/v1/subscriptions/mine").await.status, 404);
}

/// The OpenLineage specification files shipped beside the project, by
/// their `$id`: a validator's retriever, since no network is reachable.
struct OfflineSpec(std::collections::HashMap<String, Value>);

impl OfflineSpec {
    fn load() -> Self {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openlineage-spec");
        let mut files = vec![root.join("OpenLineage.json")];
        for entry in std::fs::read_dir(root.join("facets")).unwrap() {
            files.push(entry.unwrap().path());
        }
        let schemas = files
            .into_iter()
            .map(|path| {
                let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                (schema["$id"].as_str().unwrap().to_owned(), schema)
            })
            .collect();
        Self(schemas)
    }

    /// What `instance` breaks of the schema at `url` (a `$id` and perhaps
    /// a `#/$defs/...` fragment).
    fn violations(&self, url: &str, instance: &Value) -> Vec<String> {
        let validator = jsonschema::options()
            .with_retriever(OfflineSpec(self.0.clone()))
            .build(&json!({"$ref": url}))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        validator
            .iter_errors(instance)
            .map(|e| e.to_string())
            .collect()
    }

    /// The core RunEvent schema, then every facet against the schema its
    /// `_schemaURL` names.
    fn check_run_event(&self, event: &Value) {
        let core = self.violations(
            "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            event,
        );
        assert!(core.is_empty(), "{core:?}: {event}");
        let mut facets = Vec::new();
        for place in ["/run/facets", "/job/facets"] {
            facets.extend(
                event
                    .pointer(place)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten(),
            );
        }
        for output in event["outputs"].as_array().unwrap() {
            facets.extend(output["facets"].as_object().into_iter().flatten());
            facets.extend(output["outputFacets"].as_object().into_iter().flatten());
        }
        for (name, facet) in facets {
            let url = facet["_schemaURL"].as_str().unwrap();
            let wrong = self.violations(url, facet);
            assert!(wrong.is_empty(), "facet {name}: {wrong:?}: {facet}");
        }
    }
}

impl jsonschema::Retrieve for OfflineSpec {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let url = uri.as_str().split('#').next().unwrap_or_default();
        self.0
            .get(url)
            .cloned()
            .ok_or_else(|| format!("{url} is not among the shipped specification files").into())
    }
}

#[tokio::test]
async fn openlineage_run_events_validate_against_the_specification_files() {
    let spec = OfflineSpec::load();
    let app = TestApp::spawn().await;
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    subscribe(
        &app,
        json!({"name": "marquez", "url": receiver.url, "format": "openlineage"}),
    )
    .await;

    // A batch job whose audit counted its rows: START, then COMPLETE.
    let mut job = daily_job("daily");
    job["statement"] = json!("INSERT INTO daily SELECT id FROM source");
    job["hooks"][0]["audits"] = json!([{"kind": "row_count", "min": 1}]);
    let submitted = app.post("/v1/jobs", &job).await;
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let staging = submitted.body["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    app.put_status(&id, "CREATED").await;
    sqlite_database(
        &dir,
        "main",
        &format!("INSERT INTO \"{staging}\" VALUES (1), (2)"),
    )
    .await;
    app.put_status(&id, "RUNNING").await;
    app.put_status(&id, "FINISHED").await;
    // One that fails, and one cancelled.
    let mut failed_ids = Vec::new();
    for (table, end) in [("broken", "FAILED"), ("stopped", "CANCELED")] {
        let submitted = app.post("/v1/jobs", &daily_job(table)).await;
        let other = submitted.body["id"].as_str().unwrap().to_owned();
        app.put_status(&other, "CREATED").await;
        app.put_status(&other, "RUNNING").await;
        app.put_status(&other, end).await;
        failed_ids.push(other);
    }

    let taken = receiver.wait_for(6, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(receiver.taken().len(), 6, "one START and one end per run");
    let runs = |job: &str| -> Vec<Value> {
        taken
            .iter()
            .map(|r| r.json())
            .filter(|e| e["run"]["runId"].as_str().unwrap().replace('-', "") == job)
            .collect()
    };
    let published = runs(&id);
    let kinds: Vec<&str> = published
        .iter()
        .map(|e| e["eventType"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["START", "COMPLETE"]);
    let complete = &published[1];
    let output = &complete["outputs"][0];
    assert_eq!(output["namespace"], "file", "{complete}");
    assert!(
        output["name"].as_str().unwrap().ends_with("/main.db/daily"),
        "{output}"
    );
    assert_eq!(
        output["facets"]["lifecycleStateChange"]["lifecycleStateChange"],
        "CREATE"
    );
    assert_eq!(output["facets"]["schema"]["fields"][0]["name"], "id");
    assert_eq!(
        output["outputFacets"]["outputStatistics"]["rowCount"], 2,
        "{output}"
    );
    assert_eq!(complete["job"]["namespace"], "ctasd");
    assert_eq!(
        complete["job"]["facets"]["sql"]["query"],
        "INSERT INTO daily SELECT id FROM source"
    );
    let ends: Vec<String> = failed_ids
        .iter()
        .map(|job| runs(job)[1]["eventType"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ends, ["FAIL", "ABORT"]);
    assert!(runs(&failed_ids[0])[1]["run"]["facets"]["errorMessage"]["message"].is_string());
    for request in &taken {
        spec.check_run_event(&request.json());
    }
    // A checker that cannot fail proves nothing: a broken event is caught.
    let mut broken = complete.clone();
    broken["eventType"] = json!("PUBLISHED");
    assert!(
        !spec
            .violations(
                "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                &broken
            )
            .is_empty()
    );
    let mut broken_facet = output["facets"]["lifecycleStateChange"].clone();
    broken_facet["lifecycleStateChange"] = json!("APPEARED");
    assert!(
        !spec
            .violations(broken_facet["_schemaURL"].as_str().unwrap(), &broken_facet)
            .is_empty()
    );
}

/// The verifier the README gives receivers, as written there.
fn documented_verifier() -> String {
    let page =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let start = page.find("```python\n").expect("a python block") + "```python\n".len();
    page[start..start + page[start..].find("```").unwrap()].to_owned()
}

#[tokio::test]
async fn the_verifier_the_readme_gives_accepts_a_real_delivery_and_nothing_else() {
    let app = TestApp::spawn().await;
    let dir = lite_catalog(&app).await;
    let receiver = Receiver::start().await;
    let secret = subscribe(
        &app,
        json!({"name": "checked", "url": receiver.url, "events": ["table.published"]}),
    )
    .await["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    run_daily(&app, &dir, "daily").await;
    let delivery = receiver.wait_for(1, Duration::from_secs(20)).await[0].clone();

    let verdict = |secret: &str, body: &str| {
        let program = format!(
            "{}\nimport json, sys\nheaders = json.loads(sys.argv[1])\nprint(verified(sys.argv[2], headers, sys.argv[3].encode()))\n",
            documented_verifier()
        );
        let headers = json!({"webhook-id": delivery.id, "webhook-timestamp": delivery.timestamp.to_string(),
                             "webhook-signature": delivery.signature});
        let output = std::process::Command::new("python3")
            .args(["-c", &program, &headers.to_string(), secret, body])
            .output()
            .expect("python3 runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(verdict(&secret, &delivery.body), "True");
    assert_eq!(
        verdict(&secret, &delivery.body.replace("daily", "dai1y")),
        "False"
    );
    assert_eq!(
        verdict("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &delivery.body),
        "False"
    );
}
