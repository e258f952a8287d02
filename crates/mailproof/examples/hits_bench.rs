//! Tracking-hit benchmark (issue 22, scope 7): recorded hits per second and the latency of a hit,
//! on SQLite and on PostgreSQL, at increasing offered rates.
//!
//! `cargo build -p mailproof --bins --examples && target/debug/examples/hits_bench
//! [--backends sqlite,postgres] [--rates 1000,2500,5000,7500] [--seconds 5] [--connections 256]`
//!
//! Starts the sibling `mailproof` binary (no engines, no filter daemons, no hit rate limits; on
//! PostgreSQL a durable cluster of its own: fsync and synchronous_commit on), creates and
//! activates a campaign, then drives open hits over HTTP/1.1 keep-alive connections at a fixed
//! offered rate after a one-second warm-up that opens them (open loop: hit k is due at k/rate,
//! whatever the earlier answers did). A hit's latency is counted from its due time, so a service
//! that falls behind shows it. Every answered hit is recorded before it is answered; the recorded
//! count is read from `/metrics` and checked against the campaign's export at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "bench_service/mod.rs"]
mod bench_service;

use bench_service::{BenchService, BoxError};
use store::testing::PrivateCluster;

const KEY: &str = "bench-key";
const PASS: &str = "bench-password";

struct Options {
    backends: Vec<String>,
    rates: Vec<u64>,
    seconds: u64,
    connections: usize,
}

fn options() -> Result<Options, BoxError> {
    let mut o = Options {
        backends: vec!["sqlite".into(), "postgres".into()],
        rates: vec![1_000, 2_500, 5_000, 7_500],
        seconds: 5,
        connections: 256,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--backends" => o.backends = value()?.split(',').map(str::to_string).collect(),
            "--rates" => {
                o.rates = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--seconds" => o.seconds = value()?.parse()?,
            "--connections" => o.connections = value()?.parse()?,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; use --backends, --rates, --seconds, --connections"
                )
                .into())
            }
        }
    }
    Ok(o)
}

/// The value of the sample named exactly `series` in a `/metrics` text, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(series))
        .filter_map(|rest| rest.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn counters(http: &reqwest::Client, base: &str) -> Result<(f64, f64), BoxError> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    Ok((
        sample(&text, "mailproof_hits_recorded_total"),
        sample(&text, "mailproof_hit_batches_total"),
    ))
}

/// CPU seconds (user and system) the process `pid` has used so far, from `/proc`.
fn cpu_seconds(pid: u32) -> Result<f64, BoxError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after its closing paren.
    let rest = stat.rsplit_once(')').ok_or("unreadable /proc stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11..13)
        .ok_or("short /proc stat")?
        .iter()
        .map(|f| f.parse::<f64>())
        .sum::<Result<f64, _>>()?;
    // The kernel's USER_HZ is 100 on every Linux this runs on.
    Ok(ticks / 100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[i.saturating_sub(1).min(sorted.len() - 1)]
}

struct Step {
    answered: usize,
    failed: usize,
    wall: Duration,
    latencies_ms: Vec<f64>,
}

/// One client per connection, kept across steps so that every step but the warm-up finds its
/// connections open.
fn clients(connections: usize) -> Result<Vec<reqwest::Client>, BoxError> {
    (0..connections)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .timeout(Duration::from_secs(30))
                .build()
                .map_err(BoxError::from)
        })
        .collect()
}

/// Offers `rate` hits a second for `seconds` over the connections of `clients`.
async fn drive(open: &str, rate: u64, seconds: u64, clients: &[reqwest::Client]) -> Step {
    let total = rate * seconds;
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now() + Duration::from_millis(50);
    let mut workers = Vec::new();
    for http in clients {
        let (next, open, http) = (next.clone(), open.to_string(), http.clone());
        workers.push(tokio::spawn(async move {
            let (mut lat, mut failed) = (Vec::new(), 0usize);
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= total {
                    break;
                }
                let due = start + Duration::from_secs_f64(k as f64 / rate as f64);
                tokio::time::sleep_until(due.into()).await;
                let ok = match http.get(format!("{open}?d=b{k}")).send().await {
                    Ok(r) => r.status() == 200 && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if ok {
                    lat.push(due.elapsed().as_secs_f64() * 1_000.0);
                } else {
                    failed += 1;
                }
            }
            (lat, failed)
        }));
    }
    let mut step = Step {
        answered: 0,
        failed: 0,
        wall: Duration::ZERO,
        latencies_ms: Vec::new(),
    };
    for w in workers {
        if let Ok((lat, failed)) = w.await {
            step.answered += lat.len();
            step.failed += failed;
            step.latencies_ms.extend(lat);
        }
    }
    step.wall = start.elapsed();
    step.latencies_ms.sort_by(f64::total_cmp);
    step
}

async fn bench(backend: &str, o: &Options) -> Result<(), BoxError> {
    // Kept alive for the whole run: the cluster stops when dropped.
    let mut cluster = None;
    let mut config = format!(
        "[render]\nengines = []\n[spam]\ndaemons = false\n\
         [hits]\nper_address_per_minute = 0\nper_campaign_per_minute = 0\n\
         [http_limits]\nmax_connections_per_address = {}\n",
        o.connections + 16
    );
    if backend == "postgres" {
        let (c, db) = PrivateCluster::start().await;
        config = format!("database_url = \"{}\"\n{config}", db.url);
        cluster = Some(c);
    } else if backend != "sqlite" {
        return Err(format!("unknown backend {backend:?}; use sqlite or postgres").into());
    }
    let svc = BenchService::start(
        &config,
        KEY,
        PASS,
        &std::env::var("HITS_BENCH_LOG").unwrap_or_else(|_| "error".into()),
    )?;
    let http = reqwest::Client::new();
    let created: serde_json::Value = http
        .post(format!("{}/v5/analytics/createcampaign", svc.base))
        .basic_auth(KEY, Some(PASS))
        .json(&serde_json::json!({"name": "Benchmark", "total_subscribers": 1_000_000}))
        .send()
        .await?
        .json()
        .await?;
    let guid = created["guid"]
        .as_str()
        .ok_or_else(|| format!("no guid in {created}"))?
        .to_string();
    let activated = http
        .post(format!("{}/v5/analytics/activatecampaign/{guid}", svc.base))
        .basic_auth(KEY, Some(PASS))
        .json(&serde_json::json!({}))
        .send()
        .await?;
    if !activated.status().is_success() {
        return Err(format!("activating the campaign: {}", activated.status()).into());
    }
    let open = format!("{}/t/{guid}/o.gif", svc.base);
    println!(
        "\n{backend}: {} connections, {} s per step",
        o.connections, o.seconds
    );
    println!(
        "| offered hits/s | recorded hits/s | p50 ms | p99 ms | max ms | failed | mean batch | CPU ms per 1000 hits: service / load generator |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let pool = clients(o.connections)?;
    // Warm-up, not shown: opens every connection and starts the writer.
    drive(&open, o.rates.first().copied().unwrap_or(1_000), 1, &pool).await;
    let mut recorded_total = 0.0;
    for &rate in &o.rates {
        let (rec0, batches0) = counters(&http, &svc.base).await?;
        let (cpu0, own0) = (cpu_seconds(svc.pid())?, cpu_seconds(std::process::id())?);
        let step = drive(&open, rate, o.seconds, &pool).await;
        let (cpu1, own1) = (cpu_seconds(svc.pid())?, cpu_seconds(std::process::id())?);
        let (rec1, batches1) = counters(&http, &svc.base).await?;
        recorded_total = rec1;
        let recorded = rec1 - rec0;
        println!(
            "| {rate} | {:.0} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.0} / {:.0} |",
            recorded / step.wall.as_secs_f64(),
            percentile(&step.latencies_ms, 0.50),
            percentile(&step.latencies_ms, 0.99),
            step.latencies_ms.last().copied().unwrap_or(f64::NAN),
            step.failed,
            recorded / (batches1 - batches0).max(1.0),
            (cpu1 - cpu0) * 1_000_000.0 / recorded.max(1.0),
            (own1 - own0) * 1_000_000.0 / recorded.max(1.0),
        );
        if (recorded as usize) < step.answered {
            return Err(format!(
                "{} hits answered but only {recorded} recorded",
                step.answered
            )
            .into());
        }
    }
    let export = http
        .get(format!(
            "{}/v5/analytics/getcampaignexport/{guid}",
            svc.base
        ))
        .basic_auth(KEY, Some(PASS))
        .send()
        .await?
        .text()
        .await?;
    let rows = export.lines().count().saturating_sub(1);
    println!("export: {rows} rows, /metrics: {recorded_total} recorded");
    drop(svc);
    drop(cluster);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let o = options()?;
    for backend in &o.backends {
        bench(backend, &o).await?;
    }
    Ok(())
}
