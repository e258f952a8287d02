//! Tenant isolation: another account's test id is `InvalidTestID` on every test endpoint.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn another_accounts_test_ids_are_invalid_everywhere() {
    let s = Server::start().await;
    s.add_account("intruder", "enterprise", &[]);
    let email = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "x", "spam": {"test_method": "seed"}}),
        )
        .await
        .ok()["id"]
        .clone();
    let spam = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "S", "html": "x", "test_method": "seed"}),
        )
        .await
        .ok()["id"]
        .clone();
    let (e, sp) = (email.as_str().expect("id"), spam.as_str().expect("id"));
    let them = Some(("intruder", "password-1"));
    let body = json!({"clients": ["x"]});
    let calls = [
        ("GET", format!("/v5/email/tests/{e}")),
        ("DELETE", format!("/v5/email/tests/{e}")),
        ("GET", format!("/v5/email/tests/{e}/results")),
        ("GET", format!("/v5/email/tests/{e}/results/some_client")),
        ("PUT", format!("/v5/email/tests/{e}/results/reprocess")),
        ("GET", format!("/v5/email/tests/{e}/content")),
        ("GET", format!("/v5/email/tests/{e}/content/inlinecss")),
        ("GET", format!("/v5/email/tests/{e}/content/textonly")),
        ("GET", format!("/v5/email/tests/{e}/spam/results")),
        ("GET", format!("/v5/email/tests/{e}/spam/seedlist")),
        ("GET", format!("/v5/spam/tests/{sp}")),
        ("DELETE", format!("/v5/spam/tests/{sp}")),
        ("GET", format!("/v5/spam/tests/{sp}/seedlist")),
    ];
    for (method, path) in &calls {
        s.call(method, path, them, Some(&body))
            .await
            .expect_error("InvalidTestID", 404);
    }
    // The owner still has both, and the intruder's lists do not show them.
    s.get(&format!("/v5/email/tests/{e}")).await.ok();
    s.get(&format!("/v5/spam/tests/{sp}")).await.ok();
    assert_eq!(
        s.call("GET", "/v5/tests", them, None).await.ok(),
        &json!([])
    );
    // Screenshot URLs with the intruder's credentials are refused.
    let results = s
        .get(&format!("/v5/email/tests/{e}/results"))
        .await
        .ok()
        .clone();
    let url = results
        .as_object()
        .expect("results")
        .values()
        .next()
        .expect("a client")["screenshots"]["default"]
        .as_str()
        .expect("url")
        .to_string();
    let r = s
        .http
        .get(&url)
        .header("Authorization", basic("intruder", "password-1"))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 403);
}
