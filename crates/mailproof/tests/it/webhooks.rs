//! Issue 12, point 1: completion webhooks over real HTTP. A receiver on the allow-listed loopback
//! address 127.0.0.2 gets one signed POST per completed test, also when the service is killed
//! with SIGKILL while the delivery is in flight; a loopback target that is not allow-listed never
//! sees a connection and the callback is recorded as refused by the network policy. A spam test is
//! called back once its last filter has answered.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use testkit::http::{counting_listener, HttpStub, OnAccept, Request, Response};

use crate::support::*;

/// One Blink client: the cheapest real completion.
const CLIENT: &str = "gmail_chrome_web";
const RENDER_WAIT: Duration = Duration::from_secs(240);
const CALLBACK_WAIT: Duration = Duration::from_secs(90);

/// What the receiver does with the next request.
const ANSWER_200: u8 = 0;
/// Read the request, then hold the connection without answering.
const HOLD: u8 = 1;

/// A POST as the receiver read it.
#[derive(Clone, Debug)]
struct Received {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The status answered; `None` for a held request.
    answered: Option<u16>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or("", |(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the callback body is JSON")
    }
}

#[derive(Clone)]
struct Receiver {
    url: String,
    mode: Arc<AtomicU8>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// An HTTP receiver on 127.0.0.2 (Linux routes all of 127/8 to loopback).
    async fn start(mode: u8) -> Receiver {
        Receiver::start_on("127.0.0.2", mode).await
    }

    async fn start_on(ip: &str, mode: u8) -> Receiver {
        let ip: std::net::IpAddr = ip.parse().expect("an IP address");
        let mode = Arc::new(AtomicU8::new(mode));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (now, log) = (mode.clone(), received.clone());
        let stub = HttpStub::start(ip, move |r: Request| {
            let hold = now.load(Ordering::SeqCst) == HOLD;
            let headers = r
                .head
                .lines()
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                .collect();
            log.lock().expect("lock").push(Received {
                headers,
                body: r.body,
                answered: (!hold).then_some(200),
            });
            async move {
                if hold {
                    // Never answered: the service hangs up when it is killed.
                    std::future::pending::<()>().await;
                }
                Response::status(200)
            }
        })
        .await;
        Receiver {
            url: stub.url("/hook"),
            mode,
            received,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// Waits until `n` requests arrived.
    async fn wait_for(&self, n: usize) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < CALLBACK_WAIT,
                "{n} callback request(s) expected within {CALLBACK_WAIT:?}, got {}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn config(extra: &str) -> Options {
    Options {
        config: format!(
            "[fetch]\nallow = [\"127.0.0.2/32\"]\n{extra}\n[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n[webhooks]\nbase_delay = 1\nmax_delay = 2\n"
        ),
    }
}

/// Checks `X-Mailproof-Signature: t=<unix>,v1=<hex>` as a receiver would: HMAC-SHA256 over
/// "<t>.<body>" with the account's secret, and a recent timestamp.
fn assert_signed(r: &Received, secret: &str) {
    let header = r.header("X-Mailproof-Signature");
    let (t, v1) = header
        .split_once(",v1=")
        .and_then(|(t, v)| Some((t.strip_prefix("t=")?, v)))
        .unwrap_or_else(|| panic!("malformed signature header {header:?}"));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(&r.body);
    let expected = hex::encode(mac.finalize().into_bytes());
    assert_eq!(
        v1,
        expected,
        "signature of {}",
        String::from_utf8_lossy(&r.body)
    );
    let t: i64 = t.parse().expect("a unix timestamp");
    let now = chrono::Utc::now().timestamp();
    assert!((now - 600..=now + 5).contains(&t), "stale timestamp {t}");
}

async fn secret(s: &Server) -> String {
    let settings = s.get("/v5/account/webhook").await.ok().clone();
    let secret = settings["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.len() >= 32, "{secret}");
    secret
}

async fn create(s: &Server, callback_url: &str) -> String {
    s.post(
        "/v5/email/tests",
        &json!({"subject": "Hook", "html": "<p>Hello</p>", "clients": [CLIENT],
                "callback_url": callback_url}),
    )
    .await
    .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

async fn callback_state(s: &Server, id: &str, until: &str) -> Value {
    let start = Instant::now();
    loop {
        let state = s
            .get(&format!("/v5/email/tests/{id}/callback"))
            .await
            .ok()
            .clone();
        if state["state"] == until {
            return state;
        }
        assert!(
            start.elapsed() < CALLBACK_WAIT,
            "callback of {id} not {until}: {state}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_completed_email_test_is_called_back_once_signed() {
    let receiver = Receiver::start(ANSWER_200).await;
    let s = Server::start_with(config("")).await;
    let secret = secret(&s).await;
    let id = create(&s, &receiver.url).await;
    assert_eq!(
        s.get(&format!("/v5/email/tests/{id}/callback")).await.ok()["state"],
        "waiting"
    );
    s.wait_processed(&id, RENDER_WAIT).await;
    let got = receiver.wait_for(1).await;
    let state = callback_state(&s, &id, "delivered").await;
    // Time for a duplicate to show up, were one sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.received().len(), 1, "exactly one POST");
    let hook = &got[0];
    assert_signed(hook, &secret);
    assert_eq!(hook.header("Content-Type"), "application/json");
    assert_eq!(hook.header("X-Mailproof-Event"), "test.completed");
    let body = hook.json();
    assert_eq!(body["test_id"], id.as_str());
    assert_eq!(body["kind"], "email");
    assert_eq!(body["delivery_id"], hook.header("X-Mailproof-Delivery"));
    assert_eq!(body["delivery_id"], state["delivery_id"]);
    assert_eq!(body["counts"]["clients"], 1);
    assert_eq!(body["counts"]["complete"], 1);
    assert_eq!(body["clients"][0]["client"], CLIENT);
    assert_eq!(body["clients"][0]["status"], "Complete");
    assert!(body["completed_at"].as_i64().is_some_and(|t| t > 0));
    assert_eq!(state["attempts"], 1);
    assert_eq!(state["last_status"], 200);
}

#[tokio::test]
async fn a_callback_in_flight_survives_sigkill_and_arrives_once() {
    let receiver = Receiver::start(HOLD).await;
    // The held POST outlasts the lease many times over: only the heartbeat keeps it the
    // service's until the kill.
    let s = Server::start_with(config("timeout = 60")).await;
    let secret = secret(&s).await;
    let id = create(&s, &receiver.url).await;
    s.wait_processed(&id, RENDER_WAIT).await;
    let held = receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "no second POST while the first is held"
    );
    let dir = s.kill();
    let killed = Instant::now();
    receiver.mode.store(ANSWER_200, Ordering::SeqCst);
    // Restarted without engines: the callback is already queued in the database.
    let s = Server::start_in(
        dir,
        Options {
            config: "[fetch]\nallow = [\"127.0.0.2/32\"]\ntimeout = 3\n[webhooks]\nbase_delay = 1\nmax_delay = 2\n".into(),
        },
    )
    .await;
    let got = receiver.wait_for(2).await;
    let taken_over = killed.elapsed();
    println!("callback taken over {taken_over:?} after the kill (restart included)");
    // The bound: a killed holder's work is taken over within 15 s on every queue.
    assert!(
        taken_over <= Duration::from_secs(15),
        "taken over after {taken_over:?}"
    );
    let state = callback_state(&s, &id, "delivered").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let got_after = receiver.received();
    assert_eq!(got_after.len(), 2, "one held attempt and one delivery");
    assert_eq!(
        got.iter().filter(|r| r.answered == Some(200)).count(),
        1,
        "delivered once"
    );
    let delivered = &got[1];
    assert_signed(delivered, &secret);
    assert_eq!(
        delivered.json()["delivery_id"],
        held[0].json()["delivery_id"],
        "a redelivery carries the same delivery id"
    );
    assert_eq!(delivered.json()["test_id"], id.as_str());
    assert_eq!(state["attempts"], 2);
}

#[tokio::test]
async fn a_loopback_target_that_is_not_allow_listed_gets_no_connection() {
    let (addr, accepted) =
        counting_listener(std::net::Ipv4Addr::LOCALHOST.into(), OnAccept::Close).await;
    let port = addr.port();
    let s = Server::start_with(config("")).await;
    // An address literal the policy refuses is refused at once, in both kinds of test and as the
    // account's default.
    let literal = format!("http://127.0.0.1:{port}/hook");
    for (path, body) in [
        (
            "/v5/email/tests",
            json!({"subject": "S", "html": "<p>x</p>", "callback_url": literal}),
        ),
        (
            "/v5/spam/tests",
            json!({"subject": "S", "html": "<p>x</p>", "callback_url": literal}),
        ),
    ] {
        let r = s.post(path, &body).await;
        r.expect_error("InvalidParameter", 400);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("callback_url") && m.contains("internal address")),
            "{}",
            r.body
        );
    }
    s.put("/v5/account/webhook", &json!({"callback_url": literal}))
        .await
        .expect_error("InvalidParameter", 400);
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "<p>x</p>", "callback_url": "ftp://example.com/"}),
    )
    .await
    .expect_error("InvalidParameter", 400);

    // A name is judged when the callback is delivered (its addresses may change meanwhile). It
    // comes from the account's default here.
    let by_name = format!("http://localhost:{port}/hook");
    let settings = s
        .put("/v5/account/webhook", &json!({"callback_url": by_name}))
        .await
        .ok()
        .clone();
    assert_eq!(settings["callback_url"], by_name.as_str());
    let id = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "clients": [CLIENT]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    s.wait_processed(&id, RENDER_WAIT).await;
    let state = callback_state(&s, &id, "failed").await;
    assert_eq!(state["callback_url"], by_name.as_str());
    assert_eq!(state["attempts"], 1, "a refusal is not retried");
    assert!(
        state["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("refused by the network policy")),
        "{state}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "no connection to 127.0.0.1"
    );
}

#[tokio::test]
async fn a_spam_test_is_called_back_once_every_filter_answered() {
    // The mail harness allow-lists 127.0.0.1 (for its own relay); the receiver sits there.
    let receiver = Receiver::start_on("127.0.0.1", ANSWER_200).await;
    let s = MailServer::start_with("[webhooks]\nbase_delay = 1\nmax_delay = 2\n").await;
    let secret = secret(&s).await;
    let id = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "Team update", "html": "<p>Hello Jane, the report is ready.</p>",
                    "test_method": "svc", "callback_url": receiver.url}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let verdicts = spam_verdicts(&s, (ADMIN_KEY, ADMIN_PASS), &id, Duration::from_secs(180)).await;
    let got = receiver.wait_for(1).await;
    let state = s
        .get(&format!("/v5/spam/tests/{id}/callback"))
        .await
        .ok()
        .clone();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.received().len(), 1, "exactly one POST");
    assert_signed(&got[0], &secret);
    let body = got[0].json();
    assert_eq!(body["test_id"], id.as_str());
    assert_eq!(body["kind"], "spam");
    assert_eq!(body["counts"]["clients"], 0);
    assert_eq!(body["counts"]["filters"], verdicts.len());
    let sent: Vec<(Value, Value)> = body["spam"]
        .as_array()
        .expect("spam verdicts")
        .iter()
        .map(|v| (v["client"].clone(), v["spam"].clone()))
        .collect();
    let shown: Vec<(Value, Value)> = verdicts
        .iter()
        .map(|v| (v["client"].clone(), v["spam"].clone()))
        .collect();
    assert_eq!(
        sent, shown,
        "the summary carries the verdicts the API shows"
    );
    // And each mailbox provider's sender-requirements verdict, as the API answers it.
    let cards = s
        .get(&format!("/v5/spam/tests/{id}/requirements"))
        .await
        .ok()
        .clone();
    assert_eq!(cards["status"], "complete", "{cards}");
    let lines = |cards: &Value| -> Vec<(Value, Value, Value)> {
        cards
            .as_array()
            .expect("provider verdicts")
            .iter()
            .map(|p| {
                (
                    p["provider"].clone(),
                    p["verdict"].clone(),
                    p["summary"].clone(),
                )
            })
            .collect()
    };
    let (from_api, in_callback) = (lines(&cards["providers"]), lines(&body["requirements"]));
    assert_eq!(in_callback.len(), 3, "{body}");
    assert_eq!(in_callback, from_api);
    assert_eq!(state["delivery_id"], body["delivery_id"]);
}
