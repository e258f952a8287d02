//! Spec §4.1 and §5: authentication, sandbox credentials, rate limits.

use crate::support::*;

#[tokio::test]
async fn auth_check_accepts_valid_credentials_on_every_form_of_the_call() {
    let s = Server::start().await;
    for path in ["/v5/auth", "/v5.0.1/auth", "/v5/analytics/analytics_auth"] {
        assert_eq!(s.get(path).await.ok()["success"], true, "{path}");
    }
}

#[tokio::test]
async fn wrong_or_missing_credentials_are_access_denied() {
    let s = Server::start().await;
    let r = s
        .call("GET", "/v5/auth", Some((ADMIN_KEY, "wrong")), None)
        .await;
    r.expect_error("AccessDenied", 401);
    assert!(header(&r, "www-authenticate").starts_with("Basic"));
    s.call("GET", "/v5/auth", Some(("nobody", "x")), None)
        .await
        .expect_error("AccessDenied", 401);
    s.call("GET", "/v5/email/clients", None, None)
        .await
        .expect_error("AccessDenied", 401);
    let garbled = s
        .http
        .get(s.url("/v5/auth"))
        .header("Authorization", "Basic !!!notbase64")
        .send()
        .await
        .expect("send");
    Reply::from(garbled).await.expect_error("AccessDenied", 401);
}

#[tokio::test]
async fn sandbox_credentials_authenticate_and_create_nothing() {
    let s = Server::start().await;
    let sb = Some(("sandbox", "sandbox"));
    assert_eq!(
        s.call("GET", "/v5/auth", sb, None).await.ok()["success"],
        true
    );
    let body = serde_json::json!({"subject": "Hi", "html": "<p>x</p>"});
    let created = s.call("POST", "/v5/email/tests", sb, Some(&body)).await;
    let id = created.ok()["id"].as_str().expect("id").to_string();
    assert_eq!(id.len(), 26);
    s.call("GET", &format!("/v5/email/tests/{id}"), sb, None)
        .await
        .expect_error("InvalidTestID", 404);
    assert_eq!(
        s.call("GET", "/v5/tests", sb, None).await.ok(),
        &serde_json::json!([])
    );
    // Validation still applies in the sandbox.
    s.call(
        "POST",
        "/v5/email/tests",
        sb,
        Some(&serde_json::json!({"html": "<p>x</p>"})),
    )
    .await
    .expect_error("NoSubject", 400);
}

#[tokio::test]
async fn exceeding_the_rate_limit_gives_rate_limited_with_retry_after() {
    let s = Server::start().await;
    s.add_account("slow", "standard", &["--rate-limit", "3"]);
    let auth = Some(("slow", "password-1"));
    for _ in 0..3 {
        s.call("GET", "/v5/auth", auth, None).await.ok();
    }
    let r = s.call("GET", "/v5/auth", auth, None).await;
    r.expect_error("RateLimited", 429);
    let wait: u64 = header(&r, "retry-after")
        .parse()
        .expect("Retry-After seconds");
    assert!((1..=60).contains(&wait));
    // Another account is not affected.
    s.get("/v5/auth").await.ok();
}
