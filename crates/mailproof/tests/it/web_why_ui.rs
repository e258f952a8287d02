//! The "why" panel and the visual diff page in headless Chromium, on real screenshots from one
//! engine and two clients: the panel's line link lands on the offending line of the source view,
//! the diff of a test against itself is zero and a recoloured block is a changed region in every
//! client; the Links tab runs the link check; axe-core finds no serious or critical violation on
//! these pages.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;
use crate::web_ui::{Browser, AXE};

/// Both drawn by Chromium; Outlook's rule set drops `display:flex`.
const CLIENTS: [&str; 2] = ["outlook365_win", "gmail_chrome_web"];

/// `display:flex` on line 7, and a block whose colour the second test changes.
fn email(block: &str) -> String {
    format!(
        "<!doctype html>\n<html>\n<head>\n<title>t</title>\n</head>\n\
         <body style=\"margin:0;background:#ffffff\">\n\
         <div style=\"display:flex\"><p style=\"color:#222222;font-family:Arial\">Visual diff check</p></div>\n\
         <table width=\"100%\" cellpadding=\"0\" cellspacing=\"0\"><tr><td style=\"padding:20px\">\n\
         <table width=\"240\" cellpadding=\"0\" cellspacing=\"0\"><tr><td height=\"80\" bgcolor=\"{block}\" \
         style=\"background-color:{block};height:80px\">&nbsp;</td></tr></table>\n\
         </td></tr></table>\n</body>\n</html>\n"
    )
}

async fn create(s: &Server, html: &str) -> String {
    let body = json!({"subject": "Spring", "html": html, "clients": CLIENTS});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    id
}

async fn shares(b: &mut Browser) -> Vec<(String, f64, u64)> {
    let v: Value = b
        .eval(
            "[...document.querySelectorAll('.diff-client')].map(s => [s.dataset.client, \
             parseFloat((s.querySelector('dd.changed') || {dataset: {share: 'NaN'}}).dataset.share), \
             parseInt((s.querySelector('dd.regions') || {textContent: '0'}).textContent, 10)])",
        )
        .await;
    v.as_array()
        .expect("sections")
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or_default().to_string(),
                r[1].as_f64().unwrap_or(f64::NAN),
                r[2].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

const IMAGES_LOADED: &str = "document.querySelectorAll('.diff-shots img').length === 6 && \
    [...document.querySelectorAll('.diff-shots img')].every(i => i.complete && i.naturalWidth > 0)";

/// Waits until the visual diff page has compared every client (it does so after loading; on a
/// machine shared with the full-gallery test this takes a while) and shown all its pictures,
/// the lazy ones loaded at once.
async fn diff_page_ready(b: &mut Browser) {
    b.wait_for(
        "document.body.dataset.diffDone === '1'",
        Duration::from_secs(180),
    )
    .await;
    b.eval("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
        .await;
    b.wait_for(IMAGES_LOADED, Duration::from_secs(120)).await;
}

#[tokio::test]
async fn the_why_panel_and_the_visual_diff_in_chromium() {
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    let before = create(&s, &email("#3366cc")).await;
    let after = create(&s, &email("#cc3333")).await;
    for id in [&before, &after] {
        let info = s.wait_processed(id, Duration::from_secs(120)).await;
        assert_eq!(
            info["completed"].as_array().map_or(0, Vec::len),
            CLIENTS.len(),
            "every client completes: {info}"
        );
    }

    let mut b = Browser::start().await;
    b.goto(&s.url("/signin")).await;
    b.set_value("#api_key", ADMIN_KEY).await;
    b.set_value("#password", ADMIN_PASS).await;
    b.click_and_wait("form[action='/signin'] button").await;
    assert_eq!(b.eval("location.pathname").await, json!("/tests"));

    // The panel beside Outlook's screenshot: display:flex is an error on line 7.
    b.goto(&s.url(&format!("/tests/{before}/clients/outlook365_win")))
        .await;
    b.wait_for(
        "document.getElementById('full-shot') && document.getElementById('full-shot').complete && document.getElementById('full-shot').naturalWidth > 0",
        Duration::from_secs(30),
    )
    .await;
    let link = "[data-severity=error] [data-property='display:flex'] .lines a";
    let href = b
        .eval(&format!(
            "(document.querySelector({link:?}) || {{getAttribute: () => ''}}).getAttribute('href')"
        ))
        .await;
    assert_eq!(
        href,
        json!(format!("/tests/{before}/content?view=source#L7")),
        "the display:flex error links to line 7"
    );
    assert!(b.text("aside.why").await.contains("Tips for this client"));
    b.check_accessibility(&axe, "full view with the why panel")
        .await;

    // Following the link shows that line, marked, in the source view.
    b.click_and_wait(link).await;
    assert_eq!(b.eval("location.hash").await, json!("#L7"));
    let target = b
        .eval("(document.querySelector(':target') || {}).textContent || ''")
        .await;
    assert!(
        target
            .as_str()
            .is_some_and(|t| t.starts_with('7') && t.contains("display:flex")),
        "line 7 is the target: {target}"
    );
    b.check_accessibility(&axe, "numbered source").await;

    // The Links tab starts the link check and shows its report once done.
    b.goto(&s.url(&format!("/tests/{before}/links"))).await;
    b.click_and_wait("form[action$='/links'] button").await;
    b.wait_for(
        "!document.querySelector('[data-reload-after]') && document.readyState === 'complete' && document.body.textContent.includes('no links or images')",
        Duration::from_secs(60),
    )
    .await;
    b.check_accessibility(&axe, "links").await;

    // From the newer test's page, the picker offers the earlier test of the same subject.
    b.goto(&s.url(&format!("/tests/{after}"))).await;
    assert_eq!(
        b.eval("document.getElementById('diff-with').value").await,
        json!(before)
    );
    b.click_and_wait("form[action$='/diff'] button").await;
    // The page came before any comparison: each client a placeholder the page fills in turn.
    let first = b
        .eval("fetch(location.href).then(r => r.text()).then(t => [(t.match(/data-diff-src=/g) || []).length, t.includes('diff-shots')])")
        .await;
    assert_eq!(
        first,
        json!([CLIENTS.len(), false]),
        "nothing compared before the page is sent"
    );
    diff_page_ready(&mut b).await;
    let changed = shares(&mut b).await;
    assert_eq!(changed.len(), CLIENTS.len(), "{changed:?}");
    for (client, share, regions) in &changed {
        assert!(
            *share > 0.0 && *share < 0.5 && *regions >= 1,
            "{client}: the recoloured block is a changed region ({share}, {regions} regions)"
        );
    }
    b.check_accessibility(&axe, "visual diff").await;

    // A test against itself changes nowhere.
    b.goto(&s.url(&format!("/tests/{before}/diff?with={before}")))
        .await;
    diff_page_ready(&mut b).await;
    let same = shares(&mut b).await;
    assert_eq!(same.len(), CLIENTS.len(), "{same:?}");
    for (client, share, regions) in &same {
        assert!(
            *share == 0.0 && *regions == 0,
            "{client}: {share}, {regions}"
        );
    }
    assert_eq!(
        b.eval("document.querySelectorAll('dd.changed').length === 2 && [...document.querySelectorAll('dd.changed')].every(d => d.textContent.includes('no change'))").await,
        json!(true)
    );
}
