//! Issue 9 point 6: the spam filters start wherever the data directory is (here inside a 0700
//! directory, as under /root or a `mktemp -d`), one filter failing leaves the other working,
//! `/healthz` shows each component's state, and a result whose filter is down says so.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

const AUTH: (&str, &str) = (ADMIN_KEY, ADMIN_PASS);
/// rspamd's first start compiles its hyperscan cache (about 8 s on an idle machine).
const FILTER_WAIT: Duration = Duration::from_secs(180);

async fn health(s: &Server) -> Value {
    let r = s.http.get(s.url("/healthz")).send().await.expect("healthz");
    assert_eq!(
        r.status(),
        200,
        "healthz answers 200 while the service serves"
    );
    r.json().await.expect("healthz answers JSON")
}

/// Polls `/healthz` until `done` holds for its body; returns that body.
async fn health_until(s: &Server, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let body = health(s).await;
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < FILTER_WAIT,
            "{what} not seen in /healthz within {FILTER_WAIT:?} (are spamd and rspamd installed? scripts/setup.sh): {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A directory other users cannot enter, like /root or what `mktemp -d` makes.
fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    dir
}

/// A seed test sent to its whole address list; returns the test id.
async fn seed_test_sent(s: &MailServer) -> String {
    let created = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "Filters anywhere", "html": "<p>Hello</p>", "test_method": "seed"}),
        )
        .await
        .ok()
        .clone();
    let list = address_list(&created);
    let date = chrono::Utc::now().to_rfc2822();
    let message = format!(
        "From: Acme <news@mail.acme.example>\r\nTo: jane@example.org\r\nSubject: Filters anywhere\r\nDate: {date}\r\nMessage-ID: <{:x}@mail.acme.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello Jane, here is what we shipped this month.</p>\r\n",
        rand::random::<u64>()
    );
    let mut conn = SmtpConn::connect(s.smtp).await;
    let (code, text) = conn
        .send("news@mail.acme.example", &list, message.as_bytes())
        .await;
    assert_eq!(code, 250, "seed message accepted: {text}");
    created["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn all_six_filter_profiles_judge_mail_when_the_data_dir_is_inside_a_0700_directory() {
    let s = MailServer::start_in(private_dir(), "").await;
    let body = health_until(&s, "both filters ok", |b| {
        b["components"]["filters"]["spamassassin"]["state"] == "ok"
            && b["components"]["filters"]["rspamd"]["state"] == "ok"
    })
    .await;
    assert_eq!(body["status"], "ok", "{body:#}");
    assert_eq!(body["components"]["database"]["state"], "ok", "{body:#}");
    assert_eq!(body["components"]["smtp"]["state"], "ok", "{body:#}");
    assert_eq!(body["components"]["engines"]["state"], "off", "{body:#}");

    let id = seed_test_sent(&s).await;
    let verdicts = spam_verdicts(&s, AUTH, &id, FILTER_WAIT).await;
    assert_eq!(verdicts.len(), 6, "six filter profiles: {verdicts:#?}");
    for v in &verdicts {
        assert!(
            v["details"].as_str().unwrap_or("").contains("score"),
            "a real verdict with its score: {v}"
        );
    }
}

#[tokio::test]
async fn a_filter_that_cannot_start_is_shown_down_retried_and_named_in_its_results() {
    let s = MailServer::start_in(
        private_dir(),
        "[spam]\nrspamd_program = \"/nonexistent/rspamd\"\n",
    )
    .await;
    let body = health_until(&s, "spamassassin ok and rspamd down", |b| {
        b["components"]["filters"]["spamassassin"]["state"] == "ok"
            && b["components"]["filters"]["rspamd"]["state"] == "down"
    })
    .await;
    assert_eq!(body["status"], "degraded", "{body:#}");
    let rspamd = &body["components"]["filters"]["rspamd"];
    assert!(
        rspamd["reason"]
            .as_str()
            .unwrap_or("")
            .contains("/nonexistent/rspamd"),
        "the reason names the program: {rspamd}"
    );
    let next = rspamd["next_retry"].as_i64().expect("next_retry");
    assert!(
        next >= chrono::Utc::now().timestamp() - 1,
        "the next attempt is ahead: {rspamd}"
    );

    let id = seed_test_sent(&s).await;
    let started = Instant::now();
    let entries = loop {
        let r = s
            .call("GET", &format!("/v5/spam/tests/{id}"), Some(AUTH), None)
            .await;
        let entries = r.ok().as_array().cloned().unwrap_or_default();
        let settled = !entries.is_empty()
            && entries
                .iter()
                .all(|e| !e["spam"].is_null() || !e["details"].as_str().unwrap_or("").is_empty());
        if settled {
            break entries;
        }
        assert!(
            started.elapsed() < FILTER_WAIT,
            "results did not settle: {entries:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let (waiting, judged): (Vec<&Value>, Vec<&Value>) =
        entries.iter().partition(|e| e["spam"].is_null());
    assert!(
        !waiting.is_empty(),
        "the rspamd profiles wait: {entries:#?}"
    );
    assert!(
        !judged.is_empty(),
        "the other filters judged the mail: {entries:#?}"
    );
    for e in waiting {
        let details = e["details"].as_str().unwrap_or("");
        assert!(
            details.contains("rspamd") && details.contains("down"),
            "a waiting result says its filter is down: {e}"
        );
    }

    // It is tried again: a later attempt has a later next_retry.
    health_until(&s, "another rspamd attempt", |b| {
        b["components"]["filters"]["rspamd"]["next_retry"]
            .as_i64()
            .is_some_and(|n| n > next)
    })
    .await;
}
