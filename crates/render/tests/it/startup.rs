//! Issue 9 point 9: on a busy machine an engine can be slow to answer right after it starts.
//! The renderer waits for it, retries a start that failed, and says what really happened when it
//! gives up, instead of blaming a missing install. A wrapper script around firefox-esr plays the
//! starved browser: it freezes the real one (SIGSTOP) just after it announced its address.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use domain::Engine;
use render::{RenderConfig, RenderError, Renderer};

use crate::support::{request, run};

/// `behaviour` runs before the browser: `freeze <seconds>` stops it that long once it listens,
/// `fail-first` makes the first start exit at once.
fn wrapper(dir: &Path, behaviour: &str) -> PathBuf {
    let path = dir.join("firefox-wrapper.sh");
    let script = format!(
        r#"#!/bin/bash
set -u
mode="{behaviour}"
count_file="{dir}/starts"
echo x >> "$count_file"
if [[ $mode == fail-first && $(wc -l < "$count_file") -eq 1 ]]; then
  echo "simulated crash before listening" >&2
  exit 1
fi
command -v firefox-esr >/dev/null || {{ echo "firefox-esr missing: run scripts/setup.sh" >&2; exit 127; }}
fifo="{dir}/stderr-$$"
mkfifo "$fifo"
firefox-esr "$@" 2>"$fifo" &
pid=$!
frozen=
while IFS= read -r line; do
  printf '%s\n' "$line" >&2
  if [[ -z $frozen && $mode == freeze* && $line == *"WebDriver BiDi listening on "* ]]; then
    frozen=1
    kill -STOP "$pid"
    ( sleep "${{mode#freeze }}"; kill -CONT "$pid" ) &
  fi
done < "$fifo"
rm -f "$fifo"
wait "$pid"
"#,
        dir = dir.display()
    );
    std::fs::write(&path, script).expect("write the wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn config(dir: &Path, program: PathBuf) -> RenderConfig {
    let mut cfg = RenderConfig::new(dir.join("work"));
    cfg.engines = vec![Engine::Gecko];
    cfg.slots_per_engine = 1;
    cfg.firefox_program = Some(program);
    cfg
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_firefox_frozen_right_after_it_starts_listening_is_waited_for() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        // Longer than the 10 s a command may take once the engine runs.
        let mut cfg = config(dir.path(), wrapper(dir.path(), "freeze 13"));
        cfg.start_timeout = Duration::from_secs(60);
        let renderer = Renderer::start(cfg)
            .await
            .expect("a slow but working Firefox starts");
        let shot = renderer
            .render(request(
                Engine::Gecko,
                "<p>after a slow start</p>".into(),
                600,
                1.0,
            ))
            .await
            .expect("and renders");
        assert!(shot.width > 0 && !shot.png.is_empty());
        renderer.shutdown().await;
    })
}

#[test]
fn a_failed_first_start_is_retried() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = config(dir.path(), wrapper(dir.path(), "fail-first"));
        let renderer = Renderer::start(cfg)
            .await
            .expect("the second start succeeds");
        assert_eq!(starts(dir.path()), 2, "started twice");
        renderer.shutdown().await;
    })
}

#[test]
fn an_engine_that_never_gets_ready_is_named_with_the_real_cause() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cfg = config(dir.path(), wrapper(dir.path(), "freeze 300"));
        cfg.start_timeout = Duration::from_secs(3);
        cfg.start_attempts = 2;
        let error = match Renderer::start(cfg).await {
            Ok(_) => panic!("a frozen Firefox cannot start"),
            Err(e) => e,
        };
        assert!(
            matches!(error, RenderError::NotReady { attempts: 2, .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("installed but did not get ready in 2 attempts"),
            "{text}"
        );
        assert!(
            text.contains("websocket handshake"),
            "the real cause: {text}"
        );
        assert!(
            !text.contains("setup.sh"),
            "not blamed on the install: {text}"
        );
        assert_eq!(starts(dir.path()), 2, "started twice");
    })
}
