//! The render worker's outcomes as the results show them: a drawn job is stored and done, an
//! engine that dies is retried after the backoff and given up after the last attempt, a refused
//! document bounces at once, a storage fault releases the job without counting an attempt, a
//! worker claims only what its engines draw, its loops answer a wake-up and stop at shutdown, and a
//! worker whose job was taken over stores no picture.

use std::sync::Arc;
use std::time::Duration;

use domain::{ColorScheme, Engine, Picture, ScreenshotStatus, Variant};
use jobs::RenderWorkerConfig;
use store::{screenshot_key, Backend};
use tokio::sync::Notify;

use crate::engines::{Behaviour, TestEngine};
use crate::{config, drain, Fixture};

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The width of the PNG stored under `name`.
async fn stored_width(f: &Fixture, test: &str, client: &str, picture: Picture) -> u32 {
    let name = picture.name();
    let bytes = f
        .blobs
        .get(&screenshot_key(test, client, &picture))
        .await
        .expect("the blob store answers")
        .unwrap_or_else(|| panic!("no {name} screenshot of {client} stored"));
    image::load_from_memory(&bytes)
        .unwrap_or_else(|e| panic!("the {name} screenshot of {client} is not an image: {e}"))
        .width()
}

async fn a_drawn_job_is_stored_and_done(backend: Backend) {
    let f = Fixture::new(backend).await;
    let client = f
        .client_of(Engine::Blink, ColorScheme::Light, false)
        .clone();
    let test = f
        .queue(&[(&client.id, &[Variant::Default, Variant::Horizontal])])
        .await;
    let engine = Arc::new(TestEngine::new(Behaviour::Draw));
    let worker = f.worker(engine.clone(), config());
    assert_eq!(drain(&worker).await, 2, "one job per variant");
    assert_eq!(engine.renders(), 2);

    let row = f.client(&test, &client.id).await;
    assert_eq!(row.status, ScreenshotStatus::Complete);
    assert_eq!(row.engine.as_deref(), Some("blink"));
    assert!(row.rule_set.is_some(), "the rule set that transformed it");
    assert_eq!(f.store.pending_jobs().await.expect("count"), 0);
    // The request was the client's: its width, and its height once turned.
    let wide = |css: u32| (css as f32 * client.scale).round() as u32;
    assert_eq!(
        stored_width(&f, &test, &client.id, Picture::Shot(Variant::Default)).await,
        wide(client.viewport.width)
    );
    assert_eq!(
        stored_width(&f, &test, &client.id, Picture::Shot(Variant::Horizontal)).await,
        wide(client.viewport.height)
    );
    assert_eq!(
        stored_width(&f, &test, &client.id, Picture::Thumbnail).await,
        2
    );
    assert_eq!(
        stored_width(&f, &test, &client.id, Picture::FullThumbnail).await,
        3
    );
    let drawn = engine.requests.lock().expect("not poisoned").clone();
    assert!(drawn.iter().all(|r| r.html.contains("Hello")), "{drawn:?}");
    assert_eq!(
        engine
            .recolourings
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

async fn an_engine_that_dies_is_retried_after_a_backoff_then_given_up(backend: Backend) {
    let f = Fixture::new(backend).await;
    let (client, test) = f.queue_one().await;
    let engine = Arc::new(TestEngine::new(Behaviour::Die));
    let worker = f.worker(engine.clone(), config());

    let mut attempts = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while f.client(&test, &client).await.status != ScreenshotStatus::Bounced {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not given up after {attempts} attempts"
        );
        if worker.run_one().await.expect("the store answers") {
            attempts += 1;
            assert_eq!(engine.renders(), attempts);
            let row = f.client(&test, &client).await;
            assert_eq!(row.attempts, attempts as i64);
            if attempts < 3 {
                assert_eq!(
                    row.status,
                    ScreenshotStatus::Processing,
                    "a retry is still under way for the caller"
                );
                assert!(
                    !worker.run_one().await.expect("the store answers"),
                    "the retry waits for its backoff"
                );
            }
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(attempts, 3, "given up after max_attempts");
    let row = f.client(&test, &client).await;
    assert_eq!(row.bounce_code.as_deref(), Some("engine_failure"));
    let message = row.bounce_message.unwrap_or_default();
    assert!(message.contains("died"), "{message}");
    assert!(!worker.run_one().await.expect("the store answers"));
    assert_eq!(f.store.pending_jobs().await.expect("count"), 0);
    assert_eq!(
        f.blobs
            .get(&screenshot_key(
                &test,
                &client,
                &Picture::Shot(Variant::Default)
            ))
            .await
            .expect("the blob store answers"),
        None
    );
}

async fn a_refused_document_bounces_at_once(backend: Backend) {
    let f = Fixture::new(backend).await;
    let client = f
        .client_of(Engine::Gecko, ColorScheme::Light, false)
        .id
        .clone();
    let test = f
        .queue(&[(&client, &[Variant::Default, Variant::NoImages])])
        .await;
    let engine = Arc::new(TestEngine::new(Behaviour::Refuse));
    let worker = f.worker(engine.clone(), config());
    assert_eq!(
        drain(&worker).await,
        1,
        "the bounce fails the client's other variant too"
    );
    let row = f.client(&test, &client).await;
    assert_eq!(row.status, ScreenshotStatus::Bounced);
    assert_eq!(row.attempts, 1);
    assert_eq!(row.bounce_code.as_deref(), Some("render_failed"));
    assert_eq!(f.store.pending_jobs().await.expect("count"), 0);
}

/// The process-wide count of screenshots bounced with `reason`, as `/metrics` shows it.
fn bounces(reason: &str) -> u64 {
    let text = telemetry::encode(telemetry::global(), &[], 0).expect("metrics encode");
    let series = format!("mailproof_bounces_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a counter"))
}

async fn a_blank_render_bounces_as_blank_render_and_is_counted(backend: Backend) {
    let f = Fixture::new(backend).await;
    let (client, test) = f.queue_one().await;
    let before = bounces("blank_render");
    let engine = Arc::new(TestEngine::new(Behaviour::Blank));
    let worker = f.worker(engine.clone(), config());
    drain(&worker).await;
    let row = f.client(&test, &client).await;
    assert_eq!(row.status, ScreenshotStatus::Bounced);
    assert_eq!(
        row.attempts, 1,
        "the renderer already drew it again; the job does not"
    );
    assert_eq!(row.bounce_code.as_deref(), Some("blank_render"));
    assert!(
        row.bounce_message
            .as_deref()
            .is_some_and(|m| m.contains("blank picture")),
        "{:?}",
        row.bounce_message
    );
    assert!(bounces("blank_render") > before, "counted in /metrics");
}

async fn a_storage_fault_releases_the_job_without_counting_an_attempt(backend: Backend) {
    let f = Fixture::new(backend).await;
    let (client, test) = f.queue_one().await;
    let engine = Arc::new(TestEngine::new(Behaviour::Draw));
    let worker = f.worker(
        engine.clone(),
        RenderWorkerConfig {
            max_attempts: 1,
            ..config()
        },
    );
    // The blob directory turned into a file: every write fails, as on a full or lost disk.
    let dir = f.blob_dir.path().join("blobs");
    std::fs::remove_dir_all(&dir).expect("remove the blob directory");
    std::fs::write(&dir, b"not a directory").expect("a file in its place");
    assert!(worker.run_one().await.expect("the store answers"));
    assert_eq!(engine.renders(), 1);
    let row = f.client(&test, &client).await;
    assert_eq!(
        row.status,
        ScreenshotStatus::Processing,
        "not bounced although max_attempts is 1: {:?}",
        row.bounce_message
    );
    assert!(
        !worker.run_one().await.expect("the store answers"),
        "the released job waits for its backoff"
    );

    std::fs::remove_file(&dir).expect("remove the file");
    std::fs::create_dir(&dir).expect("the blob directory back");
    let mut done = false;
    for _ in 0..100 {
        if worker.run_one().await.expect("the store answers") {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done, "the released job did not come back");
    let row = f.client(&test, &client).await;
    assert_eq!(row.status, ScreenshotStatus::Complete);
    assert_eq!(row.attempts, 1, "the fault's attempt was given back");
    assert_eq!(engine.renders(), 2);
}

async fn a_worker_claims_only_the_jobs_its_engines_draw(backend: Backend) {
    let f = Fixture::new(backend).await;
    let light = f
        .client_of(Engine::Webkit, ColorScheme::Light, false)
        .id
        .clone();
    let blink = f
        .client_of(Engine::Blink, ColorScheme::Light, false)
        .id
        .clone();
    // Its colours are read in Chromium before WebKit draws it.
    let dark = f
        .client_of(Engine::Webkit, ColorScheme::Dark, true)
        .id
        .clone();
    // Its page is measured in Chromium to decide its zoom-out.
    let zooms = "iphone15_ios".to_string();
    let test = f
        .queue(&[
            (&light, &[Variant::Default]),
            (&blink, &[Variant::Default]),
            (&dark, &[Variant::Default]),
            (&zooms, &[Variant::Default]),
        ])
        .await;

    let engine = Arc::new(TestEngine::new(Behaviour::Draw));
    let webkit_only = f.worker(
        engine.clone(),
        RenderWorkerConfig {
            engines: vec![Engine::Webkit],
            ..config()
        },
    );
    assert_eq!(drain(&webkit_only).await, 1);
    assert_eq!(
        f.client(&test, &light).await.status,
        ScreenshotStatus::Complete
    );
    for other in [&blink, &dark, &zooms] {
        let row = f.client(&test, other).await;
        assert_eq!(
            row.status,
            ScreenshotStatus::Pending,
            "{other} was claimed by a worker that cannot draw it"
        );
        assert_eq!(row.attempts, 0);
    }
    assert_eq!(f.store.pending_jobs().await.expect("count"), 3);

    let both = f.worker(
        engine.clone(),
        RenderWorkerConfig {
            engines: vec![Engine::Blink, Engine::Webkit],
            ..config()
        },
    );
    assert_eq!(drain(&both).await, 3);
    for id in [&light, &blink, &dark, &zooms] {
        assert_eq!(f.client(&test, id).await.status, ScreenshotStatus::Complete);
    }
    assert_eq!(
        engine
            .recolourings
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the dark client's colours were read once"
    );
    let drawn = engine.requests.lock().expect("not poisoned").clone();
    assert_eq!(
        drawn
            .iter()
            .filter(|r| r.html.ends_with("<!-- recoloured -->"))
            .map(|r| r.engine)
            .collect::<Vec<_>>(),
        vec![Engine::Webkit],
        "the recoloured page is drawn in the client's engine"
    );
}

async fn the_loops_answer_a_wake_up_and_stop_at_shutdown(backend: Backend) {
    let f = Fixture::new(backend).await;
    let client = f
        .client_of(Engine::Blink, ColorScheme::Light, false)
        .id
        .clone();
    let engine = Arc::new(TestEngine::taking(
        Behaviour::Draw,
        Duration::from_millis(1500),
    ));
    // Looking again once an hour: only the wake-up can start the work in time.
    let worker = f.worker(
        engine.clone(),
        RenderWorkerConfig {
            rescan: Duration::from_secs(3600),
            ..config()
        },
    );
    let runtime = background::Runtime::new();
    let wake = Arc::new(Notify::new());
    runtime.spawn(worker.run(wake.clone(), runtime.cancel_token()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let test = f
        .queue(&[(
            &client,
            &[Variant::Default, Variant::NoImages, Variant::Horizontal],
        )])
        .await;
    wake.notify_one();

    testkit::wait::until("the wake-up was not heard", Duration::from_secs(10), || {
        engine.renders() > 0
    })
    .await;
    // A render is in flight: the stop lets it finish and takes nothing more.
    tokio::time::timeout(Duration::from_secs(10), runtime.shutdown())
        .await
        .expect("shutdown returns once the render in flight is recorded");
    assert_eq!(engine.renders(), 1, "no claim after the stop");
    assert_eq!(f.store.pending_jobs().await.expect("count"), 2);
    assert_eq!(
        f.client(&test, &client).await.status,
        ScreenshotStatus::Processing
    );
    // The two left hold no lease: another worker takes them at once.
    for _ in 0..2 {
        f.store
            .claim_job("another-process", now(), 60)
            .await
            .expect("claim")
            .expect("a job the stopped worker does not hold");
    }
}

/// The process-wide count of finishes refused for a lost lease in `queue`, as `/metrics` shows it.
fn leases_lost(queue: &str) -> u64 {
    let text = telemetry::encode(telemetry::global(), &[], 0).expect("metrics encode");
    let series = format!("mailproof_leases_lost_total{{queue=\"{queue}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a counter"))
}

/// A render whose job is taken over while it draws (its worker's renewals failed through a
/// database outage, as far as the store can tell) neither stores its picture nor records its
/// outcome: the job's new holder does both, once.
async fn a_render_whose_lease_was_taken_over_stores_no_picture(backend: Backend) {
    let f = Fixture::new(backend).await;
    let (client, test) = f.queue_one().await;
    let engine = Arc::new(TestEngine::taking(
        Behaviour::Draw,
        Duration::from_millis(1500),
    ));
    let worker = f.worker(engine.clone(), config());
    let before = leases_lost("render");
    let drawing = tokio::spawn(async move { worker.run_one().await });
    testkit::wait::until(
        "the worker did not start drawing",
        Duration::from_secs(20),
        || engine.renders() > 0,
    )
    .await;
    // A claim an hour ahead sees the worker's lease as expired: the takeover an outage makes.
    let taken = f
        .store
        .claim_job("taker", now() + 3600, 60)
        .await
        .expect("claim")
        .expect("the job, taken over");
    assert!(
        drawing
            .await
            .expect("the worker ran")
            .expect("the store answers"),
        "the worker had claimed the job"
    );
    let shot = screenshot_key(&test, &client, &Picture::Shot(Variant::Default));
    assert!(
        f.blobs
            .get(&shot)
            .await
            .expect("the blob store answers")
            .is_none(),
        "the worker that lost its lease stored no picture"
    );
    assert_eq!(
        f.store.job_holder(taken.id).await.expect("read"),
        Some((domain::QueueState::Leased, Some("taker".to_string()))),
        "the job is still the taker's to finish"
    );
    assert_eq!(
        f.client(&test, &client).await.status,
        ScreenshotStatus::Processing
    );
    assert!(leases_lost("render") > before, "counted in /metrics");
}

testkit::on_both!(
    a_drawn_job_is_stored_and_done,
    an_engine_that_dies_is_retried_after_a_backoff_then_given_up,
    a_refused_document_bounces_at_once,
    a_blank_render_bounces_as_blank_render_and_is_counted,
    a_storage_fault_releases_the_job_without_counting_an_attempt,
    a_worker_claims_only_the_jobs_its_engines_draw,
    the_loops_answer_a_wake_up_and_stop_at_shutdown,
    a_render_whose_lease_was_taken_over_stores_no_picture,
);
