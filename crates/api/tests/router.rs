//! `api::router()` driven in process (`tower::ServiceExt::oneshot`), with no socket and no
//! `mailproof serve`: the JSON a caller sends reaches the application layer, and its answers and
//! refusals come back in the spec's shapes (§2.1, §7).

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use base64::Engine as _;
use serde_json::{json, Value};
use store::testing::{self, TestDb};
use tower::ServiceExt as _;

struct Service {
    router: axum::Router,
    blobs: store::Blobs,
    client: String,
    _db: TestDb,
    _blobs: tempfile::TempDir,
}

async fn service() -> Service {
    service_with(api::hits::HitSettings::default()).await
}

async fn service_with(hits: api::hits::HitSettings) -> Service {
    let (db, store) = testing::store(store::Backend::from_env()).await;
    let dir = tempfile::tempdir().expect("a directory for the blobs");
    let blobs = store::Blobs::open(&store::BlobsConfig::Local, dir.path()).expect("local blobs");
    let catalog = app::testing::catalog();
    let client = catalog.clients()[0].id.clone();
    for (key, password) in [("alice", "alice-pw"), ("bob", "bob-pw")] {
        let hash = api::hash_password(password).expect("hash");
        testing::add_account_with(
            &store,
            store::NewAccount {
                api_key: key.into(),
                password_hash: hash,
                plan: domain::Plan::Enterprise,
                monthly_test_limit: None,
                rate_limit_per_minute: None,
                allowed_clients: None,
                auto_inbox: None,
            },
        )
        .await;
    }
    let settings = api::ApiSettings {
        app: app::testing::settings(),
        metrics_token: None,
        metrics_port_public: false,
        hits,
    };
    let state = api::AppState::new(
        store,
        blobs.clone(),
        catalog,
        Vec::new(),
        settings,
        Default::default(),
    );
    Service {
        router: api::router(state),
        blobs,
        client,
        _db: db,
        _blobs: dir,
    }
}

fn basic(user: &str, password: &str) -> String {
    let creds = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {creds}")
}

/// One request; the status and the JSON body.
async fn call(s: &Service, req: Request<Body>) -> (StatusCode, Value) {
    let (status, bytes) = call_raw(s, req).await;
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, body)
}

fn get(path: &str, auth: Option<&str>) -> Request<Body> {
    let mut req = Request::get(path);
    if let Some(a) = auth {
        req = req.header(header::AUTHORIZATION, a);
    }
    req.body(Body::empty()).expect("a request")
}

/// Creates an email test "Spring sale" of `html` with `auth`'s credentials; its id.
async fn create_email_test(s: &Service, auth: &str, html: &str) -> String {
    let create = Request::post("/v5/email/tests")
        .header(header::AUTHORIZATION, auth)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"subject": "Spring sale", "html": html, "clients": [s.client]}).to_string(),
        ))
        .expect("a request");
    let (status, created) = call(s, create).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    created["id"].as_str().expect("an id").to_string()
}

#[tokio::test]
async fn a_test_created_over_the_router_is_its_owners_alone() {
    let s = service().await;
    let alice = basic("alice", "alice-pw");
    let id = create_email_test(&s, &alice, "<p>Hello</p>").await;

    let (status, info) = call(&s, get(&format!("/v5/email/tests/{id}"), Some(&alice))).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["subject"], "Spring sale");

    let (status, content) = call(
        &s,
        get(&format!("/v5/email/tests/{id}/content"), Some(&alice)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{content}");
    assert_eq!(content["content"], "<p>Hello</p>");

    // Another account hears what it would for a test that does not exist, in §7's shape.
    let bob = basic("bob", "bob-pw");
    let (status, refused) = call(&s, get(&format!("/v5/email/tests/{id}"), Some(&bob))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(refused["error"]["name"], "InvalidTestID", "{refused}");

    let (status, refused) = call(&s, get(&format!("/v5/email/tests/{id}"), None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    assert_eq!(refused["error"]["name"], "AccessDenied", "{refused}");
}

#[tokio::test]
async fn a_creation_refused_by_the_application_layer_answers_its_spec_name() {
    let s = service().await;
    let create = Request::post("/v5/email/tests")
        .header(header::AUTHORIZATION, basic("alice", "alice-pw"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"html": "<p>Hello</p>"}).to_string()))
        .expect("a request");
    let (status, refused) = call(&s, create).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["error"]["name"], "NoSubject", "{refused}");
}

/// Creates a test of `alice`'s for the service's client; its id.
async fn alices_test(s: &Service, alice: &str) -> String {
    let create = Request::post("/v5/email/tests")
        .header(header::AUTHORIZATION, alice)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"subject": "Shots", "html": "<p>Hi</p>", "clients": [s.client]}).to_string(),
        ))
        .expect("a request");
    let (status, created) = call(s, create).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    created["id"].as_str().expect("an id").to_string()
}

#[tokio::test]
async fn a_screenshot_is_served_to_its_owners_credentials_and_to_nobody_elses() {
    let s = service().await;
    let alice = basic("alice", "alice-pw");
    let id = alices_test(&s, &alice).await;
    let png = b"\x89PNG\r\n\x1a\n a stored picture".to_vec();
    let picture = domain::Picture::Shot(domain::Variant::Default);
    s.blobs
        .put(
            &store::screenshot_key(&id, &s.client, &picture),
            png.clone(),
        )
        .await
        .expect("stored");
    let path = format!("/screenshots/{id}/{}/default.png", s.client);

    let resp = s
        .router
        .clone()
        .oneshot(get(&path, Some(&alice)))
        .await
        .expect("the router answers");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "image/png");
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("a body");
    assert_eq!(body.as_ref(), png.as_slice());

    // Another account's credentials, and none without a signature, see a §7 refusal.
    for auth in [Some(basic("bob", "bob-pw")), None] {
        let (status, refused) = call(&s, get(&path, auth.as_deref())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{auth:?}: {refused}");
        assert_eq!(refused["error"]["name"], "Forbidden", "{refused}");
    }
}

/// The raw answer: status and body bytes (for the CSV export and `/metrics`).
async fn call_raw(s: &Service, req: Request<Body>) -> (StatusCode, Vec<u8>) {
    let resp = s
        .router
        .clone()
        .oneshot(req)
        .await
        .expect("the router answers");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 64 << 20)
        .await
        .expect("a body");
    (status, bytes.to_vec())
}

/// The `budget_campaign` refusals `/metrics` shows (a process-wide counter).
async fn budget_refusals(s: &Service) -> u64 {
    let (status, body) = call_raw(s, get("/metrics", None)).await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"mailproof_hits_unrecorded_total{reason="budget_campaign"} "#)
        })
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// The attack on the public hit endpoint: strangers send far more opens than the old 500-open
/// activation to a campaign in test mode, each with its own merge value. The campaign stays in
/// test mode with its hits; the flood stops at the campaign's storage budget and every refusal is
/// counted in `/metrics`; the export streams all that was stored (more than one page); and the
/// owner's activation still ends test mode.
#[tokio::test]
async fn strangers_opens_neither_activate_a_campaign_nor_pass_its_budget() {
    let s = service_with(api::hits::HitSettings {
        max_stored_per_campaign: 1_100,
        ..api::hits::HitSettings::default()
    })
    .await;
    let alice = basic("alice", "alice-pw");
    let create = Request::post("/v5/analytics/createcampaign")
        .header(header::AUTHORIZATION, &alice)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"name": "Spring", "total_subscribers": 100, "merge_tag": "*|EMAIL|*"})
                .to_string(),
        ))
        .expect("a request");
    let (status, created) = call(&s, create).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let guid = created["guid"].as_str().expect("a guid").to_string();
    let before = budget_refusals(&s).await;
    for i in 0..1_250 {
        let (status, _) = call_raw(
            &s,
            get(
                &format!("/t/{guid}/o.gif?d=stranger{i}%40example.org"),
                None,
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(budget_refusals(&s).await - before, 150);
    let (_, info) = call(
        &s,
        get(
            &format!("/v5/analytics/getcampaigninfo/{guid}"),
            Some(&alice),
        ),
    )
    .await;
    assert_eq!(info["status"], "testing", "{info}");
    let (status, csv) = call_raw(
        &s,
        get(
            &format!("/v5/analytics/getcampaignexport/{guid}"),
            Some(&alice),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let csv = String::from_utf8(csv).expect("UTF-8");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 1_100, "the header and every stored hit");
    assert!(lines[0].starts_with("time,kind,"));
    assert!(lines[1..]
        .iter()
        .all(|l| l.contains(",open,") && l.contains(",1,")));
    assert!(
        lines[1_100].contains("stranger1099@example.org"),
        "oldest first, in order"
    );
    let activate = Request::post(format!("/v5/analytics/activatecampaign/{guid}"))
        .header(header::AUTHORIZATION, &alice)
        .body(Body::empty())
        .expect("a request");
    let (status, activated) = call(&s, activate).await;
    assert_eq!(status, StatusCode::OK, "{activated}");
    assert_eq!(activated["status"], "current");
}

/// `GET …/tests/{id}/callback` answers another account's test exactly as it answers an id that
/// was never made (status, name, message but for the id), so it tells no one whether a test id
/// exists; the owner gets the state.
#[tokio::test]
async fn a_tests_callback_state_is_no_oracle_for_other_accounts() {
    let s = service().await;
    let alice = basic("alice", "alice-pw");
    let id = create_email_test(&s, &alice, "<p>Hi</p>").await;
    let (status, own) = call(
        &s,
        get(&format!("/v5/email/tests/{id}/callback"), Some(&alice)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(own["state"], "none");

    let bob = basic("bob", "bob-pw");
    let unknown = "0123456789abcdefghjkmnpqrs";
    let mut answers = Vec::new();
    for (path_id, kind) in [
        (id.as_str(), "email"),
        (unknown, "email"),
        (id.as_str(), "spam"),
    ] {
        let (status, body) = call(
            &s,
            get(&format!("/v5/{kind}/tests/{path_id}/callback"), Some(&bob)),
        )
        .await;
        let message = body["error"]["message"]
            .as_str()
            .expect("a §7 message")
            .replace(path_id, "ID");
        answers.push((status, body["error"]["name"].clone(), message));
    }
    assert_eq!(answers[0].0, StatusCode::NOT_FOUND);
    assert_eq!(answers[0].1, "InvalidTestID");
    assert_eq!(
        answers[0], answers[1],
        "another's test reads as an unknown one"
    );
    assert_eq!(answers[0], answers[2]);
}
