//! Robustness under abuse (issue 9): login storms and slow clients, measured from another
//! tenant's side.
//!
//! `cargo build --release -p mailproof --bins --examples && target/release/examples/robustness_bench [--storm-secs 30] [--clients 200] [--slow 1000]`
//!
//! Starts the sibling `mailproof` binary (release build, no browsers, no filter daemons, default
//! `[http_limits]`) on loopback, creates accounts with the accounts CLI, then runs three phases
//! while another tenant polls `GET /v5/auth` and `GET /v5/tests` (its login cached, as any API
//! client's is):
//! 1. `--clients` clients, each from its own loopback address (127.1.x.y), send wrong passwords
//!    for ten existing keys for `--storm-secs`;
//! 2. `--clients` clients log in with the right passwords of as many fresh accounts (a cold
//!    credential cache), then keep calling, for `--storm-secs`;
//! 3. `--slow` clients send half a request head (half of them) or a body shorter than its
//!    Content-Length (the other half) and wait to be cut off.
//!
//! Prints the tenant's p50/p99/max latency and timeouts per phase, the storm's answers, the
//! service's RSS (VmRSS) before, at its highest during each phase and after, and how long stalled
//! clients stayed connected.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "bench_service/mod.rs"]
mod bench_service;

use bench_service::{BenchService, BoxError};

const ADMIN: &str = "bench-admin";
const PASS: &str = "bench-password";
const TENANT: &str = "bench-tenant";
const VICTIMS: usize = 10;
/// A tenant request slower than this counts as timed out.
const TENANT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a stalled client to be cut off before it is counted as never cut off.
const SLOW_WAIT: Duration = Duration::from_secs(75);

fn basic(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

fn rss_mb(pid: u32) -> f64 {
    procs::rss_bytes(&[pid]) as f64 / (1024.0 * 1024.0)
}

/// The storm's n-th client address: 127.1.x.y, never the tenant's 127.0.0.1.
fn client_ip(n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        127,
        1,
        (n / 250 % 256) as u8,
        (n % 250 + 1) as u8,
    ))
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

#[derive(Default)]
struct Phase {
    tenant: Vec<Duration>,
    tenant_timeouts: usize,
    tenant_errors: usize,
    rss_max: f64,
}

/// Shared between the tenant, the RSS sampler and the phases.
struct Board {
    phase: Mutex<String>,
    phases: Mutex<BTreeMap<String, Phase>>,
    stop: AtomicBool,
}

impl Board {
    fn with<R>(&self, f: impl FnOnce(&mut Phase) -> R) -> R {
        let name = self.phase.lock().map(|p| p.clone()).unwrap_or_default();
        let mut phases = match self.phases.lock() {
            Ok(p) => p,
            Err(p) => p.into_inner(),
        };
        f(phases.entry(name).or_default())
    }

    fn set(&self, name: &str) {
        if let Ok(mut p) = self.phase.lock() {
            *p = name.to_string();
        }
    }
}

async fn tenant(board: Arc<Board>, base: String) -> Result<(), BoxError> {
    let http = reqwest::Client::builder().timeout(TENANT_TIMEOUT).build()?;
    let auth = basic(TENANT, PASS);
    let mut n = 0u64;
    while !board.stop.load(Ordering::Relaxed) {
        n += 1;
        let path = if n.is_multiple_of(2) {
            "/v5/auth"
        } else {
            "/v5/tests?results=5"
        };
        let started = Instant::now();
        let r = http
            .get(format!("{base}{path}"))
            .header("Authorization", &auth)
            .send()
            .await;
        let took = started.elapsed();
        match r {
            Ok(r) if r.status().is_success() => {
                let _ = r.bytes().await;
                board.with(|p| p.tenant.push(took));
            }
            Ok(r) => {
                eprintln!("tenant: {path} answered {}", r.status());
                board.with(|p| p.tenant_errors += 1);
            }
            Err(e) if e.is_timeout() => board.with(|p| p.tenant_timeouts += 1),
            Err(e) => {
                eprintln!("tenant: {path} failed: {e}");
                board.with(|p| p.tenant_errors += 1);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

async fn rss_sampler(board: Arc<Board>, pid: u32) {
    while !board.stop.load(Ordering::Relaxed) {
        let rss = rss_mb(pid);
        board.with(|p| p.rss_max = p.rss_max.max(rss));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[derive(Default)]
struct StormCounts {
    by_status: Mutex<BTreeMap<String, usize>>,
    first_ok: Mutex<Vec<Duration>>,
}

impl StormCounts {
    fn count(&self, what: String) {
        if let Ok(mut m) = self.by_status.lock() {
            *m.entry(what).or_default() += 1;
        }
    }
}

/// `clients` clients, each from its own address, for `secs`: client i logs in as `key(i)`, with a
/// new wrong password each time when `wrong`, else with the right one.
async fn storm(
    base: &str,
    clients: usize,
    secs: u64,
    key: impl Fn(usize) -> String,
    wrong: bool,
) -> Result<Arc<StormCounts>, BoxError> {
    let counts = Arc::new(StormCounts::default());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..clients {
        let http = reqwest::Client::builder()
            .local_address(client_ip(i))
            .timeout(Duration::from_secs(30))
            .build()?;
        let url = format!("{base}/v5/auth");
        let counts = counts.clone();
        let key = key(i);
        tasks.spawn(async move {
            let started = Instant::now();
            let mut succeeded = false;
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let pass = if wrong {
                    format!("wrong-{i}-{n}")
                } else {
                    PASS.to_string()
                };
                let r = http
                    .get(&url)
                    .header("Authorization", basic(&key, &pass))
                    .send()
                    .await;
                match r {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let _ = r.bytes().await;
                        counts.count(status.to_string());
                        if status == 200 && !succeeded {
                            succeeded = true;
                            if let Ok(mut f) = counts.first_ok.lock() {
                                f.push(started.elapsed());
                            }
                        }
                    }
                    Err(e) if e.is_timeout() => counts.count("client timeout".into()),
                    Err(_) => {
                        counts.count("connection error".into());
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    Ok(counts)
}

/// Half a request head, or a body shorter than its Content-Length; returns how long the server
/// kept the connection open after the client stopped sending (`None`: not cut off in time).
async fn slow_client(addr: String, n: usize, auth: String) -> Option<(bool, Duration)> {
    let head = n.is_multiple_of(2);
    let mut c = tokio::net::TcpStream::connect(&addr).await.ok()?;
    let request = if head {
        "GET /v5/auth HTTP/1.1\r\nHost: localhost\r\nX-Slow: ".to_string()
    } else {
        format!(
            "POST /v5/email/tests HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"subject\":\"slow"
        )
    };
    c.write_all(request.as_bytes()).await.ok()?;
    let sent = Instant::now();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(SLOW_WAIT, async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    closed.ok().map(|()| (head, sent.elapsed()))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut storm_secs = 30u64;
    let mut clients = 200usize;
    let mut slow = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--storm-secs" => storm_secs = args.next().ok_or("--storm-secs needs N")?.parse()?,
            "--clients" => clients = args.next().ok_or("--clients needs N")?.parse()?,
            "--slow" => slow = args.next().ok_or("--slow needs N")?.parse()?,
            other => return Err(format!("unknown argument {other}; see the file header").into()),
        }
    }
    let service = BenchService::start(
        "[render]\nengines = []\n[spam]\ndaemons = false\n",
        ADMIN,
        PASS,
        "error",
    )?;
    let pid = service.pid();
    eprintln!("creating {} accounts ...", clients + VICTIMS + 1);
    service.add_account(TENANT, PASS)?;
    for v in 0..VICTIMS {
        service.add_account(&format!("victim-{v}"), PASS)?;
    }
    for f in 0..clients {
        service.add_account(&format!("fresh-{f}"), PASS)?;
    }
    let base = service.base.clone();
    let board = Arc::new(Board {
        phase: Mutex::new("0 idle".into()),
        phases: Mutex::new(BTreeMap::new()),
        stop: AtomicBool::new(false),
    });
    let tenant_task = tokio::spawn(tenant(board.clone(), base.clone()));
    let sampler = tokio::spawn(rss_sampler(board.clone(), pid));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_before = rss_mb(pid);

    eprintln!("phase 1: {clients} clients with wrong passwords for {storm_secs} s");
    board.set("1 wrong passwords");
    let wrong = storm(
        &base,
        clients,
        storm_secs,
        |i| format!("victim-{}", i % VICTIMS),
        true,
    )
    .await?;

    eprintln!(
        "phase 2: {clients} clients logging in to {clients} fresh accounts for {storm_secs} s"
    );
    board.set("2 cold right passwords");
    let cold = storm(&base, clients, storm_secs, |i| format!("fresh-{i}"), false).await?;

    eprintln!("phase 3: {slow} slow clients");
    board.set("3 slow clients");
    let addr = base.trim_start_matches("http://").to_string();
    let opened = Arc::new(AtomicUsize::new(0));
    let mut slow_tasks = tokio::task::JoinSet::new();
    for n in 0..slow {
        let (addr, auth, opened) = (addr.clone(), basic(ADMIN, PASS), opened.clone());
        slow_tasks.spawn(async move {
            opened.fetch_add(1, Ordering::Relaxed);
            slow_client(addr, n, auth).await
        });
    }
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    let mut never = 0usize;
    while let Some(r) = slow_tasks.join_next().await {
        match r.ok().flatten() {
            Some((true, d)) => heads.push(d),
            Some((false, d)) => bodies.push(d),
            None => never += 1,
        }
    }

    board.set("4 after");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rss_after = rss_mb(pid);
    board.stop.store(true, Ordering::Relaxed);
    let _ = tenant_task.await;
    let _ = sampler.await;

    println!("robustness_bench: storm {storm_secs} s, {clients} clients, {slow} slow clients");
    println!("RSS before {rss_before:.0} MB, after {rss_after:.0} MB (10 s after the last phase)");
    println!(
        "{:<24} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>12}",
        "phase", "requests", "p50 ms", "p99 ms", "max ms", "timeouts", "errors", "RSS max MB"
    );
    let phases = match board.phases.lock() {
        Ok(p) => p,
        Err(p) => p.into_inner(),
    };
    for (name, p) in phases.iter() {
        let mut t = p.tenant.clone();
        t.sort();
        println!(
            "{:<24} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>7} {:>12.0}",
            name,
            t.len(),
            pct(&t, 0.5),
            pct(&t, 0.99),
            pct(&t, 1.0),
            p.tenant_timeouts,
            p.tenant_errors,
            p.rss_max
        );
    }
    for (label, counts) in [("wrong passwords", &wrong), ("cold logins", &cold)] {
        let by = counts
            .by_status
            .lock()
            .map(|m| format!("{m:?}"))
            .unwrap_or_default();
        println!("storm answers, {label}: {by}");
    }
    let mut first = cold.first_ok.lock().map(|f| f.clone()).unwrap_or_default();
    first.sort();
    println!(
        "cold logins: {} of {clients} clients logged in; time to first success p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        first.len(),
        pct(&first, 0.5),
        pct(&first, 0.99),
        pct(&first, 1.0)
    );
    heads.sort();
    bodies.sort();
    println!(
        "slow clients: {} opened; half-sent heads cut off after p50 {:.1} s, max {:.1} s ({}); short bodies after p50 {:.1} s, max {:.1} s ({}); never cut off within {} s: {never}",
        opened.load(Ordering::Relaxed),
        pct(&heads, 0.5) / 1000.0,
        pct(&heads, 1.0) / 1000.0,
        heads.len(),
        pct(&bodies, 0.5) / 1000.0,
        pct(&bodies, 1.0) / 1000.0,
        bodies.len(),
        SLOW_WAIT.as_secs()
    );
    Ok(())
}
