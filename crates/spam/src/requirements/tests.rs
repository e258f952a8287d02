//! The requirements checked on built messages: the shipped file read and validated, each check
//! against mail that passes and fails it, and the report as the API answers it.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use ::content::dns::DnsMode;
use ::content::netpolicy::NetPolicy;
use ::content::uribl::test_dns::{BlocklistDns, TestRecord};
use ::content::uribl::{UriblLookup, Zone};
use domain::SpamMethod;
use mail_auth::common::crypto::{RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter as _;
use testkit::http::{HttpStub, Request, Response};

use strum::IntoEnumIterator;

use super::*;

fn shipped() -> SenderRequirements {
    SenderRequirements::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/sender-requirements.toml"
    )))
    .expect("data/sender-requirements.toml loads")
}

#[test]
fn the_shipped_file_covers_three_providers_and_every_check_once() {
    let reqs = shipped();
    let ids: Vec<&str> = reqs.providers().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["gmail", "yahoo", "microsoft"]);
    let checks: HashSet<Check> = reqs.rules().iter().map(|r| r.check).collect();
    assert_eq!(checks, Check::iter().collect::<HashSet<_>>());
}

#[test]
fn a_rule_without_a_source_for_a_provider_that_asks_for_it_is_refused() {
    let text = r#"
[[provider]]
id = "gmail"
name = "Gmail"
domains = ["gmail.com"]
enforcement = "rejects"
source = "https://support.google.com/a/answer/81126"
max_message_bytes = 1
max_message_source = "https://support.google.com/mail/answer/6584"

[[rule]]
id = "tls"
check = "tls"
title = "TLS"
fix = "Use TLS."
applies = { gmail = "required" }
sources = {}
"#;
    let err = SenderRequirements::parse(text).expect_err("no source");
    assert!(err.contains("gives no source for \"gmail\""), "{err}");
    let unknown = text.replace(r#"check = "tls""#, r#"check = "telepathy""#);
    assert!(SenderRequirements::parse(&unknown).is_err());
}

#[test]
fn dkim_key_sizes_are_read_from_the_record() {
    // A 512-bit RSA key (SubjectPublicKeyInfo), as too-short keys are still published.
    let short = "v=DKIM1; k=rsa; p=MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAL4vqTyv751XTdawoyyiekxSl0YVGgXzONP7BcM9yIzJ8xUeOBW2yRK6RNEA/tTskegRTibMk+AQsZ3WQImym0kCAwEAAQ==";
    assert_eq!(facts::key_bits(short), Ok((512, "RSA")));
    assert!(facts::key_bits("v=DKIM1; p=").is_err());
}

/// A 1024-bit RSA key made for these tests only (`openssl genrsa -traditional 1024`).
const TEST_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIICXQIBAAKBgQCrtAUjAN3I+XltJCkPBgI0y+SW7TRLG3ELRIf8NNGyfl8pgsyJ\nxQFd6V378LQYVkJrqebJP5fqcisbEbgh6uR41kV6W+zeUtD16tml0r6v6yGrvsb3\n3cCd2r28FSHn2DjIC3F2cv0qmxcc56W/KC+/87QNukUjYIVLJvf+Omy8IwIDAQAB\nAoGAedkqvAhlW7YOwbEjohG1hxoagjCbJ6G1uzVK+2PQXEbp6V91H1+69JYjqCLM\n62hrglPz/2UtvaZ/iJoufYNf1mcawgWuUe5oBpR0rEmv6J+cnFeRj/cethZxjBa6\nc3vSkIY6A8fAyyb75QxwV+5qVSRatte9O3shC785A1MrVMECQQDY8Cs1fcTUkOzK\n8tv5jRxQFXAE3plxzMarR4hykSqlfS1J7lu4x59Qf1ZNLyXLwCA/KQclUyGt2/Sq\nC//SkQrrAkEAyp67aKlRCjS8MSrimvhzLRtFi4zHFxTcSYK85Fcg52YhPFtlOcEv\nvjDuTKrByt1L6b0ZMf9PQ6rRuDu//AXVqQJBAMlPlck9vLnFAvgSBi+90tg+DIV4\nS8xeyr2G1Af8ziZj0vMYTeVa2WxJvjxB1EEPON1jpU3tpwM/afuixvMPxaECQQC3\nrivwlkVr/iB4ZgslN4OZ6XYjKsy05OlKDqXUThP7Eb+haq0aLUJtpQfyIn4pvHF8\nBDvZ8jvV+P3DiQ7ilht5AkBz7ZN+yf/gUfmFGEQZmKOo04FGyqqr0HgBCWfwk9Qk\nKQNp5NGP65aFXWKQX9wdYyYU4taRQhd7MxYVHaiXp28Q\n-----END RSA PRIVATE KEY-----";
const TEST_KEY_PUBLIC: &str = "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCrtAUjAN3I+XltJCkPBgI0y+SW7TRLG3ELRIf8NNGyfl8pgsyJxQFd6V378LQYVkJrqebJP5fqcisbEbgh6uR41kV6W+zeUtD16tml0r6v6yGrvsb33cCd2r28FSHn2DjIC3F2cv0qmxcc56W/KC+/87QNukUjYIVLJvf+Omy8IwIDAQAB";

/// What a hand-made message carries; `compliant(..)` meets every rule.
struct Mail {
    from_domain: &'static str,
    /// The https `List-Unsubscribe` URL (the one-click endpoint's).
    unsubscribe: String,
    list_unsubscribe_post: bool,
    sign_list_headers: bool,
    body_unsubscribe: bool,
}

impl Mail {
    fn compliant(endpoint: &Endpoint) -> Mail {
        Mail {
            from_domain: "example.com",
            unsubscribe: endpoint.stub.url("/u/ok"),
            list_unsubscribe_post: true,
            sign_list_headers: true,
            body_unsubscribe: true,
        }
    }

    /// The message, DKIM-signed by the From domain with [`TEST_KEY`].
    fn build(&self) -> Vec<u8> {
        let d = self.from_domain;
        let mut headers = format!(
            "From: News <news@{d}>\r\nTo: reader@seed.example\r\nSubject: November news\r\n\
             Date: Fri, 27 Nov 2026 10:00:00 +0000\r\nMessage-ID: <n1@{d}>\r\nMIME-Version: 1.0\r\n\
             Content-Type: text/html; charset=utf-8\r\n\
             List-Unsubscribe: <{}>, <mailto:u@{d}>\r\n",
            self.unsubscribe
        );
        if self.list_unsubscribe_post {
            headers.push_str("List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n");
        }
        let footer = if self.body_unsubscribe {
            format!("<a href=\"https://{d}/u/1\">Unsubscribe</a>")
        } else {
            format!("<a href=\"https://{d}/\">Visit us</a>")
        };
        let message = format!(
            "{headers}\r\n<html><body><p>Our November news.</p><p>{footer}</p></body></html>\r\n"
        );
        let mut signed: Vec<&str> = vec!["From", "To", "Subject", "Date", "Message-ID"];
        if self.sign_list_headers {
            signed.extend(["List-Unsubscribe", "List-Unsubscribe-Post"]);
        }
        use rsa::pkcs1::{DecodeRsaPrivateKey as _, EncodeRsaPrivateKey as _};
        let der = rsa::RsaPrivateKey::from_pkcs1_pem(TEST_KEY)
            .and_then(|k| k.to_pkcs1_der())
            .expect("test key");
        let key = RsaKey::<Sha256>::from_key_der(rustls_pki_types::PrivateKeyDer::Pkcs1(
            der.as_bytes().to_vec().into(),
        ))
        .expect("test key");
        let signature = mail_auth::dkim::DkimSigner::from_key(key)
            .domain(d)
            .selector("s1")
            .headers(signed)
            .sign(message.as_bytes())
            .expect("signs");
        let mut out = signature.to_header().into_bytes();
        out.extend_from_slice(message.as_bytes());
        out
    }
}

/// A public address (loopback's reverse name would come from /etc/hosts, and blocklists list no
/// documentation or private address). Only the test's own DNS server is ever asked about it.
const SENDER: IpAddr = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));

type Records = Vec<(String, TestRecord)>;

/// DNS for a sender that does everything right at `domain`, sending from [`SENDER`].
fn sender_records(domain: &str) -> Vec<(String, TestRecord)> {
    vec![
        (
            domain.into(),
            TestRecord::Txt("v=spf1 ip4:93.184.216.34 -all".into()),
        ),
        (
            format!("s1._domainkey.{domain}"),
            TestRecord::Txt(format!("v=DKIM1; k=rsa; p={TEST_KEY_PUBLIC}")),
        ),
        (
            format!("_dmarc.{domain}"),
            TestRecord::Txt("v=DMARC1; p=none".into()),
        ),
        (
            "34.216.184.93.in-addr.arpa".into(),
            TestRecord::Ptr("mail.example.com".into()),
        ),
        (
            "mail.example.com".into(),
            TestRecord::A(Ipv4Addr::new(93, 184, 216, 34)),
        ),
        // The blocklist answers its test point, and does not list the sender.
        (
            "2.0.0.127.zen.example".into(),
            TestRecord::A(Ipv4Addr::new(127, 0, 0, 2)),
        ),
    ]
}

fn arrival(method: SpamMethod, tls: HopTls, mail_from_domain: &str) -> Arrival {
    Arrival {
        method,
        envelope: crate::Envelope {
            client_ip: SENDER,
            helo: "mail.example.com".into(),
            hostname: String::new(),
            mail_from: format!("bounce@{mail_from_domain}"),
            rcpt_to: vec!["reader@seed.example".into()],
        },
        tls,
    }
}

/// The sender's one-click endpoint: https on loopback, trusted through `[fetch] ca_file`.
/// `/u/ok` unsubscribes (200), `/u/forbidden` answers 403, `/u/login` redirects to a login page.
struct Endpoint {
    stub: HttpStub,
    policy: NetPolicy,
    _ca: tempfile::NamedTempFile,
}

impl Endpoint {
    async fn start() -> Endpoint {
        let stub = HttpStub::start_tls(|r: Request| async move {
            match r.path.as_str() {
                "/u/ok" => Response::status(200),
                "/u/forbidden" => Response::status(403),
                "/u/login" => Response::status(302).header("Location", "/login?next=/u"),
                _ => Response::status(404),
            }
        })
        .await;
        let ca = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(ca.path(), stub.certificate_pem().expect("https stub")).expect("write");
        let policy = NetPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("network")],
            ca_file: Some(ca.path().to_owned()),
            timeout: std::time::Duration::from_secs(5),
            ..NetPolicy::default()
        };
        Endpoint {
            stub,
            policy,
            _ca: ca,
        }
    }
}

async fn check_with(
    records: Vec<(String, TestRecord)>,
    endpoint: &Endpoint,
    mail: &Mail,
    arrival: &Arrival,
) -> Report {
    let dns = BlocklistDns::serve(records).await;
    check_in(dns.mode(), endpoint, mail, arrival).await
}

/// An address blocklist the test DNS answers for: it lists its test point, and whatever
/// `34.216.184.93.zen.example` the records add.
fn test_blocklist() -> Zone {
    Zone {
        name: "ZEN".into(),
        zone: "zen.example".into(),
        test_domain: "2.0.0.127".into(),
        listed: vec!["127.0.0.2/31".parse().expect("net")],
        refused: Vec::new(),
        score: 0.0,
    }
}

async fn check_in(mode: DnsMode, endpoint: &Endpoint, mail: &Mail, arrival: &Arrival) -> Report {
    let analyzer = BuiltinAnalyzer::new(mode.clone(), UriblLookup::new(Vec::new(), &mode));
    let blocklists = UriblLookup::new(vec![test_blocklist()], &mode);
    let net = Net {
        analyzer: &analyzer,
        policy: &endpoint.policy,
        blocklists: &blocklists,
    };
    shipped().check(&net, &mail.build(), arrival).await
}

/// Every rule that did not pass, as `provider/rule=status`, and each failed rule's fix present.
fn not_passed(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for p in &report.providers {
        for r in &p.rules {
            if r.status == Status::Fail {
                assert!(r.fix.is_some(), "a failed rule says how to fix it: {r:?}");
            }
            if r.status != Status::Pass {
                out.push(format!("{}/{}={:?}", p.provider, r.rule, r.status));
            }
        }
    }
    out
}

/// Rules that failed or could not be verified (a rule that does not apply, such as trying a
/// one-click endpoint the message does not offer, is neither).
fn rules_not_passed(report: &Report) -> HashSet<String> {
    report
        .providers
        .iter()
        .flat_map(|p| {
            p.rules
                .iter()
                .filter(|r| matches!(r.status, Status::Fail | Status::NotChecked))
        })
        .map(|r| format!("{}={:?}", r.rule, r.status))
        .collect()
}

fn verdicts(report: &Report) -> Vec<(String, ProviderVerdict)> {
    report
        .providers
        .iter()
        .map(|p| (p.provider.clone(), p.verdict))
        .collect()
}

#[tokio::test]
async fn a_compliant_message_meets_every_providers_requirements() {
    let endpoint = Endpoint::start().await;
    let report = check_with(
        sender_records("example.com"),
        &endpoint,
        &Mail::compliant(&endpoint),
        &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
    )
    .await;
    assert_eq!(not_passed(&report), Vec::<String>::new(), "{report:#?}");
    // The POST a provider sends: once, the exact body, no cookies or credentials.
    let posts = endpoint.stub.requests();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(
        (posts[0].method.as_str(), posts[0].path.as_str()),
        ("POST", "/u/ok")
    );
    assert_eq!(posts[0].body, b"List-Unsubscribe=One-Click");
    assert_eq!(
        posts[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(posts[0].header("cookie"), None);
    assert_eq!(posts[0].header("authorization"), None);
    for p in &report.providers {
        assert_eq!(p.verdict, ProviderVerdict::Meets);
        assert_eq!(
            p.summary,
            format!("{}: meets the sender requirements", p.name)
        );
    }
}

#[tokio::test]
async fn each_rule_broken_alone_fails_exactly_that_rule() {
    let endpoint = Endpoint::start().await;
    let seed = |tls| arrival(SpamMethod::Seed, tls, "example.com");
    let without = |name: &str| {
        sender_records("example.com")
            .into_iter()
            .filter(|(n, _)| n != name)
            .collect::<Vec<_>>()
    };
    // (case, the DNS, the message, how it arrived, the one rule that fails)
    type Case = (&'static str, Records, Mail, Arrival, &'static str);
    let cases: Vec<Case> = vec![
        (
            "no PTR",
            without("34.216.184.93.in-addr.arpa"),
            Mail::compliant(&endpoint),
            seed(HopTls::Used),
            "reverse-dns",
        ),
        (
            "no TLS",
            sender_records("example.com"),
            Mail::compliant(&endpoint),
            seed(HopTls::NotUsed),
            "tls",
        ),
        (
            "unsigned List-Unsubscribe-Post",
            sender_records("example.com"),
            Mail {
                sign_list_headers: false,
                ..Mail::compliant(&endpoint)
            },
            seed(HopTls::Used),
            "one-click-unsubscribe",
        ),
        (
            "no List-Unsubscribe-Post",
            sender_records("example.com"),
            Mail {
                list_unsubscribe_post: false,
                ..Mail::compliant(&endpoint)
            },
            seed(HopTls::Used),
            "one-click-unsubscribe",
        ),
        (
            "no DMARC",
            without("_dmarc.example.com"),
            Mail::compliant(&endpoint),
            seed(HopTls::Used),
            "dmarc-record",
        ),
        (
            "no SPF",
            without("example.com"),
            Mail::compliant(&endpoint),
            seed(HopTls::Used),
            "spf-pass",
        ),
        (
            "no unsubscribe link in the body",
            sender_records("example.com"),
            Mail {
                body_unsubscribe: false,
                ..Mail::compliant(&endpoint)
            },
            seed(HopTls::Used),
            "visible-unsubscribe",
        ),
        (
            // The test's DNS lets the sender sign and send for gmail.com, so that only the From
            // domain itself is wrong.
            "gmail.com From",
            sender_records("gmail.com"),
            Mail {
                from_domain: "gmail.com",
                ..Mail::compliant(&endpoint)
            },
            arrival(SpamMethod::Seed, HopTls::Used, "gmail.com"),
            "from-own-domain",
        ),
    ];
    let cases = cases.into_iter().chain([
        (
            "a blocklisted sending address",
            sender_records("example.com")
                .into_iter()
                .chain([(
                    "34.216.184.93.zen.example".to_owned(),
                    TestRecord::A(Ipv4Addr::new(127, 0, 0, 3)),
                )])
                .collect(),
            Mail::compliant(&endpoint),
            seed(HopTls::Used),
            "not-blocklisted",
        ),
        (
            "an unsubscribe endpoint answering 403",
            sender_records("example.com"),
            Mail {
                unsubscribe: endpoint.stub.url("/u/forbidden"),
                ..Mail::compliant(&endpoint)
            },
            seed(HopTls::Used),
            "one-click-works",
        ),
        (
            "an unsubscribe endpoint redirecting to a login",
            sender_records("example.com"),
            Mail {
                unsubscribe: endpoint.stub.url("/u/login"),
                ..Mail::compliant(&endpoint)
            },
            seed(HopTls::Used),
            "one-click-works",
        ),
    ]);
    for (case, records, mail, arrival, rule) in cases {
        let report = check_with(records, &endpoint, &mail, &arrival).await;
        assert_eq!(
            rules_not_passed(&report),
            HashSet::from([format!("{rule}=Fail")]),
            "{case}: {report:#?}"
        );
        for p in &report.providers {
            let broken = p.rules.iter().find(|r| r.rule == rule);
            let required = broken.is_some_and(|r| r.need == Need::Required);
            let expected = if required {
                ProviderVerdict::WouldReject
            } else {
                ProviderVerdict::Meets
            };
            assert_eq!(p.verdict, expected, "{case}: {}", p.summary);
            if required {
                let seen = &broken.map(|r| r.seen.clone()).unwrap_or_default();
                assert!(
                    p.summary.contains(seen.as_str()),
                    "{case}: {} names {seen}",
                    p.summary
                );
            }
        }
    }
}

#[tokio::test]
async fn an_unsigned_list_unsubscribe_post_is_named_on_gmails_card() {
    let endpoint = Endpoint::start().await;
    let report = check_with(
        sender_records("example.com"),
        &endpoint,
        &Mail {
            sign_list_headers: false,
            ..Mail::compliant(&endpoint)
        },
        &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
    )
    .await;
    let gmail = &report.providers[0];
    assert_eq!(
        gmail.summary,
        "Gmail: would reject — the DKIM signature d=example.com does not cover List-Unsubscribe or List-Unsubscribe-Post"
    );
}

#[tokio::test]
async fn without_dns_nothing_that_needs_it_passes() {
    let endpoint = Endpoint::start().await;
    let report = check_in(
        DnsMode::Disabled,
        &endpoint,
        &Mail::compliant(&endpoint),
        &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
    )
    .await;
    let needs_dns = [
        "spf-pass",
        "dkim-pass",
        "dkim-key-1024",
        "dmarc-record",
        "dmarc-aligned",
        "reverse-dns",
        "one-click-unsubscribe",
    ];
    for p in &report.providers {
        for r in p
            .rules
            .iter()
            .filter(|r| needs_dns.contains(&r.rule.as_str()))
        {
            assert_eq!(r.status, Status::NotChecked, "{r:?}");
            assert!(r.seen.contains("no DNS"), "{r:?}");
        }
        assert_eq!(p.verdict, ProviderVerdict::NotChecked, "{}", p.summary);
    }
}

#[tokio::test]
async fn a_lookup_that_does_not_answer_is_not_checked_rather_than_failed() {
    let endpoint = Endpoint::start().await;
    // A server that never answers: every lookup times out.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mode = DnsMode::Server {
        addr: silent.local_addr().expect("addr"),
        timeout: std::time::Duration::from_millis(200),
    };
    let report = check_in(
        mode,
        &endpoint,
        &Mail::compliant(&endpoint),
        &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
    )
    .await;
    let statuses: HashSet<String> = rules_not_passed(&report);
    assert!(
        statuses.iter().all(|s| s.ends_with("=NotChecked")),
        "{statuses:?}"
    );
    assert!(statuses.contains("spf-pass=NotChecked"), "{statuses:?}");
    assert_eq!(
        verdicts(&report)
            .iter()
            .filter(|(_, v)| *v == ProviderVerdict::Meets)
            .count(),
        0
    );
}

#[tokio::test]
async fn mail_sent_by_mailproof_itself_is_not_judged_on_our_infrastructure() {
    let endpoint = Endpoint::start().await;
    let report = check_with(
        Vec::new(),
        &endpoint,
        &Mail::compliant(&endpoint),
        &arrival(SpamMethod::Svc, HopTls::Unknown, "example.com"),
    )
    .await;
    let gmail = &report.providers[0];
    let status = |id: &str| gmail.rules.iter().find(|r| r.rule == id).map(|r| r.status);
    for id in [
        "spf-pass",
        "reverse-dns",
        "tls",
        "dkim-pass",
        "dkim-key-1024",
        "dmarc-aligned",
        "one-click-works",
        "not-blocklisted",
    ] {
        assert_eq!(status(id), Some(Status::NotApplicable), "{id}");
    }
    // Whether the sender's own signature covers the unsubscribe headers is unknown.
    assert_eq!(status("one-click-unsubscribe"), Some(Status::NotChecked));
    // The From domain's own DNS is still the sender's: no DMARC record is a failure.
    assert_eq!(status("dmarc-record"), Some(Status::Fail));
}

#[tokio::test]
async fn the_one_click_post_is_reported_with_its_answer() {
    let endpoint = Endpoint::start().await;
    let seen = |report: &Report| {
        report.providers[0]
            .rules
            .iter()
            .find(|r| r.rule == "one-click-works")
            .map(|r| (r.status, r.seen.clone()))
            .expect("Gmail asks for it")
    };
    for (path, status, words) in [
        ("/u/ok", Status::Pass, "answered 200 in"),
        ("/u/forbidden", Status::Fail, "answered 403 in"),
        (
            "/u/login",
            Status::Fail,
            "answered 302 redirecting to /login?next=/u in",
        ),
    ] {
        let mail = Mail {
            unsubscribe: endpoint.stub.url(path),
            ..Mail::compliant(&endpoint)
        };
        let report = check_with(
            sender_records("example.com"),
            &endpoint,
            &mail,
            &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
        )
        .await;
        let (got, text) = seen(&report);
        assert_eq!(got, status, "{path}: {text}");
        assert!(
            text.starts_with(&format!("POST to {} ", endpoint.stub.url(path)))
                && text.contains(words),
            "{path}: {text}"
        );
    }
    // An endpoint the network policy does not admit is not tried, and says so.
    let strict = Endpoint {
        policy: NetPolicy::default(),
        ..Endpoint::start().await
    };
    let report = check_with(
        sender_records("example.com"),
        &strict,
        &Mail::compliant(&strict),
        &arrival(SpamMethod::Seed, HopTls::Used, "example.com"),
    )
    .await;
    let (got, text) = seen(&report);
    assert_eq!(got, Status::NotChecked, "{text}");
    assert!(text.contains("network policy"), "{text}");
    assert!(strict.stub.requests().is_empty());
}

#[tokio::test]
async fn a_listener_without_starttls_says_nothing_of_the_senders_tls() {
    let endpoint = Endpoint::start().await;
    let report = check_with(
        sender_records("example.com"),
        &endpoint,
        &Mail::compliant(&endpoint),
        &arrival(SpamMethod::Seed, HopTls::NotOffered, "example.com"),
    )
    .await;
    assert_eq!(
        rules_not_passed(&report),
        HashSet::from(["tls=NotChecked".to_owned()])
    );
    let gmail = &report.providers[0];
    assert_eq!(
        gmail.verdict,
        ProviderVerdict::NotChecked,
        "{}",
        gmail.summary
    );
    assert!(
        gmail.summary.contains("offers no STARTTLS"),
        "{}",
        gmail.summary
    );
}
