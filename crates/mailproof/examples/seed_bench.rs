//! End-to-end latency of seed spam tests: from the moment our SMTP listener answers 250 to the
//! final DATA until every filter's verdict can be read over the API.
//!
//! `cargo build --release -p mailproof --bins --examples && target/release/examples/seed_bench [--tests N] [--parallel K]`
//!
//! Starts the sibling `mailproof` binary (`target/<profile>/mailproof`) with its filter daemons on
//! loopback ports of its own and no browsers, creates `N` seed tests, sends each message to its
//! seed list over SMTP (`K` tests in flight at once) and polls `GET /v5/spam/tests/<id>` every
//! 10 ms. Prints per-filter and all-filter latency (median, p95, max) and the tests per second.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const KEY: &str = "bench-admin";
const BENCH_KEY: &str = "bench-key";
const PASS: &str = "bench-password";
/// Longest wait for one test's verdicts before the bench gives up on it.
const VERDICT_WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(10);

const HTML: &str = "<!DOCTYPE html><html><body style=\"font-family:Arial\"><table width=\"600\"><tr><td>\
<h1>What we shipped in November</h1><p>Faster exports, a new dashboard and fixes across the board. \
Read the full notes on our blog.</p><p><a href=\"https://acme.example/notes\">Release notes</a></p>\
<p style=\"font-size:12px;color:#666\">Acme Inc, 1 Main St. <a href=\"https://acme.example/unsub\">Unsubscribe</a></p>\
</td></tr></table></body></html>";

struct Service {
    child: std::process::Child,
    base: String,
    smtp: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        // The service runs in its own process group with its filter daemons: stop them all.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn mailproof_binary() -> Result<PathBuf, BoxError> {
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

fn start_service() -> Result<Service, BoxError> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mailproof.toml");
    std::fs::write(&config, "[render]\nengines = []\n")?;
    let mut child = Command::new(mailproof_binary()?)
        .args(["serve", "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("MAILPROOF_API_KEY", KEY)
        .env("MAILPROOF_PASSWORD", PASS)
        .env("RUST_LOG", "warn")
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
    // The first-start account has the default rate limit, which polling many tests every 10 ms
    // would exceed: the bench runs as an account of its own without a practical limit.
    let added = Command::new(mailproof_binary()?)
        .args([
            "accounts",
            "add",
            "--api-key",
            BENCH_KEY,
            "--password",
            PASS,
        ])
        .args(["--plan", "enterprise", "--rate-limit", "100000000"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .status()?;
    if !added.success() {
        return Err(format!("mailproof accounts add failed ({added})").into());
    }
    Ok(Service {
        child,
        base,
        smtp: smtp.ok_or("no `smtp on` line before the HTTP line")?,
        _dir: dir,
    })
}

async fn smtp_reply(conn: &mut AsyncBufReader<TcpStream>) -> Result<(u16, String), BoxError> {
    let mut text = String::new();
    loop {
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(format!("SMTP connection closed; so far: {text}").into());
        }
        text.push_str(&line);
        if line.as_bytes().get(3) != Some(&b'-') {
            let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
            return Ok((code, text));
        }
    }
}

async fn smtp_step(
    conn: &mut AsyncBufReader<TcpStream>,
    send: &[u8],
    want: u16,
) -> Result<(), BoxError> {
    conn.get_mut().write_all(send).await?;
    let (code, text) = smtp_reply(conn).await?;
    if code != want {
        return Err(format!("SMTP: expected {want}, got {text}").into());
    }
    Ok(())
}

/// Sends the message to `rcpts`; returns the instant the final 250 arrived.
async fn send_seed(
    smtp: std::net::SocketAddr,
    rcpts: &[String],
    subject: &str,
) -> Result<Instant, BoxError> {
    let mut conn = AsyncBufReader::new(TcpStream::connect(smtp).await?);
    let (code, text) = smtp_reply(&mut conn).await?;
    if code != 220 {
        return Err(format!("greeting: {text}").into());
    }
    smtp_step(&mut conn, b"EHLO bench.test\r\n", 250).await?;
    smtp_step(&mut conn, b"MAIL FROM:<news@mail.acme.example>\r\n", 250).await?;
    for r in rcpts {
        smtp_step(&mut conn, format!("RCPT TO:<{r}>\r\n").as_bytes(), 250).await?;
    }
    smtp_step(&mut conn, b"DATA\r\n", 354).await?;
    let message = format!(
        "From: Acme News <news@mail.acme.example>\r\nTo: Jane Doe <jane@example.org>\r\n\
Subject: {subject}\r\nDate: {}\r\nMessage-ID: <{:x}@mail.acme.example>\r\nMIME-Version: 1.0\r\n\
Content-Type: text/html; charset=utf-8\r\n\r\n{HTML}\r\n.\r\n",
        chrono::Utc::now().to_rfc2822(),
        rand::random::<u64>()
    );
    smtp_step(&mut conn, message.as_bytes(), 250).await?;
    let accepted = Instant::now();
    let _ = conn.get_mut().write_all(b"QUIT\r\n").await;
    Ok(accepted)
}

/// Per filter: time from acceptance to its verdict; plus the time to the last one.
struct Latency {
    per_filter: Vec<(String, Duration)>,
    all: Duration,
}

async fn one_test(
    http: &reqwest::Client,
    base: &str,
    smtp: std::net::SocketAddr,
    n: usize,
) -> Result<Latency, BoxError> {
    let created: Value = http
        .post(format!("{base}/v5/spam/tests"))
        .basic_auth(BENCH_KEY, Some(PASS))
        .json(&json!({"subject": format!("Bench {n}"), "html": HTML, "test_method": "seed"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = created["id"].as_str().ok_or("no id")?.to_string();
    let rcpts: Vec<String> = created["address_list"]
        .as_array()
        .ok_or("no address_list")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let accepted = send_seed(smtp, &rcpts, &format!("Bench {n}")).await?;
    let mut seen: Vec<(String, Duration)> = Vec::new();
    loop {
        let entries: Value = http
            .get(format!("{base}/v5/spam/tests/{id}"))
            .basic_auth(BENCH_KEY, Some(PASS))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let entries = entries.as_array().cloned().unwrap_or_default();
        for e in &entries {
            let name = e["client"].as_str().unwrap_or("?").to_string();
            if !e["spam"].is_null() && !seen.iter().any(|(c, _)| *c == name) {
                seen.push((name, accepted.elapsed()));
            }
        }
        if !entries.is_empty() && seen.len() == entries.len() {
            let all = seen.iter().map(|(_, d)| *d).max().unwrap_or_default();
            return Ok(Latency {
                per_filter: seen,
                all,
            });
        }
        if accepted.elapsed() > VERDICT_WAIT {
            return Err(
                format!("test {id}: not every filter answered within {VERDICT_WAIT:?}").into(),
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    format!("{:.0} | {:.0} | {:.0}", at(0.5), at(0.95), at(1.0))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut tests = 30usize;
    let mut parallel = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tests" => tests = args.next().ok_or("--tests needs N")?.parse()?,
            "--parallel" => parallel = args.next().ok_or("--parallel needs K")?.parse()?,
            other => return Err(format!("unknown argument {other}; see the file header").into()),
        }
    }
    let tests = tests.max(1);
    let parallel = parallel.clamp(1, tests);
    let started = Instant::now();
    let service = start_service()?;
    eprintln!(
        "service with filter daemons ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    // One warm-up test: the first scans pay for rule compilation and caches.
    one_test(&http, &service.base, service.smtp, 0).await?;

    let next = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let run_started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..parallel {
        let (http, base, smtp, next) = (
            http.clone(),
            service.base.clone(),
            service.smtp,
            next.clone(),
        );
        workers.spawn(async move {
            let mut out = Vec::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n > tests {
                    return Ok::<_, BoxError>(out);
                }
                out.push(one_test(&http, &base, smtp, n).await?);
            }
        });
    }
    let mut results = Vec::new();
    while let Some(done) = workers.join_next().await {
        results.extend(done??);
    }
    let took = run_started.elapsed();

    println!(
        "Seed tests: {tests}, {parallel} in flight; {:.2} tests/s ({} filters each)\n",
        tests as f64 / took.as_secs_f64(),
        results.first().map_or(0, |r| r.per_filter.len())
    );
    println!("| from SMTP 250 to verdict | median ms | p95 ms | max ms |");
    println!("|---|---|---|---|");
    let mut filters: Vec<String> = results
        .iter()
        .flat_map(|r| r.per_filter.iter().map(|(c, _)| c.clone()))
        .collect();
    filters.sort();
    filters.dedup();
    for f in &filters {
        let v = results
            .iter()
            .filter_map(|r| r.per_filter.iter().find(|(c, _)| c == f).map(|(_, d)| *d))
            .collect();
        println!("| {f} | {} |", summary(v));
    }
    println!(
        "| **last verdict (whole test)** | {} |",
        summary(results.iter().map(|r| r.all).collect())
    );
    drop(service);
    Ok(())
}
