//! Spec §1 and §4.6: mail to an account's auto-inbox address becomes an email test, with the
//! clients, customer, reference and X-headers the message names.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

const KEY: &str = "inbox-key";
const AUTH: (&str, &str) = (KEY, "password-1");

async fn listed(s: &Server, query: &str) -> Vec<Value> {
    s.call("GET", &format!("/v5/tests?{query}"), Some(AUTH), None)
        .await
        .ok()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Sends `message` to `rcpt` over SMTP, then waits (at most 60 s) until `query` lists a test.
async fn deliver_and_wait(s: &MailServer, rcpt: &str, message: &[u8], query: &str) -> Vec<Value> {
    let mut conn = SmtpConn::connect(s.smtp).await;
    let (code, text) = conn
        .send("sender@example.org", &[rcpt.to_owned()], message)
        .await;
    assert_eq!(code, 250, "{text}");
    let started = Instant::now();
    loop {
        let found = listed(s, query).await;
        if !found.is_empty() {
            return found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no test made from the auto-inbox message within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// GET `path` as the inbox account; must succeed.
async fn get_ok(s: &Server, path: &str) -> Value {
    s.call("GET", path, Some(AUTH), None).await.ok().clone()
}

/// The client ids of an email test's results.
async fn result_clients(s: &Server, id: &str) -> BTreeSet<String> {
    get_ok(s, &format!("/v5/email/tests/{id}/results"))
        .await
        .as_object()
        .expect("results by client")
        .keys()
        .cloned()
        .collect()
}

#[tokio::test]
async fn auto_inbox_mail_becomes_an_email_test_with_exactly_its_x_svc_clients() {
    let s = MailServer::start().await;
    s.add_account(KEY, "enterprise", &["--auto-inbox", "Team-Inbox"]);
    let clients = get_ok(&s, "/v5/email/clients").await;
    let ids: Vec<&String> = clients["clients"]
        .as_object()
        .expect("clients by id")
        .keys()
        .collect();
    let (a, b) = (ids[ids.len() - 1], ids[ids.len() - 2]);

    let message = format!(
        "From: Maria <maria@acme.example>\r\nTo: team-inbox+cust-77@inbox.localhost\r\nSubject: =?utf-8?q?Spring_launch_=E2=9C=93?=\r\nX-SVC-CLIENTS: {a}, not a client!, {b}, unknown_client_id\r\nX-SVC-REFERENCE-ID: ref-9\r\nX-Campaign: spring-2026\r\nX-Team: growth\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSpring launch\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body><h1>Spring launch</h1></body></html>\r\n--alt--\r\n"
    );
    let entries = deliver_and_wait(
        &s,
        "TEAM-INBOX+cust-77@Inbox.Localhost",
        message.as_bytes(),
        "headers[X-Campaign]=spring-2026",
    )
    .await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let id = entries[0]["id"].as_str().expect("id");
    assert_eq!(entries[0]["type"], "email-test");
    assert_eq!(entries[0]["headers"]["X-Campaign"], "spring-2026");
    assert_eq!(entries[0]["headers"]["X-Team"], "growth");
    assert!(
        entries[0]["headers"].as_object().is_some_and(|h| h
            .keys()
            .all(|k| !k.to_ascii_lowercase().starts_with("x-svc"))),
        "X-SVC headers steer the test and are not stored: {}",
        entries[0]["headers"]
    );
    assert_eq!(
        result_clients(&s, id).await,
        BTreeSet::from([a.clone(), b.clone()]),
        "exactly the valid X-SVC-CLIENTS"
    );
    let content = get_ok(&s, &format!("/v5/email/tests/{id}/content")).await;
    assert!(
        content["content"]
            .as_str()
            .unwrap_or("")
            .contains("<h1>Spring launch</h1>"),
        "the HTML part is the test's content: {content}"
    );
    let info = get_ok(&s, &format!("/v5/email/tests/{id}")).await;
    assert_eq!(info["subject"], "Spring launch \u{2713}");
    // The inbox rows name the message's sender (this server draws no rows: it runs no engine).
    let started = Instant::now();
    let rows = loop {
        let rows = get_ok(&s, &format!("/v5/email/tests/{id}/inbox")).await;
        if rows["status"] == "complete" {
            break rows;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{rows}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(rows["sender"]["name"], "Maria", "{rows}");
    assert_eq!(rows["sender"]["address"], "maria@acme.example", "{rows}");
    for query in [
        "customer_id=cust-77",
        "reference_id=ref-9",
        "headers[X-Team]=growth",
    ] {
        let found = listed(&s, query).await;
        assert!(
            found.iter().any(|e| e["id"] == id),
            "{query} finds the test: {found:?}"
        );
    }
}

#[tokio::test]
async fn a_text_only_message_without_x_svc_clients_gets_the_default_clients() {
    let s = MailServer::start().await;
    s.add_account(KEY, "standard", &["--auto-inbox", "plain"]);
    let message = b"From: a@example.org\r\nTo: plain@inbox.localhost\r\nSubject: Plain <text>\r\nX-Campaign: ignored-below-enterprise\r\n\r\nHello & welcome <b>not bold</b>\r\n";
    let entries = deliver_and_wait(&s, "plain@inbox.localhost", message, "type=email-test").await;
    let id = entries[0]["id"].as_str().expect("id");
    assert_eq!(
        entries[0]["headers"],
        serde_json::json!({}),
        "X-headers are enterprise only"
    );
    let content = get_ok(&s, &format!("/v5/email/tests/{id}/content")).await;
    let html = content["content"].as_str().unwrap_or("");
    assert!(
        html.contains("Hello &amp; welcome &lt;b&gt;not bold&lt;/b&gt;") && html.contains("<html"),
        "text is wrapped in HTML, escaped: {html}"
    );
    let defaults: BTreeSet<String> = get_ok(&s, "/v5/email/clients/default").await["clients"]
        .as_array()
        .expect("default clients")
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        result_clients(&s, id).await,
        defaults,
        "the account's default clients"
    );
}
