//! The renderer's own checks on what an engine drew, shown to work on the real engines by making
//! them misbehave: a page that still holds an earlier document is refused by its address (the
//! per-request nonce) and replaced, and the email is drawn on the fresh page; a blank picture of
//! an email with visible text is drawn again once and then refused; an email with nothing visible
//! may be blank.

use render::{Faults, RenderError};

use crate::support::{
    config, counter, is_red, page, page_replacements, pixel, request, run, start, ENGINES,
};

/// The error `result` ends in; a picture there is the failure this module guards against.
fn refusal(engine: domain::Engine, result: Result<render::Rendered, RenderError>) -> RenderError {
    match result {
        Ok(shot) => panic!(
            "{engine}: a {}x{} picture came back where none should",
            shot.width, shot.height
        ),
        Err(e) => e,
    }
}

/// The process-wide count of pictures refused by `check` for `engine`.
fn refused(engine: domain::Engine, check: &str) -> u64 {
    counter(&format!(
        "mailproof_drawn_refused_total{{engine=\"{engine}\",check=\"{check}\"}}"
    ))
}

fn coloured(colour: &str, text: &str) -> String {
    format!(
        r#"<body style="margin:0;background:{colour}"><p style="font:20px Arial">{text}</p></body>"#
    )
}

#[test]
fn an_engine_that_keeps_the_previous_document_is_refused_by_its_address() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cfg = config(dir.path().to_path_buf(), &ENGINES);
        cfg.slots_per_engine = 1;
        cfg.faults = Faults {
            keep_previous_document: true,
            ..Faults::default()
        };
        let renderer = start(cfg).await;
        for engine in ENGINES {
            let first = renderer
                .render(request(
                    engine,
                    coloured("#ff0000", "first account"),
                    600,
                    1.0,
                ))
                .await
                .unwrap_or_else(|e| panic!("{engine}: the first document loads: {e}"));
            assert!(
                is_red(pixel(&first, 300, 10, 1.0)),
                "{engine}: the first is red"
            );
            let refused_before = refused(engine, "wrong_document");
            let replaced_before = page_replacements(engine);
            // The page still holds the first account's email: that picture is refused by the
            // address the page reports, the page is replaced, and the fresh one draws this one.
            let second = renderer
                .render(request(
                    engine,
                    coloured("#00ff00", "second account"),
                    600,
                    1.0,
                ))
                .await
                .unwrap_or_else(|e| panic!("{engine}: drawn again on a fresh page: {e}"));
            let p = pixel(&second, 300, 10, 1.0);
            assert!(
                p[1] > 200 && p[0] < 60,
                "{engine}: the second account's picture is its own green, got {p:?}"
            );
            assert!(
                refused(engine, "wrong_document") > refused_before,
                "{engine}: the stale picture was refused and counted"
            );
            assert!(
                page_replacements(engine) > replaced_before,
                "{engine}: the page holding the stale document was replaced"
            );
        }
        renderer.shutdown().await;
    });
}

#[test]
fn a_blank_picture_of_an_email_with_text_is_drawn_again_then_refused() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cfg = config(dir.path().to_path_buf(), &ENGINES);
        cfg.slots_per_engine = 1;
        cfg.faults = Faults {
            blank_capture: true,
            ..Faults::default()
        };
        let renderer = start(cfg).await;
        for engine in ENGINES {
            let before = refused(engine, "blank");
            let error = refusal(
                engine,
                renderer
                    .render(request(engine, page("data:,"), 600, 1.0))
                    .await,
            );
            assert!(
                matches!(error, RenderError::BlankRender { .. }),
                "{engine}: {error}"
            );
            assert_eq!(error.bounce_code(), "blank_render");
            assert_eq!(
                refused(engine, "blank"),
                before + 2,
                "{engine}: drawn once more, then refused"
            );
            // Nothing a reader could see: hidden, transparent, too small, or the colour of
            // what is behind it. A blank picture is then the truth.
            let invisible = r#"<body style="margin:0;background:#ffffff">
<div style="display:none">hidden preheader</div>
<p style="color:transparent">transparent</p>
<p style="color:#ffffff">white on white</p>
<p style="font-size:1px">tiny</p>
<p style="visibility:hidden">invisible</p></body>"#;
            renderer
                .render(request(engine, invisible.to_string(), 600, 1.0))
                .await
                .unwrap_or_else(|e| {
                    panic!("{engine}: a page with nothing visible may be blank: {e}")
                });
        }
        renderer.shutdown().await;
    });
}
