//! Spec §2.1, §2.4, §2.5 and §4.2: creating email tests and reading them back.

use serde_json::{json, Value};

use crate::support::*;

async fn create(s: &Server, body: Value) -> String {
    let r = s.post("/v5/email/tests", &body).await;
    r.ok()["id"].as_str().expect("id").to_string()
}

#[tokio::test]
async fn a_new_test_runs_the_default_clients_and_reports_them_pending() {
    let s = Server::start().await;
    let id = create(&s, json!({"subject": "Hello", "html": "<p>Hi</p>"})).await;
    let defaults = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let info = s.get(&format!("/v5/email/tests/{id}")).await.ok().clone();
    assert_eq!(info["subject"], "Hello");
    assert!(info["date"].as_i64().expect("date") > 1_700_000_000);
    let mut processing: Vec<Value> = info["processing"].as_array().expect("processing").clone();
    let mut want: Vec<Value> = defaults.as_array().expect("defaults").clone();
    processing.sort_by_key(|v| v.to_string());
    want.sort_by_key(|v| v.to_string());
    assert_eq!(processing, want);
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    for (client, r) in results.as_object().expect("results") {
        assert_eq!(r["id"], client.as_str());
        assert_eq!(r["status"], "Pending");
        assert!(r["screenshots"]["default"]
            .as_str()
            .expect("url")
            .contains("/screenshots/"));
        assert!(r["thumbnail"].is_string());
        assert!(
            r.get("full_thumbnail").is_none(),
            "full_thumbnail is v5.0.1 only"
        );
        for field in [
            "display_name",
            "client",
            "os",
            "category",
            "engine",
            "rule_set",
        ] {
            assert!(r[field].is_string(), "{client} lacks {field}");
        }
    }
    let micro = s
        .get(&format!("/v5.0.1/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    for r in micro.as_object().expect("results").values() {
        assert!(r["full_thumbnail"].is_string());
    }
}

#[tokio::test]
async fn screenshot_keys_follow_image_blocking_and_rotation() {
    let s = Server::start().await;
    let clients = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let clients = clients.as_object().expect("clients");
    let rotating = clients
        .values()
        .find(|c| c["rotate"] == true && c["image_blocking"] == true)
        .expect("a client that rotates and blocks images");
    let plain = clients
        .values()
        .find(|c| c["rotate"] == false && c["image_blocking"] == true)
        .expect("a client that blocks images and does not rotate");
    let ids = [
        rotating["id"].as_str().expect("id"),
        plain["id"].as_str().expect("id"),
    ];
    let id = create(
        &s,
        json!({"subject": "S", "html": "<p>x</p>", "clients": ids, "image_blocking": "true"}),
    )
    .await;
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let keys = |c: &str| {
        let mut k: Vec<String> = results[c]["screenshots"]
            .as_object()
            .expect("shots")
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(ids[0]),
        ["default", "horizontal", "horizontal_no_images", "no_images"]
    );
    assert_eq!(keys(ids[1]), ["default", "no_images"]);
    let id2 = create(
        &s,
        json!({"subject": "S", "html": "<p>x</p>", "clients": ids[1]}),
    )
    .await;
    let r = s
        .get(&format!("/v5/email/tests/{id2}/results"))
        .await
        .ok()
        .clone();
    assert_eq!(
        r[ids[1]]["screenshots"].as_object().expect("shots").len(),
        1
    );
}

#[tokio::test]
async fn subject_and_source_are_required() {
    let s = Server::start().await;
    s.post("/v5/email/tests", &json!({"html": "<p>x</p>"}))
        .await
        .expect_error("NoSubject", 400);
    s.post(
        "/v5/email/tests",
        &json!({"subject": "   ", "html": "<p>x</p>"}),
    )
    .await
    .expect_error("NoSubject", 400);
    s.post("/v5/email/tests", &json!({"subject": "S"}))
        .await
        .expect_error("NoSource", 400);
}

#[tokio::test]
async fn encoded_subject_and_html_are_decoded_to_utf8() {
    let s = Server::start().await;
    // "Grüße" / "<p>Grüße</p>" in ISO-8859-1, base64.
    let id = create(
        &s,
        json!({"subject": "R3L832U=", "html": "PHA+R3L832U8L3A+", "transfer_encoding": "base64", "charset": "iso-8859-1"}),
    )
    .await;
    assert_eq!(
        s.get(&format!("/v5/email/tests/{id}")).await.ok()["subject"],
        "Grüße"
    );
    assert_eq!(
        s.get(&format!("/v5/email/tests/{id}/content")).await.ok()["content"],
        "<p>Grüße</p>"
    );
    let id = create(
        &s,
        json!({"subject": "Caf=C3=A9", "html": "<p style=3D\"color:red\">x</p>", "transfer_encoding": "quoted-printable"}),
    )
    .await;
    assert_eq!(
        s.get(&format!("/v5/email/tests/{id}")).await.ok()["subject"],
        "Café"
    );
    let bad = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Uw==", "html": "%%%", "transfer_encoding": "base64"}),
        )
        .await;
    bad.expect_error("BadRequest", 400);
    assert!(bad.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("html"));
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "transfer_encoding": "uuencode"}),
    )
    .await
    .expect_error("BadRequest", 400);
}

#[tokio::test]
async fn unknown_and_non_free_clients_are_refused() {
    let s = Server::start().await;
    let r = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "x", "clients": ["nope_client"]}),
        )
        .await;
    r.expect_error("InvalidClient", 400);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("nope_client"));
    let clients = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let paid = clients
        .as_object()
        .expect("clients")
        .values()
        .find(|c| c["free"] == false)
        .expect("a non-free client");
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "free_test": 1, "clients": [paid["id"]]}),
    )
    .await
    .expect_error("InvalidFreeClient", 400);
}

#[tokio::test]
async fn permissive_forms_are_understood() {
    let s = Server::start().await;
    let clients = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let two: Vec<&str> = clients
        .as_array()
        .expect("defaults")
        .iter()
        .take(2)
        .filter_map(Value::as_str)
        .collect();
    let id = create(
        &s,
        json!({"subject": 42, "html": "<p>x</p>", "clients": two.join(" , ").to_uppercase(), "image_blocking": "0", "free_test": "false"}),
    )
    .await;
    let info = s.get(&format!("/v5/email/tests/{id}")).await.ok().clone();
    assert_eq!(info["subject"], "42");
    assert_eq!(info["processing"].as_array().expect("processing").len(), 2);
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "image_blocking": "perhaps"}),
    )
    .await
    .expect_error("BadRequest", 400);
}

#[tokio::test]
async fn results_for_one_client_and_its_errors() {
    let s = Server::start().await;
    let defaults = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let first = defaults[0].as_str().expect("a default client").to_string();
    let id = create(&s, json!({"subject": "S", "html": "x", "clients": [first]})).await;
    let one = s
        .get(&format!("/v5/email/tests/{id}/results/{first}"))
        .await
        .ok()
        .clone();
    assert_eq!(one.as_object().expect("object").len(), 1);
    assert_eq!(one[&first]["id"], first.as_str());
    s.get(&format!("/v5/email/tests/{id}/results/not_in_test"))
        .await
        .expect_error("ClientNotFound", 404);
    s.get(&format!("/v5/email/tests/{id}/results/"))
        .await
        .expect_error("NoClient", 400);
}

#[tokio::test]
async fn reprocess_spends_the_quota_and_reports_per_client_reasons() {
    let s = Server::start().await;
    let defaults = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let c = defaults[0].as_str().expect("client").to_string();
    let id = create(&s, json!({"subject": "S", "html": "x", "clients": [c]})).await;
    let path = format!("/v5/email/tests/{id}/results/reprocess");
    s.put(&path, &json!({}))
        .await
        .expect_error("NoClients", 400);
    s.put(&path, &json!({"clients": ["elsewhere"]}))
        .await
        .expect_error("InvalidTestClient", 400);
    let mut last = i64::MAX;
    for _ in 0..5 {
        let r = s
            .put(&path, &json!({"clients": [c.clone(), "elsewhere"]}))
            .await
            .ok()
            .clone();
        assert_eq!(r[&c]["success"], true);
        assert_eq!(r[&c]["regional"], false);
        let remaining = r[&c]["remaining_reprocesses"].as_i64().expect("remaining");
        assert!(remaining < last);
        last = remaining;
        assert_eq!(r["elsewhere"]["success"], false);
        assert!(r["elsewhere"]["reason"]
            .as_str()
            .expect("reason")
            .contains("not in this test"));
    }
    let r = s
        .put(&path, &json!({"clients": [c.clone()]}))
        .await
        .ok()
        .clone();
    assert_eq!(r[&c]["success"], false);
    assert_eq!(r[&c]["remaining_reprocesses"], 0);
    assert!(r[&c]["reason"].is_string());
}

#[tokio::test]
async fn a_deleted_test_is_gone_for_good() {
    let s = Server::start().await;
    let id = create(&s, json!({"subject": "S", "html": "x"})).await;
    assert_eq!(
        s.delete(&format!("/v5/email/tests/{id}")).await.ok()["success"],
        true
    );
    s.get(&format!("/v5/email/tests/{id}"))
        .await
        .expect_error("InvalidTestID", 404);
    s.delete(&format!("/v5/email/tests/{id}"))
        .await
        .expect_error("InvalidTestID", 404);
    s.get("/v5/email/tests/not-an-id")
        .await
        .expect_error("InvalidTestID", 404);
}

#[tokio::test]
async fn a_url_source_is_fetched_under_the_network_policy() {
    let origin = serve_static(
        "<html><body><p>From the web</p></body></html>",
        "text/html; charset=utf-8",
    )
    .await;
    let open = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.1/32\"]\n".into(),
    })
    .await;
    let id = create(
        &open,
        json!({"subject": "S", "url": format!("{origin}/email.html")}),
    )
    .await;
    let content = open
        .get(&format!("/v5/email/tests/{id}/content"))
        .await
        .ok()["content"]
        .clone();
    assert!(content.as_str().expect("content").contains("From the web"));

    let strict = Server::start().await;
    let r = strict
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "url": format!("{origin}/email.html")}),
        )
        .await;
    r.expect_error("InvalidURL", 400);
    strict
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "url": "ftp://example.com/x"}),
        )
        .await
        .expect_error("InvalidURL", 400);
}

#[tokio::test]
async fn spam_processing_alongside_an_email_test() {
    let s = Server::start().await;
    let plain = create(&s, json!({"subject": "S", "html": "x"})).await;
    s.get(&format!("/v5/email/tests/{plain}/spam/results"))
        .await
        .expect_error("NoSpamResults", 400);
    s.get(&format!("/v5/email/tests/{plain}/spam/seedlist"))
        .await
        .expect_error("NoSeedList", 400);

    let svc = create(
        &s,
        json!({"subject": "S", "html": "x", "spam": {"test_method": "svc"}}),
    )
    .await;
    let results = s
        .get(&format!("/v5/email/tests/{svc}/spam/results"))
        .await
        .ok()
        .clone();
    let spam_clients = s.get("/v5/spam/clients").await.ok().clone();
    assert_eq!(
        results.as_array().expect("array").len(),
        spam_clients.as_array().expect("array").len()
    );
    for r in results.as_array().expect("array") {
        assert!(r["spam"].is_null(), "no filter has returned yet");
        assert!(r["client"].is_string() && r["type"].is_string());
    }
    s.get(&format!("/v5/email/tests/{svc}/spam/seedlist"))
        .await
        .expect_error("NoSeedList", 400);

    let r = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "x", "spam": {"test_method": "seed"}}),
        )
        .await;
    let body = r.ok().clone();
    let list = body["spam"]["address_list"]
        .as_array()
        .expect("address_list");
    assert_eq!(list.len(), spam_clients.as_array().expect("array").len());
    let id = body["id"].as_str().expect("id");
    let seeds = s
        .get(&format!("/v5/email/tests/{id}/spam/seedlist"))
        .await
        .ok()
        .clone();
    assert_eq!(&seeds, &body["spam"]["address_list"]);

    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "spam": {"test_method": "carrier-pigeon"}}),
    )
    .await
    .expect_error("InvalidSpamType", 400);
}

#[tokio::test]
async fn enterprise_fields_need_an_enterprise_plan() {
    let s = Server::start().await;
    s.add_account("std", "standard", &[]);
    let std = Some(("std", "password-1"));
    for body in [
        json!({"subject": "S", "html": "x", "reference_id": "r1"}),
        json!({"subject": "S", "html": "x", "customer_id": "c1"}),
        json!({"subject": "S", "html": "x", "headers": {"X-Campaign": "spring"}}),
    ] {
        s.call("POST", "/v5/email/tests", std, Some(&body))
            .await
            .expect_error("PermissionError", 403);
    }
    let r = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "x", "reference_id": "r1", "customer_id": "c1"}),
        )
        .await;
    assert_eq!(r.ok()["reference_id"], "r1");
    assert_eq!(r.body["customer_id"], "c1");
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "headers": {"X-SVC-CLIENTS": "a"}}),
    )
    .await
    .expect_error("BadRequest", 400);
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "x", "headers": {"Campaign": "a"}}),
    )
    .await
    .expect_error("BadRequest", 400);
}

#[tokio::test]
async fn reseller_plans_need_a_customer_id_and_respect_the_monthly_limit() {
    let s = Server::start().await;
    s.add_account("resell", "reseller", &["--monthly-test-limit", "2"]);
    let auth = Some(("resell", "password-1"));
    s.call(
        "POST",
        "/v5/email/tests",
        auth,
        Some(&json!({"subject": "S", "html": "x"})),
    )
    .await
    .expect_error("MissingCustomerID", 400);
    let body = json!({"subject": "S", "html": "x", "customer_id": "cust-1"});
    for _ in 0..2 {
        s.call("POST", "/v5/email/tests", auth, Some(&body))
            .await
            .ok();
    }
    s.call("POST", "/v5/email/tests", auth, Some(&body))
        .await
        .expect_error("TestLimitReached", 403);
    // Another customer has its own allowance.
    s.call(
        "POST",
        "/v5/email/tests",
        auth,
        Some(&json!({"subject": "S", "html": "x", "customer_id": "cust-2"})),
    )
    .await
    .ok();
}

#[tokio::test]
async fn a_sandbox_test_is_answered_but_not_created() {
    let s = Server::start().await;
    let id = create(&s, json!({"subject": "S", "html": "x", "sandbox": true})).await;
    s.get(&format!("/v5/email/tests/{id}"))
        .await
        .expect_error("InvalidTestID", 404);
    assert_eq!(s.get("/v5/tests").await.ok(), &json!([]));
}

#[tokio::test]
async fn screenshot_urls_refuse_while_the_file_does_not_exist_and_with_a_bad_signature() {
    let s = Server::start().await;
    let defaults = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let c = defaults[0].as_str().expect("client").to_string();
    let id = create(&s, json!({"subject": "S", "html": "x", "clients": [c]})).await;
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let url = results[&c]["screenshots"]["default"]
        .as_str()
        .expect("url")
        .to_string();
    let pending = s.http.get(&url).send().await.expect("get");
    assert_eq!(
        pending.status(),
        403,
        "a screenshot not yet taken answers 403"
    );
    let tampered = url.replace("signature=", "signature=00");
    assert_eq!(
        s.http.get(&tampered).send().await.expect("get").status(),
        403
    );
    let unsigned = url.split('?').next().expect("path").to_string();
    assert_eq!(
        s.http.get(&unsigned).send().await.expect("get").status(),
        403
    );
}

#[tokio::test]
async fn an_email_over_the_renderers_limit_is_refused_when_created_not_bounced_later() {
    let s = Server::start().await;
    let html = format!("<p>{}</p>", "x".repeat(10 * 1024 * 1024));
    let r = s
        .post("/v5/email/tests", &json!({"subject": "Big", "html": html}))
        .await;
    r.expect_error("BadRequest", 400);
    let message = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("limit"), "{message}");
    let listed = s.get("/v5/email/tests").await.ok().clone();
    assert_eq!(listed, json!([]), "nothing was created");
}
