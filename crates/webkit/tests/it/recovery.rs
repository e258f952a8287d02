//! A killed or hung helper fails its capture with a retryable error and is replaced alone by the
//! next capture at its scale, the engine staying alive; a killed Xvfb fails the next capture and
//! the engine says it is no longer alive: replacing it whole is the caller's (`render`'s pool;
//! its tests show the replacement). A killed web process alone is survived by the helper.

use crate::support::{request, runtime, start_engine};
use std::time::Duration;
use webkit::WebkitEngine;

const PAGE: &str = "<!doctype html><html><body><p>still here</p></body></html>";

/// Sends `signal` to every process of the engine whose command name starts with `name`,
/// returning how many.
fn signal_named(engine: &WebkitEngine, name: &str, signal: procs::Signal) -> usize {
    let victims: Vec<u32> = engine
        .pids()
        .into_iter()
        .filter(|&pid| procs::live_command(pid).is_some_and(|comm| comm.starts_with(name)))
        .collect();
    for &pid in &victims {
        assert!(procs::signal(pid, signal), "kill {pid}");
    }
    victims.len()
}

/// Kills `name` on a warm engine; returns the next capture's result and whether the engine still
/// says it is alive, after checking that shutting it down leaves no process behind.
fn kill_and_capture(name: &str) -> (Result<webkit::Capture, webkit::WebkitError>, bool) {
    runtime().block_on(async {
        let (engine, _dir) = start_engine(None, Duration::from_secs(30)).await;
        engine
            .capture(&request(PAGE, 600, 1))
            .await
            .expect("capture before the kill");
        assert!(engine.is_alive(), "a warm engine is alive");
        let killed = signal_named(&engine, name, procs::Signal::KILL);
        assert!(
            killed >= 1,
            "the engine runs a {name} process: {:?}",
            engine.pids()
        );
        // Long enough for a helper to notice that its display has gone.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let next = engine.capture(&request(PAGE, 600, 1)).await;
        let alive = engine.is_alive();
        let pids = engine.pids();
        engine.shutdown().await;
        // WebKit's child processes leave on their own once the helper's IPC channel closes.
        let mut left = pids.clone();
        for _ in 0..50 {
            left.retain(|&pid| procs::alive(pid));
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let described: Vec<_> = left.iter().map(|p| describe(*p)).collect();
        assert!(
            left.is_empty(),
            "shutdown leaves no process behind: {described:?}"
        );
        (next, alive)
    })
}

#[test]
fn a_killed_helper_is_replaced_alone_by_the_next_capture() {
    // /proc/PID/comm holds the first 15 bytes of the binary name.
    let (next, alive) = kill_and_capture("mailproof-webki");
    let capture = next.expect("a new helper draws the next capture");
    assert_eq!(capture.width_px, 600);
    assert!(
        alive,
        "the engine stays alive: only its helper was replaced"
    );
}

#[test]
fn a_killed_xvfb_fails_the_next_capture_retryably() {
    let (next, alive) = kill_and_capture("Xvfb");
    let error = next.expect_err("no capture on a broken engine");
    assert!(error.is_retryable(), "{error}");
    assert!(!alive, "the engine reports that it must be replaced");
}

#[test]
fn a_killed_web_process_is_survived_by_the_helper() {
    let (next, alive) = kill_and_capture("WebKitWebProces");
    // The WebView starts a new web process for the next page, or reports the crash: either the
    // capture works on a live engine or it fails retryably.
    match next {
        Ok(capture) => {
            assert_eq!(capture.width_px, 600);
            assert!(alive, "an engine that captured is alive");
        }
        Err(e) => assert!(e.is_retryable(), "{e}"),
    }
}

fn describe(pid: u32) -> String {
    format!("{pid}: {:?}", procs::live_command(pid))
}

#[test]
fn a_hung_helper_times_out_and_is_killed() {
    runtime().block_on(async {
        let timeout = Duration::from_secs(3);
        let (engine, _dir) = start_engine(None, timeout).await;
        engine
            .capture(&request(PAGE, 600, 1))
            .await
            .expect("capture before the hang");
        // A stopped process neither answers nor exits: exactly what a hung WebView looks like.
        let stopped = signal_named(&engine, "mailproof-webki", procs::Signal::STOP);
        assert_eq!(stopped, 1, "one helper at scale 1: {:?}", engine.pids());
        let started = std::time::Instant::now();
        let error = engine
            .capture(&request(PAGE, 600, 1))
            .await
            .expect_err("a hung helper answers nothing");
        assert!(matches!(error, webkit::WebkitError::Timeout(_)), "{error}");
        assert!(error.is_retryable());
        assert!(
            started.elapsed() >= timeout && started.elapsed() < timeout * 4,
            "the capture gave up after its timeout, not {:?}",
            started.elapsed()
        );
        assert!(
            engine.is_alive(),
            "the engine stays: only its helper was killed"
        );
        let capture = engine
            .capture(&request(PAGE, 600, 1))
            .await
            .expect("a new helper draws the next capture");
        assert_eq!(capture.width_px, 600);
        let helpers = signal_named(&engine, "mailproof-webki", procs::Signal::CONT);
        assert_eq!(
            helpers,
            1,
            "one helper runs, the new one: {:?}",
            engine.pids()
        );
        engine.shutdown().await;
    });
}
