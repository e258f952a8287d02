//! Issue 4 end to end: spam tests by the seed, smtp and svc methods over real SMTP on loopback,
//! judged by the real filters (spamd, rspamd, the built-in analyzer) that `mailproof serve` starts.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use testkit::smtp::SmtpStub;

use crate::support::*;

const AUTH: (&str, &str) = (ADMIN_KEY, ADMIN_PASS);
const RELAY_USER: &str = "relay-user";
const RELAY_PASSWORD: &str = "relay-secret";
/// Every filter of every test must have answered by then (spamd needs ~50 ms a scan; the
/// built-in analyzer's DNS checks are bounded too).
const VERDICT_WAIT: Duration = Duration::from_secs(180);

const CLEAN_SUBJECT: &str = "Acme monthly: what we shipped in November";
const CLEAN_HTML: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Acme monthly</title></head>
<body style="font-family:Arial,sans-serif;color:#222">
<table width="600" cellpadding="0" cellspacing="0" align="center"><tr><td>
<h1>November at Acme</h1>
<p>Hello Jane,</p>
<p>This month the team finished the new reporting screens you asked about in the spring survey.
Reports now load faster, can be shared with colleagues, and keep their filters when you come back.</p>
<p>We also fixed the calendar export that some of you reported, and the mobile app remembers your
last project again.</p>
<h2>Coming next</h2>
<p>In December we will work on comments on shared reports. If you want to help us test it early,
just reply to this email and tell us how your team uses reports today.</p>
<p>Thanks for reading, and see you next month.</p>
<p>Maria from the Acme product team</p>
<p style="font-size:12px;color:#666">You receive this newsletter because you have an Acme account.
You can change your email preferences in your account settings.</p>
</td></tr></table></body></html>
"#;

const SPAM_SUBJECT: &str = "FREE VIAGRA!!! 100% GUARANTEED $$$ CASH NOW";
const SPAM_HTML: &str = r##"<html><body bgcolor="#ff0000">
<p><b><font size="7">BUY VIAGRA AND CIALIS ONLINE - NO PRESCRIPTION NEEDED!!!</font></b></p>
<p>Dear friend, you have been selected as the WINNER of $1,000,000 US DOLLARS in our lottery!!!
100% GUARANTEED, RISK FREE, act now! Limited time offer, click below to claim your prize money.</p>
<p><a href="http://203.0.113.7/claim.php?id=1">CLICK HERE TO CLAIM YOUR CASH $$$</a></p>
<p>Cheap VIAGRA, CIALIS, LEVITRA, XANAX and VALIUM at the lowest prices from our online pharmacy.
No doctor visit, no prescription, discreet shipping worldwide! Enlarge your penis today, 100%
satisfaction guaranteed or your money back!!!</p>
<p>Make money fast working from home!!! Earn $5000 per week, no experience needed. This is not spam,
you signed up for this offer. To be removed from our list click <a href="http://203.0.113.7/remove">here</a>.</p>
<p><a href="http://203.0.113.7/buy">ORDER NOW</a> <a href="http://203.0.113.7/buy">ORDER NOW</a></p>
</body></html>
"##;

/// A caller's provider: AUTH required, each message relayed to the service before 250.
struct RelayServer {
    port: u16,
}

impl RelayServer {
    async fn start(relay_to: std::net::SocketAddr) -> RelayServer {
        let stub = SmtpStub::builder()
            .hostname("relay.example.net")
            .auth(RELAY_USER, RELAY_PASSWORD)
            .relay_to(relay_to)
            .start()
            .await;
        RelayServer {
            port: stub.addr.port(),
        }
    }

    fn smtp_info(&self, password: &str) -> Value {
        json!({"host": "127.0.0.1", "port": self.port, "secure": "",
               "username": RELAY_USER, "password": password})
    }
}

/// A complete message as a sender's own system would send it to the seed list.
fn seed_message(subject: &str, html: &str, from: &str) -> Vec<u8> {
    let date = chrono::Utc::now().to_rfc2822();
    let id = rand::random::<u64>();
    format!(
        "From: {from}\r\nTo: Jane Doe <jane@example.org>\r\nSubject: {subject}\r\nDate: {date}\r\nMessage-ID: <{id:x}@mail.acme.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n{}",
        html.replace('\n', "\r\n")
    )
    .into_bytes()
}

fn count(verdicts: &[Value], spam: i64) -> usize {
    verdicts.iter().filter(|v| v["spam"] == spam).count()
}

#[track_caller]
fn assert_mostly(verdicts: &[Value], spam: i64, what: &str) {
    assert!(
        count(verdicts, spam) * 2 > verdicts.len(),
        "{what}: expected spam={spam} from most of the {} filters, got {verdicts:#?}",
        verdicts.len()
    );
}

#[tokio::test]
async fn clean_and_spammy_mail_gets_a_verdict_from_every_filter_by_all_three_methods() {
    let s = MailServer::start().await;
    let relay = RelayServer::start(s.smtp).await;
    let mut tests = Vec::new();
    for (kind, subject, html) in [
        ("clean", CLEAN_SUBJECT, CLEAN_HTML),
        ("spammy", SPAM_SUBJECT, SPAM_HTML),
    ] {
        // seed: the caller sends the message to the address list itself.
        let created = create_spam_test(&s, subject, html, "seed").await;
        let list = address_list(&created);
        let mut conn = SmtpConn::connect(s.smtp).await;
        let (code, text) = conn
            .send(
                "news@mail.acme.example",
                &list,
                &seed_message(subject, html, "Acme News <news@mail.acme.example>"),
            )
            .await;
        assert_eq!(code, 250, "seed message accepted: {text}");
        tests.push((kind, "seed", created["id"].as_str().expect("id").to_owned()));

        // smtp: the service sends through the caller's server, which relays to our listener.
        let created = s
            .post(
                "/v5/spam/tests",
                &json!({"subject": subject, "html": html, "test_method": "smtp",
                        "from_address": "news@mail.acme.example",
                        "smtp_info": relay.smtp_info(RELAY_PASSWORD)}),
            )
            .await
            .ok()
            .clone();
        tests.push((kind, "smtp", created["id"].as_str().expect("id").to_owned()));

        // svc: the service sends from its own sending path.
        let created = create_spam_test(&s, subject, html, "svc").await;
        tests.push((kind, "svc", created["id"].as_str().expect("id").to_owned()));
    }
    for (kind, method, id) in &tests {
        let verdicts = spam_verdicts(&s, AUTH, id, VERDICT_WAIT).await;
        assert!(verdicts.len() >= 3, "{method}: {verdicts:?}");
        for v in &verdicts {
            assert!(
                [-1, 0, 1].contains(&v["spam"].as_i64().unwrap_or(9)),
                "{method}: {v}"
            );
            assert!(
                v["details"].as_str().unwrap_or("").contains("score"),
                "details carry the score: {v}"
            );
        }
        let expected = if *kind == "clean" { -1 } else { 1 };
        assert_mostly(&verdicts, expected, &format!("{kind} message by {method}"));

        // Each method's test has its sender-requirements report, judged on how its mail came:
        // this listener offers no STARTTLS, so seed and smtp mail say nothing of their
        // sender's TLS; svc mail is mailproof's own.
        let report = s
            .get(&format!("/v5/spam/tests/{id}/requirements"))
            .await
            .ok()
            .clone();
        assert_eq!(report["status"], "complete", "{method}: {report}");
        assert_eq!(report["method"], *method);
        let gmail = &report["providers"][0];
        let tls = gmail["rules"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["rule"] == "tls"))
            .unwrap_or_else(|| panic!("Gmail asks for TLS: {gmail}"));
        if *method == "svc" {
            assert_eq!(tls["status"], "not_applicable", "{tls}");
        } else {
            assert_eq!(tls["status"], "not_checked", "{method}: {tls}");
            assert!(
                tls["seen"]
                    .as_str()
                    .is_some_and(|t| t.contains("offers no STARTTLS")),
                "{tls}"
            );
        }
    }
}

#[tokio::test]
async fn the_smtp_method_reports_refused_credentials_and_unreachable_hosts() {
    let s = MailServer::start().await;
    let relay = RelayServer::start(s.smtp).await;
    s.post(
        "/v5/spam/tests",
        &json!({"subject": "S", "html": "<p>x</p>", "test_method": "smtp",
                "smtp_info": relay.smtp_info("wrong-password")}),
    )
    .await
    .expect_error("SMTPAuthenticationError", 502);
    s.post(
        "/v5/spam/tests",
        &json!({"subject": "S", "html": "<p>x</p>", "test_method": "smtp",
                "smtp_info": {"host": "no-such-host.invalid", "port": 25}}),
    )
    .await
    .expect_error("SMTPError", 502);
    // The same through an email test's `spam` part.
    s.post(
        "/v5/email/tests",
        &json!({"subject": "S", "html": "<p>x</p>",
                "spam": {"test_method": "smtp", "smtp_info": relay.smtp_info("wrong-password")}}),
    )
    .await
    .expect_error("SMTPAuthenticationError", 502);
}

#[tokio::test]
async fn only_seed_and_auto_inbox_addresses_are_accepted_never_a_relay() {
    let s = MailServer::start().await;
    let created = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "test_method": "seed"}),
        )
        .await
        .ok()
        .clone();
    let good = created["address_list"][0]
        .as_str()
        .expect("an address")
        .to_owned();
    let (key, rest) = good.split_once('.').expect("key.slug@domain");
    let mut conn = SmtpConn::connect(s.smtp).await;
    let (code, text) = conn.cmd("MAIL FROM:<a@example.org>").await;
    assert_eq!(code, 250, "{text}");
    for refused in [
        "someone@example.org".to_owned(),
        format!("zzzzzzzzzzzz.{rest}"),
        format!("{key}.no-such-profile@seeds.localhost"),
        "nobody@inbox.localhost".to_owned(),
    ] {
        let (code, text) = conn.cmd(&format!("RCPT TO:<{refused}>")).await;
        assert_eq!(code, 550, "{refused} must be refused: {text}");
        assert!(text.contains("5.1.1"), "{text}");
    }
    let (code, text) = conn
        .cmd(&format!("RCPT TO:<{}>", good.to_uppercase()))
        .await;
    assert_eq!(code, 250, "seed addresses are case-insensitive: {text}");
}

/// A seed test's id and address list.
async fn seed_test(s: &Server) -> (String, Vec<String>) {
    let created = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "Robustness", "html": "<p>x</p>", "test_method": "seed"}),
        )
        .await
        .ok()
        .clone();
    let list = address_list(&created);
    (created["id"].as_str().expect("id").to_owned(), list)
}

/// How many stored inbound messages end with exactly `message` (what the sender sent, after our
/// `Received:` header).
fn stored_intact(s: &Server, message: &[u8]) -> u64 {
    let hex: String = message.iter().map(|b| format!("{b:02X}")).collect();
    let n = message.len();
    let out = match database_url(s.dir.path()) {
        Some(url) => Command::new("psql")
            .args(["-tA", &url, "-c"])
            .arg(format!(
                "SELECT count(*) FROM inbound_messages WHERE length(data) >= {n} \
                 AND upper(encode(substring(data from length(data) - {n} + 1), 'hex')) = '{hex}';"
            ))
            .output()
            .expect("psql runs (install it with scripts/setup.sh)"),
        None => Command::new("sqlite3")
            .arg(s.data_dir().join("mailproof.sqlite"))
            .arg(format!(
                "SELECT count(*) FROM inbound_messages WHERE hex(substr(data, -{n})) = '{hex}';"
            ))
            .output()
            .expect("sqlite3 runs (install it with scripts/setup.sh)"),
    };
    assert!(
        out.status.success(),
        "counting stored mail: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn malformed_huge_8bit_and_dropped_mail_never_crash_the_server_or_lose_accepted_mail() {
    let s = MailServer::start().await;

    // Malformed MIME: a multipart whose boundary never closes, a broken header line, bad base64.
    let (malformed_id, list) = seed_test(&s).await;
    let malformed = b"From: a@example.org\r\nSubject: broken\r\nThis line is not a header\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64@@@\r\n--b1\r\nContent-Type: text/plain\r\n\r\nno closing boundary\r\n".to_vec();
    let mut conn = SmtpConn::connect(s.smtp).await;
    let (code, text) = conn.send("a@example.org", &list, &malformed).await;
    assert_eq!(code, 250, "malformed MIME is accepted and stored: {text}");

    // 8-bit header bytes (UTF-8 and Latin-1), without any MIME declaration.
    let (eight_bit_id, list) = seed_test(&s).await;
    let eight_bit = b"From: J\xe9r\xf4me <jerome@example.org>\r\nSubject: Caf\xc3\xa9 \xe9t\xe9 sale\r\nX-Note: \xff\xfe\r\n\r\n<p>Caf\xc3\xa9</p>\r\n".to_vec();
    let (code, text) = conn.send("jerome@example.org", &list, &eight_bit).await;
    assert_eq!(code, 250, "8-bit headers are accepted and stored: {text}");

    // 30 MB: over the listener's size limit, refused with a clear permanent reply.
    let (_, list) = seed_test(&s).await;
    let mut huge = b"From: big@example.org\r\nSubject: huge\r\n\r\n".to_vec();
    let line = [b"x".repeat(998), b"\r\n".to_vec()].concat();
    while huge.len() < 30 * 1024 * 1024 {
        huge.extend_from_slice(&line);
    }
    let (code, text) = conn.send("big@example.org", &list[..1], &huge).await;
    assert_eq!(code, 552, "a 30 MB message gets 552 (too big): {text}");
    let (code, text) = conn.cmd("QUIT").await;
    assert_eq!(code, 221, "the session goes on after the refusal: {text}");

    // A connection dropped in the middle of DATA: nothing is stored, the server goes on.
    let (dropped_id, list) = seed_test(&s).await;
    let mut cut = SmtpConn::connect(s.smtp).await;
    assert_eq!(cut.cmd("MAIL FROM:<cut@example.org>").await.0, 250);
    assert_eq!(cut.cmd(&format!("RCPT TO:<{}>", list[0])).await.0, 250);
    assert_eq!(cut.cmd("DATA").await.0, 354);
    let partial = b"From: cut@example.org\r\nSubject: cut short\r\n\r\nthe first half of the bo";
    cut.send_raw(partial).await;
    drop(cut);
    let complete =
        b"From: cut@example.org\r\nSubject: sent again\r\n\r\n<p>the whole body</p>\r\n".to_vec();
    let mut again = SmtpConn::connect(s.smtp).await;
    let (code, text) = again.send("cut@example.org", &list, &complete).await;
    assert_eq!(code, 250, "a new session after the dropped one: {text}");

    // Every accepted message was kept byte for byte and judged by every filter.
    for (what, message) in [
        ("malformed", &malformed),
        ("8-bit", &eight_bit),
        ("resent", &complete),
    ] {
        assert_eq!(
            stored_intact(&s, message),
            1,
            "{what} message stored intact"
        );
    }
    assert_eq!(
        stored_intact(&s, b"the first half of the bo"),
        0,
        "the half message is not stored"
    );
    for id in [&malformed_id, &eight_bit_id, &dropped_id] {
        let verdicts = spam_verdicts(&s, AUTH, id, VERDICT_WAIT).await;
        assert!(!verdicts.is_empty());
    }
    let health = s.http.get(s.url("/healthz")).send().await.expect("healthz");
    assert_eq!(health.status(), 200, "the server is still up");
}

/// Every file under `dir` (database, its WAL, blobs, logs) that holds `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test]
async fn the_callers_smtp_password_is_used_for_the_send_and_never_kept() {
    let s = MailServer::start().await;
    let relay = RelayServer::start(s.smtp).await;
    let created = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "test_method": "smtp",
                    "from_address": "news@mail.acme.example",
                    "smtp_info": relay.smtp_info(RELAY_PASSWORD)}),
        )
        .await
        .ok()
        .clone();
    assert!(created["id"].is_string(), "{created}");
    let holding = files_containing(&s.data_dir(), RELAY_PASSWORD.as_bytes());
    assert!(
        holding.is_empty(),
        "the SMTP password is stored in {holding:?}"
    );
}

/// A spam test of `subject` and `html` by `method` (`svc` or `seed`): the API's answer.
async fn create_spam_test(s: &Server, subject: &str, html: &str, method: &str) -> Value {
    s.post(
        "/v5/spam/tests",
        &json!({"subject": subject, "html": html, "test_method": method}),
    )
    .await
    .ok()
    .clone()
}

/// The score at the start of a filter's `details` (`score 1.23 / spam at 5.0; ...`).
fn details_score(entry: &Value) -> f64 {
    entry["details"]
        .as_str()
        .and_then(|d| d.strip_prefix("score "))
        .and_then(|d| d.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("details start with the score: {entry}"))
}

/// The filters' entries of a test by client name.
fn by_client(entries: &[Value]) -> std::collections::BTreeMap<String, Value> {
    entries
        .iter()
        .map(|e| {
            (
                e["client"].as_str().unwrap_or_default().to_owned(),
                e.clone(),
            )
        })
        .collect()
}

/// The SpamAssassin and Rspamd rules (both engines use these names) that score one message
/// addressed to many similar recipients.
const MANY_RECIPIENT_RULES: &[&str] = &["SUSPICIOUS_RECIPS", "SORTED_RECIPS"];

/// Issue 30: an svc test measures the email, not the way mailproof sends it. A corpus email sent
/// by `svc` gets the SpamAssassin and Rspamd scores of the same message delivered over SMTP to
/// one seed address at a time, with no rule about many recipients; and its DKIM signature
/// verifies with no DNS at all.
#[tokio::test]
async fn an_svc_test_scores_the_email_as_a_one_recipient_delivery_does_and_its_signature_verifies_offline(
) {
    let s = MailServer::start_with("[dns]\nenabled = false\n").await;
    let html = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/postmark--receipt.html"
    ))
    .expect("../shared/corpus beside the checkout");
    let subject = "Your receipt from Acme";

    let created = create_spam_test(&s, subject, &html, "svc").await;
    let svc_id = created["id"].as_str().expect("id").to_owned();
    let svc = by_client(&spam_verdicts(&s, AUTH, &svc_id, VERDICT_WAIT).await);

    // The reference: a seed test whose addresses each get the same message, built and signed as
    // the service does, in a delivery of its own.
    let created = create_spam_test(&s, subject, &html, "seed").await;
    let seed_id = created["id"].as_str().expect("id").to_owned();
    let list = address_list(&created);
    let seed_domain = list[0].rsplit_once('@').expect("an address").1.to_owned();
    let from = format!("mailproof@{seed_domain}");
    // The service made its key before it sent the svc test, which has its verdicts.
    let signer = smtp::DkimSigner::generate_or_load(
        &s.data_dir().join("dkim.pem"),
        &seed_domain,
        inbox::DKIM_SELECTOR,
    )
    .expect("the service's DKIM key");
    for address in &list {
        let message = smtp::build_message(
            subject,
            &html,
            &from,
            std::slice::from_ref(address),
            &seed_domain,
        )
        .expect("build the message");
        let signed = signer.sign(&message).expect("sign it");
        smtp::deliver_local(s.smtp, &from, std::slice::from_ref(address), &signed)
            .await
            .expect("delivered to one seed address");
    }
    let single = by_client(&spam_verdicts(&s, AUTH, &seed_id, VERDICT_WAIT).await);

    assert_eq!(
        svc.keys().collect::<Vec<_>>(),
        single.keys().collect::<Vec<_>>()
    );
    let mut compared = 0;
    for (client, by_svc) in &svc {
        let by_one = &single[client];
        println!(
            "{client}\n  svc:           {}\n  one recipient: {}",
            by_svc["details"], by_one["details"]
        );
        if !(client.starts_with("SpamAssassin") || client.starts_with("Rspamd")) {
            continue;
        }
        compared += 1;
        assert_eq!(
            details_score(by_svc),
            details_score(by_one),
            "{client}: svc scores the email as a one-recipient delivery does"
        );
        assert_eq!(by_svc["spam"], by_one["spam"], "{client}: the same verdict");
        let details = by_svc["details"].as_str().unwrap_or_default();
        for rule in MANY_RECIPIENT_RULES {
            assert!(
                !details.contains(rule),
                "{client}: {rule} fired on the svc send: {details}"
            );
        }
    }
    assert_eq!(compared, 4, "two SpamAssassin and two Rspamd profiles");
    let own = svc
        .iter()
        .find(|(client, _)| client.starts_with("mailproof checks"))
        .map(|(_, entry)| entry["details"].as_str().unwrap_or_default().to_owned())
        .expect("the built-in filter's result");
    assert!(
        own.contains("MP_DKIM_PASS"),
        "the svc send's DKIM signature verifies with DNS off: {own}"
    );
}
