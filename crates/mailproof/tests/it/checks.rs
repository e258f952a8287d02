//! Issue 11, point 4: accessibility and content checks (`GET /v5/email/tests/<id>/checks`) over
//! real HTTP: the static findings at once, then the full report with the colour contrast Chromium
//! judged (on the right source line), the weight of an image served from an allow-listed loopback
//! address, a corpus email with known findings, and the errors.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::http::{counting_listener, HttpStub, OnAccept, Request, Response};

use crate::support::*;

/// Bytes of the image the test server sends: over the 500 KB "heavy image" mark.
const PHOTO_BYTES: usize = 600 * 1024;

/// A web server on 127.0.0.2 answering `/photo.jpg` with [`PHOTO_BYTES`] bytes after a second, so
/// that the check is surely still pending when first asked for.
async fn image_server() -> String {
    let stub = HttpStub::start(
        Ipv4Addr::new(127, 0, 0, 2).into(),
        |r: Request| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if r.target == "/photo.jpg" {
                Response::ok("image/jpeg", vec![0xffu8; PHOTO_BYTES])
            } else {
                Response::status(404)
                    .header("Content-Type", "image/jpeg")
                    .body(&b"no"[..])
            }
        },
    )
    .await;
    stub.base()
}

async fn create(s: &Server, html: &str) -> String {
    s.post(
        "/v5/email/tests",
        &json!({"subject": "checks", "html": html}),
    )
    .await
    .ok()["id"]
        .as_str()
        .expect("test id")
        .to_owned()
}

async fn wait_complete(s: &Server, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let body = s
            .get(&format!("/v5/email/tests/{id}/checks"))
            .await
            .ok()
            .clone();
        if body["status"] == "complete" {
            return body;
        }
        assert_eq!(body["status"], "pending", "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "content check not complete after 90 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `(id, severity, line)` of every finding.
fn found(report: &Value) -> Vec<(String, String, Option<u64>)> {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .map(|f| {
            assert!(f["message"].as_str().is_some_and(|m| m.len() > 20), "{f}");
            (
                f["id"].as_str().unwrap_or_default().to_owned(),
                f["severity"].as_str().unwrap_or_default().to_owned(),
                f["line"].as_u64(),
            )
        })
        .collect()
}

/// The findings of one check.
fn findings_of<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

fn has(report: &Value, id: &str, severity: &str, line: Option<u64>) -> bool {
    found(report).contains(&(id.to_owned(), severity.to_owned(), line))
}

fn email(web: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html>\n<head></head>\n<body>\n<h1>Sale</h1>\n<h3>Details</h3>\n\
         <p style=\"color:#999999\">Grey on white</p>\n<img src=\"{web}/photo.jpg\">\n\
         <a href=\"https://example.com/x\">click here</a>\n<table><tr><td>x</td></tr></table>\n\
         <p style=\"color:#000000\">Black on white</p>\n</body></html>\n"
    )
}

#[tokio::test]
async fn checks_are_pending_then_complete_with_contrast_weights_and_lines() {
    let web = image_server().await;
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.2/32\"]\n[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n"
            .into(),
    })
    .await;
    let html = email(&web);
    let id = create(&s, &html).await;
    let path = format!("/v5/email/tests/{id}/checks");

    s.add_account("intruder", "enterprise", &[]);
    s.call("GET", &path, Some(("intruder", "password-1")), None)
        .await
        .expect_error("InvalidTestID", 404);
    s.get("/v5/email/tests/not-a-test-id/checks")
        .await
        .expect_error("InvalidTestID", 404);

    // The first call starts the check and answers the static findings at once.
    let pending = s.get(&path).await.ok().clone();
    assert_eq!(pending["status"], "pending", "{pending:#}");
    for (check, severity, line) in [
        ("lang", "error", Some(2)),
        ("heading-order", "warning", Some(6)),
        ("img-alt", "error", Some(8)),
        ("link-text", "warning", Some(9)),
        ("table-role", "warning", Some(10)),
        ("title", "warning", None),
        ("preheader", "info", None),
    ] {
        assert!(has(&pending, check, severity, line), "{check}: {pending:#}");
    }
    assert!(!found(&pending).iter().any(|f| f.0 == "contrast"));
    assert_eq!(pending["summary"]["images"], Value::Null);
    assert_eq!(pending["summary"]["gmail_clipped"], false);

    let report = wait_complete(&s, &id).await;
    let contrast = findings_of(&report, "contrast");
    assert_eq!(contrast.len(), 1, "{report:#}");
    assert_eq!(contrast[0]["line"], 7);
    assert_eq!(contrast[0]["severity"], "error");
    assert_eq!(contrast[0]["contrast"]["foreground"], "#999999");
    assert_eq!(contrast[0]["contrast"]["background"], "#ffffff");
    assert_eq!(contrast[0]["contrast"]["required"], 4.5);
    assert!(
        has(&report, "image-weight", "warning", Some(8)),
        "{report:#}"
    );
    assert!(has(&report, "img-alt", "error", Some(8)), "{report:#}");
    let summary = &report["summary"];
    assert_eq!(summary["html_bytes"], html.len());
    assert_eq!(summary["images"][0]["bytes"], PHOTO_BYTES);
    assert_eq!(summary["images"][0]["line"], 8);
    assert_eq!(summary["image_bytes"], PHOTO_BYTES);
    assert_eq!(summary["total_bytes"], html.len() + PHOTO_BYTES);
    assert_eq!(summary["images_not_measured"], 0);
    assert_eq!(summary["gmail_clip_bytes"], 102 * 1024);

    // Asking again does not start it again: the same report comes back.
    let again = s.get(&path).await.ok().clone();
    assert_eq!(again, report);

    // A corpus email: Postmark's password reset has no lang, an empty <title>, a hidden
    // preheader, and #A8AAAF text (the masthead link, line 464; the footer, line 518) too pale for
    // its size on its light backgrounds.
    let corpus = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/postmark--password-reset.html"
    ))
    .expect("../shared/corpus beside the checkout");
    let id = create(&s, &corpus).await;
    let report = wait_complete(&s, &id).await;
    assert!(has(&report, "lang", "error", Some(2)), "{report:#}");
    let title = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|f| f["id"] == "title")
        .expect("a title finding");
    assert!(title["message"]
        .as_str()
        .is_some_and(|m| m.contains("empty")));
    assert!(
        !found(&report).iter().any(|f| f.0 == "preheader"),
        "{report:#}"
    );
    let pale: Vec<u64> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|f| f["id"] == "contrast" && f["contrast"]["foreground"] == "#a8aaaf")
        .filter_map(|f| f["line"].as_u64())
        .collect();
    assert!(pale.contains(&464) && pale.contains(&518), "{report:#}");
    assert_eq!(report["summary"]["html_bytes"], corpus.len());
}

#[tokio::test]
async fn without_engines_contrast_is_not_judged_and_says_why() {
    let s = Server::start().await;
    let id = create(&s, "<html lang=\"en\"><title>t</title><p>hi</p></html>").await;
    let report = wait_complete(&s, &id).await;
    let contrast = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|f| f["id"] == "contrast")
        .unwrap_or_else(|| panic!("no contrast finding in {report:#}"));
    assert_eq!(contrast["severity"], "info");
    assert!(
        contrast["message"]
            .as_str()
            .is_some_and(|m| m.contains("not judged") && m.contains("blink")),
        "{contrast}"
    );
    assert_eq!(report["summary"]["images"], json!([]));
    // A spam test is not an email test.
    let spam = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "test_method": "seed"}),
        )
        .await;
    let spam_id = spam.ok()["id"].as_str().expect("spam test id");
    s.get(&format!("/v5/email/tests/{spam_id}/checks"))
        .await
        .expect_error("InvalidTestID", 404);
}

/// Polls the checks of `id` as `auth` until complete.
async fn wait_complete_as(s: &Server, auth: (&str, &str), id: &str) -> Value {
    let start = Instant::now();
    loop {
        let path = format!("/v5/email/tests/{id}/checks");
        let body = s.call("GET", &path, Some(auth), None).await.ok().clone();
        if body["status"] == "complete" {
            return body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "content check not complete after 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn mail_to_the_auto_inbox_is_judged_for_its_plain_text_part() {
    let s = MailServer::start_with("[spam]\ndaemons = false\n").await;
    s.add_account("checks-inbox", "enterprise", &["--auto-inbox", "checks"]);
    let auth = ("checks-inbox", "password-1");
    let html_only = "From: a@example.org\r\nTo: checks@inbox.localhost\r\nSubject: html-only\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html lang=\"en\"><body><p>Hi</p></body></html>\r\n";
    let both = "From: a@example.org\r\nTo: checks@inbox.localhost\r\nSubject: with-text\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHi\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html lang=\"en\"><body><p>Hi</p></body></html>\r\n--alt--\r\n";
    let mut conn = SmtpConn::connect(s.smtp).await;
    for message in [html_only, both] {
        let (code, text) = conn
            .send(
                "a@example.org",
                &["checks@inbox.localhost".to_owned()],
                message.as_bytes(),
            )
            .await;
        assert_eq!(code, 250, "{text}");
    }
    let mut plain_text = Vec::new();
    for subject in ["html-only", "with-text"] {
        let start = Instant::now();
        let id = loop {
            let listed = s
                .call(
                    "GET",
                    &format!("/v5/tests?subject={subject}"),
                    Some(auth),
                    None,
                )
                .await
                .ok()
                .clone();
            if let Some(id) = listed[0]["id"].as_str() {
                break id.to_owned();
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no test made from the {subject} message within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let report = wait_complete_as(&s, auth, &id).await;
        plain_text.push(
            found(&report)
                .into_iter()
                .filter(|f| f.0 == "plain-text")
                .map(|f| f.1)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(plain_text, vec![vec!["warning".to_owned()], vec![]]);
}

/// A loopback server on 127.0.0.2 (allow-listed for the test) that only counts: nothing in the
/// hostile email below references it except its scripts and its meta refresh, so any request
/// arriving means something of the email ran or navigated.
async fn counting_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (addr, hits) = counting_listener(
        Ipv4Addr::new(127, 0, 0, 2).into(),
        OnAccept::Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    )
    .await;
    (format!("http://{addr}"), hits)
}

/// Issue 17: the contrast pass loads the email in Chromium; its scripts, handlers, nested
/// documents, dialogs, busy loops and meta refresh must do nothing there, while our own probe
/// still judges the page as authored.
#[tokio::test]
async fn hostile_email_runs_nothing_in_the_contrast_pass_and_is_still_judged() {
    let (trap, hits) = counting_server().await;
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.2/32\"]\n[render]\nengines = [\"blink\"]\nslots_per_engine = 1\nrender_timeout = 10\n[metrics]\ntoken = \"scrape-me\"\n"
            .into(),
    })
    .await;
    // If any script ran, the black paragraph would turn pale (a contrast failure the probe would
    // report) and the trap would be called.
    let paint = |tag: &str| {
        format!(
            "document.getElementById('black').style.color='#eeeeee';new Image().src='{trap}/js-{tag}';fetch('{trap}/fetch-{tag}');"
        )
    };
    use base64::Engine as _;
    let nested = base64::engine::general_purpose::STANDARD.encode(format!(
        "<body><script>{}top.location='{trap}/top-object';</script></body>",
        paint("object")
    ));
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><title>Hostile</title>\
         <meta http-equiv=\"refresh\" content=\"0;url={trap}/refresh\"></head>\n<body>\n\
         <p id=\"black\" style=\"color:#000000\">Black on white</p>\n\
         <p style=\"color:#999999\">Grey on white</p>\n\
         <script>{script}</script>\n\
         <img src=\"data:,\" alt=\"\" onerror=\"{onerror}\">\n\
         <object data=\"data:text/html;base64,{nested}\" type=\"text/html\" width=\"300\" height=\"50\"></object>\n\
         <iframe srcdoc=\"&lt;script&gt;{srcdoc}&lt;/script&gt;\" width=\"300\" height=\"50\"></iframe>\n\
         <script>alert(1);confirm('c');</script>\n\
         <script>while(true){{}}</script>\n\
         </body></html>\n",
        script = paint("script"),
        onerror = paint("onerror").replace('\'', "&#39;"),
        srcdoc = paint("srcdoc").replace('\'', "&#39;"),
    );
    let id = create(&s, &html).await;
    let report = wait_complete(&s, &id).await;
    let contrast = findings_of(&report, "contrast");
    // Our probe ran (in its own world) and saw the page as authored: the grey line fails, the
    // black one is untouched.
    assert_eq!(contrast.len(), 1, "{report:#}");
    assert_eq!(contrast[0]["severity"], "error", "{report:#}");
    assert_eq!(contrast[0]["line"], 6, "{report:#}");
    assert_eq!(contrast[0]["contrast"]["foreground"], "#999999");
    // Late timers (the refresh) get a moment before the count.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the hostile email reached the network from the engine"
    );
    let metrics = s
        .http
        .get(s.url("/metrics"))
        .bearer_auth("scrape-me")
        .send()
        .await
        .expect("scrape /metrics")
        .text()
        .await
        .expect("metrics body");
    let restarts: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("mailproof_engine_restarts_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(restarts, 0.0, "the engine restarted: {metrics}");
}
