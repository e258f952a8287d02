//! Issue 32, scope 1, over real HTTP: `GET /v5/email/tests/<id>/inbox` starts the inbox rows and
//! answers them once drawn: one row per client family of the test, the subject and preview as
//! cut, the short preheader named with the body text that fills the row, pictures behind
//! presigned URLs; another account can neither read the rows nor fetch their pictures; a service
//! without engines says why no row was drawn and still names a missing preheader.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// An iPhone (WebKit, drawn by Chromium here: the one engine this server runs), Gmail's web
/// inbox (Blink, one line: the preview follows the subject) and Gmail's Android app.
const CLIENTS: [&str; 3] = ["iphone15_ios", "gmail_chrome_web", "gmail_android"];

const HTML: &str = "<!doctype html><html><body>\
    <div style=\"display:none;max-height:0;overflow:hidden\">Big news!!!!</div>\
    <p><a href=\"https://example.invalid/view\">View in browser</a></p>\
    <h1>Our autumn range is here</h1><p>Twelve new colours, made to last.</p></body></html>";

async fn wait_rows(s: &Server, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let body = s
            .get(&format!("/v5/email/tests/{id}/inbox"))
            .await
            .ok()
            .clone();
        if body["status"] == "complete" {
            return body;
        }
        assert_eq!(body["status"], "pending", "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "inbox rows not drawn after 120 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn inbox_rows_are_drawn_per_family_and_name_a_short_preheader() {
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    let subject = "🍂 Autumn is here: twelve new colours, made to last for years and years";
    let id = s
        .post(
            "/v5/email/tests",
            &json!({"subject": subject, "html": HTML, "clients": CLIENTS}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let path = format!("/v5/email/tests/{id}/inbox");

    s.add_account("intruder", "enterprise", &[]);
    s.call("GET", &path, Some(("intruder", "password-1")), None)
        .await
        .expect_error("InvalidTestID", 404);

    let report = wait_rows(&s, &id).await;
    assert_eq!(report["not_drawn"], Value::Null, "{report:#}");
    let rows = report["rows"].as_array().expect("rows");
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["apple_mail_iphone", "gmail_android", "gmail_web"]);
    assert_eq!(report["preview"]["preheader"], "Big news!!!!");
    for r in rows {
        let shown = r["subject"]["drawn"].as_str().expect("drawn subject");
        assert!(subject.starts_with(shown), "{r}");
        assert_eq!(r["sender"]["text"], "(no From header)");
        assert!(
            r["subject"]["used_width"].as_f64() <= r["subject"]["width"].as_f64(),
            "{r}"
        );
    }
    // Gmail's web inbox: the subject leaves the preview the rest of its one line.
    let web = &rows[2];
    assert_eq!(web["clients"], json!(["gmail_chrome_web"]));
    assert!(web["preview"]["width"].as_f64() < web["subject"]["width"].as_f64());

    // The short preheader, named on every row the body text reaches, with that text.
    let short: Vec<&Value> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["id"] == "short-preheader")
        .collect();
    let leaked: Vec<&Value> = rows.iter().filter(|r| !r["body_text"].is_null()).collect();
    assert!(!leaked.is_empty(), "{report:#}");
    assert_eq!(short.len(), leaked.len(), "{report:#}");
    let apple = &rows[0];
    let text = apple["body_text"]
        .as_str()
        .expect("Apple's row shows body text");
    assert!(text.starts_with("View in browser"), "{text}");
    let message = short
        .iter()
        .find(|w| w["row"] == "apple_mail_iphone")
        .and_then(|w| w["message"].as_str())
        .expect("Apple's warning");
    assert!(
        message.starts_with(&format!(
            "the preheader is 12 characters: Apple Mail (iPhone) fills the row with “{}",
            &text[..15]
        )),
        "{message}"
    );

    // Pictures: presigned like the screenshots, one per colour scheme of the family's clients.
    let pictures = apple["pictures"].as_array().expect("pictures");
    assert_eq!(pictures.len(), 1, "iphone15_ios is light only: {apple}");
    let url = pictures[0]["url"].as_str().expect("url");
    let fetched = s.http.get(url).send().await.expect("fetch");
    assert_eq!(fetched.status(), 200);
    let png = fetched.bytes().await.expect("png");
    let img = image::load_from_memory(&png).expect("a PNG");
    assert_eq!(img.width(), 372 * 3, "the iPhone row at its 3x scale");
    let tampered = url.replace("signature=", "signature=0");
    assert_eq!(
        s.http.get(&tampered).send().await.expect("fetch").status(),
        403
    );
    let bare = url.split('?').next().expect("path");
    let as_intruder = s
        .http
        .get(bare)
        .basic_auth("intruder", Some("password-1"))
        .send()
        .await
        .expect("fetch");
    assert_eq!(as_intruder.status(), 403);

    // Asked again, the same rows: drawn once.
    let again = wait_rows(&s, &id).await;
    assert_eq!(again["rows"].as_array().map(Vec::len), Some(3));
    assert_eq!(again["completed_at"], report["completed_at"]);
}

#[tokio::test]
async fn without_engines_the_rows_say_why_and_the_missing_preheader_is_still_named() {
    let s = Server::start().await;
    let html = "<html><body><p><a href=\"#\">View in browser</a></p><p>Hello</p></body></html>";
    let id = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "No engines", "html": html, "clients": ["gmail_android"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let report = wait_rows(&s, &id).await;
    let why = report["not_drawn"].as_str().expect("not_drawn");
    assert!(why.contains("[render] engines is empty"), "{why}");
    assert_eq!(report["rows"], json!([]));
    let w = &report["warnings"][0];
    assert_eq!(w["id"], "no-preheader");
    assert!(
        w["message"]
            .as_str()
            .is_some_and(|m| m.contains("“View in browser Hello”")),
        "{w}"
    );
}
