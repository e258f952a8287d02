//! A private Xvfb display: WebKitGTK cannot run without an X server, even offscreen.

use crate::error::WebkitError;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long Xvfb may take to announce its display number.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Seconds Xvfb lingers without clients before it exits.
const ORPHAN_GRACE_SECS: &str = "10";

/// The screen only bounds on-screen windows; the WebView lives in an offscreen window, so a
/// modest screen keeps Xvfb's framebuffer small.
const SCREEN: &str = "1280x1024x24";

pub(crate) struct Xvfb {
    child: Child,
    display: u32,
    pid: u32,
}

impl Xvfb {
    /// Starts Xvfb on a display number it picks itself (`-displayfd`), so parallel engines and
    /// test runs never collide on a fixed `:99`.
    pub(crate) async fn start() -> Result<Xvfb, WebkitError> {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                SCREEN,
                "-nolisten",
                "tcp",
            ])
            // Xvfb outlives an engine that cannot drop it (a crash, a test's static engine), so
            // it ends itself once its last client, a helper, has gone. Helpers end when the
            // engine's pipe closes. The delay lets a replacement helper connect first.
            .args(["-terminate", ORPHAN_GRACE_SECS])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => WebkitError::XvfbMissing { source },
                _ => WebkitError::XvfbStart(format!("cannot spawn Xvfb: {source}")),
            })?;
        let pid = child.id().unwrap_or_default();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| WebkitError::XvfbStart("Xvfb stdout was not captured".into()))?;
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        match tokio::time::timeout(START_TIMEOUT, stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) => {
                let status = child.wait().await.ok();
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
        matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
