//! Spec §4.2 content calls: the source, CSS inlined, and text only.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn content_views_of_a_test() {
    let s = Server::start().await;
    let html = "<html><head><style>.hero { color: #ff0000; }</style></head><body><p class=\"hero\">Big news</p><p>Read <a href=\"https://example.com\">more</a></p></body></html>";
    let id = s
        .post("/v5/email/tests", &json!({"subject": "S", "html": html}))
        .await
        .ok()["id"]
        .clone();
    let id = id.as_str().expect("id");
    assert_eq!(
        s.get(&format!("/v5/email/tests/{id}/content")).await.ok()["content"],
        html
    );
    let inlined = s
        .get(&format!("/v5/email/tests/{id}/content/inlinecss"))
        .await
        .ok()["content"]
        .clone();
    let inlined = inlined.as_str().expect("content");
    assert!(inlined.contains("style=\"color: #ff0000"), "{inlined}");
    let text = s
        .get(&format!("/v5/email/tests/{id}/content/textonly"))
        .await
        .ok()["content"]
        .clone();
    let text = text.as_str().expect("content");
    assert!(text.contains("Big news") && text.contains("more"), "{text}");
    assert!(!text.contains("<p"), "{text}");
}
