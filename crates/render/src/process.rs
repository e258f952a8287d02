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
    // `kill` from procps takes a negative pid for a process group; no libc binding needed.
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `pid` and all its descendants, read from /proc.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| parse_ppid(&s))
            {
                parent_of.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for &(child, ppid) in &parent_of {
            if ppid == parent && !found.contains(&child) {
                found.push(child);
            }
        }
        i += 1;
    }
    found
}

/// Summed resident set size of `pids`, in bytes (shared pages counted once per process).
pub fn rss_bytes(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .sum()
}

/// The parent pid from `/proc/PID/stat`, counting fields after the command name's last `)`.
fn parse_ppid(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_pid_survives_odd_command_names() {
        assert_eq!(parse_ppid("77 (Web (Content) x) S 42 77 77 0"), Some(42));
        assert_eq!(parse_ppid("nonsense"), None);
    }

    #[test]
    fn this_process_tree_starts_with_itself_and_has_memory() {
        let me = std::process::id();
        let tree = process_tree(me);
        assert_eq!(tree.first(), Some(&me));
        assert!(rss_bytes(&tree) > 0);
    }
}
