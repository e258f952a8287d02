//! Page probes: a script evaluated on the loaded document, here the contrast check of
//! `content::checks`, which needs the colours the engine computed.

use content::checks::{contrast_findings, tag_lines, Severity, CONTRAST_PROBE};
use domain::Engine;
use render::RenderError;

use crate::support::{renderer, request, run};

const EMAIL: &str = "<!DOCTYPE html>\n<html lang=\"en\"><body style=\"margin:0\">\n<p style=\"color:#000\">Black on white reads well.</p>\n<p style=\"color:#999999\">Grey on white does not.</p>\n<div style=\"background:#1a1a1a\">\n<p style=\"color:#ffffff\">White on near-black is fine.</p>\n<h1 style=\"color:#707070;font-size:30px\">Large grey heading</h1>\n</div>\n<div style=\"background-image:linear-gradient(#fff,#eee)\"><p style=\"color:#bbb\">Over an image</p></div>\n<p style=\"display:none;color:#eee\">hidden preheader</p>\n</body></html>\n";

#[test]
fn chromium_evaluates_the_contrast_probe_with_real_colours_and_lines() {
    run(async {
        let tagged = tag_lines(EMAIL).expect("readable");
        let json = renderer()
            .await
            .evaluate(request(Engine::Blink, tagged, 600, 1.0), CONTRAST_PROBE)
            .await
            .unwrap_or_else(|e| panic!("the probe failed: {e}"));
        let findings = contrast_findings(&json).expect("the probe's JSON is readable");
        let failures: Vec<_> = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        assert_eq!(failures.len(), 1, "{findings:#?}");
        assert_eq!(failures[0].line, Some(4));
        let contrast = failures[0].contrast.as_ref().expect("colours");
        assert_eq!(
            (contrast.foreground.as_str(), contrast.background.as_str()),
            ("#999999", "#ffffff")
        );
        assert!((contrast.ratio - 2.84).abs() < 0.02, "{contrast:?}");
        assert_eq!(contrast.required, 4.5);
        // #707070 on #1a1a1a is about 3.5:1: too little for body text, enough for 30px text.
        let unjudged: Vec<_> = findings
            .iter()
            .filter(|f| f.severity == Severity::Info)
            .map(|f| f.line)
            .collect();
        assert_eq!(unjudged, vec![Some(9)], "{findings:#?}");
    });
}

#[test]
fn probes_are_refused_outside_chromium() {
    run(async {
        let e = renderer()
            .await
            .evaluate(request(Engine::Gecko, "<p>x</p>".into(), 600, 1.0), "1 + 1")
            .await
            .expect_err("Gecko cannot evaluate probes");
        assert!(matches!(e, RenderError::InvalidRequest(_)), "{e}");
        assert!(e.to_string().contains("Chromium"), "{e}");
        let two = renderer()
            .await
            .evaluate(request(Engine::Blink, "<p>x</p>".into(), 600, 1.0), "1 + 1")
            .await
            .expect("Chromium evaluates");
        assert_eq!(two, "2");
    });
}
