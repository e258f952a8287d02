//! The engine's side of one helper process: spawn it, send it a page, read its answer.

use crate::error::WebkitError;
use crate::protocol::{
    DrawnPage, HelperOptions, PageFacts, RenderRequest, Reply, Timings, MAX_REPLY_LINE_BYTES,
};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The file name of the helper binary built by this crate.
pub const HELPER_BINARY: &str = "mailproof-webkit-helper";

/// How long GTK and WebKit may take to come up in a fresh helper.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How many of the helper's last stderr lines are kept to explain a crash.
const STDERR_TAIL_LINES: usize = 20;

/// Everything needed to spawn helpers of any scale on a given display.
pub(crate) struct Spawn<'a> {
    pub binary: &'a Path,
    pub display: &'a str,
    pub scale: u32,
    pub options: &'a HelperOptions,
    pub env: &'a [(String, String)],
    pub home: &'a Path,
}

pub(crate) struct Helper {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// A request was sent and its reply not read: the caller gave up on the capture midway
    /// (its own time-out), so a late reply could still come and be taken for the next one's.
    in_exchange: bool,
}

/// The helper's answer to a successful render.
pub(crate) struct Rendered {
    pub width_px: u32,
    pub height_px: u32,
    pub loaded: bool,
    pub timings: Timings,
    pub before: PageFacts,
    pub after: PageFacts,
    pub drawn: DrawnPage,
}

impl Helper {
    pub(crate) async fn spawn(spec: &Spawn<'_>) -> Result<Helper, WebkitError> {
        let options = serde_json::to_string(spec.options)
            .map_err(|e| WebkitError::HelperStart(format!("options do not serialise: {e}")))?;
        for dir in ["cache", "config", "data"] {
            let path = spec.home.join(dir);
            tokio::fs::create_dir_all(&path)
                .await
                .map_err(|e| WebkitError::io(format!("creating {}", path.display()), e))?;
        }
        let mut command = Command::new(spec.binary);
        command
            .arg("--options")
            .arg(options)
            .env("DISPLAY", spec.display)
            .env("GDK_SCALE", spec.scale.to_string())
            .env("GDK_BACKEND", "x11")
            // No accessibility bus exists here; without this GTK waits for it on start-up.
            .env("NO_AT_BRIDGE", "1")
            // GTK, WebKit and fontconfig write caches and state under these: keep them in the
            // engine's own directory rather than the service user's home.
            .env("XDG_CACHE_HOME", spec.home.join("cache"))
            .env("XDG_CONFIG_HOME", spec.home.join("config"))
            .env("XDG_DATA_HOME", spec.home.join("data"))
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            WebkitError::HelperStart(format!("cannot spawn {}: {e}", spec.binary.display()))
        })?;
        let pid = child.id().unwrap_or_default();
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    return Err(WebkitError::HelperStart(
                        "helper pipes were not captured".into(),
                    ))
                }
            };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(forward_stderr(stderr, pid, stderr_tail.clone()));
        let mut helper = Helper {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            pid,
            stderr_tail,
            in_exchange: false,
        };
        match tokio::time::timeout(START_TIMEOUT, helper.read_reply()).await {
            Ok(Ok(Reply::Ready { .. })) => {
                tracing::info!(
                    pid,
                    scale = spec.scale,
                    display = spec.display,
                    "WebKit helper ready"
                );
                Ok(helper)
            }
            Ok(Ok(other)) => Err(WebkitError::HelperStart(format!(
                "expected ready, got {other:?}"
            ))),
            Ok(Err(e)) => Err(WebkitError::HelperStart(e.to_string())),
            Err(_) => Err(WebkitError::HelperStart(format!(
                "not ready within {START_TIMEOUT:?}{}",
                helper.stderr_summary()
            ))),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether this helper can take the next request: alive, and not left midway through an
    /// exchange by a caller that stopped waiting.
    pub(crate) fn usable(&self) -> bool {
        !self.in_exchange && procs::alive(self.pid)
    }

    /// Sends one page and waits for its PNG. A timeout kills the helper: a WebView that does not
    /// answer cannot be trusted with the next email.
    pub(crate) async fn render(
        &mut self,
        request: &RenderRequest,
        timeout: Duration,
    ) -> Result<Rendered, WebkitError> {
        self.in_exchange = true;
        let exchange = async {
            let mut line = serde_json::to_vec(request)
                .map_err(|e| WebkitError::InvalidRequest(format!("does not serialise: {e}")))?;
            line.push(b'\n');
            self.stdin
                .write_all(&line)
                .await
                .map_err(|e| self.died(&format!("writing to it: {e}")))?;
            self.stdin
                .flush()
                .await
                .map_err(|e| self.died(&format!("writing to it: {e}")))?;
            self.read_reply().await
        };
        let reply = match tokio::time::timeout(timeout, exchange).await {
            Ok(reply) => {
                let reply = reply?;
                self.in_exchange = false;
                reply
            }
            Err(_) => {
                tracing::warn!(pid = self.pid, ?timeout, "WebKit helper hung; killing it");
                let _ = self.child.start_kill();
                return Err(WebkitError::Timeout(timeout));
            }
        };
        match reply {
            Reply::Rendered {
                width_px,
                height_px,
                loaded,
                timings,
                before,
                after,
                drawn,
            } => Ok(Rendered {
                width_px,
                height_px,
                loaded,
                timings,
                before,
                after,
                drawn,
            }),
            Reply::Failed {
                message,
                fatal: true,
            } => Err(WebkitError::HelperDied(message)),
            Reply::Failed {
                message,
                fatal: false,
            } => Err(WebkitError::Render(message)),
            Reply::Ready { .. } => Err(self.died("it announced ready again in mid-session")),
        }
    }

    async fn read_reply(&mut self) -> Result<Reply, WebkitError> {
        let mut line = Vec::new();
        let limit = MAX_REPLY_LINE_BYTES as u64 + 1;
        let read = (&mut self.stdout)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => {
                // Give the process a moment to be reaped so the exit status reaches the message.
                let status = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
                let status = match status {
                    Ok(Ok(s)) => s.to_string(),
                    _ => "still running".into(),
                };
                Err(self.died(&format!("it closed its output ({status})")))
            }
            Ok(_) if line.len() > MAX_REPLY_LINE_BYTES => {
                Err(self.died("it sent an oversized reply"))
            }
            Ok(_) => serde_json::from_slice(&line).map_err(|e| {
                self.died(&format!(
                    "unreadable reply {:?}: {e}",
                    String::from_utf8_lossy(&line)
                ))
            }),
            Err(e) => Err(self.died(&format!("reading from it: {e}"))),
        }
    }

    fn died(&self, what: &str) -> WebkitError {
        WebkitError::HelperDied(format!(
            "helper pid {}: {what}{}",
            self.pid,
            self.stderr_summary()
        ))
    }

    fn stderr_summary(&self) -> String {
        let tail = match self.stderr_tail.lock() {
            Ok(tail) => tail.iter().cloned().collect::<Vec<_>>().join(" | "),
            Err(_) => String::new(),
        };
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with: {tail}")
        }
    }

    /// Closing stdin asks the helper to quit; it is killed if it takes longer than a moment.
    pub(crate) async fn stop(self) {
        let Helper {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        if tokio::time::timeout(Duration::from_secs(2), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

async fn forward_stderr(
    stderr: tokio::process::ChildStderr,
    pid: u32,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(pid, "webkit helper: {line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            // Long lines (a dumped page, say) are cut so the tail stays small.
            tail.push_back(line.chars().take(300).collect());
        }
    }
}

/// Where the helper binary is: an explicit path, `MAILPROOF_WEBKIT_HELPER`, or next to the running
/// executable (also one level up, which covers test and example binaries under `target/*/deps`).
pub(crate) fn locate(explicit: Option<&Path>) -> Result<PathBuf, WebkitError> {
    let mut searched = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = explicit {
        candidates.push(path.to_path_buf());
    } else {
        if let Some(path) = std::env::var_os("MAILPROOF_WEBKIT_HELPER") {
            candidates.push(PathBuf::from(path));
        }
        if let Ok(exe) = std::env::current_exe() {
            let mut dir = exe.parent();
            for _ in 0..2 {
                if let Some(d) = dir {
                    candidates.push(d.join(HELPER_BINARY));
                    dir = d.parent();
                }
            }
        }
    }
    for candidate in candidates {
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate);
    }
    Err(WebkitError::HelperMissing { searched })
}
