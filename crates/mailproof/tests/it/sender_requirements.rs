//! Issue 30, scope 2 end to end: a seed spam test's mail crosses SMTP from a sending address the
//! test chooses, with DNS answered by a server the test runs, and `…/requirements` gives one card
//! per provider whose rules say what was seen.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use content::uribl::test_dns::{BlocklistDns, TestRecord};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use testkit::http::{HttpStub, Response};

use crate::hostile_clients::connect_from;
use crate::support::*;
use crate::web_pages_ui::{assert_fits, sign_in, window};
use crate::web_ui::{Browser, AXE};

/// The sending server: a loopback address of its own, which SPF lists. Its reverse name is not
/// the test DNS's to give: resolvers answer `localhost` for all of 127/8 (RFC 6761), so the
/// reverse-DNS rule fails here as it would for any sender on loopback (the spam crate's tests
/// check it with a documentation address the test DNS answers for).
const SENDER: Ipv4Addr = Ipv4Addr::new(127, 0, 7, 7);

/// One SMTP delivery from `from`, as a sending server makes it (no TLS).
async fn deliver_from(from: IpAddr, to: SocketAddr, mail_from: &str, rcpt: &str, data: &[u8]) {
    let stream = connect_from(from, to).await;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    // Each reply's last line has a space after its code.
    async fn reply(
        lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    ) -> String {
        loop {
            let line = lines.next_line().await.expect("read").expect("a reply");
            if line.as_bytes().get(3) != Some(&b'-') {
                return line;
            }
        }
    }
    assert!(reply(&mut lines).await.starts_with("220"));
    for (command, code) in [
        ("EHLO mail.example.com".to_owned(), "250"),
        (format!("MAIL FROM:<{mail_from}>"), "250"),
        (format!("RCPT TO:<{rcpt}>"), "250"),
        ("DATA".to_owned(), "354"),
    ] {
        write
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .expect("write");
        let answer = reply(&mut lines).await;
        assert!(answer.starts_with(code), "{command}: {answer}");
    }
    // Dot-stuffed on the wire (RFC 5321 4.5.2); the receiver takes the dots off again.
    let stuffed = String::from_utf8_lossy(data).replace("\r\n.", "\r\n..");
    write
        .write_all(stuffed.as_bytes())
        .await
        .expect("write the message");
    write.write_all(b"\r\n.\r\n").await.expect("end of data");
    let answer = reply(&mut lines).await;
    assert!(answer.starts_with("250"), "after DATA: {answer}");
    let _ = write.write_all(b"QUIT\r\n").await;
}

async fn requirements(s: &Server, id: &str) -> Value {
    for _ in 0..300 {
        let got = s
            .get(&format!("/v5/spam/tests/{id}/requirements"))
            .await
            .ok()
            .clone();
        if got["status"] == "complete" {
            return got;
        }
        assert_eq!(got["status"], "pending", "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no sender-requirements report within 30 s");
}

fn rule<'a>(card: &'a Value, id: &str) -> &'a Value {
    card["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["rule"] == id))
        .unwrap_or_else(|| panic!("{} has rule {id}: {card}", card["provider"]))
}

/// A corpus newsletter (it has an unsubscribe link) sent by a sender whose SPF, DKIM key and DMARC
/// record are in order, from loopback (no reverse DNS of its own), without TLS and with one-click
/// headers its DKIM signature does not cover (the signer signs a fixed list without them, as many
/// setups do): Gmail would reject it and says why first; Yahoo too (it asks for reverse DNS and
/// one-click, not TLS); Microsoft asks for none of the three (one-click is a recommendation), so
/// its card meets.
#[tokio::test]
async fn a_seed_test_gets_a_card_per_provider_naming_what_fails() {
    let key_dir = tempfile::tempdir().expect("temp dir");
    let signer =
        smtp::DkimSigner::generate_or_load(&key_dir.path().join("k.pem"), "example.com", "s1")
            .expect("a DKIM key");
    let dns = BlocklistDns::serve([
        (
            "example.com".to_owned(),
            TestRecord::Txt(format!("v=spf1 ip4:{SENDER} -all")),
        ),
        (signer.dns_name(), TestRecord::Txt(signer.dns_record())),
        (
            "_dmarc.example.com".to_owned(),
            TestRecord::Txt("v=DMARC1; p=none".into()),
        ),
    ])
    .await;
    // The sender's one-click endpoint, https on loopback; the service trusts its certificate
    // through `[fetch] ca_file` (the first line of `extra` lands in the [fetch] table).
    let endpoint = HttpStub::start_tls(|_| async { Response::status(200) }).await;
    let ca = key_dir.path().join("ca.pem");
    std::fs::write(&ca, endpoint.certificate_pem().expect("https")).expect("write");
    // The listener offers STARTTLS (a sender that does not use it is then to blame).
    let s = MailServer::start_with(&format!(
        "ca_file = {:?}\n[spam]\ndaemons = false\n[dns]\nnameserver = \"{}\"\ntimeout_ms = 2000\n{}",
        ca.display().to_string(),
        dns.addr(),
        starttls_keys(key_dir.path())
    ))
    .await;
    let html = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/leemunroe--email.html"
    ))
    .expect("../shared/corpus beside the checkout");
    let created = s
        .post(
            "/v5/spam/tests",
            &json!({"subject": "News", "html": html, "test_method": "seed"}),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id").to_owned();
    let seed = created["address_list"][0]
        .as_str()
        .expect("an address")
        .to_owned();
    let pending = s
        .get(&format!("/v5/spam/tests/{id}/requirements"))
        .await
        .ok()
        .clone();
    assert_eq!(pending["status"], "pending", "{pending}");
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let mut b = Browser::start().await;
    sign_in(&mut b, &s).await;
    window(&mut b, 1440, 900).await;
    b.goto(&s.url(&format!("/tests/{id}"))).await;
    b.wait_loaded("#arrival").await;
    let waiting = b.text("#arrival").await;
    assert!(
        waiting.contains("checked when the test's message reaches the first seed address"),
        "{waiting}"
    );

    let message = format!(
        "From: News <news@example.com>\r\nTo: <{seed}>\r\nSubject: News\r\n\
         Date: Fri, 27 Nov 2026 10:00:00 +0000\r\nMessage-ID: <n1@example.com>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\
         List-Unsubscribe: <{unsubscribe}>\r\n\
         List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\n{}",
        html.replace("\r\n", "\n").replace('\n', "\r\n"),
        unsubscribe = endpoint.url("/u/1"),
    );
    let signed = signer.sign(message.as_bytes()).expect("signed");
    deliver_from(
        IpAddr::V4(SENDER),
        s.smtp,
        "bounce@example.com",
        &seed,
        &signed,
    )
    .await;
    let report = requirements(&s, &id).await;
    assert_eq!(report["method"], "seed");
    let cards = report["providers"].as_array().expect("cards");
    let names: Vec<&str> = cards
        .iter()
        .filter_map(|c| c["provider"].as_str())
        .collect();
    assert_eq!(names, ["gmail", "yahoo", "microsoft"]);
    let (gmail, yahoo, microsoft) = (&cards[0], &cards[1], &cards[2]);
    for passing in [
        "spf-pass",
        "dkim-pass",
        "dkim-key-1024",
        "dmarc-record",
        "dmarc-aligned",
        "from-own-domain",
        "rfc5322",
        "one-click-works",
        "visible-unsubscribe",
        "message-size",
    ] {
        assert_eq!(
            rule(gmail, passing)["status"],
            "pass",
            "{}",
            rule(gmail, passing)
        );
    }
    assert_eq!(rule(gmail, "reverse-dns")["status"], "fail");
    assert_eq!(
        rule(gmail, "reverse-dns")["seen"],
        "127.0.7.7 → localhost, which does not resolve back to 127.0.7.7"
    );
    assert_eq!(
        rule(gmail, "dkim-key-1024")["seen"],
        "RSA key of 2048 bits (d=example.com s=s1)"
    );
    let tls = rule(gmail, "tls");
    assert_eq!(tls["status"], "fail");
    assert_eq!(
        tls["seen"],
        "received from 127.0.7.7 without TLS, which was offered"
    );
    assert!(
        tls["fix"].as_str().is_some_and(|f| f.contains("STARTTLS")),
        "{tls}"
    );
    let one_click = rule(gmail, "one-click-unsubscribe");
    assert_eq!(one_click["status"], "fail");
    assert_eq!(
        one_click["seen"],
        "the DKIM signature d=example.com does not cover List-Unsubscribe or List-Unsubscribe-Post"
    );
    let posts = endpoint.requests();
    assert_eq!(posts.len(), 1, "one POST, as a provider sends: {posts:?}");
    assert_eq!(posts[0].body, b"List-Unsubscribe=One-Click");
    assert_eq!(gmail["verdict"], "would_reject", "{gmail}");
    assert_eq!(
        gmail["summary"],
        "Gmail: would reject — 127.0.7.7 → localhost, which does not resolve back to 127.0.7.7 (and 2 more)"
    );
    assert_eq!(yahoo["verdict"], "would_reject");
    assert_eq!(rule(yahoo, "one-click-unsubscribe")["status"], "fail");
    assert!(
        yahoo["rules"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["rule"] != "tls")),
        "Yahoo does not ask for TLS: {yahoo}"
    );
    assert_eq!(microsoft["verdict"], "meets");
    assert_eq!(
        microsoft["summary"],
        "Outlook.com, Hotmail and Live: meets the sender requirements; 1 recommendation(s) not met"
    );
    assert!(
        report["checked_at"].as_i64().is_some_and(|t| t > 0),
        "{report}"
    );

    // The page opened before the mail came fills in by itself, and says what the API says, at
    // a desktop's width and a phone's.
    b.wait_for(
        "document.querySelector('#arrival[data-state=complete]') !== null",
        Duration::from_secs(60),
    )
    .await;
    for (width, height) in [(1440, 900), (390, 844)] {
        window(&mut b, width, height).await;
        b.goto(&s.url(&format!("/tests/{id}"))).await;
        b.wait_loaded("#arrival").await;
        assert_eq!(shown_cards(&mut b).await, api_cards(cards), "at {width} px");
        assert_fits(&mut b, "test (with sender requirements)", width).await;
    }
    b.check_accessibility(&axe, "test (with sender requirements)")
        .await;
}

/// What a person reads per card: (provider, verdict, why, [(rule, result, seen)]).
type Card = (String, String, String, Vec<(String, String, String)>);

/// The API's cards in the words the page should use, written out here rather than taken from the
/// page's code.
fn api_cards(cards: &[Value]) -> Vec<Card> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    cards
        .iter()
        .map(|c| {
            let verdict = match c["verdict"].as_str() {
                Some("meets") => "Meets the requirements",
                Some("would_reject") => "Would reject",
                Some("not_checked") => "Not fully checked",
                other => panic!("verdict {other:?}"),
            };
            // Failures first, then what was not checked, passes, what does not apply.
            let rank = |r: &&Value| {
                ["fail", "not_checked", "pass", "not_applicable"]
                    .iter()
                    .position(|s| r["status"] == *s)
            };
            let mut in_order: Vec<&Value> = c["rules"].as_array().expect("rules").iter().collect();
            in_order.sort_by_key(rank);
            let rules = in_order
                .into_iter()
                .map(|r| {
                    let result = match r["status"].as_str() {
                        Some("pass") => "Passes",
                        Some("fail") => "Fails",
                        Some("not_applicable") => "Does not apply",
                        Some("not_checked") => "Not checked",
                        other => panic!("status {other:?}"),
                    };
                    let mut seen = text(&r["seen"]);
                    if let Some(fix) = r["fix"].as_str() {
                        seen.push_str(&format!(" Fix: {fix}"));
                    }
                    (text(&r["title"]), result.to_owned(), seen)
                })
                .collect();
            // The card's heading and verdict line say the name and the verdict: its summary
            // line says what follows them in the API's summary.
            let (name, summary) = (text(&c["name"]), text(&c["summary"]));
            let reason = match summary.split_once(" — ") {
                Some((_, why)) => why.to_owned(),
                None => summary
                    .strip_prefix(&format!("{name}: "))
                    .unwrap_or(&summary)
                    .to_owned(),
            };
            (name, verdict.to_owned(), reason, rules)
        })
        .collect()
}

async fn shown_cards(b: &mut Browser) -> Vec<Card> {
    let shown = b
        .eval(
            r"[...document.querySelectorAll('#arrival article.provider')].map(a => [
                a.querySelector('h3').textContent.trim(),
                a.querySelector('.verdict').textContent.trim(),
                a.querySelector('.summary').textContent.trim(),
                [...a.querySelectorAll('tbody tr')].map(r => {
                    const cells = r.querySelectorAll('td');
                    const seen = cells[3].cloneNode(true);
                    seen.querySelectorAll('a').forEach(l => l.remove());
                    return [cells[0].textContent.trim(), cells[2].textContent.trim(),
                            seen.textContent.replace(/\s+/g, ' ').trim()];
                })])",
        )
        .await;
    serde_json::from_value(shown).expect("cards as read")
}
