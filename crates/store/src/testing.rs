//! Throw-away databases for tests (feature `testing`): a fresh SQLite file, or a fresh database in
//! a PostgreSQL cluster that this process starts once on a loopback port and that stops when the
//! process exits, however it exits.
//!
//! Used by the store's own tests (every one on both backends) and by the service's integration
//! harness, which picks the backend with `MAILPROOF_TEST_DB=postgres|sqlite` ([`Backend::from_env`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use sqlx::Connection;

use crate::{Account, Backend, NewAccount, NewTest, Store};

/// The environment variable naming the backend integration tests run on.
pub const TEST_DB_ENV: &str = "MAILPROOF_TEST_DB";

impl Backend {
    /// The backend `MAILPROOF_TEST_DB` names (`sqlite`, the default, or `postgres`).
    ///
    /// # Panics
    /// On any other value: a typo must not quietly test the default instead.
    pub fn from_env() -> Backend {
        match std::env::var(TEST_DB_ENV).as_deref() {
            Err(_) | Ok("") | Ok("sqlite") => Backend::Sqlite,
            Ok("postgres") | Ok("postgresql") => Backend::Postgres,
            Ok(other) => panic!("{TEST_DB_ENV}={other:?}: use sqlite or postgres"),
        }
    }
}

/// A database of its own for one test. Keep it alive as long as the test uses the database: a
/// SQLite file lives in a temporary directory removed on drop. (PostgreSQL databases go with the
/// cluster when the process ends.)
pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh, empty database on `backend`.
///
/// # Panics
/// When the database cannot be made (e.g. PostgreSQL is not installed: the message says to run
/// `scripts/setup.sh`). Tests must not skip silently.
pub async fn database(backend: Backend) -> TestDb {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("a temporary directory for the SQLite database");
            let url = crate::sqlite_url(dir.path()).expect("a URL for the SQLite database");
            TestDb {
                url,
                backend,
                _dir: Some(dir),
            }
        }
        Backend::Postgres => {
            let port = tokio::task::spawn_blocking(|| {
                CLUSTER
                    .get_or_init(PgCluster::start)
                    .as_ref()
                    .map(|c| c.port)
                    .map_err(Clone::clone)
            })
            .await
            .expect("starting PostgreSQL panicked")
            .unwrap_or_else(|e| panic!("{e}"));
            create_database(port).await
        }
    }
}

/// A fresh database on `backend`, opened as a [`Store`] (schema migrated).
pub async fn store(backend: Backend) -> (TestDb, Store) {
    let db = database(backend).await;
    let store = Store::connect(&db.url)
        .await
        .unwrap_or_else(|e| panic!("opening the test database {}: {e}", db.url));
    (db, store)
}

/// An enterprise account with API key `key` and no limits; its password hash is not a real one
/// (tests of the store never check passwords).
///
/// # Panics
/// When the account cannot be created.
pub async fn add_account(store: &Store, key: &str) -> Account {
    add_account_with(
        store,
        NewAccount {
            api_key: key.into(),
            password_hash: "x".into(),
            plan: domain::Plan::Enterprise,
            monthly_test_limit: None,
            rate_limit_per_minute: None,
            allowed_clients: None,
            auto_inbox: None,
        },
    )
    .await
}

/// [`add_account`] with an account of the caller's making (another plan, an auto-inbox).
///
/// # Panics
/// When the account cannot be created.
pub async fn add_account_with(store: &Store, account: NewAccount) -> Account {
    store
        .create_account(&account, 1_000)
        .await
        .unwrap_or_else(|e| panic!("creating test account {}: {e}", account.api_key))
}

/// A test of `account_id` with a fresh id and nothing else in it: no clients, no spam, no
/// callback, created at 1,000. Tests name what matters to them and take the rest from here:
/// `NewTest { clients, ..testing::new_test(account, TestKind::Email) }`.
pub fn new_test(account_id: i64, kind: domain::TestKind) -> NewTest {
    NewTest {
        id: domain::TestId::generate().to_string(),
        account_id,
        kind,
        subject: "S".into(),
        html: "<p>x</p>".into(),
        created_at: 1_000,
        reference_id: None,
        customer_id: None,
        headers: std::collections::BTreeMap::new(),
        image_blocking: false,
        free_test: false,
        source_url: None,
        clients: Vec::new(),
        spam_method: None,
        seed_key: None,
        spam_from_address: None,
        sender: None,
        spam_filters: Vec::new(),
        reprocesses: 0,
        monthly_limit: None,
        callback_url: None,
        text_part: None,
    }
}

const PG_USER: &str = "mailproof";

static CLUSTER: OnceLock<Result<PgCluster, String>> = OnceLock::new();

/// A PostgreSQL cluster of a test's own, for tests that stop and start it (the shared one serves
/// every other test of the process). Stopped with the process, like the shared one.
pub struct PrivateCluster {
    cluster: PgCluster,
}

impl PrivateCluster {
    /// Starts a cluster and makes one database in it. The cluster stops when dropped. Unlike the
    /// shared one it is durable (`synchronous_commit`, `fsync`): [`PrivateCluster::stop`] is a
    /// crash, and a crash of a real server keeps every commit it acknowledged.
    ///
    /// # Panics
    /// When PostgreSQL cannot be started (the message says to run `scripts/setup.sh`).
    pub async fn start() -> (PrivateCluster, TestDb) {
        let cluster = tokio::task::spawn_blocking(|| PgCluster::start_with(true))
            .await
            .expect("starting PostgreSQL panicked")
            .unwrap_or_else(|e| panic!("{e}"));
        let db = create_database(cluster.port).await;
        (PrivateCluster { cluster }, db)
    }

    /// Stops the server at once (`-m immediate`: connections drop as in a crash).
    pub fn stop(&self) {
        let c = &self.cluster;
        run(
            pg_command(&c.bin, "pg_ctl", c.as_root)
                .arg("-D")
                .arg(&c.data)
                .args(["-m", "immediate", "-w", "stop"]),
            "pg_ctl stop",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts the stopped server again on the same port, with the same data. Tried three times,
    /// a second apart: after `-m immediate` the old server's last children may still hold the
    /// port for a moment, and the new postmaster then exits at once ("could not start server").
    pub fn start_again(&self) {
        let mut failed = Vec::new();
        for _ in 0..3 {
            match self.cluster.pg_ctl_start(self.cluster.port) {
                Ok(()) => return,
                Err(e) => failed.push(e),
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let log = std::fs::read_to_string(&self.cluster.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        panic!(
            "PostgreSQL did not start again: {failed:?}; its log ends with:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

/// Makes a fresh database in the cluster listening on `port`.
async fn create_database(port: u16) -> TestDb {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let admin = format!("postgres://{PG_USER}@127.0.0.1:{port}/postgres");
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test cluster at {admin}: {e}"));
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("creating test database {name}: {e}"));
    // Closing politely is not needed for correctness; a failure here is only noise.
    let _ = conn.close().await;
    TestDb {
        url: format!("postgres://{PG_USER}@127.0.0.1:{port}/{name}"),
        backend: Backend::Postgres,
        _dir: None,
    }
}

/// A PostgreSQL cluster: the process's shared one (a static, never dropped) or a test's own;
/// `_watchdog` stops it when dropped or when the process ends.
struct PgCluster {
    port: u16,
    bin: PathBuf,
    data: PathBuf,
    log: PathBuf,
    dir: PathBuf,
    as_root: bool,
    /// Whether a commit is acknowledged only once it is on disk, as on a production server.
    /// The shared cluster trades that for speed; a cluster a test crashes on purpose must not, or
    /// the crash loses commits the service was told were made.
    durable: bool,
    /// A shell waiting for end-of-file on its stdin, whose only writer is this process: when the
    /// process exits (normally, by panic or by a signal) the kernel closes the pipe and the shell
    /// stops the cluster and removes its directory. Set once the cluster has started.
    _watchdog: Option<Mutex<(Child, ChildStdin)>>,
}

impl PgCluster {
    fn start() -> Result<PgCluster, String> {
        PgCluster::start_with(false)
    }

    fn start_with(durable: bool) -> Result<PgCluster, String> {
        let bin = pg_bindir()?;
        let dir = tempfile::Builder::new()
            .prefix("mailproof-pg-")
            .tempdir()
            .map_err(|e| format!("creating a directory for the test PostgreSQL cluster: {e}"))?
            .keep();
        let as_root = is_root();
        // initdb and pg_ctl refuse to run as root: the cluster belongs to `postgres`, which must
        // be able to reach the directory (tempdir makes it 0700).
        prepare_dir(&dir, as_root)?;
        let data = dir.join("data");
        let log = dir.join("log");
        run(
            pg_command(&bin, "initdb", as_root)
                .arg("-D")
                .arg(&data)
                .args(["-A", "trust", "-U", PG_USER, "--no-sync", "-E", "UTF8"]),
            "initdb",
        )?;
        let mut cluster = PgCluster {
            port: 0,
            bin,
            data,
            log,
            dir,
            as_root,
            durable,
            _watchdog: None,
        };
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port()?;
            match cluster.pg_ctl_start(port) {
                Ok(()) => {
                    cluster.port = port;
                    cluster._watchdog = Some(Mutex::new(watchdog(
                        &cluster.bin,
                        &cluster.data,
                        &cluster.dir,
                        as_root,
                    )?));
                    return Ok(cluster);
                }
                // Most likely the port was taken between choosing and binding it: try another.
                Err(e) => {
                    last = format!(
                        "{e}\n{}",
                        std::fs::read_to_string(&cluster.log).unwrap_or_default()
                    )
                }
            }
        }
        let _ = std::fs::remove_dir_all(&cluster.dir);
        Err(format!(
            "starting the test PostgreSQL cluster failed: {last}"
        ))
    }

    fn pg_ctl_start(&self, port: u16) -> Result<(), String> {
        let durability = if self.durable {
            "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
        } else {
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        };
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 {durability} -c max_connections=300",
            self.dir.display()
        );
        run(
            pg_command(&self.bin, "pg_ctl", self.as_root)
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(&self.log)
                .args(["-w", "-t", "60", "start", "-o", &opts]),
            "pg_ctl start",
        )
    }
}

/// Debian's versioned directory (the newest installed), or the directory of `initdb` on `PATH`.
fn pg_bindir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("MAILPROOF_PG_BINDIR") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .ok_or_else(|| {
            "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH); \
             run scripts/setup.sh, which installs the Debian package `postgresql`"
                .to_string()
        })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn prepare_dir(dir: &Path, as_root: bool) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("making {} readable for postgres: {e}", dir.display()))?;
    if as_root {
        run(
            Command::new("chown").arg("postgres").arg(dir),
            "chown postgres",
        )?;
    }
    Ok(())
}

fn pg_command(bin: &Path, program: &str, as_root: bool) -> Command {
    if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

/// Runs `cmd` to completion. Output goes to a file rather than a pipe: the server that `pg_ctl`
/// starts would inherit a pipe and keep it open after `pg_ctl` exits.
fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = tempfile::tempfile().map_err(|e| format!("{what}: temporary file: {e}"))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{what}: temporary file: {e}"))?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| format!("{what}: {e}"))?)
        .stderr(err)
        .status()
        .map_err(|e| format!("{what} could not be started ({e}); run scripts/setup.sh"))?;
    if status.success() {
        return Ok(());
    }
    use std::io::{Read, Seek};
    let mut text = String::new();
    let mut out = out;
    let _ = out.rewind();
    let _ = out.read_to_string(&mut text);
    Err(format!("{what} failed ({status}): {text}"))
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("choosing a loopback port for PostgreSQL: {e}"))
}

fn watchdog(
    bin: &Path,
    data: &Path,
    dir: &Path,
    as_root: bool,
) -> Result<(Child, ChildStdin), String> {
    let stop = if as_root {
        "runuser -u postgres -- \"$1/pg_ctl\" -D \"$2\" -m immediate stop"
    } else {
        "\"$1/pg_ctl\" -D \"$2\" -m immediate stop"
    };
    let script = format!("cat >/dev/null; {stop} >/dev/null 2>&1; rm -rf \"$3\"");
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("mailproof-pg-watchdog")
            .arg(bin)
            .arg(data)
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C aimed at the tests must not kill it before it has
            // stopped the cluster.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting the cluster's watchdog shell: {e}"))?
    };
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| "the watchdog shell has no stdin".to_string())?;
    // Nothing is ever written; flushing checks the pipe is open.
    stdin
        .flush()
        .map_err(|e| format!("the watchdog shell's stdin: {e}"))?;
    Ok((child, stdin))
}
