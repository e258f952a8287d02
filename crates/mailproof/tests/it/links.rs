//! Issue 11, point 2: link validation (`PUT`/`GET /v5/email/tests/<id>/links`) over real HTTP,
//! against a web server on an allow-listed loopback address, and a second loopback listener that
//! is not allow-listed and must never see a connection.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use content::uribl::test_dns::BlocklistDns;
use serde_json::{json, Value};
use testkit::http::{HttpStub, OnAccept, Request, Response};

use crate::support::*;

/// A tiny web server on 127.0.0.2: `/redirect` → 301 → `/final` (HTML), `/missing` → 404,
/// `/logo.png` → a PNG. Answers `HEAD` without a body.
async fn web_server() -> String {
    let stub = HttpStub::start(
        Ipv4Addr::new(127, 0, 0, 2).into(),
        |r: Request| async move {
            match r.path.split('?').next().unwrap_or("") {
                "/redirect" => Response::status(301)
                    .header("Location", "/final")
                    .header("Content-Type", "text/plain")
                    .body(&b"moved"[..]),
                "/final" => Response::ok("text/html; charset=utf-8", &b"<p>landing</p>"[..]),
                "/logo.png" => Response::ok("image/png", &b"\x89PNG\r\n\x1a\n"[..]),
                _ => Response::status(404)
                    .header("Content-Type", "text/plain")
                    .body(&b"no such page"[..]),
            }
        },
    )
    .await;
    stub.base()
}

/// A listener on 127.0.0.1 (not allow-listed) that counts connections.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let (addr, accepted) =
        testkit::http::counting_listener(Ipv4Addr::LOCALHOST.into(), OnAccept::Close).await;
    (addr.port(), accepted)
}

fn find<'a>(report: &'a Value, url: &str) -> &'a Value {
    report["links"]
        .as_array()
        .expect("links array")
        .iter()
        .find(|l| l["url"] == url)
        .unwrap_or_else(|| panic!("no {url} in {report}"))
}

async fn create_test(s: &Server, subject: &str, html: &str) -> String {
    s.post(
        "/v5/email/tests",
        &json!({"subject": subject, "html": html}),
    )
    .await
    .ok()["id"]
        .as_str()
        .expect("test id")
        .to_owned()
}

/// The types the existing v5 SDKs read from a finished link (the PHP SDK casts them): `status` an
/// integer, `mime` a string, `warning` and `alt` booleans, `error` a string or `false`.
fn assert_sdk_types(link: &Value) {
    assert!(link["status"].is_u64(), "status: {link}");
    assert!(link["mime"].is_string(), "mime: {link}");
    assert!(link["warning"].is_boolean(), "warning: {link}");
    assert!(link["alt"].is_boolean(), "alt: {link}");
    assert!(
        link["error"].is_string() || link["error"] == false,
        "error: {link}"
    );
    assert!(link["warning_text"].is_string(), "warning_text: {link}");
}

async fn wait_complete(s: &Server, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let r = s.get(&format!("/v5/email/tests/{id}/links")).await;
        let body = r.ok().clone();
        if body["status"] == "complete" {
            return body;
        }
        assert_eq!(body["status"], "pending", "{body}");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "link check not complete after 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn links_are_followed_judged_and_loopback_is_never_contacted() {
    let web = web_server().await;
    let (port, loopback_hits) = counting_listener().await;
    // No DNS: the blocklists' answer must not depend on whether this machine is online.
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.2/32\"]\n[dns]\nenabled = false\n".into(),
    })
    .await;
    let html = format!(
        "<p>\n<a href=\"{web}/redirect?utm_source=news\">offer</a>\n\
         <a href=\"{web}/missing\">gone</a>\n<img src=\"{web}/logo.png\">\n\
         <a href=\"http://127.0.0.1:{port}/admin\">internal</a>\n<a href=\"#\">top</a>\n\
         <a href=\"mailto:sales@example.com\">mail</a></p>"
    );
    let id = create_test(&s, "links", &html).await;
    let path = format!("/v5/email/tests/{id}/links");

    let before = s.get(&path).await;
    before.expect_error("BadRequest", 400);
    let message = before.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("PUT"), "{message}");

    s.add_account("intruder", "enterprise", &[]);
    let them = Some(("intruder", "password-1"));
    for method in ["PUT", "GET"] {
        s.call(method, &path, them, None)
            .await
            .expect_error("InvalidTestID", 404);
    }

    let started = s.put(&path, &json!({})).await.ok().clone();
    assert_eq!(started["status"], "pending");
    assert!(
        started["links"].is_array() && started["uribl"].is_array(),
        "PUT answers in the report's shape: {started}"
    );
    let report = wait_complete(&s, &id).await;
    for link in report["links"].as_array().expect("links") {
        assert_sdk_types(link);
    }

    let redirect = find(&report, &format!("{web}/redirect?utm_source=news"));
    assert_eq!(redirect["type"], "link");
    assert_eq!(
        redirect["redirects"],
        json!([format!("{web}/final")]),
        "{redirect}"
    );
    assert_eq!(redirect["status"], 200);
    assert_eq!(redirect["mime"], "text/html");
    assert_eq!(redirect["error"], false);
    assert_eq!(redirect["line"], 2);
    assert_eq!(redirect["warning"], true);
    let warnings = redirect["warning_text"].as_str().unwrap_or_default();
    assert!(warnings.contains("uses http, not https"), "{warnings}");
    assert!(
        warnings.contains("tracking parameters (utm_source)"),
        "{warnings}"
    );

    let broken = find(&report, &format!("{web}/missing"));
    assert_eq!(broken["status"], 404);
    assert!(
        broken["error"].as_str().is_some_and(|e| e.contains("404")),
        "{broken}"
    );

    let image = find(&report, &format!("{web}/logo.png"));
    assert_eq!(image["type"], "image");
    assert_eq!(
        (image["status"].clone(), image["mime"].clone()),
        (json!(200), json!("image/png"))
    );
    assert_eq!(
        (image["alt"].clone(), image["alt_text"].clone()),
        (json!(false), Value::Null)
    );
    assert!(
        image["warning_text"]
            .as_str()
            .is_some_and(|w| w.contains("no alt attribute")),
        "{image}"
    );

    let internal = find(&report, &format!("http://127.0.0.1:{port}/admin"));
    assert_eq!(
        (internal["status"].clone(), internal["mime"].clone()),
        (json!(0), json!(""))
    );
    assert!(
        internal["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused: 127.0.0.1")),
        "{internal}"
    );
    assert_eq!(
        loopback_hits.load(Ordering::SeqCst),
        0,
        "the loopback address was contacted"
    );

    let hash = find(&report, "#");
    assert!(
        hash["warning_text"]
            .as_str()
            .is_some_and(|w| w.contains("'#'")),
        "{hash}"
    );
    let mail = find(&report, "mailto:sales@example.com");
    assert_eq!(
        (mail["warning"].clone(), mail["error"].clone()),
        (json!(false), json!(false))
    );

    assert_eq!(report["uribl"], json!([]));
    assert_eq!(
        report["uribl_status"], "not checked: DNS lookups are disabled in the configuration",
        "an empty list from lists never asked must not read as clean"
    );
}

/// `uribl` lists link domains that the built-in spam filter's blocklists (data/spam-filters.toml)
/// list, asked through `[dns] nameserver`; a zone that does not answer its test point is named as
/// not consulted.
#[tokio::test]
async fn link_domains_on_a_uri_blocklist_are_reported_and_silent_lists_are_named() {
    let dns = BlocklistDns::start([
        // Spamhaus DBL answers its documented test point, and lists one of the email's domains.
        ("dbltest.com.dbl.spamhaus.org", Ipv4Addr::new(127, 0, 1, 2)),
        (
            "listed-domain.example.dbl.spamhaus.org",
            Ipv4Addr::new(127, 0, 1, 2),
        ),
        // URIBL and SURBL do not answer their test points here: not consulted.
    ])
    .await;
    let s = Server::start_with(Options {
        config: format!(
            "[dns]\nnameserver = \"{}\"\ntimeout_ms = 300\n[fetch]\ntimeout = 2\n",
            dns.addr()
        ),
    })
    .await;
    let html = "<p><a href=\"https://www.listed-domain.example/offer\">offer</a>\n\
                <a href=\"https://news.clean-domain.example/\">news</a></p>";
    let id = create_test(&s, "uribl", html).await;
    let path = format!("/v5/email/tests/{id}/links");
    s.put(&path, &json!({})).await.ok();
    let report = wait_complete(&s, &id).await;
    assert_eq!(
        report["uribl"],
        json!([{"domain": "listed-domain.example", "list": "DBL", "zone": "dbl.spamhaus.org",
                "answer": "127.0.1.2"}]),
        "{report}"
    );
    assert_eq!(report["uribl_consulted"], json!(["dbl.spamhaus.org"]));
    let status = report["uribl_status"].as_str().unwrap_or_default();
    assert!(
        status.starts_with("2 link domain(s) looked up in dbl.spamhaus.org: 1 listed"),
        "{status}"
    );
    assert!(
        status.contains(
            "not consulted: multi.uribl.com: its test point test.uribl.com is not listed"
        ),
        "{status}"
    );
    assert!(
        dns.queries() >= 3,
        "the blocklists were asked through [dns] nameserver"
    );
}
