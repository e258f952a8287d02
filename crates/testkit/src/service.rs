//! `mailproof serve` as the suites and benchmarks run it: the real binary on loopback ports it
//! chooses itself (`127.0.0.1:0`, announced on stdout as `mailproof: listening on <url>` and
//! `mailproof: smtp on <addr>`), in its own process group so that stopping it also stops the
//! browsers and filter daemons it started.
//!
//! [`Launch`] starts one process; [`Deployment`] is what several processes by role share (one
//! database, one blob store, the key files) and writes each one's configuration.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::Error;

/// The first account's API key and password of every service the kit starts.
pub const ADMIN_KEY: &str = "admin-key";
pub const ADMIN_PASS: &str = "admin-password";

/// How long a process may take to announce its addresses (engines and daemons start first).
const READY_WITHIN: Duration = Duration::from_secs(120);

/// The `mailproof` binary of the build running this example (`target/<profile>/examples/..`):
/// examples have no `CARGO_BIN_EXE_*`.
pub fn sibling_binary() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or("cannot locate the target directory")?;
    let bin = profile_dir.join("mailproof");
    if !bin.is_file() {
        return Err(format!(
            "{} is missing: build it first with `cargo build -p mailproof --bins`",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

/// One `mailproof serve` to start: `--http 127.0.0.1:0` unless [`Launch::http`] says otherwise,
/// the kit's first account, `RUST_LOG=warn`, and whatever arguments and environment are added.
pub struct Launch {
    bin: PathBuf,
    name: String,
    http: String,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stop: procs::Signal,
}

impl Launch {
    pub fn serve(bin: &Path, name: &str) -> Launch {
        Launch {
            bin: bin.to_path_buf(),
            name: name.to_owned(),
            http: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            stop: procs::Signal::KILL,
        }
    }

    /// The HTTP listen address (e.g. `0.0.0.0:0`).
    pub fn http(mut self, addr: &str) -> Launch {
        addr.clone_into(&mut self.http);
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Launch {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set after the kit's defaults, so it overrides them (`MAILPROOF_API_KEY`, `RUST_LOG`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn envs<K: Into<OsString>, V: Into<OsString>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Launch {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The signal its process group gets when the [`Service`] is dropped (default SIGKILL;
    /// SIGTERM lets it stop its daemons itself).
    pub fn stop_with(mut self, signal: procs::Signal) -> Launch {
        self.stop = signal;
        self
    }

    /// The command, not started: for a test that watches a process meant to fail, or reads its
    /// log (set `stderr` to piped), instead of waiting for it to serve.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["serve", "--http", &self.http])
            .args(&self.args)
            .env("MAILPROOF_API_KEY", ADMIN_KEY)
            .env("MAILPROOF_PASSWORD", ADMIN_PASS)
            .env("RUST_LOG", "warn")
            .env_remove("MAILPROOF_ROLE")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        cmd
    }

    /// Starts the process without waiting for it to be ready.
    pub fn spawn(self) -> Result<Starting, Error> {
        let mut child = self
            .command()
            .spawn()
            .map_err(|e| format!("start {} serve ({}): {e}", self.bin.display(), self.name))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("mailproof: ") {
                    let _ = tx.send(rest.to_string());
                }
            }
        });
        Ok(Starting {
            child,
            name: self.name,
            lines,
            stop: self.stop,
        })
    }

    /// Starts the process and waits until it announces its addresses.
    pub fn start(self) -> Result<Service, Error> {
        self.spawn()?.ready()
    }
}

/// A started `mailproof serve` whose address lines are still to be read.
pub struct Starting {
    pub child: Child,
    pub name: String,
    /// Its `mailproof: ...` stdout lines, without the prefix.
    pub lines: Receiver<String>,
    stop: procs::Signal,
}

impl Starting {
    /// Waits for the process's "listening on" line (its roles are running), noting the SMTP
    /// address announced before it, if any.
    pub fn ready(self) -> Result<Service, Error> {
        let Starting {
            child,
            name,
            lines,
            stop,
        } = self;
        // Built first, so that an error below still stops the process.
        let mut service = Service {
            child,
            base: String::new(),
            smtp: None,
            stop,
            reaped: false,
        };
        loop {
            let line = match lines.recv_timeout(READY_WITHIN) {
                Ok(line) => line,
                // Its stdout closed: the process ended (its own error is on stderr, above).
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let status = service
                        .child
                        .wait()
                        .map_or_else(|e| format!("status unknown: {e}"), |s| s.to_string());
                    service.reaped = true;
                    return Err(format!(
                        "{name} exited ({status}) before it reported its address; its error is on stderr above"
                    )
                    .into());
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{name} did not report its address within {READY_WITHIN:?}"
                    )
                    .into())
                }
            };
            if let Some(addr) = line.strip_prefix("smtp on ") {
                service.smtp = Some(addr.parse()?);
            } else if let Some(url) = line.strip_prefix("listening on ") {
                service.base = url.to_owned();
                return Ok(service);
            }
        }
    }
}

/// A running `mailproof serve`; its process group is stopped when it is dropped.
pub struct Service {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The SMTP listener, for a process that runs one.
    pub smtp: Option<SocketAddr>,
    stop: procs::Signal,
    reaped: bool,
}

impl Service {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL to the service's main process alone, as a crash: what it started must end by
    /// itself.
    pub fn kill(&mut self) {
        procs::signal(self.pid(), procs::Signal::KILL);
        self.reap();
    }

    /// SIGKILL to the whole group: the service and its engines or daemons die at once.
    pub fn kill_group(&mut self) {
        if !self.reaped {
            procs::signal_group(self.pid(), procs::Signal::KILL);
        }
        self.reap();
    }

    /// SIGTERM to the main process, then waits up to `within` for it to exit; its status if it did.
    pub fn terminate(&mut self, within: Duration) -> Option<ExitStatus> {
        assert!(
            procs::signal(self.pid(), procs::Signal::TERM),
            "SIGTERM to {}",
            self.pid()
        );
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.reaped = true;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn reap(&mut self) {
        if !self.reaped {
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // The group outlives a reaped leader only if it started children; after `kill` the
        // leader's id may be reused, so a reaped service signals nothing.
        if !self.reaped {
            procs::signal_group(self.pid(), self.stop);
        }
        self.reap();
    }
}

/// `mailproof accounts add <args>` against `data_dir` (and `database_url` when the database is
/// not SQLite there).
pub fn add_account(
    bin: &Path,
    data_dir: &Path,
    database_url: Option<&str>,
    args: &[&str],
) -> Result<(), Error> {
    let mut cmd = Command::new(bin);
    cmd.args(["accounts", "add"])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir);
    if let Some(url) = database_url {
        cmd.arg("--database-url").arg(url);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "mailproof accounts add failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

/// What every process of one service deployed by roles shares: one database, one blob store, the
/// key files. Each process gets its configuration from [`Deployment::process_config`].
pub struct Deployment {
    bin: PathBuf,
    pub root: tempfile::TempDir,
    /// One data directory for all processes: the embedded SQLite database when there is no
    /// `database` (WAL mode serves several processes on one machine) and local blobs when there
    /// is no `s3`.
    pub data_dir: PathBuf,
    /// A PostgreSQL database all processes use (kept alive with the deployment).
    database: Option<store::testing::TestDb>,
    /// An S3-compatible server holding every process's screenshots.
    pub s3: Option<store::test_s3::S3Server>,
    pub url_key: PathBuf,
    dkim_key: PathBuf,
}

impl Deployment {
    /// The database `MAILPROOF_TEST_DB` asks for (SQLite or a fresh PostgreSQL one) and local blobs.
    pub async fn new(bin: &Path) -> Deployment {
        let database = match store::Backend::from_env() {
            store::Backend::Postgres => {
                Some(store::testing::database(store::Backend::Postgres).await)
            }
            store::Backend::Sqlite => None,
        };
        Deployment::with(bin, database, None)
    }

    /// PostgreSQL and an S3-compatible server, whatever the harness runs on: the deployment with
    /// several machines that roles are for.
    pub async fn on_postgres_and_s3(bin: &Path) -> Deployment {
        let database = store::testing::database(store::Backend::Postgres).await;
        let s3 = store::test_s3::S3Server::start().await;
        Deployment::with(bin, Some(database), Some(s3))
    }

    pub fn with(
        bin: &Path,
        database: Option<store::testing::TestDb>,
        s3: Option<store::test_s3::S3Server>,
    ) -> Deployment {
        let root = tempfile::tempdir().expect("temp dir");
        let data_dir = root.path().join("data");
        let keys = root.path().join("keys");
        std::fs::create_dir_all(&keys).expect("keys dir");
        let url_key = keys.join("url-signing.key");
        std::fs::write(&url_key, rand::random::<[u8; 32]>()).expect("write url key");
        Deployment {
            bin: bin.to_path_buf(),
            data_dir,
            database,
            s3,
            url_key,
            dkim_key: keys.join("dkim.pem"),
            root,
        }
    }

    /// The PostgreSQL database's URL, when there is one.
    pub fn database_url(&self) -> Option<&str> {
        self.database.as_ref().map(|db| db.url.as_str())
    }

    /// The shared database, as the processes see it.
    pub async fn store(&self) -> store::Store {
        match &self.database {
            Some(db) => store::Store::connect(&db.url).await,
            None => store::Store::open(&self.data_dir).await,
        }
        .expect("open the shared store")
    }

    /// The shared blob store, as the processes see it.
    pub fn blobs(&self) -> store::Blobs {
        let config = self
            .s3
            .as_ref()
            .map_or(store::BlobsConfig::Local, |s3| s3.config());
        store::Blobs::open(&config, &self.data_dir).expect("open the shared blobs")
    }

    /// Makes the DKIM key once, as an operator would with openssl, for every mail process.
    pub fn make_dkim_key(&self) {
        let out = Command::new("openssl")
            .args(["genrsa", "-traditional", "-out"])
            .arg(&self.dkim_key)
            .arg("2048")
            .output()
            .expect("openssl runs (install it with scripts/setup.sh)");
        assert!(
            out.status.success(),
            "openssl genrsa: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The configuration file of one process of `role`, with `extra` TOML appended. Without
    /// `[render]` or `[spam]` in `extra` it starts no browsers and no filter daemons.
    pub fn process_config(&self, role: &str, extra: &str) -> String {
        let mut text = format!(
            "role = \"{role}\"\ndata_dir = {:?}\n",
            self.data_dir.display().to_string()
        );
        if let Some(db) = &self.database {
            text.push_str(&format!("database_url = {:?}\n", db.url));
        }
        text.push_str(&format!(
            "[keys]\nurl_signing_key_file = {:?}\n",
            self.url_key.display().to_string()
        ));
        if self.dkim_key.exists() {
            text.push_str(&format!(
                "dkim_key_file = {:?}\n",
                self.dkim_key.display().to_string()
            ));
        }
        text.push_str(extra);
        if let Some(s3) = &self.s3 {
            text.push('\n');
            text.push_str(&s3.config_toml());
        }
        if !text.contains("[render]") {
            text.push_str("\n[render]\nengines = []\n");
        }
        if !text.contains("[spam]") {
            text.push_str("\n[spam]\ndaemons = false\n");
        }
        text
    }

    /// A process named `name` with `config` (written beside the shared data) and `args`.
    pub fn launch(&self, name: &str, config: &str, args: &[&str]) -> Launch {
        let path = self.root.path().join(format!("{name}.toml"));
        std::fs::write(&path, config).expect("write config");
        Launch::serve(&self.bin, name)
            .args(args)
            .arg("--config")
            .arg(path)
    }

    /// `mailproof accounts add <args>` against the shared database.
    pub fn add_account(&self, args: &[&str]) -> Result<(), Error> {
        add_account(&self.bin, &self.data_dir, self.database_url(), args)
    }
}
