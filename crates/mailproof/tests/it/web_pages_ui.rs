//! Issue 19 in headless Chromium against the real `mailproof serve`: what the pages say is what
//! the API says (spam verdicts, screenshot statuses, counts) on the test page, the client page and
//! the shared proof; verdicts and thumbnails arrive without a reload; no page kind is wider than a
//! 1440 px or a 390 px window; axe finds no serious or critical violation; revoking a share stops
//! the pictures loaded through it. A second test renders every client of the catalog and checks
//! that each thumbnail keeps its screenshot's proportions.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::*;
use crate::web_ui::{Browser, AXE};

/// A desktop client and a phone, both drawn by Chromium (the one engine the first test starts).
/// The visual diff page has compared every client it waits on (it does so after loading).
const DIFF_DONE: &str = "document.body.dataset.diffDone === '1'";

const CLIENTS: [&str; 2] = ["outlook365_win", "gmail_android"];

/// Gmail in a phone's browser: a 412 px window that cuts a wider email (drawn by Chromium).
const PHONE_WEBMAIL: &str = "gmail_mobile_web";

const HTML: &str = "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Acme monthly</title></head>\n\
<body style=\"margin:0;background:#ffffff;font-family:Arial,sans-serif;color:#222222\">\n\
<h1>November at Acme</h1>\n<p>Hello Jane, this month the team finished the reporting screens you asked about.</p>\n\
<p><a href=\"https://example.invalid/reports\">See the new reports</a></p>\n\
<img src=\"https://example.invalid/logo.png\" width=\"120\" height=\"40\">\n\
<p>Reply to this email to tell us how your team uses reports today.</p>\n</body>\n</html>\n";

/// §2.8's meaning of `spam`, written out here rather than taken from the code under test.
fn verdict_label(spam: &Value) -> &'static str {
    match spam.as_i64() {
        None => "Waiting for the filter",
        Some(1) => "Spam",
        Some(0) => "Neutral",
        Some(-1) => "Not spam",
        Some(other) => panic!("spam {other} is not a §2.8 value"),
    }
}

pub(crate) async fn window(b: &mut Browser, width: u32, height: u32) {
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}),
    )
    .await;
}

/// No part of the page reaches past the window's right edge.
pub(crate) async fn assert_fits(b: &mut Browser, what: &str, width: u32) {
    let sizes = b
        .eval("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        .await;
    let (scroll, client) = (sizes[0].as_u64(), sizes[1].as_u64());
    assert!(
        scroll.is_some() && scroll <= client,
        "the {what} page is {scroll:?} px wide in a {width} px window ({client:?} px inside)"
    );
}

/// Every image on the page has loaded.
const IMAGES_LOADED: &str = "[...document.images].every(i => i.complete && i.naturalWidth > 0)";

/// Every image a filter leaves shown has loaded (a hidden card's lazy picture never loads).
const SHOWN_IMAGES_LOADED: &str =
    "[...document.images].filter(i => i.offsetParent).every(i => i.complete && i.naturalWidth > 0)";

/// The filter rows of the page's spam table: (filter, label).
async fn shown_verdicts(b: &mut Browser) -> Vec<(String, String)> {
    let v = b
        .eval("[...document.querySelectorAll('#spam tbody tr')].map(r => [r.dataset.filter, r.querySelector('td.verdict').textContent.trim()])")
        .await;
    v.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or_default().to_string(),
                r[1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A screenshot of the whole page into `$MAILPROOF_SHOTS_DIR`, when it is set, for a person to
/// look at (`what` and the width name the file).
pub(crate) async fn shot_for_people(b: &mut Browser, what: &str, width: u32) {
    let Some(dir) = std::env::var_os("MAILPROOF_SHOTS_DIR") else {
        return;
    };
    let shot = b
        .call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        )
        .await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().expect("png"))
        .expect("base64");
    let name = format!("{}-{width}.png", what.replace(' ', "-"));
    std::fs::write(std::path::Path::new(&dir).join(name), png).expect("write shot");
}

/// Creates a share link of the test at `test_path` through its page, as its owner; answers the
/// link's path (`/share/<token>`), the browser left on the "link created" page.
pub(crate) async fn create_share_link(b: &mut Browser, s: &Server, test_path: &str) -> String {
    b.goto(&s.url(test_path)).await;
    b.click_and_wait("form[action$='/shares'] button").await;
    let share = b
        .eval("document.getElementById('share-link').value")
        .await
        .as_str()
        .expect("share link")
        .to_string();
    share
        .split_once("/share/")
        .map(|(_, t)| format!("/share/{t}"))
        .expect("a /share/ link")
}

pub(crate) async fn sign_in(b: &mut Browser, s: &Server) {
    b.goto(&s.url("/signin")).await;
    b.set_value("#api_key", ADMIN_KEY).await;
    b.set_value("#password", ADMIN_PASS).await;
    b.click_and_wait("form[action='/signin'] button").await;
    assert_eq!(b.eval("location.pathname").await, json!("/tests"));
}

/// Presses `key` in the full view and waits for `client`'s full view.
async fn press_and_land(b: &mut Browser, key: &str, client: &str) {
    b.eval("window.__before_nav = 1").await;
    b.press(key).await;
    b.wait_for(
        &format!(
            "window.__before_nav === undefined && document.readyState === 'complete' && location.pathname.endsWith('/clients/{client}')"
        ),
        Duration::from_secs(30),
    )
    .await;
}

/// The HTTP status the page's own `fetch` gets for `url`.
async fn fetch_status(b: &mut Browser, url: &str) -> Value {
    b.eval(&format!("fetch({url:?}).then(r => r.status)")).await
}

/// The test page (or shared proof) says exactly what the API says.
async fn assert_test_page_matches_api(b: &mut Browser, s: &Server, id: &str, what: &str) {
    let spam = s
        .get(&format!("/v5/email/tests/{id}/spam/results"))
        .await
        .ok()
        .clone();
    let mut want: Vec<(String, String)> = spam
        .as_array()
        .expect("spam results")
        .iter()
        .map(|r| {
            (
                r["client"].as_str().unwrap_or_default().to_string(),
                verdict_label(&r["spam"]).to_string(),
            )
        })
        .collect();
    let mut shown = shown_verdicts(b).await;
    want.sort();
    shown.sort();
    assert!(!want.is_empty(), "the test has spam filters");
    assert_eq!(
        shown, want,
        "{what}: spam verdicts against the API's {spam}"
    );

    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let results = results.as_object().expect("results");
    let mut finished = 0;
    for (client, r) in results {
        let status = r["status"].as_str().expect("status");
        if status == "Complete" || status == "Bounced" {
            finished += 1;
        }
        let card = b
            .text(&format!(".card[data-client={client}] .status"))
            .await;
        assert_eq!(card, status, "{what}: {client}'s card");
        // The card's mark counts what the API lists as not loaded, each address once.
        let mark = b
            .eval(&format!(
                "(document.querySelector('.card[data-client={client}] .failed') || {{}}).textContent || ''"
            ))
            .await;
        let shown: usize = mark
            .as_str()
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert_eq!(
            shown,
            api_failed_count(r),
            "{what}: {client}'s card says {mark} for {}",
            r["failed_resources"]
        );
    }
    assert_eq!(
        b.text("#progress-text").await,
        format!("{finished} of {}", results.len()),
        "{what}: the count"
    );
    assert_inbox_strip_matches_api(b, s, id, what).await;
}

/// The inbox strip (put in place by the status poll once drawn) shows the API's rows, in its
/// order, with the subject and preview as cut, and the API's warnings; each row's picture loads.
async fn assert_inbox_strip_matches_api(b: &mut Browser, s: &Server, id: &str, what: &str) {
    b.wait_for(
        "!!document.querySelector('#inbox[data-state=done]')",
        Duration::from_secs(90),
    )
    .await;
    let api = s
        .get(&format!("/v5/email/tests/{id}/inbox"))
        .await
        .ok()
        .clone();
    assert_eq!(api["status"], "complete", "{api}");
    let want: Vec<Value> = api["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let preview = r["preview"]["text"].as_str().unwrap_or_default();
            json!([
                r["id"],
                r["name"],
                r["subject"]["text"],
                if preview.is_empty() {
                    "none: the subject fills the row"
                } else {
                    preview
                }
            ])
        })
        .collect();
    assert!(!want.is_empty(), "{what}: the API drew rows: {api}");
    let shown = b
        .eval("[...document.querySelectorAll('#inbox .inbox-row')].map(r => [r.dataset.row, r.querySelector('.inbox-name').textContent, r.querySelector('[data-field=subject]').textContent, r.querySelector('[data-field=preview]').textContent.trim()])")
        .await;
    assert_eq!(shown, json!(want), "{what}: the inbox strip against {api}");
    // Every warning is on the page in the API's words (the subject cuts folded into one line).
    let page_warnings = b
        .eval("[...document.querySelectorAll('#inbox .inbox-warnings li')].map(l => l.textContent)")
        .await;
    let page_warnings = page_warnings.to_string();
    for w in api["warnings"].as_array().expect("warnings") {
        let message = w["message"].as_str().unwrap_or_default();
        assert!(
            page_warnings.contains(message),
            "{what}: {message:?} not on the page: {page_warnings}"
        );
    }
    b.wait_for(
        "[...document.querySelectorAll('#inbox img')].every(i => i.complete && i.naturalWidth > 0)",
        Duration::from_secs(30),
    )
    .await;
}

/// How many resources a client result lists as not loaded, each address and kind once across
/// its screenshots.
fn api_failed_count(result: &Value) -> usize {
    let mut seen = std::collections::HashSet::new();
    if let Some(variants) = result["failed_resources"].as_object() {
        for list in variants.values() {
            for f in list.as_array().into_iter().flatten() {
                seen.insert((f["url"].to_string(), f["kind"].to_string()));
            }
        }
    }
    seen.len()
}

/// A page server the test controls: one image that loads, one answering 404, one on an address
/// the network policy refuses (127.0.0.2), one that never answers. The API lists the three that
/// failed with why; the gallery card counts them; the client page lists each with its address,
/// kind and a reason in words, at 1440 and 390 px, axe clean.
#[tokio::test]
async fn a_screenshot_says_which_images_did_not_load_and_why() {
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let png = {
        let img = image::RgbaImage::from_pixel(40, 40, image::Rgba([200, 30, 30, 255]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png)
            .expect("png");
        out.into_inner()
    };
    let server = testkit::http::HttpStub::resources("127.0.0.1".parse().expect("ip"), png).await;
    let ok = server.url("/logo.png");
    let gone = server.url("/gone/hero.png");
    let slow = server.url("/slow/banner.png");
    // The same port on 127.0.0.2: loopback, but outside the allow-list (127.0.0.1/32).
    let refused = server.url("/inside.png").replace("127.0.0.1", "127.0.0.2");
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Broken pictures</title></head>\n\
<body style=\"margin:0;font-family:Arial,sans-serif\"><h1>Our autumn range</h1>\n\
<img src=\"{ok}\" width=\"40\" height=\"40\" alt=\"Logo\">\n<img src=\"{gone}\" width=\"200\" height=\"80\" alt=\"Hero\">\n\
<img src=\"{refused}\" width=\"40\" height=\"40\" alt=\"Inside\">\n<img src=\"{slow}\" width=\"200\" height=\"40\" alt=\"Banner\">\n\
<table width=\"700\" role=\"presentation\"><tr><td>Read the whole range on our site.</td></tr></table></body></html>\n"
    );
    let s = MailServer::start_with(
        "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\nresource_wait = 3\n",
    )
    .await;
    let client = CLIENTS[0];
    let created = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Broken pictures", "html": html, "clients": [client, CLIENTS[1], PHONE_WEBMAIL], "image_blocking": true}),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id").to_string();
    s.wait_processed(&id, Duration::from_secs(180)).await;
    let result = s
        .get(&format!("/v5/email/tests/{id}/results/{client}"))
        .await
        .ok()
        .clone();
    let result = &result[client];
    assert_eq!(result["status"], "Complete", "{result}");
    let listed = result["failed_resources"]["default"]
        .as_array()
        .unwrap_or_else(|| panic!("failed_resources.default in {result}"))
        .clone();
    let reason_of = |url: &str| {
        listed
            .iter()
            .find(|f| f["url"] == url)
            .map(|f| (f["kind"].clone(), f["reason"].clone(), f["status"].clone()))
    };
    assert_eq!(reason_of(&ok), None, "{listed:?}");
    assert_eq!(
        reason_of(&gone),
        Some((json!("image"), json!("http_status"), json!(404)))
    );
    assert_eq!(
        reason_of(&refused),
        Some((json!("image"), json!("refused_by_policy"), Value::Null))
    );
    assert_eq!(
        reason_of(&slow),
        Some((json!("image"), json!("timeout"), Value::Null))
    );
    assert_eq!(listed.len(), 3, "{listed:?}");
    // A 700 px email in a 412 px phone browser is cut at the window's edge (a desktop window
    // holds it; Gmail's app zooms it out to fit).
    let all = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let cut = all[PHONE_WEBMAIL]["overflow_width"]["default"]
        .as_u64()
        .unwrap_or_else(|| panic!("{PHONE_WEBMAIL} overflows: {}", all[PHONE_WEBMAIL]));
    assert!(cut >= 700, "{cut}");
    for fits in [client, CLIENTS[1]] {
        assert_eq!(all[fits]["overflow_width"], json!({}), "{fits}");
    }
    // Images off: only stylesheets could fail, and none did.
    assert_eq!(
        result["failed_resources"]["no_images"],
        json!([]),
        "{result}"
    );

    let mut b = Browser::start().await;
    sign_in(&mut b, &s).await;
    let test_path = format!("/tests/{id}");
    let client_path = format!("{test_path}/clients/{client}");
    for (width, height) in [(1440, 900), (390, 844)] {
        window(&mut b, width, height).await;
        b.goto(&s.url(&test_path)).await;
        assert_eq!(
            b.text(&format!(".card[data-client={client}] .failed"))
                .await,
            "3 images did not load"
        );
        assert_eq!(
            b.text(&format!(".card[data-client={PHONE_WEBMAIL}] .cut-mark"))
                .await,
            "Wider than the window: cut at the right"
        );
        assert_eq!(
            b.eval(&format!(
                "!!document.querySelector('.card[data-client={client}] .cut-mark')"
            ))
            .await,
            json!(false)
        );
        assert_fits(&mut b, "broken pictures test", width).await;
        shot_for_people(&mut b, "broken pictures test", width).await;
        b.check_accessibility(&axe, &format!("broken pictures test ({width} px)"))
            .await;

        b.goto(&s.url(&client_path)).await;
        let rows = b
            .eval("[...document.querySelectorAll('table.failed tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()))")
            .await;
        let rows: Vec<Vec<String>> = serde_json::from_value(rows).expect("rows");
        let want: Vec<String> = listed
            .iter()
            .map(|f| f["url"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
            want,
            "the page lists the API's addresses, in its order"
        );
        for row in &rows {
            assert_eq!(row[1], "image", "{row:?}");
            let why = &row[2];
            let expected = if row[0] == gone {
                "HTTP 404"
            } else if row[0] == refused {
                "private or internal"
            } else {
                "still loading when the picture was taken"
            };
            assert!(why.contains(expected), "{row:?}: {why}");
        }
        assert_fits(&mut b, "broken pictures client", width).await;
        shot_for_people(&mut b, "broken pictures client", width).await;
        b.check_accessibility(&axe, &format!("broken pictures client ({width} px)"))
            .await;
        b.goto(&s.url(&format!("{test_path}/clients/{PHONE_WEBMAIL}")))
            .await;
        let note = b.text("#cut-note").await;
        assert!(
            note.starts_with(&format!(
                "This email is {cut} px wide, wider than this client's 412 px window"
            )),
            "{note}"
        );
        shot_for_people(&mut b, "cut phone webmail", width).await;
        b.goto(&s.url(&format!("{client_path}?variant=no_images")))
            .await;
        assert_eq!(
            b.text("#failed-none").await,
            "Images are off in this screenshot; every stylesheet loaded."
        );
    }

    // The gallery: counts per status as the API has them, filters and the images-off switch
    // kept in the address, so a reload shows the same cards.
    window(&mut b, 1440, 900).await;
    b.goto(&s.url(&test_path)).await;
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let complete = results
        .as_object()
        .expect("results")
        .values()
        .filter(|r| r["status"] == "Complete")
        .count();
    assert_eq!(complete, 3);
    assert_eq!(
        b.eval("[...document.querySelectorAll('#show-status option')].map(o => o.textContent)")
            .await,
        json!([
            "All (3)",
            "Complete (3)",
            "Pending (0)",
            "Processing (0)",
            "Bounced (0)"
        ])
    );
    let choose = |id: &str, value: &str| {
        format!("(() => {{ const s = document.getElementById('{id}'); s.value = '{value}'; s.dispatchEvent(new Event('change', {{bubbles: true}})); }})()")
    };
    let card_src =
        format!("document.querySelector('.card[data-client={client}] img').getAttribute('src')");
    let card_href = format!(
        "document.querySelector('.card[data-client={client}] a.shot').getAttribute('href')"
    );
    let visible =
        "[...document.querySelectorAll('.card')].filter(c => !c.hidden).map(c => c.dataset.client)";
    b.eval(&choose("show-images", "off")).await;
    b.eval(&choose("show-category", "Application")).await;
    assert_eq!(b.eval(visible).await, json!([client]));
    assert_eq!(b.text("#shown-count").await, "1 shown");
    for (when, reload) in [("switched", false), ("reloaded", true)] {
        if reload {
            let here = b.eval("location.href").await;
            b.goto(here.as_str().expect("href")).await;
        }
        let search = b.eval("location.search").await;
        assert!(
            search
                .as_str()
                .is_some_and(|q| q.contains("images=off") && q.contains("category=Application")),
            "{when}: {search}"
        );
        let src = b.eval(&card_src).await;
        assert!(
            src.as_str()
                .is_some_and(|s| s.contains("thumbnail-no_images")),
            "{when}: the card shows the images-off screenshot: {src}"
        );
        assert!(
            b.eval(&card_href)
                .await
                .as_str()
                .is_some_and(|h| h.ends_with("?variant=no_images")),
            "{when}: the card opens the images-off screenshot"
        );
        assert_eq!(b.eval(visible).await, json!([client]), "{when}");
        b.wait_for(SHOWN_IMAGES_LOADED, Duration::from_secs(30))
            .await;
    }
    shot_for_people(&mut b, "broken pictures images off", 1440).await;
    b.check_accessibility(&axe, "broken pictures images off")
        .await;
    b.eval(&choose("show-images", "")).await;
    b.eval(&choose("show-category", "")).await;
    assert_eq!(b.eval("location.search").await, json!(""));
    assert!(b
        .eval(&card_src)
        .await
        .as_str()
        .is_some_and(|s| !s.contains("no_images")));
    assert_eq!(b.text("#shown-count").await, "3 shown");
}

#[tokio::test]
async fn the_pages_say_what_the_api_says_live_and_fit_the_window() {
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let s = MailServer::start_with("[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n").await;
    let mut b = Browser::start().await;
    window(&mut b, 1440, 900).await;
    sign_in(&mut b, &s).await;

    // The form: every error at once, beside its field, in plain words; the first one focused.
    b.goto(&s.url("/tests/new")).await;
    b.eval("document.querySelectorAll('input[name=clients]').forEach(c => c.checked = false)")
        .await;
    b.set_value("#html", "<p>x</p>").await;
    b.set_value("#url", "https://example.invalid/email.html")
        .await;
    b.click_and_wait("form[action='/tests/new'] button[type=submit]")
        .await;
    for field in ["subject", "source", "clients"] {
        let m = b.text(&format!("#err-{field}")).await;
        assert!(!m.is_empty(), "no error beside {field}");
        assert!(!m.contains('`'), "API wording in {m}");
    }
    assert!(
        b.text("#err-source").await.contains("not both"),
        "HTML and a URL together are refused"
    );
    assert_eq!(
        b.eval("document.activeElement.id").await,
        json!("subject"),
        "the first error has the focus"
    );
    // A PDF chosen by mistake is refused, saying what it is, and nothing is created.
    let dir = tempfile::tempdir().expect("dir");
    let pdf = dir.path().join("invoice.pdf");
    std::fs::write(
        &pdf,
        b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n",
    )
    .expect("pdf");
    b.goto(&s.url("/tests/new")).await;
    b.set_value("#subject", "Invoice").await;
    let doc = b.call("DOM.getDocument", json!({})).await;
    let node = b
        .call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "#file"}),
        )
        .await;
    b.call(
        "DOM.setFileInputFiles",
        json!({"nodeId": node["nodeId"], "files": [pdf.to_string_lossy()]}),
    )
    .await;
    let before = s.get("/v5/email/tests").await.ok().clone();
    b.click_and_wait("form[action='/tests/new'] button[type=submit]")
        .await;
    assert_eq!(
        b.text("#err-source").await,
        "invoice.pdf is a PDF document, not an email: upload the email as an .eml message or an .html file, or paste its HTML."
    );
    assert_eq!(
        s.get("/v5/email/tests").await.ok().clone(),
        before,
        "no test created"
    );
    // The way to "Create test" by keyboard is short: the clients' checkboxes are folded.
    b.goto(&s.url("/tests/new")).await;
    let mut stops = 0;
    let at_submit =
        "document.activeElement.matches(\"form[action='/tests/new'] button[type=submit]\")";
    while stops < 80 && b.eval(at_submit).await != json!(true) {
        for kind in ["keyDown", "keyUp"] {
            b.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9}),
            )
            .await;
        }
        stops += 1;
    }
    assert!(
        stops <= 20,
        "{stops} Tab stops to \"Create test\" (80 means it was never reached)"
    );
    // Select all / none, with a live count.
    let total = b
        .eval("document.querySelectorAll('input[name=clients]').length")
        .await;
    b.eval("document.querySelector('fieldset.clients > .select-all [data-select=all]').click()")
        .await;
    assert_eq!(
        b.text("#clients-count").await,
        format!("{total} of {total} clients selected")
    );
    b.eval("document.querySelector('fieldset.clients > .select-all [data-select=none]').click()")
        .await;
    assert_eq!(
        b.text("#clients-count").await,
        format!("0 of {total} clients selected")
    );

    let created = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Acme monthly", "html": HTML, "clients": CLIENTS, "spam": {"test_method": "svc"}}),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id").to_string();
    let test_path = format!("/tests/{id}");

    // Opened while the work runs: thumbnails and verdicts arrive on the same page.
    b.goto(&s.url(&test_path)).await;
    b.eval("window.__same_page = 1").await;
    b.wait_for(
        "document.body.dataset.pending === '0' && document.querySelectorAll('.card img').length === 2",
        Duration::from_secs(240),
    )
    .await;
    b.wait_for(IMAGES_LOADED, Duration::from_secs(30)).await;
    assert_eq!(
        b.eval("window.__same_page").await,
        json!(1),
        "the page reloaded"
    );
    assert_test_page_matches_api(&mut b, &s, &id, "test page").await;
    let labels: Vec<String> = shown_verdicts(&mut b)
        .await
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert!(
        labels.iter().all(|l| l != "Spam"),
        "a clean email is not spam to any filter: {labels:?}"
    );
    // Each filter's details arrive with its verdict, on the same page.
    let spam = s
        .get(&format!("/v5/email/tests/{id}/spam/results"))
        .await
        .ok()
        .clone();
    let with_details = spam
        .as_array()
        .expect("spam results")
        .iter()
        .filter(|r| r["details"].as_str().is_some_and(|d| !d.trim().is_empty()))
        .count();
    assert!(with_details > 0, "filters explain their verdicts: {spam}");
    b.wait_for(
        &format!("!document.querySelector('#spam[data-reload-after]') && document.querySelectorAll('#spam tbody tr details').length === {with_details}"),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        b.eval("window.__same_page").await,
        json!(1),
        "the page reloaded"
    );
    // A card takes its client's shape.
    assert_eq!(
        b.eval("[...document.querySelectorAll('.card')].map(c => c.dataset.client + ':' + c.dataset.shape).sort()").await,
        json!(["gmail_android:portrait", "outlook365_win:landscape"])
    );

    // The client page's status is the API's.
    let one = s
        .get(&format!("/v5/email/tests/{id}/results/{}", CLIENTS[0]))
        .await
        .ok()
        .clone();
    b.goto(&s.url(&format!("{test_path}/clients/{}", CLIENTS[0])))
        .await;
    assert_eq!(
        b.text("#client-status").await,
        one[CLIENTS[0]]["status"].as_str().expect("status")
    );
    // j moves to the next client of the gallery, k back.
    press_and_land(&mut b, "j", CLIENTS[1]).await;
    // The zoom choice is kept for the next page.
    b.wait_for(IMAGES_LOADED, Duration::from_secs(30)).await;
    b.eval("document.querySelector('.zoom [data-zoom=css]').click()")
        .await;
    let css_width = b
        .eval("document.getElementById('full-shot').getBoundingClientRect().width")
        .await;
    assert!(
        (css_width.as_f64().unwrap_or(0.0) - 412.0).abs() < 1.0,
        "CSS size of a 412 px wide phone: {css_width}"
    );
    press_and_land(&mut b, "k", CLIENTS[0]).await;
    assert_eq!(
        b.eval("document.querySelector('figure.full').dataset.zoom")
            .await,
        json!("css")
    );
    b.eval("document.querySelector('.zoom [data-zoom=fit]').click()")
        .await;

    // Reprocess from the client page: it shows the client waiting, then its new screenshot, in
    // place.
    b.click_and_wait("form[action$='/reprocess'] button").await;
    let waiting = b.text("#client-status").await;
    b.eval("window.__same_page = 3").await;
    b.wait_for(
        "document.getElementById('client-status').textContent === 'Complete' && !document.querySelector('[data-reload-after]') && document.getElementById('full-shot') && document.getElementById('full-shot').naturalWidth > 0",
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        b.eval("window.__same_page").await,
        json!(3),
        "drawn in place"
    );
    let one = s
        .get(&format!("/v5/email/tests/{id}/results/{}", CLIENTS[0]))
        .await
        .ok()
        .clone();
    assert_eq!(one[CLIENTS[0]]["status"], "Complete");
    assert!(
        ["Pending", "Processing"].contains(&waiting.as_str()),
        "the page after Reprocess shows the client waiting, not the old picture: {waiting}"
    );

    // Links and checks, so that their pages have reports to lay out.
    s.put(&format!("/v5/email/tests/{id}/links"), &json!({}))
        .await
        .ok();
    let start = std::time::Instant::now();
    while s.get(&format!("/v5/email/tests/{id}/links")).await.ok()["status"] != "complete" {
        assert!(start.elapsed() < Duration::from_secs(60), "link check");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    while s.get(&format!("/v5/email/tests/{id}/checks")).await.ok()["status"] != "complete" {
        assert!(start.elapsed() < Duration::from_secs(120), "content checks");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // A link check started from its page: the report replaces the waiting note in place.
    b.goto(&s.url(&format!("{test_path}/links"))).await;
    b.click_and_wait("form[action$='/links'] button").await;
    b.eval("window.__same_page = 2").await;
    b.wait_for(
        "!document.querySelector('[data-reload-after]') && document.querySelectorAll('table.links tbody tr').length === 2",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        b.eval("window.__same_page").await,
        json!(2),
        "the links page reloaded"
    );

    // A share link, created through the page.
    let share_path = create_share_link(&mut b, &s, &test_path).await;
    let share_created = b
        .eval("location.href")
        .await
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        b.eval("document.getElementById('copy-share').hidden").await,
        json!(false),
        "a copy button"
    );

    let compare = format!("?c={}&c={}", CLIENTS[0], CLIENTS[1]);
    let pages: Vec<(&str, String)> = vec![
        ("tests list", "/tests".into()),
        ("new test", "/tests/new".into()),
        ("test", test_path.clone()),
        (
            "desktop client",
            format!("{test_path}/clients/{}", CLIENTS[0]),
        ),
        (
            "phone client",
            format!("{test_path}/clients/{}", CLIENTS[1]),
        ),
        ("side by side", format!("{test_path}/compare{compare}")),
        ("source", format!("{test_path}/content?view=source")),
        ("text version", format!("{test_path}/content?view=text")),
        ("links", format!("{test_path}/links")),
        ("checks", format!("{test_path}/checks")),
        ("visual diff", format!("{test_path}/diff?with={id}")),
        ("not found", "/tests/nothing-here".into()),
        ("shared proof", share_path.clone()),
        (
            "shared client",
            format!("{share_path}/clients/{}", CLIENTS[1]),
        ),
        (
            "shared side by side",
            format!("{share_path}/compare{compare}"),
        ),
    ];
    for (width, height) in [(1440, 900), (390, 844)] {
        window(&mut b, width, height).await;
        for (what, path) in &pages {
            b.goto(&s.url(path)).await;
            if *what == "visual diff" {
                b.wait_for(DIFF_DONE, Duration::from_secs(60)).await;
                // Its pictures load as they are scrolled to: load them all to lay them out.
                b.eval("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
                    .await;
            }
            b.wait_for(IMAGES_LOADED, Duration::from_secs(30)).await;
            assert_fits(&mut b, what, width).await;
            shot_for_people(&mut b, what, width).await;
            b.check_accessibility(&axe, &format!("{what} ({width} px)"))
                .await;
            if what.ends_with("side by side") {
                // One scale for all, tops aligned: a CSS px of each email is drawn the same size.
                let shown = b
                    .eval("[...document.querySelectorAll('.compare figure')].map(f => { const r = f.querySelector('img').getBoundingClientRect(); return [r.top, r.width / +f.dataset.cssWidth]; })")
                    .await;
                let shown = shown.as_array().expect("figures");
                assert_eq!(shown.len(), 2, "{what}");
                let (top, scale) = (shown[0][0].as_f64(), shown[0][1].as_f64().unwrap_or(0.0));
                for f in shown {
                    assert_eq!(f[0].as_f64(), top, "{what} ({width} px): tops aligned");
                    let other = f[1].as_f64().unwrap_or(0.0);
                    assert!(
                        scale > 0.0 && (other / scale - 1.0).abs() < 0.02,
                        "{what} ({width} px): scales {shown:?}"
                    );
                }
            }
            if matches!(*what, "test" | "shared proof") {
                // The labels a person reads, at this width too.
                assert_test_page_matches_api(&mut b, &s, &id, &format!("{what} ({width} px)"))
                    .await;
            }
        }
        b.goto(&share_created).await;
        assert_fits(&mut b, "share created", width).await;
    }
    window(&mut b, 1440, 900).await;

    // The visual diff's slider uncovers the "after" screenshot as far as it is moved.
    b.goto(&s.url(&format!("{test_path}/diff?with={id}"))).await;
    // The page compares each client after it has loaded.
    b.wait_for(DIFF_DONE, Duration::from_secs(60)).await;
    let clip = b
        .eval("(() => { const r = document.querySelector('.swipe-range'); r.value = 80; r.dispatchEvent(new Event('input')); return document.querySelector('.swipe-after').style.clipPath })()")
        .await;
    assert_eq!(clip, json!("inset(0px 0px 0px 80%)"));

    // The site has its icon.
    let icon = b
        .eval("fetch('/favicon.ico').then(r => r.arrayBuffer().then(a => [r.status, r.headers.get('content-type'), new Uint8Array(a).slice(0, 4).join(',')]))")
        .await;
    assert_eq!(icon, json!([200, "image/x-icon", "0,0,1,0"]), "an ICO file");

    // The checks table is a table, not a column squeezed into a grid cell.
    b.goto(&s.url(&format!("{test_path}/checks"))).await;
    let display = b
        .eval("getComputedStyle(document.querySelector('table.checks')).display")
        .await;
    assert_eq!(display, json!("table"));

    // The shared proof says what the API says too.
    b.goto(&s.url(&share_path)).await;
    assert_test_page_matches_api(&mut b, &s, &id, "shared proof").await;
    let picture = b
        .eval("document.querySelector('.card img').src")
        .await
        .as_str()
        .expect("a thumbnail")
        .to_string();
    assert_eq!(fetch_status(&mut b, &picture).await, json!(200));

    // Revoked, the proof and the pictures loaded through it are gone.
    b.goto(&s.url(&test_path)).await;
    b.click_and_wait("form[action$='/shares/revoke'] button")
        .await;
    assert_eq!(fetch_status(&mut b, &picture).await, json!(404));
    assert_eq!(fetch_status(&mut b, &s.url(&share_path)).await, json!(404));
    // A stranger who opens the revoked link is not told about "your tests".
    b.goto(&s.url(&share_path)).await;
    let said = b.text("main").await;
    assert!(!said.contains("your tests"), "{said}");
    assert_eq!(
        b.eval("document.querySelector('main a').getAttribute('href')")
            .await,
        json!("/")
    );

    // The visual diff picker preselects nothing when no earlier test has this subject.
    let unrelated = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Something else", "html": HTML, "clients": [CLIENTS[0]]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    b.goto(&s.url(&format!("/tests/{unrelated}"))).await;
    assert_eq!(
        b.eval(&format!(
            "[document.getElementById('diff-with').value, !!document.querySelector('#diff-with option[value=\"{id}\"]')]"
        ))
        .await,
        json!(["", true])
    );
}

/// Every client of the catalog, drawn by the three engines: a phone's card keeps the proportions
/// of its screenshot (within 2 %); a desktop or web client's is a 4:3 crop of its email's column
/// whose text is at 60% of its size or more at 1440 and 390 px; each card has its client's shape,
/// and a desktop window has more than three gallery columns.
#[tokio::test]
async fn a_full_gallery_keeps_each_screenshots_proportions() {
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\", \"gecko\", \"webkit\"]\nslots_per_engine = 1\n"
            .into(),
    })
    .await;
    let clients = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let profiles: Vec<String> = clients
        .as_object()
        .expect("clients")
        .iter()
        .filter(|(_, c)| c["alias_of"].is_null())
        .map(|(id, _)| id.clone())
        .collect();
    assert!(profiles.len() >= 57, "{} profiles", profiles.len());
    let id = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Gallery", "html": HTML, "clients": profiles}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let info = s.wait_processed(&id, Duration::from_secs(900)).await;
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let complete: Vec<(String, String)> = results
        .as_object()
        .expect("results")
        .iter()
        .filter(|(_, r)| r["status"] == "Complete")
        .map(|(c, r)| {
            (
                c.clone(),
                r["screenshots"]["default"]
                    .as_str()
                    .expect("screenshot URL")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        complete.len(),
        profiles.len(),
        "every client completes: {info}"
    );

    let mut b = Browser::start().await;
    window(&mut b, 1440, 900).await;
    sign_in(&mut b, &s).await;
    b.goto(&s.url(&format!("/tests/{id}"))).await;
    // Lazy pictures load as they come into view: scroll through the gallery.
    b.eval("document.querySelectorAll('.card img').forEach(i => i.loading = 'eager')")
        .await;
    b.wait_for(IMAGES_LOADED, Duration::from_secs(120)).await;

    let columns = b
        .eval("getComputedStyle(document.querySelector('ul.grid')).gridTemplateColumns.split(' ').length")
        .await;
    assert!(
        columns.as_u64().unwrap_or(0) > 3,
        "{columns} gallery columns at 1440 px"
    );
    for (w, h) in [(1440, 900), (390, 844)] {
        window(&mut b, w, h).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_fits(&mut b, "full gallery", w).await;
        shot_for_people(&mut b, "full gallery", w).await;
        // A desktop or web client's card is its email's column, its text at 60% of its CSS size
        // or more (the card's picture is WIDE_CROP_CSS px of the page).
        let scales = b
            .eval("[...document.querySelectorAll('.card[data-shape=landscape] img')].map(i => [i.closest('.card').dataset.client, i.naturalWidth, i.getBoundingClientRect().width, i.closest('.card').getBoundingClientRect().width, getComputedStyle(i.closest('ul.grid')).gridTemplateColumns, innerWidth])")
            .await;
        let scales = scales.as_array().expect("cards");
        assert!(!scales.is_empty());
        for c in scales {
            assert_eq!(
                c[1].as_u64(),
                Some(u64::from(render::WIDE_THUMBNAIL_WIDTH)),
                "{c}"
            );
            let text = c[2].as_f64().unwrap_or(0.0) / f64::from(render::WIDE_CROP_CSS);
            assert!(
                text >= 0.6,
                "{}: text at {:.0}% of its size at {w} px ({c})",
                c[0],
                text * 100.0
            );
        }
    }
    window(&mut b, 1440, 900).await;

    // The mode filter shows the dark profiles, exactly those the client list calls dark, and
    // keeps the choice in the address.
    let mut dark: Vec<&String> = profiles
        .iter()
        .filter(|id| clients[id.as_str()]["color_scheme"] == "dark")
        .collect();
    dark.sort();
    assert!(!dark.is_empty(), "the catalog has dark profiles");
    b.eval("(() => { const s = document.getElementById('show-scheme'); s.value = 'dark'; s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        .await;
    let mut shown: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('.card')].filter(c => !c.hidden).map(c => c.dataset.client)")
            .await,
    )
    .expect("ids");
    shown.sort();
    assert_eq!(shown.iter().collect::<Vec<_>>(), dark);
    assert_eq!(
        b.text("#shown-count").await,
        format!("{} shown", dark.len())
    );
    assert_eq!(b.eval("location.search").await, json!("?scheme=dark"));
    b.eval("(() => { const s = document.getElementById('show-scheme'); s.value = ''; s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        .await;

    for (client, url) in &complete {
        let expr = format!(
            "new Promise(ok => {{ const full = new Image(); full.onload = () => {{ \
               const img = document.querySelector('.card[data-client={client}] img'); \
               const r = img.getBoundingClientRect(); \
               ok([full.naturalWidth / full.naturalHeight, r.width / r.height, \
                   img.closest('.card').dataset.shape]); }}; full.src = {url:?}; }})"
        );
        let v = b.eval(&expr).await;
        let (shot, shown) = (
            v[0].as_f64().expect("screenshot ratio"),
            v[1].as_f64().expect("thumbnail ratio"),
        );
        let viewport = &clients[client.as_str()]["viewport"];
        let portrait = viewport["width"].as_u64() < viewport["height"].as_u64();
        // A phone's card is its whole page narrowed; a wider client's a 4:3 crop of its column.
        let want = if portrait { shot } else { 4.0 / 3.0 };
        assert!(
            (shown / want - 1.0).abs() <= 0.02,
            "{client}: the thumbnail is {shown:.3} wide per high, want {want:.3} (screenshot {shot:.3})"
        );
        assert_eq!(
            v[2],
            json!(if portrait { "portrait" } else { "landscape" }),
            "{client}'s card shape"
        );
    }
    // The visual diff of 57 clients: the page is sent before any comparison, then fills itself,
    // each client's figures and pictures arriving in turn, the summary sorted at the end.
    let again = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Gallery", "html": HTML.replace("November", "December"), "clients": profiles}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    s.wait_processed(&again, Duration::from_secs(900)).await;
    b.goto(&s.url(&format!("/tests/{again}/diff?with={id}")))
        .await;
    let first = b
        .eval("fetch(location.href).then(r => r.text()).then(t => [performance.getEntriesByType('navigation')[0].responseEnd - performance.getEntriesByType('navigation')[0].requestStart, (t.match(/data-diff-src=/g) || []).length, (t.match(/<img/g) || []).length])")
        .await;
    assert_eq!(
        (first[1].as_u64(), first[2].as_u64()),
        (Some(profiles.len() as u64), Some(0)),
        "the first load compares nothing and loads no picture: {first}"
    );
    println!(
        "diff page of {} clients: first load {:.0} ms",
        profiles.len(),
        first[0].as_f64().unwrap_or(0.0)
    );
    b.wait_for(
        "document.body.dataset.diffDone === '1'",
        Duration::from_secs(300),
    )
    .await;
    let filled = b
        .eval("[document.querySelectorAll('section.diff-client dd.changed').length, document.querySelectorAll('.diff-summary tr[data-pending]').length, [...document.querySelectorAll('.diff-summary tbody tr')].map(r => parseFloat(r.dataset.share)).every((v, i, a) => i === 0 || a[i - 1] >= v)]")
        .await;
    assert_eq!(
        filled,
        json!([profiles.len(), 0, true]),
        "every client compared, the summary most changed first"
    );
    println!(
        "diff page of {} clients: all compared after {:.1} s",
        profiles.len(),
        b.eval("performance.now()").await.as_f64().unwrap_or(0.0) / 1000.0
    );
}
