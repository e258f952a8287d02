//! Starting, watching and stopping a browser process, and reading its process tree from /proc.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use std::os::unix::process::CommandExt;
use std::process::Child;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use crate::error::RenderError;
use domain::Engine;

/// A running browser; killed (with its whole process group) when dropped.
pub(crate) struct Browser {
    engine: Engine,
    child: Child,
    pid: u32,
}

impl Browser {
    /// Starts `program` in its own process group and waits until a stderr line contains
    /// `marker`; returns the browser and the rest of that line after the marker.
    pub(crate) async fn spawn(
        engine: Engine,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        marker: &'static str,
        timeout: Duration,
    ) -> Result<(Browser, String), RenderError> {
        // The browser gets a parent-death signal, so it never outlives a service or test process
        // that died without cleaning up.
        let mut command = webkit::tied::command(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child =
            webkit::tied::spawn(command)
                .await
                .map_err(|e| RenderError::EngineStart {
                    engine,
                    reason: format!("cannot run {}: {e}", program.display()),
                })?;
        let pid = child.id();
        let stderr = child
            .stderr
            .take()
            .and_then(|s| tokio::process::ChildStderr::from_std(s).ok());
        let Some(stderr) = stderr else {
            let mut browser = Browser { engine, child, pid };
            browser.kill().await;
            return Err(RenderError::EngineStart {
                engine,
                reason: "no stderr pipe".into(),
            });
        };
        let (found_tx, found_rx) = oneshot::channel::<String>();
        // The reader keeps draining stderr for the browser's whole life: a full pipe would block it.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut found_tx = Some(found_tx);
            let mut tail: Vec<String> = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(pos) = line.find(marker) {
                    if let Some(tx) = found_tx.take() {
                        let _ = tx.send(line[pos + marker.len()..].trim().to_string());
                        continue;
                    }
                }
                if found_tx.is_some() && tail.len() < 20 {
                    tail.push(line.clone());
                }
                tracing::trace!(engine = %engine, "{line}");
            }
            if found_tx.is_some() {
                tracing::warn!(engine = %engine, stderr = ?tail, "browser exited before it was ready");
            }
        });
        let mut browser = Browser { engine, child, pid };
        match tokio::time::timeout(timeout, found_rx).await {
            Ok(Ok(rest)) => Ok((browser, rest)),
            Ok(Err(_)) => {
                let status = browser.child.try_wait().ok().flatten();
                Err(RenderError::EngineStart {
                    engine,
                    reason: format!(
                        "{} exited before it was ready ({status:?}); run it by hand with the same \
                         flags to see why",
                        program.display()
                    ),
                })
            }
            Err(_) => {
                browser.kill().await;
                Err(RenderError::EngineStart {
                    engine,
                    reason: format!("{} was not ready within {timeout:?}", program.display()),
                })
            }
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// True while the main process runs.
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the whole process group (renderers, GPU and crash handlers included) and reaps it.
    pub(crate) async fn kill(&mut self) {
        kill_group(self.pid);
        for _ in 0..100 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracing::debug!(engine = %self.engine, pid = self.pid, "browser stopped");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_group(self.pid);
        let _ = self.child.try_wait();
    }
}

fn kill_group(pid: u32) {
    procs::signal_group(pid, procs::Signal::KILL);
}
