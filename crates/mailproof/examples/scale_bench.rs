//! Issue 13's scale-out benchmark: the same batch of email tests through 1, 2 and 4 render
//! processes (`serve --role render`, Chromium) sharing one PostgreSQL database and one blob
//! directory with one api process (`serve --role api`). For each count it prints the throughput,
//! the median and p95 time from submission to a complete test, the jobs claimed more than once,
//! the jobs done twice (screenshots stored by two workers: refused by the lease check, so must be
//! 0) and the jobs lost (not done at the end: must be 0). Then it measures the database's claim
//! rate: C concurrent claimers claiming and finishing render jobs through `store::Store` alone.
//!
//! ```sh
//! cargo build --release -p mailproof --bins --examples
//! target/release/examples/scale_bench [--tests 12] [--renderers 1,2,4] [--claim-jobs 3000]
//! ```
//! PostgreSQL comes from the setup (`scripts/setup.sh`); the benchmark starts its own throw-away
//! cluster on a loopback port (`store::testing`).

#[path = "bench_service/mod.rs"]
mod bench_service;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bench_service::{unlimited_account, BoxError};
use domain::{TestKind, Variant};

use serde_json::{json, Value};
use store::testing::database;
use store::{Backend, JobOutcome, NewTest, NewTestClient, Store};
use testkit::service::{sibling_binary, Deployment, Service};

const KEY: &str = "scale-bench";
const PASSWORD: &str = "scale-bench-password";
/// Blink clients only: every render process runs one Chromium, so the processes compete for the
/// same kind of work.
const CLIENTS: [&str; 3] = ["gmail_chrome_web", "yahoo_chrome_web", "outlook_com_chrome"];
const EMAIL: &str = "cerberus--responsive.html";

struct Options {
    tests: usize,
    renderers: Vec<usize>,
    claim_jobs: usize,
}

fn options() -> Result<Options, BoxError> {
    let mut o = Options {
        tests: 12,
        renderers: vec![1, 2, 4],
        claim_jobs: 3000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--tests" => o.tests = value()?.parse()?,
            "--renderers" => {
                o.renderers = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--claim-jobs" => o.claim_jobs = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(o)
}

/// One process of `role` with `engines` (a TOML list), SIGTERM'd with its browser when dropped.
fn start(shared: &Deployment, role: &str, engines: &str) -> Result<Service, BoxError> {
    let n = std::fs::read_dir(shared.root.path())?.count();
    let config = shared.process_config(role, &format!("[render]\nengines = {engines}\n"));
    shared
        .launch(&format!("{role}-{n}"), &config, &["--smtp", "127.0.0.1:0"])
        .stop_with(procs::Signal::TERM)
        .start()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct RunFigures {
    renderers: usize,
    screenshots: usize,
    wall: Duration,
    median: f64,
    p95: f64,
    reclaimed: i64,
    lost: usize,
}

async fn run(o: &Options, renderers: usize, html: &str) -> Result<RunFigures, BoxError> {
    let db = database(Backend::Postgres).await;
    eprintln!("scale_bench: database ready; starting 1 api and {renderers} render process(es)");
    let db_url = db.url.clone();
    let shared = Deployment::with(&sibling_binary()?, Some(db), None);
    let api = start(&shared, "api", "[]")?;
    let mut render = Vec::new();
    for _ in 0..renderers {
        render.push(start(&shared, "render", "[\"blink\"]")?);
    }
    // No practical rate limit: the batch is polled hard, and the benchmark measures the service.
    shared.add_account(&unlimited_account(KEY, PASSWORD))?;
    eprintln!("scale_bench: processes up; submitting {} tests", o.tests);
    let store = Store::connect(&db_url).await?;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let mut ids = Vec::new();
    for n in 0..o.tests {
        let r: Value = http
            .post(format!("{}/v5/email/tests", api.base))
            .basic_auth(KEY, Some(PASSWORD))
            .json(&json!({"subject": format!("scale {n}"), "html": html, "clients": CLIENTS}))
            .send()
            .await?
            .json()
            .await?;
        ids.push(
            r["id"]
                .as_str()
                .ok_or_else(|| format!("no test id in {r}"))?
                .to_string(),
        );
    }
    let mut done: BTreeMap<String, f64> = BTreeMap::new();
    while done.len() < ids.len() {
        if started.elapsed() > Duration::from_secs(1800) {
            return Err("the batch did not complete within 30 minutes".into());
        }
        for id in &ids {
            if done.contains_key(id) {
                continue;
            }
            let info: Value = http
                .get(format!("{}/v5/email/tests/{id}", api.base))
                .basic_auth(KEY, Some(PASSWORD))
                .send()
                .await?
                .json()
                .await?;
            if info.get("error").is_some() {
                return Err(format!("GET /v5/email/tests/{id} answered {info}").into());
            }
            // The spec leaves `processing` out once nothing is processing.
            if info["processing"].as_array().map_or(0, Vec::len) == 0 {
                done.insert(id.clone(), started.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall = started.elapsed();
    let mut times: Vec<f64> = done.values().copied().collect();
    times.sort_by(f64::total_cmp);
    let mut reclaimed = 0;
    let mut lost = 0;
    let mut screenshots = 0;
    for id in &ids {
        for c in store.test_clients(id).await? {
            reclaimed += (c.attempts - 1).max(0);
            screenshots += 1;
            if c.status != domain::ScreenshotStatus::Complete {
                lost += 1;
            }
        }
    }
    drop(render);
    drop(api);
    Ok(RunFigures {
        renderers,
        screenshots,
        wall,
        median: percentile(&times, 0.5),
        p95: percentile(&times, 0.95),
        reclaimed,
        lost,
    })
}

/// Claims per second the database sustains: `jobs` render jobs, claimed and finished by
/// `claimers` concurrent workers through `store::Store` (no engine, no HTTP).
async fn claim_rate(
    backend: Backend,
    jobs: usize,
    claimers: usize,
) -> Result<(f64, usize), BoxError> {
    let (_db, store) = store::testing::store(backend).await;
    let account = store::testing::add_account(&store, "claims").await;
    // Tests of 100 clients each, as many as make `jobs` jobs.
    for t in 0..jobs.div_ceil(100) {
        let n = (jobs - t * 100).min(100);
        let test = NewTest {
            subject: "claims".into(),
            clients: (0..n)
                .map(|c| NewTestClient {
                    client_id: format!("c{c}"),
                    variants: vec![Variant::Default],
                })
                .collect(),
            ..store::testing::new_test(account.id, TestKind::Email)
        };
        store.create_test(&test).await?;
    }
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..claimers {
        let store = store.clone();
        workers.push(tokio::spawn(async move {
            let name = format!("w{w}");
            let mut done = 0usize;
            let outcome = JobOutcome::Done {
                engine: "blink".into(),
                shot: Default::default(),
            };
            while let Some(job) = store.claim_job(&name, 2_000, 600).await? {
                if store.finish_job(&job, &name, 2_000, &outcome).await? {
                    done += 1;
                }
            }
            Ok::<usize, store::StoreError>(done)
        }));
    }
    let mut done = 0;
    for w in workers {
        done += w.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok((done as f64 / secs, done))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let o = options()?;
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let html = std::fs::read_to_string(corpus.join(EMAIL))
        .map_err(|e| format!("cannot read {EMAIL} from {}: {e}", corpus.display()))?;
    println!(
        "scale_bench: {} tests x {} Blink clients ({EMAIL}), one api process, N render processes, one PostgreSQL",
        o.tests,
        CLIENTS.len()
    );
    println!("| render processes | screenshots | wall s | screenshots/s | median s to complete | p95 s | re-claimed jobs | lost jobs |");
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &o.renderers {
        let f = run(&o, n, &html).await?;
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.1} | {:.1} | {} | {} |",
            f.renderers,
            f.screenshots,
            f.wall.as_secs_f64(),
            f.screenshots as f64 / f.wall.as_secs_f64(),
            f.median,
            f.p95,
            f.reclaimed,
            f.lost
        );
    }
    println!();
    println!("| backend | claimers | jobs claimed and finished | claims/s |");
    println!("|---|---|---|---|");
    for backend in [Backend::Postgres, Backend::Sqlite] {
        for claimers in [1, 4, 16] {
            let (rate, done) = claim_rate(backend, o.claim_jobs, claimers).await?;
            println!("| {backend:?} | {claimers} | {done} | {rate:.0} |");
        }
    }
    Ok(())
}
