//! One job through the real Chromium: the path the service takes, from the queue to a stored
//! screenshot of the client's size. On the backend `MAILPROOF_TEST_DB` names (the engine, not the
//! database, is what this adds to the tests with test engines).

use std::sync::Arc;
use std::time::Duration;

use domain::{ColorScheme, Engine, Picture, ScreenshotStatus, Variant};
use jobs::RenderWorkerConfig;
use render::{RenderConfig, Renderer};
use store::{screenshot_key, Backend};

use crate::{config, drain, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_draws_a_queued_job() {
    let f = Fixture::new(Backend::from_env()).await;
    let work = tempfile::tempdir().expect("a work directory");
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.engines = vec![Engine::Blink];
    cfg.slots_per_engine = 1;
    cfg.resource_wait = Duration::from_secs(1);
    let renderer =
        Arc::new(Renderer::start(cfg).await.unwrap_or_else(|e| {
            panic!("Chromium did not start ({e}); scripts/setup.sh installs it")
        }));
    let client = f
        .client_of(Engine::Blink, ColorScheme::Light, false)
        .clone();
    let test = f.queue(&[(&client.id, &[Variant::Default])]).await;
    let worker = f.worker(
        renderer.clone(),
        RenderWorkerConfig {
            engines: vec![Engine::Blink],
            ..config()
        },
    );
    assert_eq!(drain(&worker).await, 1);
    let row = f.client(&test, &client.id).await;
    assert_eq!(
        row.status,
        ScreenshotStatus::Complete,
        "bounced: {:?}",
        row.bounce_message
    );
    let png = f
        .blobs
        .get(&screenshot_key(
            &test,
            &client.id,
            &Picture::Shot(Variant::Default),
        ))
        .await
        .expect("the blob store answers")
        .expect("the screenshot is stored");
    let shot = image::load_from_memory(&png).expect("the screenshot is a PNG");
    assert_eq!(
        shot.width(),
        (client.viewport.width as f32 * client.scale).round() as u32
    );
    // The email's dark text was drawn: not a blank page.
    let dark_pixels = shot
        .to_rgb8()
        .pixels()
        .filter(|p| p.0.iter().all(|&c| c < 100))
        .count();
    assert!(dark_pixels > 0, "nothing of the email was drawn");
    drop(worker);
    match Arc::try_unwrap(renderer) {
        Ok(renderer) => renderer.shutdown().await,
        Err(_) => panic!("the renderer is still shared after the worker is gone"),
    }
}
