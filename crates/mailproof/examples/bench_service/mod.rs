//! The service under measurement, for the benchmark examples: the sibling `mailproof` binary of
//! the same build (`testkit::service`), started on loopback ports with a temporary data
//! directory, stopped (with the filter daemons it started) when dropped. Included by each example
//! with `#[path]`.

// Compiled into each example separately, and each uses its own part of it.
#![allow(dead_code)]

use std::path::PathBuf;

use testkit::service::{sibling_binary, Launch, Service};

pub type BoxError = testkit::Error;

pub struct BenchService {
    service: Service,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub smtp: std::net::SocketAddr,
    dir: tempfile::TempDir,
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
        let service = Launch::serve(&sibling_binary()?, "mailproof serve")
            .args(["--smtp", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(config_path)
            .env("MAILPROOF_API_KEY", admin_key)
            .env("MAILPROOF_PASSWORD", password)
            .env("RUST_LOG", rust_log)
            // SIGTERM lets the service stop its filter daemons itself.
            .stop_with(procs::Signal::TERM)
            .start()?;
        Ok(BenchService {
            base: service.base.clone(),
            smtp: service
                .smtp
                .ok_or("no `smtp on` line before the HTTP line")?,
            service,
            dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.service.pid()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `mailproof accounts add` on the enterprise plan without a practical rate limit, so that
    /// the benchmark measures the service rather than its per-account limit.
    pub fn add_account(&self, key: &str, password: &str) -> Result<(), BoxError> {
        testkit::service::add_account(
            &sibling_binary()?,
            &self.data_dir(),
            None,
            &unlimited_account(key, password),
        )
    }
}

/// `accounts add` arguments: enterprise plan, no practical rate limit.
pub fn unlimited_account<'a>(key: &'a str, password: &'a str) -> [&'a str; 8] {
    [
        "--api-key",
        key,
        "--password",
        password,
        "--plan",
        "enterprise",
        "--rate-limit",
        "100000000",
    ]
}
