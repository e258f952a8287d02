//! Forced dark mode computed on the rendered page: colours read in Chromium after the cascade,
//! written back inline, then drawn by each engine.

use emulate::color::DarkPass;

use crate::support::{pixel, render, renderer, request, run, ENGINES};

/// A light card with dark text (its colours come from a `<style>` rule and from inheritance), a
/// dark-designed bar, an Outlook hook rule that turns the hook box green once `data-ogsb` is set,
/// and a 24 px icon.
const PAGE: &str = r##"<!DOCTYPE html><html><head><style>
body { margin: 0; }
.card { background: #ffffff; color: #111111; height: 100px; font-size: 40px; }
.bar { background-color: #000000; color: #ffffff; height: 100px; }
.hook { background-color: #ff0000; height: 100px; }
[data-ogsb] .hook { background-color: #00ff00 !important; }
</style></head><body>
<div class="card"><span>Text</span></div>
<div class="bar">x</div>
<div class="hook"></div>
<table bgcolor="#ffffff" width="600" height="100"><tr><td><font color="#000000">font</font></td></tr></table>
</body></html>"##;

fn lightness(p: [u8; 4]) -> u32 {
    (u32::from(p[0]) + u32::from(p[1]) + u32::from(p[2])) / 3
}

/// The card, the bar and the hook box of [`PAGE`].
fn bands(shot: render::Rendered) -> [[u8; 4]; 3] {
    [50, 150, 250].map(|y| pixel(&shot, 500, y, 1.0))
}

#[test]
fn each_class_recolours_the_computed_colours_and_every_engine_draws_the_result() {
    run(async {
        let r = renderer().await;
        let req = request(domain::Engine::Blink, PAGE.to_string(), 600, 1.0);

        let outlook = r
            .recolour_dark(&req, DarkPass::OutlookPartial)
            .await
            .expect("Outlook pass");
        // Originals kept where the client keeps them; the tags of the probe are gone.
        assert!(
            outlook.contains("data-ogsb=\"rgb(255, 255, 255)\""),
            "{outlook}"
        );
        assert!(outlook.contains("data-ogac=\"rgb(0, 0, 0)\""), "{outlook}");
        assert!(
            outlook.contains("data-ogab=\"rgb(255, 255, 255)\""),
            "{outlook}"
        );
        assert!(!outlook.contains("data-mp-dark"), "{outlook}");
        assert!(
            outlook.starts_with("<!DOCTYPE html>"),
            "standards mode kept"
        );
        let full = r
            .recolour_dark(&req, DarkPass::FullInvert)
            .await
            .expect("full pass");
        assert!(
            !full.contains("data-ogsb=") && !full.contains("data-ogsc="),
            "{full}"
        );

        for engine in ENGINES {
            let mut shot_req = req.clone();
            shot_req.engine = engine;
            shot_req.html = outlook.clone();
            let [card, bar, hook] = bands(render(shot_req.clone()).await);
            assert!(
                lightness(card) < 80,
                "{engine} Outlook: light card darkened, {card:?}"
            );
            assert!(
                lightness(bar) < 30,
                "{engine} Outlook: dark bar kept, {bar:?}"
            );
            assert!(
                hook[1] > 200 && hook[0] < 60,
                "{engine} Outlook: [data-ogsb] hook applies, {hook:?}"
            );

            shot_req.html = full.clone();
            let [card, bar, hook] = bands(render(shot_req.clone()).await);
            assert!(
                lightness(card) < 80,
                "{engine} full: light card darkened, {card:?}"
            );
            assert!(
                lightness(bar) > 200,
                "{engine} full: dark bar made light, {bar:?}"
            );
            assert!(
                hook[0] > 150 && hook[1] < 100,
                "{engine} full: no hook, {hook:?}"
            );

            // The light document, drawn as sent, for contrast.
            shot_req.html = PAGE.to_string();
            let shot = render(shot_req).await;
            assert!(
                lightness(pixel(&shot, 500, 50, 1.0)) > 240,
                "{engine} light card"
            );
        }
    });
}

#[test]
fn blink_force_dark_keeps_dark_areas_and_inverts_small_images_only() {
    run(async {
        let r = renderer().await;
        let html = r##"<html><body style="margin:0">
<div style="background:#ffffff;height:100px"></div>
<div style="background:#222222;height:100px"></div>
<img style="display:block" width="24" height="24" src="data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAAAAAAALAAAAAABAAEAAAICRAEAOw==">
<img style="display:block" width="300" height="100" src="data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAAAAAAALAAAAAABAAEAAAICRAEAOw==">
</body></html>"##;
        let req = request(domain::Engine::Blink, html.to_string(), 600, 1.0);
        let out = r
            .recolour_dark(&req, DarkPass::BlinkForceDark)
            .await
            .expect("Blink pass");
        let shot = render(crate::support::request(
            domain::Engine::Blink,
            out,
            600,
            1.0,
        ))
        .await;
        assert!(
            lightness(pixel(&shot, 300, 50, 1.0)) < 30,
            "white made dark"
        );
        let kept = pixel(&shot, 300, 150, 1.0);
        assert_eq!(&kept[..3], &[0x22, 0x22, 0x22], "dark area kept");
        let icon = pixel(&shot, 10, 212, 1.0);
        let big = pixel(&shot, 200, 270, 1.0);
        assert!(
            lightness(icon) < 30,
            "the 24 px white icon is inverted, {icon:?}"
        );
        assert!(
            lightness(big) > 240,
            "the large white image is kept, {big:?}"
        );
    });
}
