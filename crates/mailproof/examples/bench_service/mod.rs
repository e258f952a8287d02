//! The service under measurement, for the benchmark examples: the sibling `mailproof` binary of
//! the same build, started on loopback ports with a temporary data directory, stopped (with the
//! filter daemons it started) when dropped. Included by each example with `#[path]`; an example
//! cannot use the integration tests' harness (`CARGO_BIN_EXE_*` exists only for tests).

// Compiled into each example separately, and each uses its own part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub struct BenchService {
    child: std::process::Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub smtp: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for BenchService {
    fn drop(&mut self) {
        // The service runs in its own process group with its filter daemons: stop them all.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// `mailproof` beside this example's directory (`target/<profile>/examples/..`).
pub fn mailproof_binary() -> Result<PathBuf, BoxError> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or("cannot locate the target directory")?;
    let bin = profile_dir.join("mailproof");
    if !bin.is_file() {
        return Err(format!(
            "{} is missing: build it first with `cargo build --release -p mailproof --bins`",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

impl BenchService {
    /// Starts `mailproof serve` with `config` (TOML) and the first account `admin_key`/`password`,
    /// and waits until it reports its addresses.
    pub fn start(
        config: &str,
        admin_key: &str,
        password: &str,
        rust_log: &str,
    ) -> Result<BenchService, BoxError> {
        let dir = tempfile::tempdir()?;
        let config_path = dir.path().join("mailproof.toml");
        std::fs::write(&config_path, config)?;
        let mut child = Command::new(mailproof_binary()?)
            .args(["serve", "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config_path)
            .env("MAILPROOF_API_KEY", admin_key)
            .env("MAILPROOF_PASSWORD", password)
            .env("RUST_LOG", rust_log)
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("mailproof: ") {
                    let _ = tx.send(rest.to_string());
                }
            }
        });
        let mut smtp = None;
        let base = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .map_err(|_| "mailproof serve did not report its addresses within 120 s")?;
            if let Some(addr) = line.strip_prefix("smtp on ") {
                smtp = Some(addr.parse()?);
            } else if let Some(url) = line.strip_prefix("listening on ") {
                break url.to_string();
            }
        };
        Ok(BenchService {
            child,
            base,
            smtp: smtp.ok_or("no `smtp on` line before the HTTP line")?,
            dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `mailproof accounts add` on the enterprise plan without a practical rate limit, so that
    /// the benchmark measures the service rather than its per-account limit.
    pub fn add_account(&self, key: &str, password: &str) -> Result<(), BoxError> {
        add_account_in(&self.data_dir(), None, key, password)
    }
}

/// The same, for a service whose database is `database_url` (else SQLite in `data_dir`).
pub fn add_account_in(
    data_dir: &Path,
    database_url: Option<&str>,
    key: &str,
    password: &str,
) -> Result<(), BoxError> {
    let mut cmd = Command::new(mailproof_binary()?);
    cmd.args(["accounts", "add", "--api-key", key, "--password", password])
        .args(["--plan", "enterprise", "--rate-limit", "100000000"])
        .arg("--data-dir")
        .arg(data_dir);
    if let Some(url) = database_url {
        cmd.arg("--database-url").arg(url);
    }
    let out = cmd.stdout(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(format!(
            "mailproof accounts add {key} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}
