//! Issue 5's acceptance, seen in real screenshots: what each profile draws, not only the HTML it
//! hands the engine.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// Word-engine Outlook profiles, and profiles of other families in all three engines.
const WORD: [&str; 3] = ["outlook2013_win", "outlook2016_win", "outlook365_win"];
const OTHERS: [&str; 4] = [
    "gmail_chrome_web",
    "applemail_macos",
    "thunderbird_win",
    "outlook_com_chrome",
];

fn config() -> Options {
    Options {
        config: "[render]\nengines = [\"blink\", \"gecko\", \"webkit\"]\nslots_per_engine = 1\n"
            .into(),
    }
}

async fn render(s: &Server, html: &str, clients: &[&str]) -> (Value, Value) {
    let body = json!({"subject": "Emulation", "html": html, "clients": clients});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let info = s.wait_processed(&id, Duration::from_secs(300)).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        clients.len(),
        "{info}"
    );
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let catalog = s.get("/v5/email/clients").await.ok()["clients"].clone();
    (results, catalog)
}

async fn screenshot(s: &Server, results: &Value, client: &str) -> image::RgbImage {
    let url = results[client]["screenshots"]["default"]
        .as_str()
        .expect("url");
    let bytes = s
        .http
        .get(url)
        .send()
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    image::load_from_memory(&bytes).expect("png").to_rgb8()
}

/// Pixels within a small distance of `rgb`.
fn count(img: &image::RgbImage, rgb: [u8; 3]) -> usize {
    img.pixels()
        .filter(|p| (0..3).all(|i| (i32::from(p[i]) - i32::from(rgb[i])).abs() < 40))
        .count()
}

/// Topmost row (in CSS px) holding a pixel of `rgb`.
fn top_css_row(img: &image::RgbImage, rgb: [u8; 3], scale: f64) -> Option<f64> {
    img.enumerate_pixels()
        .find(|(_, _, p)| (0..3).all(|i| (i32::from(p[i]) - i32::from(rgb[i])).abs() < 40))
        .map(|(_, y, _)| f64::from(y) / scale)
}

const RED: [u8; 3] = [255, 0, 0];
const GREEN: [u8; 3] = [0, 255, 0];
const BLUE: [u8; 3] = [0, 0, 255];
const MAGENTA: [u8; 3] = [255, 0, 255];
const YELLOW: [u8; 3] = [255, 255, 0];

#[tokio::test]
async fn word_engine_outlook_draws_mso_content_and_vml_buttons_and_nobody_else_does() {
    let html = r##"<!doctype html><html xmlns:v="urn:schemas-microsoft-com:vml"><body style="margin:0;background:#ffffff">
<!--[if mso]><table role="presentation"><tr><td bgcolor="#ff0000" style="background:#ff0000;width:300px;height:100px">&nbsp;</td></tr></table><![endif]-->
<!--[if !mso]><!--><div style="background:#00ff00;width:300px;height:100px">&nbsp;</div><!--<![endif]-->
<div style="height:20px"></div>
<!--[if mso]><v:roundrect xmlns:v="urn:schemas-microsoft-com:vml" href="https://example.com" style="height:60px;v-text-anchor:middle;width:300px;" arcsize="10%" strokecolor="#0000ff" fillcolor="#0000ff"><center style="color:#ffffff;font-family:Arial;font-size:20px;">Buy now</center></v:roundrect><![endif]-->
</body></html>"##;
    let s = Server::start_with(config()).await;
    let all: Vec<&str> = WORD.iter().chain(OTHERS.iter()).copied().collect();
    let (results, _) = render(&s, html, &all).await;
    for c in WORD {
        let img = screenshot(&s, &results, c).await;
        assert!(
            count(&img, RED) > 20_000,
            "{c}: the mso-only red block shows"
        );
        assert_eq!(
            count(&img, GREEN),
            0,
            "{c}: the non-mso green block is hidden"
        );
        assert!(
            count(&img, BLUE) > 10_000,
            "{c}: the VML button's fill colour shows"
        );
    }
    for c in OTHERS {
        let img = screenshot(&s, &results, c).await;
        assert_eq!(count(&img, RED), 0, "{c}: the mso-only red block is hidden");
        assert!(
            count(&img, GREEN) > 20_000,
            "{c}: the non-mso green block shows"
        );
        assert_eq!(
            count(&img, BLUE),
            0,
            "{c}: the VML button is Outlook's alone"
        );
    }
}

#[tokio::test]
async fn gmail_drops_position_absolute_apple_mail_keeps_it_and_only_the_dark_twin_is_dark() {
    // `:root { color-scheme }` opts in: without it Apple Mail leaves styled HTML as sent in dark
    // mode (behaviour dark-apple-opt-in, tested in emulate's suite).
    let html = r##"<!doctype html><html><head><style>
:root { color-scheme: light dark; }
.abs { position: absolute; top: 0; left: 0; width: 120px; height: 120px; background: #ff00ff; }
.box { width: 200px; height: 200px; background: #ffff00; }
@media (prefers-color-scheme: dark) { .box { background: #0000ff !important; } }
</style></head><body style="margin:0;background:#ffffff">
<div style="height:400px"></div>
<div class="abs">&nbsp;</div>
<div class="box">&nbsp;</div>
</body></html>"##;
    let s = Server::start_with(config()).await;
    let clients = ["gmail_chrome_web", "applemail_macos", "applemail_macos_dm"];
    let (results, catalog) = render(&s, html, &clients).await;
    let scale = |c: &str| catalog[c]["viewport"]["scale"].as_f64().expect("scale");
    // The rule set shown with each screenshot names the documented behaviours that changed it
    // (data/behaviours.toml): Gmail renamed the classes; Apple Mail applies none.
    assert_eq!(
        results["gmail_chrome_web"]["rule_set"], "gmail-desktop-webmail + gmail-class-prefix",
        "{results}"
    );
    assert_eq!(results["applemail_macos"]["rule_set"], "apple-mail-macos");

    let gmail = screenshot(&s, &results, "gmail_chrome_web").await;
    let top = top_css_row(&gmail, MAGENTA, scale("gmail_chrome_web"))
        .expect("the block is drawn in Gmail");
    assert!(
        top >= 400.0,
        "Gmail drops position:absolute, so the block stays in the flow (top at {top} CSS px)"
    );
    let apple = screenshot(&s, &results, "applemail_macos").await;
    let top = top_css_row(&apple, MAGENTA, scale("applemail_macos"))
        .expect("the block is drawn in Apple Mail");
    assert!(
        top < 100.0,
        "Apple Mail keeps position:absolute (top at {top} CSS px)"
    );

    assert!(
        count(&apple, YELLOW) > 10_000,
        "light Apple Mail: the light colours"
    );
    assert_eq!(
        count(&apple, BLUE),
        0,
        "light Apple Mail: no dark-mode rule"
    );
    let dark = screenshot(&s, &results, "applemail_macos_dm").await;
    assert!(
        count(&dark, BLUE) > 10_000,
        "Apple Mail dark: the prefers-color-scheme rule applies (the CSS opts in)"
    );
    assert_eq!(
        count(&dark, YELLOW),
        0,
        "Apple Mail dark: the light rule is overridden"
    );
}
