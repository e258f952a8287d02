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
        hits: api::hits::HitSettings::default(),
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
    let resp = s
        .router
        .clone()
        .oneshot(req)
        .await
        .expect("the router answers");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("a body");
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

#[tokio::test]
async fn a_test_created_over_the_router_is_its_owners_alone() {
    let s = service().await;
    let alice = basic("alice", "alice-pw");
    let create = Request::post("/v5/email/tests")
        .header(header::AUTHORIZATION, &alice)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"subject": "Spring sale", "html": "<p>Hello</p>", "clients": [s.client]})
                .to_string(),
        ))
        .expect("a request");
    let (status, created) = call(&s, create).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().expect("an id").to_string();

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
