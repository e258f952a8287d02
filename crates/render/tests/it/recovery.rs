//! A killed or hung engine is restarted and the next render succeeds, the same way for all three.

use std::time::Duration;

use domain::Engine;
use render::Renderer;

use crate::support::{
    config, page, page_replacements, render, renderer, request, restart_turn, restarts, run, start,
};

fn kill(pid: u32) {
    assert!(procs::signal(pid, procs::Signal::KILL), "kill {pid}");
}

#[test]
fn a_killed_browser_is_restarted_and_the_next_render_succeeds() {
    let _turn = restart_turn();
    run(async {
        for engine in [Engine::Blink, Engine::Gecko] {
            let renderer = renderer().await;
            // Warm first, so the kill lands on a browser in use.
            render(request(engine, page("data:,"), 600, 1.0)).await;
            // Every browser of the engine (Firefox runs one per slot).
            let pids: Vec<u32> = renderer
                .engine_pids()
                .into_iter()
                .filter(|(e, _)| *e == engine)
                .map(|(_, pid)| pid)
                .collect();
            assert!(!pids.is_empty(), "{engine} runs");
            pids.iter().for_each(|&pid| kill(pid));
            let shot = render(request(engine, page("data:,"), 600, 1.0)).await;
            assert_eq!(shot.width, 600);
            let new_pid = renderer
                .engine_pids()
                .into_iter()
                .find(|(e, _)| *e == engine)
                .map(|(_, pid)| pid)
                .expect("engine pid after restart");
            assert!(!pids.contains(&new_pid), "{engine} runs in a new process");
        }
    });
}

/// The processes of `renderer`'s WebKit engine whose command name starts with `name`.
fn webkit_processes(renderer: &Renderer, name: &str) -> Vec<u32> {
    renderer
        .engine_pids()
        .into_iter()
        .filter(|(e, _)| *e == Engine::Webkit)
        .map(|(_, pid)| pid)
        .filter(|&pid| procs::live_command(pid).is_some_and(|comm| comm.starts_with(name)))
        .collect()
}

/// A WebKit-only renderer with one slot, warm, with its one helper and its Xvfb.
/// A WebKit renderer with one slot and `render_timeout`, after one render.
async fn webkit_renderer(
    dir: &std::path::Path,
    render_timeout: Duration,
) -> (Renderer, Vec<u32>, Vec<u32>) {
    let mut cfg = config(dir.to_path_buf(), &[Engine::Webkit]);
    cfg.slots_per_engine = 1;
    cfg.render_timeout = render_timeout;
    let renderer = start(cfg).await;
    renderer
        .render(request(Engine::Webkit, page("data:,"), 600, 1.0))
        .await
        .expect("render before");
    // comm holds the first 15 bytes of the binary name.
    let helpers = webkit_processes(&renderer, "mailproof-webki");
    let xvfb = webkit_processes(&renderer, "Xvfb");
    assert_eq!(
        (helpers.len(), xvfb.len()),
        (1, 1),
        "{:?}",
        renderer.engine_pids()
    );
    (renderer, helpers, xvfb)
}

#[test]
fn a_killed_webkit_xvfb_is_replaced_through_the_pools_restart() {
    let _turn = restart_turn();
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let (renderer, helpers, xvfb) = webkit_renderer(
            dir.path(),
            render::RenderConfig::new(dir.path().to_path_buf()).render_timeout,
        )
        .await;
        let warm = request(Engine::Webkit, page("data:,"), 600, 1.0);
        let before = restarts(Engine::Webkit);
        for &pid in &xvfb {
            kill(pid);
        }
        let shot = renderer
            .render(warm.clone())
            .await
            .expect("the render after the kill is retried on a fresh engine");
        assert_eq!(shot.width, 600);
        assert_eq!(
            restarts(Engine::Webkit),
            before + 1,
            "the pool restarted WebKit once"
        );
        let new_helpers = webkit_processes(&renderer, "mailproof-webki");
        let new_xvfb = webkit_processes(&renderer, "Xvfb");
        assert_eq!(new_helpers.len(), 1, "{:?}", renderer.engine_pids());
        assert_ne!(helpers, new_helpers, "a new helper runs");
        assert_ne!(
            xvfb, new_xvfb,
            "the whole engine was replaced, its Xvfb too"
        );
        renderer
            .render(warm)
            .await
            .expect("and the render after that");
        renderer.shutdown().await;
        for pid in helpers.iter().chain(&xvfb) {
            assert!(!procs::alive(*pid), "the replaced engine's {pid} is gone");
        }
    });
}

/// Breaks the WebKit helper with `signal` and checks that it alone is replaced: a new helper on
/// the same Xvfb draws the next render, and the engine is not restarted.
fn webkit_helper_is_replaced_alone_after(signal: procs::Signal) {
    let _turn = restart_turn();
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        // A stopped helper is found hung after the render budget: a short one, but not so short
        // that a fresh helper's first render misses it on a loaded machine. A killed one needs
        // no budget to be found dead: the service's own.
        let budget = if signal == procs::Signal::STOP {
            Duration::from_secs(10)
        } else {
            render::RenderConfig::new(dir.path().to_path_buf()).render_timeout
        };
        let (renderer, helpers, xvfb) = webkit_renderer(dir.path(), budget).await;
        let warm = request(Engine::Webkit, page("data:,"), 600, 1.0);
        let before = restarts(Engine::Webkit);
        for &pid in &helpers {
            assert!(procs::signal(pid, signal), "signal {pid}");
        }
        if signal == procs::Signal::STOP {
            // A hung helper costs the render in it its time budget, and only that render.
            let replaced = page_replacements(Engine::Webkit);
            let Err(error) = renderer.render(warm.clone()).await else {
                panic!("a hung helper answers nothing");
            };
            assert!(error.is_retryable(), "{error}");
            assert!(
                page_replacements(Engine::Webkit) > replaced,
                "the hung helper was replaced alone"
            );
        }
        let shot = renderer
            .render(warm.clone())
            .await
            .expect("a new helper draws the next render");
        assert_eq!(shot.width, 600);
        assert_eq!(
            restarts(Engine::Webkit),
            before,
            "the engine was not restarted"
        );
        let new_helpers = webkit_processes(&renderer, "mailproof-webki");
        assert_eq!(new_helpers.len(), 1, "{:?}", renderer.engine_pids());
        assert_ne!(helpers, new_helpers, "a new helper runs");
        assert_eq!(
            xvfb,
            webkit_processes(&renderer, "Xvfb"),
            "on the same Xvfb"
        );
        renderer.shutdown().await;
        for pid in helpers.iter().chain(&xvfb) {
            assert!(
                !procs::alive(*pid),
                "the engine's {pid} is gone after shutdown"
            );
        }
    });
}

#[test]
fn a_killed_webkit_helper_is_replaced_alone() {
    webkit_helper_is_replaced_alone_after(procs::Signal::KILL);
}

#[test]
fn a_hung_webkit_helper_is_replaced_alone() {
    // A stopped process neither answers nor exits: what a hung WebView looks like.
    webkit_helper_is_replaced_alone_after(procs::Signal::STOP);
}
