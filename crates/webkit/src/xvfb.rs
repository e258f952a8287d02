//! A private Xvfb display: WebKitGTK cannot run without an X server, even offscreen.

use crate::error::WebkitError;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long Xvfb may take to announce its display number.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Seconds Xvfb lingers without clients before it exits.
const ORPHAN_GRACE_SECS: &str = "10";

/// The screen only bounds on-screen windows; the WebView lives in an offscreen window, so a
/// modest screen keeps Xvfb's framebuffer small.
const SCREEN: &str = "1280x1024x24";

pub(crate) struct Xvfb {
    child: KillOnDrop,
    display: u32,
    pid: u32,
}

impl Xvfb {
    /// Starts Xvfb on a display number it picks itself (`-displayfd`), so parallel engines and
    /// test runs never collide on a fixed `:99`.
    pub(crate) async fn start() -> Result<Xvfb, WebkitError> {
        let program = which("Xvfb").ok_or_else(|| WebkitError::XvfbMissing {
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "Xvfb is not on PATH"),
        })?;
        // Started tied to the service: it dies with it (parent-death signal) rather than after
        // its orphan grace below.
        let mut command = crate::tied::command(&program);
        command
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                SCREEN,
                "-nolisten",
                "tcp",
            ])
            // An engine that cannot drop it (a test's static engine) leaves Xvfb running in a
            // live process, so it also ends itself once its last client, a helper, has gone.
            // Helpers end when the engine's pipe closes. The delay lets a replacement helper
            // connect first.
            .args(["-terminate", ORPHAN_GRACE_SECS])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child =
            crate::tied::spawn(command)
                .await
                .map_err(|source| match source.kind() {
                    std::io::ErrorKind::NotFound => WebkitError::XvfbMissing { source },
                    _ => WebkitError::XvfbStart(format!("cannot spawn Xvfb: {source}")),
                })?;
        let pid = child.id();
        let stdout = child
            .stdout
            .take()
            .and_then(|s| tokio::process::ChildStdout::from_std(s).ok());
        let Some(stdout) = stdout else {
            stop_child(child).await;
            return Err(WebkitError::XvfbStart(
                "Xvfb stdout was not captured".into(),
            ));
        };
        // Dropped without `stop` (an error below, a panic), Xvfb must not linger.
        let mut child = KillOnDrop(Some(child));
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        match tokio::time::timeout(START_TIMEOUT, stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) => {
                let status = match child.take() {
                    Some(c) => stop_child(c).await,
                    None => None,
                };
                return Err(WebkitError::XvfbStart(format!(
                    "Xvfb exited before choosing a display (status {status:?})"
                )));
            }
            Ok(Err(e)) => return Err(WebkitError::XvfbStart(format!("reading its display: {e}"))),
            Err(_) => {
                return Err(WebkitError::XvfbStart(format!(
                    "no display number within {START_TIMEOUT:?}"
                )))
            }
        }
        let number = line.trim().parse::<u32>().map_err(|_| {
            WebkitError::XvfbStart(format!("unexpected -displayfd output {:?}", line.trim()))
        })?;
        tracing::info!(display = number, pid, "Xvfb started");
        Ok(Xvfb {
            child,
            display: number,
            pid,
        })
    }

    pub(crate) fn display(&self) -> String {
        format!(":{}", self.display)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn is_alive(&mut self) -> bool {
        self.child
            .0
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub(crate) async fn stop(mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child).await;
        }
    }
}

/// A child killed and reaped when dropped.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn take(&mut self) -> Option<Child> {
        self.0.take()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.try_wait();
        }
    }
}

/// Kills `child` and waits (briefly, without blocking the runtime) for it to be reaped; returns
/// its exit status when it had one.
async fn stop_child(mut child: Child) -> Option<std::process::ExitStatus> {
    let _ = child.kill();
    for _ in 0..100 {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| Path::new(p).is_file())
}
