//! Issue 17, point 4: one account's slow background work does not hold another account's. The
//! order of events decides (the other account's check is complete while every slow one is still
//! pending), not a measured time.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::http::{counting_listener, OnAccept};

use crate::support::*;

/// A host on 127.0.0.3 that accepts connections and never answers; counts them.
async fn silent_host() -> (String, Arc<AtomicUsize>) {
    let (addr, accepted) =
        counting_listener(Ipv4Addr::new(127, 0, 0, 3).into(), OnAccept::Hold).await;
    (format!("http://{addr}"), accepted)
}

async fn create_with_links(s: &Server, auth: (&str, &str), html: &str) -> String {
    let created = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(auth),
            Some(&json!({"subject": "links", "html": html})),
        )
        .await;
    let id = created.ok()["id"].as_str().expect("test id").to_owned();
    let path = format!("/v5/email/tests/{id}/links");
    let requested = s.call("PUT", &path, Some(auth), Some(&json!({}))).await;
    assert_eq!(requested.ok()["status"], "pending");
    id
}

async fn link_status(s: &Server, auth: (&str, &str), id: &str) -> Value {
    let path = format!("/v5/email/tests/{id}/links");
    s.call("GET", &path, Some(auth), None).await.ok().clone()
}

#[tokio::test]
async fn another_accounts_link_check_completes_while_one_accounts_slow_checks_run() {
    let (silent, accepted) = silent_host().await;
    let web = serve_static("<p>landing</p>", "text/html").await;
    // Two workers, as a small deployment might have: without the per-account cap, account A's
    // slow checks would take both.
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.0/8\"]\ntimeout = 5\n[dns]\nenabled = false\n\
                 [queues]\nlink_check_workers = 2\nlink_checks_per_account = 1\n"
            .into(),
    })
    .await;
    s.add_account("tenant-b", "enterprise", &[]);
    let a = (ADMIN_KEY, ADMIN_PASS);
    let b = ("tenant-b", "password-1");

    // A: three tests of 24 links to a host that never answers. Each check waits out 6 rounds of
    // 4 links at the 5 s timeout, about 30 s.
    let slow: String = (0..24)
        .map(|n| format!("<a href=\"{silent}/page{n}\">link {n}</a>\n"))
        .collect();
    let mut slow_ids = Vec::new();
    for _ in 0..3 {
        slow_ids.push(create_with_links(&s, a, &slow).await);
    }
    let start = Instant::now();
    while accepted.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "A's first link check never reached the silent host"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // B asks after all of A's checks, for one link that answers at once.
    let quick = create_with_links(&s, b, &format!("<a href=\"{web}/offer\">offer</a>")).await;
    let start = Instant::now();
    let report = loop {
        let body = link_status(&s, b, &quick).await;
        if body["status"] == "complete" {
            break body;
        }
        assert_eq!(body["status"], "pending", "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "B's link check not complete: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(report["links"][0]["status"], 200, "{report}");

    // B was served while A's first check was still waiting on the silent host: every one of A's
    // checks is still pending, so B waited for none of them.
    for id in &slow_ids {
        let body = link_status(&s, a, id).await;
        assert_eq!(
            body["status"], "pending",
            "A's check {id} finished (at {}) before B's one-link check",
            body["completed_at"]
        );
    }
    // A's second and third checks have not started: A holds one worker at a time. The silent
    // host has seen only the first check's connections (at most its 24 links).
    let seen = accepted.load(Ordering::SeqCst);
    assert!(
        seen <= 24,
        "{seen} connections: more than one of A's checks ran"
    );
}

/// One Blink client: the cheapest real completion, which queues a test's callback.
const CLIENT: &str = "gmail_chrome_web";

async fn create_with_callback(s: &Server, auth: (&str, &str), callback_url: &str) -> String {
    let created = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(auth),
            Some(
                &json!({"subject": "Hook", "html": "<p>Hello</p>", "clients": [CLIENT],
                          "callback_url": callback_url}),
            ),
        )
        .await;
    created.ok()["id"].as_str().expect("test id").to_owned()
}

async fn callback(s: &Server, auth: (&str, &str), id: &str) -> Value {
    let path = format!("/v5/email/tests/{id}/callback");
    s.call("GET", &path, Some(auth), None).await.ok().clone()
}

/// Waits until `done` holds for the callback of every test in `ids`.
async fn wait_callbacks(s: &Server, auth: (&str, &str), ids: &[String], done: fn(&Value) -> bool) {
    let start = Instant::now();
    for id in ids {
        loop {
            let state = callback(s, auth, id).await;
            if done(&state) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(240),
                "callback of {id}: {state}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn another_accounts_callback_is_delivered_while_one_accounts_receiver_hangs() {
    let (silent, accepted) = silent_host().await;
    let receiver = serve_static("ok", "text/plain").await;
    // A delivery waits up to 60 s for its receiver; a failed one is retried only after a minute.
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.0/8\"]\ntimeout = 60\n\
                 [render]\nengines = [\"blink\"]\nslots_per_engine = 1\n\
                 [webhooks]\nbase_delay = 60\nmax_delay = 120\n\
                 [queues]\ncallback_workers = 2\ncallbacks_per_account = 1\n"
            .into(),
    })
    .await;
    s.add_account("tenant-b", "enterprise", &[]);
    let a = (ADMIN_KEY, ADMIN_PASS);
    let b = ("tenant-b", "password-1");

    // A: three tests called back at a receiver that never answers.
    let mut hanging = Vec::new();
    for _ in 0..3 {
        hanging.push(create_with_callback(&s, a, &format!("{silent}/hook")).await);
    }
    wait_callbacks(&s, a, &hanging, |c| {
        matches!(c["state"].as_str(), Some("queued" | "leased"))
    })
    .await;
    let start = Instant::now();
    while accepted.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "A's first callback never reached its receiver"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // B's test completes after A's callbacks are all queued; its receiver answers at once.
    let quick = create_with_callback(&s, b, &format!("{receiver}/hook")).await;
    wait_callbacks(&s, b, std::slice::from_ref(&quick), |c| {
        c["state"] == "delivered"
    })
    .await;

    // B's callback went out while A's first was still waiting on its receiver, and A's other
    // two were not attempted: A holds one worker at a time, and B took the other.
    let seen = accepted.load(Ordering::SeqCst);
    let mut states = Vec::new();
    for id in &hanging {
        states.push(callback(&s, a, id).await);
    }
    assert_eq!(
        seen, 1,
        "A's receiver saw {seen} deliveries before B's callback: {states:?}"
    );
    for id in &hanging {
        let state = callback(&s, a, id).await;
        assert!(
            matches!(state["state"].as_str(), Some("queued" | "leased")),
            "{id}: {state}"
        );
    }
}

/// Render jobs: account A's test of twelve clients, then account B's of one, on one render slot.
/// B's screenshot is taken after at most two of A's (the one rendering when B asked, and at most
/// one more if B's job was queued just after a claim), not after all twelve.
#[tokio::test]
async fn another_accounts_screenshot_waits_for_at_most_one_of_a_large_test() {
    const A_CLIENTS: [&str; 12] = [
        "gmail_chrome_web",
        "gmail_mobile_web",
        "gmail_android",
        "gmail_android_dm",
        "outlook2013_win",
        "outlook2016_win",
        "outlook2019_win",
        "outlook2021_win",
        "outlook365_win",
        "outlook365_win_dm",
        "windows_mail",
        "outlook_new_win",
    ];
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    s.add_account("tenant-b", "enterprise", &[]);
    let b = ("tenant-b", "password-1");
    let large = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Large", "html": "<p>Hello</p>", "clients": A_CLIENTS}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("test id")
        .to_owned();
    let small = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(b),
            Some(&json!({"subject": "Small", "html": "<p>Hello</p>", "clients": [CLIENT]})),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("test id")
        .to_owned();
    let start = Instant::now();
    loop {
        let info = s
            .call("GET", &format!("/v5/email/tests/{small}"), Some(b), None)
            .await
            .ok()
            .clone();
        // `processing` is left out once no client is.
        if info["processing"].as_array().is_none_or(Vec::is_empty) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "B's test not processed: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let info = s
        .get(&format!("/v5/email/tests/{large}"))
        .await
        .ok()
        .clone();
    let waiting = info["processing"].as_array().map_or(0, Vec::len);
    assert!(
        waiting >= A_CLIENTS.len() - 2,
        "B's screenshot waited for {} of A's {} screenshots: {info}",
        A_CLIENTS.len() - waiting,
        A_CLIENTS.len()
    );
}
