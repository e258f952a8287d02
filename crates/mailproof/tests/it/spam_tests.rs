//! Spec §2.2, §2.7, §2.9 and §4.4: spam tests and seed lists.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn spam_clients_are_listed_with_type_and_description() {
    let s = Server::start().await;
    let list = s.get("/v5/spam/clients").await.ok().clone();
    let list = list.as_array().expect("array");
    assert!(list.len() >= 3, "several filter profiles: {list:?}");
    for c in list {
        assert!(c["client"].is_string() && c["description"].is_string());
        assert!(c["type"] == "b2b" || c["type"] == "b2c");
    }
}

#[tokio::test]
async fn a_seed_spam_test_hands_out_its_address_list() {
    let s = Server::start().await;
    let r = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "test_method": "seed"}),
        )
        .await;
    let body = r.ok().clone();
    let id = body["id"].as_str().expect("id");
    let list = body["address_list"].as_array().expect("address_list");
    assert!(!list.is_empty());
    assert!(list
        .iter()
        .all(|a| a.as_str().unwrap_or("").ends_with("@seeds.localhost")));
    assert_eq!(
        &s.get(&format!("/v5/spam/tests/{id}/seedlist"))
            .await
            .ok()
            .clone(),
        &body["address_list"]
    );
    let results = s.get(&format!("/v5/spam/tests/{id}")).await.ok().clone();
    assert_eq!(results.as_array().expect("array").len(), list.len());
}

#[tokio::test]
async fn a_reserved_seed_list_key_is_used_once() {
    let s = Server::start().await;
    let reserved = s.get("/v5/spam/seedlist").await.ok().clone();
    let key = reserved["key"].as_str().expect("key");
    let body = json!({"subject": "S", "html": "x", "test_method": "seed", "key": key});
    let created = s.post("/v5/spam/tests", &body).await.ok().clone();
    assert_eq!(created["address_list"], reserved["address_list"]);
    s.post("/v5/spam/tests", &body)
        .await
        .expect_error("BadRequest", 400);
    s.post(
        "/v5/spam/tests",
        &json!({"subject": "S", "html": "x", "test_method": "seed", "key": "unreserved-key"}),
    )
    .await
    .expect_error("BadRequest", 400);
}

#[tokio::test]
async fn spam_test_validation() {
    let s = Server::start().await;
    s.post("/v5/spam/tests", &json!({"html": "x"}))
        .await
        .expect_error("NoSubject", 400);
    s.post("/v5/spam/tests", &json!({"subject": "S"}))
        .await
        .expect_error("NoSource", 400);
    s.post(
        "/v5/spam/tests",
        &json!({"subject": "S", "html": "x", "test_method": "fax"}),
    )
    .await
    .expect_error("InvalidSpamType", 400);
    s.post(
        "/v5/spam/tests",
        &json!({"subject": "S", "html": "x", "test_method": "smtp"}),
    )
    .await
    .expect_error("BadRequest", 400);
    let svc = s
        .post("/v5/spam/tests", &json!({"subject": "S", "html": "x"}))
        .await
        .ok()
        .clone();
    assert!(
        svc.get("address_list").is_none(),
        "only the seed method shows addresses"
    );
    let id = svc["id"].as_str().expect("id");
    s.get(&format!("/v5/spam/tests/{id}/seedlist"))
        .await
        .expect_error("NoSeedList", 400);
}

#[tokio::test]
async fn spam_and_email_test_ids_do_not_cross() {
    let s = Server::start().await;
    let spam = s
        .post("/v5/spam/tests", &json!({"subject": "S", "html": "x"}))
        .await
        .ok()["id"]
        .clone();
    let spam = spam.as_str().expect("id");
    s.get(&format!("/v5/email/tests/{spam}"))
        .await
        .expect_error("InvalidTestID", 404);
    assert_eq!(
        s.delete(&format!("/v5/spam/tests/{spam}")).await.ok()["success"],
        true
    );
    s.get(&format!("/v5/spam/tests/{spam}"))
        .await
        .expect_error("InvalidTestID", 404);
}
