//! Supervision of spamd and rspamd: offline-safe configs in a run directory the daemons' users can
//! reach, loopback ports of our choosing, readiness waits, restarts of a daemon that failed or
//! died (each daemon on its own), and shutdown. Or the addresses of daemons someone else runs.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::rspamd::RspamdClient;
use crate::spamd::SpamdClient;
use crate::SpamError;

/// Where a daemon comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonSource {
    /// Start it ourselves on a free loopback port.
    Start,
    /// Use one already listening at this address.
    External(SocketAddr),
    /// Do without it: its profiles report "not configured".
    Off,
}

/// How to get the filter daemons. `DaemonConfig::new(work_dir)` starts both.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The daemons' logs go here. Only this process writes below it (the daemons inherit their
    /// log files), so it may sit anywhere, e.g. inside a 0700 home directory.
    pub work_dir: PathBuf,
    /// Configs and run files the daemons read after dropping to their own users: a directory of
    /// ours under the temp dir (0711), not the data dir, whose ancestors those users may not be
    /// allowed to enter. Removed on shutdown.
    pub run_dir: PathBuf,
    /// rspamd's DBDIR: its hyperscan cache (about 8 s to build) survives here between runs.
    pub cache_dir: PathBuf,
    pub spamd: DaemonSource,
    pub rspamd: DaemonSource,
    /// How long each daemon may take to answer its first ping.
    pub start_timeout: Duration,
    /// spamd scanning children; scanning is CPU-bound, so about the core count.
    pub spamd_children: u32,
    pub spamd_program: PathBuf,
    pub rspamd_program: PathBuf,
    /// The SpamAssassin configuration copied into the run dir.
    pub spamassassin_etc: PathBuf,
    /// Wait before the first restart of a daemon that failed; doubled per failure up to
    /// `retry_max`.
    pub retry_first: Duration,
    pub retry_max: Duration,
}

/// What one daemon is doing, for `/healthz` and for the details of results it cannot give.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DaemonState {
    /// Not wanted (`DaemonSource::Off`).
    #[default]
    Off,
    Starting,
    Up(SocketAddr),
    /// It failed to start or died; another start is attempted at `retry_at`.
    Down {
        reason: String,
        retry_at: SystemTime,
    },
}

/// The state of both daemons.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilterStatus {
    pub spamd: DaemonState,
    pub rspamd: DaemonState,
}

impl FilterStatus {
    /// The daemons that answer now.
    pub fn addresses(&self) -> FilterAddresses {
        let up = |s: &DaemonState| match s {
            DaemonState::Up(addr) => Some(*addr),
            _ => None,
        };
        FilterAddresses {
            spamd: up(&self.spamd),
            rspamd: up(&self.rspamd),
        }
    }
}

/// The addresses scanning needs; `None` means the engine is not available.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterAddresses {
    pub spamd: Option<SocketAddr>,
    pub rspamd: Option<SocketAddr>,
}

/// Running (or referenced) filter daemons. Dropping it stops the ones it started.
pub struct FilterDaemons {
    addresses: FilterAddresses,
    children: Vec<Supervised>,
    run_dir: PathBuf,
}

struct Supervised {
    name: &'static str,
    child: Child,
    /// A shell that sends SIGTERM to the daemon when this pipe closes, i.e. when our process
    /// ends in any way (even SIGKILL or a test binary that never drops its daemons).
    _watchdog: Option<Child>,
}

impl DaemonConfig {
    /// Start both daemons, keeping the rspamd cache in a per-user directory under the temp dir.
    pub fn new(work_dir: impl Into<PathBuf>) -> DaemonConfig {
        let uid = own_uid();
        let work_dir = work_dir.into();
        DaemonConfig {
            run_dir: run_dir_for(&work_dir),
            work_dir,
            cache_dir: std::env::temp_dir().join(format!("mailproof-rspamd-cache-{uid}")),
            spamd: DaemonSource::Start,
            rspamd: DaemonSource::Start,
            start_timeout: Duration::from_secs(90),
            spamd_children: 2,
            spamd_program: first_existing(&["/usr/sbin/spamd", "/usr/bin/spamd"], "spamd"),
            rspamd_program: first_existing(&["/usr/bin/rspamd", "/usr/sbin/rspamd"], "rspamd"),
            spamassassin_etc: PathBuf::from("/etc/spamassassin"),
            retry_first: Duration::from_secs(5),
            retry_max: Duration::from_secs(300),
        }
    }

    /// Use daemons that already run at these addresses; nothing is started.
    pub fn external(spamd: SocketAddr, rspamd: SocketAddr) -> DaemonConfig {
        DaemonConfig {
            spamd: DaemonSource::External(spamd),
            rspamd: DaemonSource::External(rspamd),
            ..DaemonConfig::new(std::env::temp_dir())
        }
    }
}

fn own_uid() -> u32 {
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

/// `<temp>/mailproof-<uid>/filters-<hash of work_dir>`: one per data dir, so that two services
/// (or tests) with different data dirs never share configs.
fn run_dir_for(work_dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(work_dir).unwrap_or_else(|_| work_dir.to_path_buf());
    // FNV-1a: stable across builds, unlike std's hasher, so a restarted service finds (and
    // replaces) its own leftovers instead of piling up new directories.
    let hash = absolute
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    std::env::temp_dir()
        .join(format!("mailproof-{}", own_uid()))
        .join(format!("filters-{hash:016x}"))
}

/// Makes the run dir (and its per-user parent) ours and enterable, but not listable, by others.
/// A parent that is a symlink or someone else's is refused: the temp dir is shared.
fn prepare_run_dir(run_dir: &Path) -> Result<(), SpamError> {
    if let Some(parent) = run_dir.parent() {
        match fs::create_dir(parent) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(work_err(&format!("the run dir {}", parent.display()), e)),
        }
        let meta = fs::symlink_metadata(parent)
            .map_err(|e| work_err(&format!("the run dir {}", parent.display()), e))?;
        if !meta.is_dir() || meta.uid() != own_uid() {
            return Err(work_err(
                &format!("the run dir {}", parent.display()),
                std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "it exists but is not a directory owned by this user; remove it",
                ),
            ));
        }
        set_mode(parent, 0o711)?;
    }
    make_dir(run_dir, "the run dir")?;
    set_mode(run_dir, 0o711)?;
    let owner = run_dir.join("owner.pid");
    fs::write(&owner, std::process::id().to_string())
        .map_err(|e| work_err(&owner.display().to_string(), e))?;
    if let Some(parent) = run_dir.parent() {
        remove_abandoned(parent, run_dir);
    }
    Ok(())
}

/// A process killed outright (SIGKILL, power loss) leaves its run dir behind; remove those whose
/// owner is gone, so that the temp dir does not fill with them.
fn remove_abandoned(parent: &Path, ours: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_run_dir = entry.file_name().to_string_lossy().starts_with("filters-");
        if !is_run_dir || path == ours {
            continue;
        }
        let Ok(pid) = fs::read_to_string(path.join("owner.pid")) else {
            continue;
        };
        let alive = pid.trim().parse().is_ok_and(procs::alive);
        if !alive && !pid.trim().is_empty() {
            remove_run_dir(&path);
        }
    }
}

fn first_existing(candidates: &[&str], fallback: &str) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(fallback))
}

impl FilterDaemons {
    /// Starts what the config asks for and waits until each daemon answers a ping.
    pub async fn start(cfg: DaemonConfig) -> Result<FilterDaemons, SpamError> {
        if cfg.spamd == DaemonSource::Start || cfg.rspamd == DaemonSource::Start {
            make_dir(&cfg.work_dir, "the work dir")?;
            prepare_run_dir(&cfg.run_dir)?;
        }
        let mut daemons = FilterDaemons {
            addresses: FilterAddresses::default(),
            children: Vec::new(),
            run_dir: cfg.run_dir.clone(),
        };
        let (spamd, rspamd) = tokio::join!(start_spamd(&cfg), start_rspamd(&cfg));
        // Keep whatever started so that an error below still stops it (on drop).
        let spamd = spamd.map(|(addr, child)| {
            if let Some(child) = child {
                daemons.children.push(child);
            }
            addr
        });
        let rspamd = rspamd.map(|(addr, child)| {
            if let Some(child) = child {
                daemons.children.push(child);
            }
            addr
        });
        daemons.addresses = FilterAddresses {
            spamd: spamd?,
            rspamd: rspamd?,
        };
        Ok(daemons)
    }

    pub fn addresses(&self) -> FilterAddresses {
        self.addresses
    }

    /// Stops the daemons this value started (SIGTERM, then SIGKILL after 10 s) and removes
    /// their run dir.
    pub async fn shutdown(mut self) {
        let started_any = !self.children.is_empty();
        for supervised in std::mem::take(&mut self.children) {
            stop_daemon(supervised).await;
        }
        if started_any {
            remove_run_dir(&self.run_dir);
        }
    }
}

async fn stop_daemon(mut supervised: Supervised) {
    terminate(&supervised.child);
    match tokio::time::timeout(Duration::from_secs(10), supervised.child.wait()).await {
        Ok(_) => tracing::info!(daemon = supervised.name, "stopped"),
        Err(_) => {
            tracing::warn!(
                daemon = supervised.name,
                "did not stop on SIGTERM; killing it"
            );
            let _ = supervised.child.start_kill();
            let _ = supervised.child.wait().await;
        }
    }
}

fn remove_run_dir(run_dir: &Path) {
    if let Err(e) = fs::remove_dir_all(run_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %run_dir.display(), error = %e, "cannot remove the filters' run dir");
        }
    }
}

/// Which daemon a supervising task looks after.
#[derive(Debug, Clone, Copy)]
enum Which {
    Spamd,
    Rspamd,
}

/// spamd and rspamd, each started, watched and restarted on its own: one that cannot start or
/// dies is retried with a growing wait and never holds the other back. Its [`FilterStatus`] says
/// what each is doing.
pub struct FilterSupervisor {
    status: watch::Receiver<FilterStatus>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    run_dir: PathBuf,
}

impl FilterSupervisor {
    /// Starts supervising at once; the daemons come up in the background (watch
    /// [`FilterSupervisor::status`]).
    pub fn start(cfg: DaemonConfig) -> FilterSupervisor {
        let initial = FilterStatus {
            spamd: initial_state(&cfg.spamd),
            rspamd: initial_state(&cfg.rspamd),
        };
        let (status_tx, status) = watch::channel(initial);
        let status_tx = Arc::new(status_tx);
        let (stop, stop_rx) = watch::channel(false);
        let run_dir = cfg.run_dir.clone();
        let cfg = Arc::new(cfg);
        let tasks = [Which::Spamd, Which::Rspamd]
            .into_iter()
            .map(|which| {
                tokio::spawn(supervise(
                    which,
                    cfg.clone(),
                    status_tx.clone(),
                    stop_rx.clone(),
                ))
            })
            .collect();
        FilterSupervisor {
            status,
            stop,
            tasks,
            run_dir,
        }
    }

    /// Changes whenever a daemon comes up, goes down or is being started.
    pub fn status(&self) -> watch::Receiver<FilterStatus> {
        self.status.clone()
    }

    /// Stops both daemons and removes their run dir.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a filter supervising task failed");
            }
        }
        remove_run_dir(&self.run_dir);
    }
}

fn initial_state(source: &DaemonSource) -> DaemonState {
    match source {
        DaemonSource::Off => DaemonState::Off,
        DaemonSource::External(addr) => DaemonState::Up(*addr),
        DaemonSource::Start => DaemonState::Starting,
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Start, wait for the end, wait, start again: until `stop`.
async fn supervise(
    which: Which,
    cfg: Arc<DaemonConfig>,
    status: Arc<watch::Sender<FilterStatus>>,
    mut stop: watch::Receiver<bool>,
) {
    let set = |state: DaemonState| {
        status.send_modify(|s| match which {
            Which::Spamd => s.spamd = state,
            Which::Rspamd => s.rspamd = state,
        })
    };
    let source = match which {
        Which::Spamd => &cfg.spamd,
        Which::Rspamd => &cfg.rspamd,
    };
    if *source != DaemonSource::Start {
        set(initial_state(source));
        return;
    }
    let mut failures = 0u32;
    loop {
        set(DaemonState::Starting);
        let attempt = async {
            make_dir(&cfg.work_dir, "the work dir")?;
            prepare_run_dir(&cfg.run_dir)?;
            match which {
                Which::Spamd => start_spamd(&cfg).await,
                Which::Rspamd => start_rspamd(&cfg).await,
            }
        };
        let started = tokio::select! {
            started = attempt => started,
            () = stopped(&mut stop) => return,
        };
        let reason = match started {
            Ok((Some(addr), Some(mut child))) => {
                set(DaemonState::Up(addr));
                failures = 0;
                tokio::select! {
                    exited = child.child.wait() => {
                        let status = exited.map_or_else(|e| e.to_string(), |s| s.to_string());
                        format!("{} exited ({status}); see its log in {}", child.name, cfg.work_dir.display())
                    }
                    () = stopped(&mut stop) => {
                        stop_daemon(child).await;
                        return;
                    }
                }
            }
            Ok(_) => format!("{which:?} started without a process to watch"),
            Err(e) => e.to_string(),
        };
        failures = failures.saturating_add(1);
        let wait = cfg
            .retry_first
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(cfg.retry_max.max(cfg.retry_first));
        tracing::error!(daemon = ?which, failures, retry_in_s = wait.as_secs(), error = %reason, "spam filter daemon is down; its results wait until it is back");
        set(DaemonState::Down {
            reason,
            retry_at: SystemTime::now() + wait,
        });
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stopped(&mut stop) => return,
        }
    }
}

impl Drop for FilterDaemons {
    fn drop(&mut self) {
        for supervised in &self.children {
            // SIGTERM lets spamd and rspamd stop their worker processes too; kill_on_drop only
            // reaches the main process.
            terminate(&supervised.child);
        }
    }
}

fn terminate(child: &Child) {
    if let Some(pid) = child.id() {
        procs::signal(pid, procs::Signal::TERM);
    }
}

type Started = (Option<SocketAddr>, Option<Supervised>);

async fn start_spamd(cfg: &DaemonConfig) -> Result<Started, SpamError> {
    let port = match &cfg.spamd {
        DaemonSource::Off => return Ok((None, None)),
        DaemonSource::External(addr) => return Ok((Some(*addr), None)),
        DaemonSource::Start => free_port()?,
    };
    let dir = cfg.run_dir.join("spamassassin");
    let site = dir.join("site");
    if site.exists() {
        fs::remove_dir_all(&site).map_err(|e| work_err("the old SpamAssassin site config", e))?;
    }
    copy_dir(&cfg.spamassassin_etc, &site)?;
    let local_cf = site.join("local.cf");
    let mut local = fs::read_to_string(&local_cf).unwrap_or_default();
    // No Bayes (root-run scans cannot lock ~/.spamassassin) and no network tests: deterministic.
    local.push_str("\n# mailproof: offline and deterministic\nuse_bayes 0\nbayes_auto_learn 0\ndns_available no\nskip_rbl_checks 1\n");
    fs::write(&local_cf, local).map_err(|e| work_err("local.cf", e))?;
    set_mode(&dir, 0o755)?;
    let log = cfg.work_dir.join("spamd.log");
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut cmd = Command::new(&cfg.spamd_program);
    cmd.arg("-L")
        .arg("-x")
        .arg(format!("--siteconfigpath={}", site.display()))
        .arg(format!("--listen={addr}"));
    // spamd refuses to scan as root; a normal user cannot switch users and runs it as itself.
    if own_uid() == 0 {
        cmd.args(["-u", "debian-spamd", "-g", "debian-spamd"])
            .arg("--helper-home-dir=/var/lib/spamassassin");
    }
    cmd.arg(format!("--max-children={}", cfg.spamd_children.max(1)))
        .arg("--min-children=1")
        .args(["-s", "stderr"]);
    let child = spawn("spamd", &cfg.spamd_program, cmd, &log)?;
    let client = SpamdClient::new(addr, Duration::from_secs(5));
    let child = wait_ready(child, addr, &log, cfg.start_timeout, || client.ping()).await?;
    // spamd answers PING even when it could not read its rules (a config it cannot reach), and
    // then fails every scan: one real scan tells.
    let probe = b"From: probe@localhost\r\nSubject: start-up probe\r\n\r\nprobe\r\n";
    if let Err(e) = client.scan(probe).await {
        terminate(&child.child);
        return Err(SpamError::DaemonCannotScan {
            daemon: "spamd",
            reason: e.to_string(),
            config: site,
            log,
        });
    }
    Ok((Some(addr), Some(child)))
}

async fn start_rspamd(cfg: &DaemonConfig) -> Result<Started, SpamError> {
    let port = match &cfg.rspamd {
        DaemonSource::Off => return Ok((None, None)),
        DaemonSource::External(addr) => return Ok((Some(*addr), None)),
        DaemonSource::Start => free_port()?,
    };
    let dir = cfg.run_dir.join("rspamd");
    let conf = dir.join("conf");
    let run = dir.join("run");
    for d in [
        &conf.join("local.d"),
        &conf.join("override.d"),
        &run,
        &cfg.cache_dir,
    ] {
        make_dir(d, "an rspamd directory")?;
    }
    set_mode(&dir, 0o755)?;
    set_mode(&conf, 0o755)?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    for (file, text) in rspamd_config(addr) {
        fs::write(conf.join(file), text).map_err(|e| work_err(file, e))?;
    }
    let as_root = own_uid() == 0;
    if as_root {
        let (uid, gid) = (
            system_id("/etc/passwd", "_rspamd")?,
            system_id("/etc/group", "_rspamd")?,
        );
        for d in [&run, &cfg.cache_dir] {
            std::os::unix::fs::chown(d, Some(uid), Some(gid))
                .map_err(|e| work_err(&format!("ownership of {}", d.display()), e))?;
        }
        if let Some(parent) = cfg.cache_dir.parent() {
            allow_traversal(parent)?;
        }
    }
    let log = cfg.work_dir.join("rspamd.log");
    let mut cmd = Command::new(&cfg.rspamd_program);
    cmd.arg("-f");
    if as_root {
        cmd.args(["-u", "_rspamd", "-g", "_rspamd"]);
    }
    cmd.arg(format!("--var=LOCAL_CONFDIR={}", conf.display()))
        .arg(format!("--var=RUNDIR={}", run.display()))
        .arg(format!("--var=DBDIR={}", cfg.cache_dir.display()))
        .arg(format!("--var=LOGDIR={}", run.display()));
    let child = spawn("rspamd", &cfg.rspamd_program, cmd, &log)?;
    let client = RspamdClient::new(addr, Duration::from_secs(5))?;
    let child = wait_ready(child, addr, &log, cfg.start_timeout, || client.ping()).await?;
    Ok((Some(addr), Some(child)))
}

/// The offline `local.d` set from the measurements (0 DNS requests per scan), one worker on our
/// port, and no controller, proxy or fuzzy workers (nothing to manage, fewer processes).
fn rspamd_config(addr: SocketAddr) -> Vec<(&'static str, String)> {
    let disabled = "enabled = false;\n".to_string();
    vec![
        (
            "local.d/options.inc",
            "dns { timeout = 0.5s; retransmits = 1; }\ndisable_monitoring = true;\n".into(),
        ),
        ("local.d/rbl.conf", disabled.clone()),
        ("local.d/fuzzy_check.conf", disabled.clone()),
        ("local.d/asn.conf", disabled.clone()),
        ("local.d/spf.conf", disabled.clone()),
        ("local.d/dkim.conf", disabled.clone()),
        ("local.d/dmarc.conf", disabled.clone()),
        ("local.d/arc.conf", disabled.clone()),
        (
            "local.d/hfilter.conf",
            "from_enabled = false;\nhelo_enabled = false;\n".into(),
        ),
        (
            "local.d/phishing.conf",
            "phishtank_enabled = false;\n".into(),
        ),
        (
            "override.d/worker-normal.inc",
            format!("bind_socket = \"{addr}\";\ncount = 1;\n"),
        ),
        ("override.d/worker-controller.inc", disabled.clone()),
        ("override.d/worker-proxy.inc", disabled.clone()),
        ("override.d/worker-fuzzy.inc", disabled),
        (
            "override.d/logging.inc",
            "type = \"console\";\nlevel = \"warning\";\n".into(),
        ),
    ]
}

fn spawn(
    name: &'static str,
    program: &Path,
    mut cmd: Command,
    log: &Path,
) -> Result<Supervised, SpamError> {
    let out = fs::File::create(log).map_err(|e| work_err("a daemon log", e))?;
    let err = out.try_clone().map_err(|e| work_err("a daemon log", e))?;
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|source| SpamError::ProgramMissing {
        program: program.display().to_string(),
        source,
    })?;
    tracing::info!(daemon = name, pid = child.id(), log = %log.display(), "started");
    let watchdog = child.id().and_then(|pid| match spawn_watchdog(pid) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(daemon = name, error = %e, "no watchdog: the daemon may outlive a crashed process");
            None
        }
    });
    Ok(Supervised {
        name,
        child,
        _watchdog: watchdog,
    })
}

/// `read` returns at end of file, which happens when every holder of the pipe's write end (only
/// this process) is gone; then the daemon gets SIGTERM and stops its workers.
fn spawn_watchdog(pid: u32) -> std::io::Result<Child> {
    Command::new("sh")
        .arg("-c")
        .arg(format!("read -r _; kill -TERM {pid} 2>/dev/null"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(false)
        .spawn()
}

async fn wait_ready<F, Fut>(
    mut supervised: Supervised,
    addr: SocketAddr,
    log: &Path,
    timeout: Duration,
    ping: F,
) -> Result<Supervised, SpamError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), SpamError>>,
{
    let started = Instant::now();
    let mut last = String::from("no answer yet");
    while started.elapsed() < timeout {
        if let Ok(Some(status)) = supervised.child.try_wait() {
            return Err(SpamError::DaemonExited {
                daemon: supervised.name,
                status: status.to_string(),
                log: log.to_path_buf(),
            });
        }
        match ping().await {
            Ok(()) => {
                tracing::info!(daemon = supervised.name, %addr, ready_ms = started.elapsed().as_millis(), "ready");
                return Ok(supervised);
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    terminate(&supervised.child);
    Err(SpamError::DaemonNotReady {
        daemon: supervised.name,
        addr: addr.to_string(),
        waited_ms: started.elapsed().as_millis(),
        last,
        log: log.to_path_buf(),
    })
}

/// A port the kernel just gave us; the daemon binds it a moment later.
fn free_port() -> Result<u16, SpamError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| work_err("a free loopback port", e))
}

/// Numeric id of a system user or group, from `/etc/passwd` or `/etc/group`.
fn system_id(file: &str, name: &str) -> Result<u32, SpamError> {
    let text = fs::read_to_string(file).map_err(|e| work_err(file, e))?;
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let entry = fields.next()?;
            let id = fields.nth(1)?.parse().ok()?;
            (entry == name).then_some(id)
        })
        .next()
        .ok_or_else(|| SpamError::ProgramMissing {
            program: format!("user/group {name} (in {file})"),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such entry"),
        })
}

fn make_dir(dir: &Path, what: &str) -> Result<(), SpamError> {
    fs::create_dir_all(dir).map_err(|e| work_err(&format!("{what} {}", dir.display()), e))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), SpamError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| work_err(&format!("permissions of {}", path.display()), e))
}

/// Adds o+x (search, not read) so the daemons' users can reach their own subdirectories.
fn allow_traversal(dir: &Path) -> Result<(), SpamError> {
    let meta = fs::metadata(dir).map_err(|e| work_err(&dir.display().to_string(), e))?;
    let mode = meta.permissions().mode();
    if mode & 0o001 == 0 {
        set_mode(dir, (mode & 0o7777) | 0o011)?;
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), SpamError> {
    make_dir(to, "the SpamAssassin site config")?;
    let entries = fs::read_dir(from).map_err(|source| SpamError::ProgramMissing {
        program: format!("SpamAssassin configuration {}", from.display()),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| work_err(&from.display().to_string(), e))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| work_err(&from.display().to_string(), e))?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)
                .map_err(|e| work_err(&format!("copy of {}", entry.path().display()), e))?;
        }
    }
    set_mode(to, 0o755)
}

fn work_err(what: &str, source: std::io::Error) -> SpamError {
    SpamError::WorkDir {
        what: what.to_string(),
        source,
    }
}
