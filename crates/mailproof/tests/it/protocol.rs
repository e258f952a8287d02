//! Spec §4 common rules, §7 and §9: versions, Accept, methods, unknown paths, JSON parsing.

use crate::support::*;

#[tokio::test]
async fn only_v5_and_v5_0_1_are_served() {
    let s = Server::start().await;
    for path in ["/v4/auth", "/v5.0.2/auth", "/v6/email/tests", "/v5.1/tests"] {
        s.get(path).await.expect_error("WrongVersion", 400);
    }
}

#[tokio::test]
async fn unknown_paths_are_not_found() {
    let s = Server::start().await;
    s.get("/v5/nothing/here")
        .await
        .expect_error("NotFound", 404);
    s.get("/elsewhere").await.expect_error("NotFound", 404);
}

#[tokio::test]
async fn a_wrong_method_is_bad_method_listing_the_allowed_ones() {
    let s = Server::start().await;
    let r = s.delete("/v5/auth").await;
    r.expect_error("BadMethod", 405);
    assert!(
        header(&r, "allow").contains("GET"),
        "Allow: {}",
        header(&r, "allow")
    );
    assert!(
        header(&r, "accept").contains("GET"),
        "Accept: {}",
        header(&r, "accept")
    );
    let r = s.put("/v5/email/tests", &serde_json::json!({})).await;
    r.expect_error("BadMethod", 405);
    assert!(header(&r, "accept").contains("POST"));
}

#[tokio::test]
async fn an_accept_header_without_json_is_no_accept() {
    let s = Server::start().await;
    let r = s
        .http
        .get(s.url("/v5/auth"))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .header("Accept", "text/html")
        .send()
        .await
        .expect("send");
    Reply::from(r).await.expect_error("NoAccept", 406);
    let ok = s
        .http
        .get(s.url("/v5/auth"))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .header("Accept", "text/html, application/json;q=0.5")
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn malformed_json_is_invalid_json_and_json_without_content_type_is_accepted() {
    let s = Server::start().await;
    let r = s
        .http
        .post(s.url("/v5/email/tests"))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .body("{\"subject\": ")
        .send()
        .await
        .expect("send");
    Reply::from(r).await.expect_error("InvalidJSON", 400);
    let r = s
        .http
        .post(s.url("/v5/email/tests"))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .body(r#"{"subject": "No content type", "html": "<p>hi</p>"}"#)
        .send()
        .await
        .expect("send");
    let r = Reply::from(r).await;
    assert!(r.ok()["id"].is_string());
}

#[tokio::test]
async fn the_openapi_document_lists_every_call_and_each_one_is_routed() {
    let s = Server::start().await;
    let doc = s.get("/openapi.json").await.ok().clone();
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 20);
    for (path, ops) in paths {
        for method in ops.as_object().expect("ops").keys() {
            let concrete = path
                .replace("{test_id}", "00000000000000000000000000")
                .replace("{client_id}", "some_client");
            let r = s
                .call(
                    &method.to_uppercase(),
                    &concrete,
                    Some((ADMIN_KEY, ADMIN_PASS)),
                    Some(&serde_json::json!({})),
                )
                .await;
            assert_ne!(
                r.error(),
                "NotFound",
                "{method} {path} is documented but not routed"
            );
            assert_ne!(
                r.error(),
                "BadMethod",
                "{method} {path} is documented but not routed"
            );
        }
    }
}
