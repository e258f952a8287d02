//! A killed helper, web process or Xvfb is replaced by the next capture, on a warm engine.

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

fn survives_killing(name: &str) {
    runtime().block_on(async {
        let (engine, _dir) = start_engine(None, Duration::from_secs(30)).await;
        engine
            .capture(&request(PAGE, 600, 1.0))
            .await
            .expect("capture before the kill");
        let killed = signal_named(&engine, name, procs::Signal::KILL);
        assert!(
            killed >= 1,
            "the engine runs a {name} process: {:?}",
            engine.pids()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let capture = engine
            .capture(&request(PAGE, 600, 1.0))
            .await
            .expect("capture after the kill");
        assert_eq!(capture.width_px, 600);
        engine
            .capture(&request(PAGE, 390, 1.0))
            .await
            .expect("and the one after that");
        let pids = engine.pids();
        engine.shutdown().await;
        // WebKit's child processes leave on their own once the helper's IPC channel closes.
        let mut alive = pids.clone();
        for _ in 0..50 {
            alive.retain(|&pid| procs::alive(pid));
            if alive.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let described: Vec<_> = alive.iter().map(|p| describe(*p)).collect();
        assert!(
            alive.is_empty(),
            "shutdown leaves no process behind: {described:?}"
        );
    });
}

#[test]
fn a_killed_helper_is_replaced_by_the_next_capture() {
    // /proc/PID/comm holds the first 15 bytes of the binary name.
    survives_killing("mailproof-webki");
}

#[test]
fn a_killed_web_process_is_survived_by_the_next_capture() {
    survives_killing("WebKitWebProces");
}

#[test]
fn a_killed_xvfb_is_replaced_by_the_next_capture() {
    survives_killing("Xvfb");
}

fn describe(pid: u32) -> String {
    format!("{pid}: {:?}", procs::live_command(pid))
}

#[test]
fn a_hung_helper_times_out_and_the_capture_is_retried_on_a_fresh_one() {
    runtime().block_on(async {
        let timeout = Duration::from_secs(3);
        let (engine, _dir) = start_engine(None, timeout).await;
        engine
            .capture(&request(PAGE, 600, 1.0))
            .await
            .expect("capture before the hang");
        // A stopped process neither answers nor exits: exactly what a hung WebView looks like.
        let stopped = signal_named(&engine, "mailproof-webki", procs::Signal::STOP);
        assert_eq!(stopped, 1, "one helper at scale 1: {:?}", engine.pids());
        let started = std::time::Instant::now();
        let capture = engine
            .capture(&request(PAGE, 600, 1.0))
            .await
            .expect("capture after the hang");
        assert_eq!(capture.width_px, 600);
        assert!(
            started.elapsed() >= timeout,
            "the retry came after the capture timeout, not {:?}",
            started.elapsed()
        );
        engine.shutdown().await;
    });
}
