//! A killed engine is restarted and the next render succeeds.

use domain::Engine;

use crate::support::{page, render, renderer, request, run};

fn kill(pid: u32) {
    assert!(procs::signal(pid, procs::Signal::KILL), "kill {pid}");
}

#[test]
fn a_killed_browser_is_restarted_and_the_next_render_succeeds() {
    run(async {
        for engine in [Engine::Blink, Engine::Gecko] {
            let renderer = renderer().await;
            // Warm first, so the kill lands on a browser in use.
            render(request(engine, page("data:,"), 600, 1.0)).await;
            let pid = renderer
                .engine_pids()
                .into_iter()
                .find(|(e, _)| *e == engine)
                .map(|(_, pid)| pid)
                .expect("engine pid");
            kill(pid);
            let shot = render(request(engine, page("data:,"), 600, 1.0)).await;
            assert_eq!(shot.width, 600);
            let new_pid = renderer
                .engine_pids()
                .into_iter()
                .find(|(e, _)| *e == engine)
                .map(|(_, pid)| pid)
                .expect("engine pid after restart");
            assert_ne!(pid, new_pid, "{engine} runs in a new process");
        }
    });
}
