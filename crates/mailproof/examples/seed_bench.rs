//! End-to-end latency of seed spam tests: from the moment our SMTP listener answers 250 to the
//! final DATA until every filter's verdict can be read over the API.
//!
//! `cargo build --release -p mailproof --bins --examples && target/release/examples/seed_bench [--tests N] [--parallel K]`
//!
//! Starts the sibling `mailproof` binary (`target/<profile>/mailproof`) with its filter daemons on
//! loopback ports of its own and no browsers, creates `N` seed tests, sends each message to its
//! seed list over SMTP (`K` tests in flight at once) and polls `GET /v5/spam/tests/<id>` every
//! 10 ms. Prints per-filter and all-filter latency (median, p95, max) and the tests per second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::TcpStream;

#[path = "bench_service/mod.rs"]
mod bench_service;

use bench_service::{BenchService, BoxError};

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

/// The service with the filter daemons, and an account of the bench's own: the first-start
/// account has the default rate limit, which polling many tests every 10 ms would exceed.
fn start_service() -> Result<BenchService, BoxError> {
    let service = BenchService::start("[render]\nengines = []\n", KEY, PASS, "warn")?;
    service.add_account(BENCH_KEY, PASS)?;
    Ok(service)
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
