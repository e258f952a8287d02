//! Issue 17, point 5: the engines' processes (browsers and their helpers, the WebKit helper and
//! its Xvfb) end with the service, even when it is killed with SIGKILL and cleans nothing up.

use std::time::{Duration, Instant};

use procs::live_command;

use crate::support::*;

#[tokio::test]
async fn engines_and_xvfb_die_with_a_killed_service() {
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\", \"gecko\", \"webkit\"]\nslots_per_engine = 1\n"
            .into(),
    })
    .await;
    let service = s.pid();
    // The engines start in the background: wait until all three kinds of process are there.
    let started = Instant::now();
    let tree = loop {
        let tree: Vec<(u32, String)> = procs::tree(service)
            .into_iter()
            .skip(1)
            .filter_map(|pid| live_command(pid).map(|c| (pid, c)))
            .collect();
        let has = |name: &str| tree.iter().any(|(_, c)| c.contains(name));
        if has("Xvfb") && has("chromium") && (has("firefox") || has("Web Content")) {
            break tree;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the engines did not start within 120 s: {tree:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let _dir = s.kill();
    let killed = Instant::now();
    loop {
        let left: Vec<&(u32, String)> = tree
            .iter()
            .filter(|(pid, command)| live_command(*pid).as_ref() == Some(command))
            .collect();
        if left.is_empty() {
            break;
        }
        // Xvfb used to linger for its 10 s orphan grace; a parent-death signal ends it at once.
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "still running 5 s after the service was killed: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
