//! Spec §2.3 and §4.5: lists and search.

use serde_json::{json, Value};

use crate::support::*;

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test]
async fn lists_are_newest_first_per_area_and_paged() {
    let s = Server::start().await;
    let mut email = Vec::new();
    for i in 0..3 {
        let r = s
            .post(
                "/v5/email/tests",
                &json!({"subject": format!("Newsletter {i}"), "html": "x"}),
            )
            .await;
        email.push(r.ok()["id"].as_str().expect("id").to_string());
    }
    let spam = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "Spam check", "html": "x"}),
        )
        .await
        .ok()["id"]
        .clone();
    let all = s.get("/v5/tests").await.ok().clone();
    assert_eq!(all.as_array().expect("array").len(), 4);
    assert_eq!(ids(&all)[0], spam.as_str().expect("id"), "newest first");
    let entry = &all[0];
    assert_eq!(entry["type"], "spam-test");
    assert!(entry["date"].is_i64());
    assert_eq!(entry["headers"], json!({}));
    let emails = s.get("/v5/email/tests").await.ok().clone();
    let mut want = email.clone();
    want.reverse();
    assert_eq!(ids(&emails), want);
    assert_eq!(ids(s.get("/v5/spam/tests").await.ok()).len(), 1);
    assert_eq!(ids(s.get("/v5/tests?type=email-test").await.ok()).len(), 3);
    assert_eq!(
        ids(s.get("/v5/tests?results=2&page=1").await.ok()),
        ids(&all)[..2].to_vec()
    );
    assert_eq!(
        ids(s.get("/v5/tests?results=2&page=2").await.ok()),
        ids(&all)[2..].to_vec()
    );
    assert_eq!(s.get("/v5/tests?results=2&page=3").await.ok(), &json!([]));
}

#[tokio::test]
async fn search_by_subject_and_date() {
    let s = Server::start().await;
    s.post(
        "/v5/email/tests",
        &json!({"subject": "Spring SALE now", "html": "x"}),
    )
    .await
    .ok();
    s.post(
        "/v5/email/tests",
        &json!({"subject": "Receipt", "html": "x"}),
    )
    .await
    .ok();
    assert_eq!(
        ids(s.get("/v5/email/tests?subject=spring%20sale").await.ok()).len(),
        1
    );
    assert_eq!(
        ids(s.get("/v5/tests?subject=%25").await.ok()).len(),
        0,
        "no wildcard semantics"
    );
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        ids(s.get(&format!("/v5/tests?from={}", now - 60)).await.ok()).len(),
        2
    );
    assert_eq!(
        ids(s.get(&format!("/v5/tests?to={}", now - 3600)).await.ok()).len(),
        0
    );
    assert_eq!(ids(s.get("/v5/tests?from=yesterday").await.ok()).len(), 2);
    assert_eq!(
        ids(s.get("/v5/tests?from=3%20days%20ago&to=now").await.ok()).len(),
        2
    );
    assert_eq!(ids(s.get("/v5/tests?to=last%20week").await.ok()).len(), 0);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(
        ids(s
            .get(&format!("/v5/tests?from={today}%2000:00:00"))
            .await
            .ok())
        .len(),
        2
    );
}

#[tokio::test]
async fn search_by_headers_customer_and_reference_is_enterprise_and_and_matched() {
    let s = Server::start().await;
    let a = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "A", "html": "x", "customer_id": "c1", "reference_id": "r1",
                    "headers": {"X-Campaign": "spring", "X-Team": "growth"}}),
        )
        .await
        .ok()["id"]
        .clone();
    s.post(
        "/v5/email/tests",
        &json!({"subject": "B", "html": "x", "headers": {"X-Campaign": "spring"}}),
    )
    .await
    .ok();
    assert_eq!(
        ids(s.get("/v5/tests?headers[X-Campaign]=spring").await.ok()).len(),
        2
    );
    let both = s
        .get("/v5/tests?headers%5BX-Campaign%5D=spring&headers[x-team]=growth")
        .await
        .ok()
        .clone();
    assert_eq!(ids(&both), vec![a.as_str().expect("id").to_string()]);
    assert_eq!(both[0]["headers"]["X-Team"], "growth");
    assert_eq!(ids(s.get("/v5/tests?customer_id=c1").await.ok()).len(), 1);
    assert_eq!(ids(s.get("/v5/tests?reference_id=r1").await.ok()).len(), 1);
    assert_eq!(
        ids(s.get("/v5/tests?reference_id=none").await.ok()).len(),
        0
    );

    s.add_account("std", "standard", &[]);
    s.call(
        "GET",
        "/v5/tests?headers[X-Campaign]=spring",
        Some(("std", "password-1")),
        None,
    )
    .await
    .expect_error("PermissionError", 403);
}

#[tokio::test]
async fn unparseable_search_parameters_are_invalid_parameter() {
    let s = Server::start().await;
    for q in [
        "results=0",
        "results=201",
        "results=ten",
        "page=0",
        "from=the%20dawn%20of%20time",
        "to=2024-13-45",
        "type=fax-test",
        "from=now&to=yesterday",
    ] {
        s.get(&format!("/v5/tests?{q}"))
            .await
            .expect_error("InvalidParameter", 400);
    }
    s.get("/v5/email/tests?type=spam-test")
        .await
        .expect_error("InvalidParameter", 400);
}
