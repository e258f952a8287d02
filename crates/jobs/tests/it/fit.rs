//! Gmail Android's, iOS Mail's and Samsung Email's zoom-out of a page wider than the screen,
//! through the real engines: decided on the page Chromium lays out at the client's screen, then drawn by the
//! client's own engine (Chromium for Gmail Android and Samsung, WebKit for iOS Mail). That
//! nothing is cropped is read from the PNG in both engines.

use std::time::Duration;

use domain::{Engine, Variant};
use render::{RenderConfig, Renderer};

use crate::Fixture;

/// The marker at the table's right edge: drawn only if nothing right of the screen is cropped.
const MARKER: [u8; 3] = [0, 0, 255];

/// A 600 px table whose last 40 px are the [`MARKER`]; `head` goes into the document's head.
fn table_email(head: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}</head>\
         <body style=\"margin:0;background-color:#ffffff\">\
         <table class=\"wrap\" width=\"600\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"width:600px\"><tr>\
         <td height=\"40\" style=\"height:40px;font-family:Arial,sans-serif;color:#222222\">Hello</td>\
         <td width=\"40\" height=\"40\" bgcolor=\"#0000ff\" style=\"width:40px;height:40px;background-color:#0000ff;font-size:1px;line-height:1px\">&nbsp;</td>\
         </tr></table></body></html>"
    )
}

/// A media query that fires on a phone but leaves the table as wide as it is.
const UNRELATED_QUERY: &str = "<style>@media only screen and (max-width: 620px) { .footer { font-size: 12px !important; } }</style>";

/// A media query that makes the table as wide as the screen.
const RESPONSIVE_QUERY: &str = "<style>@media only screen and (max-width: 620px) { .wrap { width: 100% !important; } }</style>";

/// Whether the marker colour is drawn right of `fraction` of the screenshot's columns (a little
/// margin for the scaling): where the table's last 40 px land when nothing is cropped.
fn marker_drawn_right_of(png: &[u8], fraction: f32) -> bool {
    let shot = image::load_from_memory(png)
        .expect("the screenshot is a PNG")
        .to_rgb8();
    let from = (shot.width() as f32 * fraction * 0.98) as u32;
    shot.enumerate_pixels()
        .any(|(x, _, p)| x >= from && p.0.iter().zip(MARKER).all(|(&c, m)| c.abs_diff(m) < 40))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_wider_than_the_screen_is_zoomed_out_to_it_and_a_responsive_one_is_not() {
    let f = Fixture::new(store::Backend::Sqlite).await;
    let work = tempfile::tempdir().expect("a work directory");
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.engines = vec![Engine::Blink, Engine::Webkit];
    cfg.slots_per_engine = 1;
    cfg.resource_wait = Duration::from_secs(1);
    let renderer = Renderer::start(cfg).await.unwrap_or_else(|e| {
        panic!("Chromium or WebKit did not start ({e}); scripts/setup.sh installs them")
    });
    let wide = [table_email(""), table_email(UNRELATED_QUERY)];
    let responsive = table_email(RESPONSIVE_QUERY);
    // No viewport meta: a phone browser would lay it out 980 px wide; the clients do not.
    let fluid_without_meta = "<html><body style=\"margin:0\"><table width=\"100%\"><tr><td>Hello</td><td width=\"40\" bgcolor=\"#0000ff\">&nbsp;</td></tr></table></body></html>".to_string();
    // Laid out at the page's width, or, for Samsung's auto fit, at its fixed 686 px.
    for (id, behaviour, layout) in [
        ("gmail_android", "gmail-android-auto-fit", 600),
        ("iphone15_ios", "ios-mail-zoom-out", 600),
        ("samsung_email_android", "samsung-auto-fit", 686),
    ] {
        let client = f.catalog.get(id).expect("in the catalog");
        let screen_px = (client.viewport.width as f32 * client.scale).round() as u32;
        for (html, zoomed) in [
            (&wide[0], true),
            (&wide[1], true),
            (&responsive, false),
            (&fluid_without_meta, false),
        ] {
            let what = if zoomed { "wide" } else { "responsive" };
            let transformed = emulate::transform(html, client, &f.rules).expect("transforms");
            let jobs::Prepared {
                request: req,
                rule_set,
                ..
            } = jobs::prepared_request(&renderer, client, Variant::Default, transformed)
                .await
                .expect("measured");
            assert_eq!(req.engine, client.engine, "{id}: drawn in its own engine");
            assert_eq!(
                rule_set.contains(behaviour),
                zoomed,
                "{id}, {what}: {rule_set}"
            );
            if zoomed {
                assert_eq!(req.viewport.width, layout, "{id}: laid out wider");
            } else {
                assert_eq!(req.viewport, client.viewport, "{id}: not zoomed");
                assert_eq!(req.scale, client.scale, "{id}: not zoomed");
            }
            let shot = renderer.render(req).await.expect("drawn");
            assert_eq!(shot.width, screen_px, "{id}, {what}: the screen's width");
            // Not checked without a viewport meta: Chromium's mobile emulation draws such a
            // page 980 px wide at the screen's width whatever was measured (render's drawing,
            // not the zoom-out decision this test is about; the request is checked above).
            // Zoomed, the table's last 40 px end the 600 px table in a page laid out `layout`
            // px wide; responsive, they end the screen.
            if html != &fluid_without_meta {
                let width = if zoomed {
                    layout
                } else {
                    client.viewport.width
                };
                let fraction = (width - 40) as f32 / width as f32;
                let fraction = if zoomed {
                    560.0 / layout as f32
                } else {
                    fraction
                };
                assert!(
                    marker_drawn_right_of(&shot.png, fraction),
                    "{id}, {what}: the table's right edge is cropped"
                );
            }
        }
    }
    renderer.shutdown().await;
}
