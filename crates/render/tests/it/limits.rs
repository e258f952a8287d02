//! One set of request limits for all three engines, applied before any engine sees a request.

use domain::Engine;
use render::{
    RenderError, RenderRequest, MAX_HTML_BYTES, MAX_SCALE, MAX_VIEWPORT_CSS_PX, MIN_SCALE,
};

use crate::support::{config, request, run, start};

#[test]
fn a_webkit_request_over_the_limits_is_refused_exactly_as_a_blink_one_before_any_engine() {
    run(async {
        // No engine runs at all: what reaches an engine answers "not running in this renderer",
        // so an InvalidRequest here was decided before any engine.
        let dir = tempfile::tempdir().expect("temp dir");
        let renderer = start(config(dir.path().to_path_buf(), &[])).await;
        let mut refusals = Vec::new();
        for engine in [Engine::Blink, Engine::Webkit] {
            let mut messages = Vec::new();
            for (name, req) in over_the_limits(engine) {
                match renderer.render(req).await {
                    Err(e @ RenderError::InvalidRequest(_)) => {
                        assert!(!e.is_retryable(), "{name}: {e}");
                        messages.push(format!("{name}: {e}"));
                    }
                    other => panic!("{name} for {engine}: refused as invalid, got {other:?}"),
                }
            }
            refusals.push(messages);
        }
        assert_eq!(refusals[0], refusals[1], "one validation for both engines");
        // At the limits (a fractional scale too, which WebKit draws at the next whole one) the
        // request passes validation and only then finds no engine.
        for engine in [Engine::Blink, Engine::Webkit] {
            for scale in [MIN_SCALE, 2.625, MAX_SCALE] {
                let mut req = request(engine, String::new(), MAX_VIEWPORT_CSS_PX, scale);
                req.html = "x".repeat(MAX_HTML_BYTES);
                match renderer.render(req).await {
                    Err(RenderError::EngineUnavailable(e)) => assert_eq!(e, engine),
                    other => panic!("{engine} at scale {scale}: valid, got {other:?}"),
                }
            }
        }
        renderer.shutdown().await;
    });
}

/// One request per limit, each just past it.
fn over_the_limits(engine: Engine) -> Vec<(&'static str, RenderRequest)> {
    let page = || "<p>x</p>".to_string();
    let mut too_tall = request(engine, page(), 600, 1.0);
    too_tall.viewport.height = MAX_VIEWPORT_CSS_PX + 1;
    vec![
        (
            "too wide",
            request(engine, page(), MAX_VIEWPORT_CSS_PX + 1, 1.0),
        ),
        ("too tall", too_tall),
        ("no width", request(engine, page(), 0, 1.0)),
        (
            "scale too large",
            request(engine, page(), 600, MAX_SCALE + 0.5),
        ),
        (
            "scale too small",
            request(engine, page(), 600, MIN_SCALE / 2.0),
        ),
        ("scale not a number", request(engine, page(), 600, f32::NAN)),
        (
            "HTML too large",
            request(engine, "x".repeat(MAX_HTML_BYTES + 1), 600, 1.0),
        ),
    ]
}
