//! Issue 4 end to end: spam tests by the seed, smtp and svc methods over real SMTP on loopback,
//! judged by the real filters (spamd, rspamd, the built-in analyzer) that `mailproof serve` starts.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

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

/// An aiosmtpd server with AUTH that relays to the service, as a caller's provider would.
struct RelayServer {
    child: Child,
    port: u16,
}

impl RelayServer {
    fn start(relay_to: std::net::SocketAddr) -> RelayServer {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/resources/relay_smtp_server.py"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut child = Command::new("/usr/bin/python3")
            .arg(script)
            .args([
                &port.to_string(),
                &relay_to.port().to_string(),
                RELAY_USER,
                RELAY_PASSWORD,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("/usr/bin/python3 runs (install python3-aiosmtpd with scripts/setup.sh)");
        let stdout = child.stdout.take().expect("relay stdout");
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.trim() == "READY");
        assert!(
            ready,
            "the aiosmtpd relay did not start; install python3-aiosmtpd with scripts/setup.sh"
        );
        RelayServer { child, port }
    }

    fn smtp_info(&self, password: &str) -> Value {
        json!({"host": "127.0.0.1", "port": self.port, "secure": "",
               "username": RELAY_USER, "password": password})
    }
}

impl Drop for RelayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let relay = RelayServer::start(s.smtp);
    let mut tests = Vec::new();
    for (kind, subject, html) in [
        ("clean", CLEAN_SUBJECT, CLEAN_HTML),
        ("spammy", SPAM_SUBJECT, SPAM_HTML),
    ] {
        // seed: the caller sends the message to the address list itself.
        let created = s
            .post(
                "/v5/spam/tests",
                &json!({"subject": subject, "html": html, "test_method": "seed"}),
            )
            .await
            .ok()
            .clone();
        let list: Vec<String> = created["address_list"]
            .as_array()
            .expect("address_list")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
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
        let created = s
            .post(
                "/v5/spam/tests",
                &json!({"subject": subject, "html": html, "test_method": "svc"}),
            )
            .await
            .ok()
            .clone();
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
    }
}

#[tokio::test]
async fn the_smtp_method_reports_refused_credentials_and_unreachable_hosts() {
    let s = MailServer::start().await;
    let relay = RelayServer::start(s.smtp);
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
