//! Issue 22, "Done when" 2: an email carrying the tracking code, loaded in real Chromium as a
//! reader would, against the real `mailproof serve`. Each signal is produced by the browser
//! itself (the CSS of the code under print media, inside a forward wrapper, under a dark colour
//! scheme, the animation while the page stays open), never by fetching a hit URL by hand.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::http::{HttpStub, Request, Response};

use crate::support::*;
use crate::web_ui::Browser;

/// One recorded hit, as the CSV export gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hit {
    kind: String,
    number: u32,
    reader: String,
    source: String,
}

async fn hits(s: &Server, guid: &str) -> Vec<Hit> {
    let csv = crate::analytics::export_csv(s, guid).await;
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert!(f.len() >= 9, "CSV row {l:?}");
            Hit {
                kind: f[1].into(),
                number: f[2].parse().expect("number"),
                reader: f[3].into(),
                source: f[6].into(),
            }
        })
        .collect()
}

/// Waits until a hit of `kind` from `reader` is recorded (the browser fetches beacons on its own
/// schedule).
async fn wait_hit(s: &Server, guid: &str, kind: &str, reader: &str) -> Vec<Hit> {
    let start = Instant::now();
    loop {
        let all = hits(s, guid).await;
        if all.iter().any(|h| h.kind == kind && h.reader == reader) {
            return all;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no {kind} hit from {reader} within 20 s; recorded: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn of<'a>(all: &'a [Hit], kind: &str, reader: &str) -> Vec<&'a Hit> {
    all.iter()
        .filter(|h| h.kind == kind && h.reader == reader)
        .collect()
}

/// Emails as a mail service would deliver them (the merge tag replaced per recipient), served
/// from loopback, and the landing page the tracked link leads to.
async fn mail_host(pages: Arc<Mutex<HashMap<String, String>>>) -> String {
    let html = |body: String| Response::ok("text/html; charset=utf-8", body);
    let stub = HttpStub::start(Ipv4Addr::LOCALHOST.into(), move |r: Request| {
        let path = r.path.split('?').next().unwrap_or_default().to_owned();
        let response = match path.strip_prefix("/mail/") {
            Some(name) => html(
                pages
                    .lock()
                    .ok()
                    .and_then(|p| p.get(name).cloned())
                    .unwrap_or_default(),
            ),
            None if path == "/landing" => html("<title>Landed</title><p>landed</p>".to_owned()),
            None => Response::status(404),
        };
        async move { response }
    })
    .await;
    stub.base()
}

/// Opens `url` as a reader opens an email: without waiting for the load event, which the
/// tracking code's held-open image keeps back for as long as the email stays open.
async fn open(b: &mut Browser, url: &str) {
    b.call("Page.navigate", json!({"url": url})).await;
}

async fn media(b: &mut Browser, media: &str, scheme: &str) {
    b.call(
        "Emulation.setEmulatedMedia",
        json!({"media": media, "features": [{"name": "prefers-color-scheme", "value": scheme}]}),
    )
    .await;
}

#[tokio::test]
async fn a_reader_in_chromium_produces_every_signal_and_mpp_is_machine() {
    // Apple's relay ranges as the operator configures them, with loopback in them: the test's
    // browser is where Apple's relay would be.
    let (_ranges, s) = crate::analytics::server_with_loopback_as_apple_relay().await;
    let pages: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let host = mail_host(pages.clone()).await;
    let landing = format!("{host}/landing?from=mail");
    let click_html = format!(
        "<p>Hello,</p><p><a id=\"go\" href=\"{}\">See the sale</a></p>",
        landing.replace('&', "&amp;")
    );
    let created = s
        .post(
            "/v5/analytics/createcampaign",
            &json!({"name": "E2E", "total_subscribers": 10, "merge_tag": "*|ID|*",
                    "click_tracking": {"html": click_html}}),
        )
        .await
        .ok()
        .clone();
    let guid = created["guid"].as_str().expect("guid").to_string();
    let code = created["tracking_code"].as_str().expect("code").to_string();
    let body = created["click_tracking"]["html"]
        .as_str()
        .expect("rewritten html")
        .to_string();
    s.post(
        &format!("/v5/analytics/activatecampaign/{guid}"),
        &json!({}),
    )
    .await
    .ok();
    let email = |reader: &str, wrap: fn(&str) -> String| {
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sale</title></head><body>{}</body></html>",
            wrap(&format!("{body}{code}"))
        )
        .replace("*|ID|*", reader)
    };
    {
        let mut p = pages.lock().expect("pages");
        p.insert("reader".into(), email("reader-1", |b| b.to_string()));
        // What a forward composed in Apple Mail or Gmail looks like to the next reader.
        p.insert(
            "forwarded".into(),
            email("reader-2", |b| {
                format!("<p>---------- Forwarded message ---------</p><blockquote type=\"cite\">{b}</blockquote>")
            }),
        );
        p.insert("mpp".into(), email("mpp-1", |b| b.to_string()));
    }

    let mut b = Browser::start().await;
    // A reader's browser, not a headless one (which the classifier rightly calls a scanner).
    b.call(
        "Emulation.setUserAgentOverride",
        json!({"userAgent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"}),
    )
    .await;
    media(&mut b, "screen", "light").await;
    let opened = Instant::now();
    open(&mut b, &format!("{host}/mail/reader")).await;
    let all = wait_hit(&s, &guid, "open", "reader-1").await;
    assert_eq!(of(&all, "open", "reader-1")[0].source, "direct", "{all:?}");
    // The reader keeps the email open for 10 s.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(opened.elapsed())).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all = hits(&s, &guid).await;
    let read = of(&all, "read", "reader-1").iter().map(|h| h.number).max();
    assert!(
        read.is_some_and(|r| (8..=12).contains(&r)),
        "10 s open gave a read time of {read:?}: {all:?}"
    );
    // Nothing but the open and the reading steps on a plain screen in light mode.
    for kind in ["print", "forward", "dark", "click"] {
        assert!(
            of(&all, kind, "reader-1").is_empty(),
            "{kind} fired: {all:?}"
        );
    }

    media(&mut b, "print", "light").await;
    wait_hit(&s, &guid, "print", "reader-1").await;
    media(&mut b, "screen", "dark").await;
    let all = wait_hit(&s, &guid, "dark", "reader-1").await;
    assert!(of(&all, "forward", "reader-1").is_empty(), "{all:?}");
    media(&mut b, "screen", "light").await;

    // A click goes through the service to the original URL, and is recorded.
    b.click_and_wait("#go").await;
    let at = b.eval("location.href").await;
    assert_eq!(at, json!(landing), "the click landed elsewhere");
    let all = wait_hit(&s, &guid, "click", "reader-1").await;
    assert_eq!(of(&all, "click", "reader-1")[0].number, 1);
    let tracked = body
        .split('"')
        .find(|p| p.contains(&format!("/t/{guid}/1")))
        .expect("tracked link")
        .replace("&amp;", "&")
        .replace("*|ID|*", "reader-3");
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .get(&tracked)
        .send()
        .await
        .expect("click");
    assert_eq!(r.status(), 302);
    assert_eq!(r.headers()["location"], landing.as_str());

    // The email inside a forward wrapper reports the forward.
    open(&mut b, &format!("{host}/mail/forwarded")).await;
    let all = wait_hit(&s, &guid, "forward", "reader-2").await;
    assert_eq!(of(&all, "open", "reader-2").len(), 1, "{all:?}");

    // Apple's Mail Privacy Protection: the bare agent from a relay address.
    b.call(
        "Emulation.setUserAgentOverride",
        json!({"userAgent": "Mozilla/5.0"}),
    )
    .await;
    open(&mut b, &format!("{host}/mail/mpp")).await;
    let all = wait_hit(&s, &guid, "open", "mpp-1").await;
    assert_eq!(of(&all, "open", "mpp-1")[0].source, "apple_mpp", "{all:?}");

    // The report: the reader's signals, and Apple's open as a machine one.
    let report = s
        .get(&format!("/v5/analytics/getcampaignstats/{guid}"))
        .await
        .ok()
        .clone();
    let opens = &report["opens"];
    assert_eq!(
        opens["reliable"]["unique"], 2,
        "reader-1 and reader-2: {report}"
    );
    assert_eq!(opens["machine"]["unique"], 1, "Apple's relay: {report}");
    assert_eq!(opens["total"]["unique"], 3, "{report}");
    // Only reader-1 stayed 10 s (more than the 7 s skim threshold): one read.
    assert_eq!(report["engagement"]["read"], 1, "{report}");
    assert_eq!(report["engagement"]["skim"], 0, "{report}");
    assert_eq!(report["prints"]["unique"], 1, "{report}");
    assert_eq!(report["forwards"]["unique"], 1, "{report}");
    assert_eq!(report["dark"]["unique"], 1, "{report}");
    assert_eq!(report["clicks"][0]["number"], 1, "{report}");
    assert!(
        report["clicks"][0]["clicks"]["hits"].as_i64() >= Some(1),
        "{report}"
    );
    assert_eq!(report["apple_mpp"]["ranges_configured"], true, "{report}");
}
