//! The corpus report: every email of the corpora through every client profile, drawn as the
//! service draws it, each drawing checked by the invariants of `jobs::corpus`.
//!
//! `cargo build --release -p jobs -p webkit --bins && target/release/corpus-report`
//! `[--corpus DIR]... [--clients id,id] [--emails N] [--show N]`
//!
//! Without `--corpus`, reads `../shared/corpus`; give `--corpus` once per folder of `.html`
//! emails to read others (the shared corpus is then read only if named too). `--emails N`
//! takes the first N emails of each corpus (by name). Prints, per invariant and per client
//! family, failing pairs / total, then the first `--show` failures (40 unless told) with what is
//! wrong. Exits 1 when any pair fails.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Catalog;
use emulate::RuleBook;
use jobs::corpus::{self, Email, Invariant, Outcome};
use render::{RenderConfig, Renderer};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Pairs in flight at once: enough to keep every engine's slots busy.
const IN_FLIGHT: usize = 6;

struct Args {
    repo: PathBuf,
    corpora: Vec<PathBuf>,
    clients: Option<Vec<String>>,
    emails: Option<usize>,
    show: usize,
}

fn parse_args() -> Result<Args, BoxError> {
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut args = Args {
        repo,
        corpora: Vec::new(),
        clients: None,
        emails: None,
        show: 40,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--corpus" => args.corpora.push(value()?.into()),
            "--clients" => {
                args.clients = Some(value()?.split(',').map(|s| s.trim().to_string()).collect())
            }
            "--emails" => args.emails = Some(value()?.parse()?),
            "--show" => args.show = value()?.parse()?,
            "--repo" => args.repo = value()?.into(),
            other => return Err(format!("unknown argument {other}; see the file header").into()),
        }
    }
    if args.corpora.is_empty() {
        args.corpora = vec![args.repo.join("../shared/corpus")];
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let catalog = Catalog::parse(&std::fs::read_to_string(
        args.repo.join("data/clients.toml"),
    )?)?;
    let book = Arc::new(RuleBook::load(&args.repo.join("data/rules"))?);
    let clients = catalog.chosen(args.clients.as_deref())?;
    let mut emails: Vec<Email> = Vec::new();
    for dir in &args.corpora {
        let mut found = corpus::load(dir).map_err(|e| format!("corpus {}: {e}", dir.display()))?;
        if let Some(n) = args.emails {
            found.truncate(n);
        }
        emails.extend(found);
    }
    let work = tempfile::tempdir()?;
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.resource_wait = Duration::from_secs(1);
    let renderer =
        Arc::new(Renderer::start(cfg).await.map_err(|e| {
            format!("the engines did not start ({e}); scripts/setup.sh installs them")
        })?);
    let started = Instant::now();
    let total_pairs = emails.len() * clients.len();
    eprintln!(
        "{} emails x {} clients = {total_pairs} pairs",
        emails.len(),
        clients.len()
    );
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut running = JoinSet::new();
    let mut pending = emails
        .iter()
        .flat_map(|e| clients.iter().map(move |c| (e.clone(), c.clone())));
    let mut done = 0usize;
    loop {
        while running.len() < IN_FLIGHT {
            let Some((email, client)) = pending.next() else {
                break;
            };
            let (renderer, book) = (Arc::clone(&renderer), Arc::clone(&book));
            running.spawn(async move { corpus::check(&renderer, &book, &client, &email).await });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        outcomes.extend(joined?);
        done += 1;
        if done.is_multiple_of(100) {
            eprintln!(
                "{done}/{total_pairs} pairs, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let elapsed = started.elapsed();
    if let Ok(renderer) = Arc::try_unwrap(renderer) {
        renderer.shutdown().await;
    }

    // invariant -> family -> (failing, total)
    let mut table: BTreeMap<Invariant, BTreeMap<String, (usize, usize)>> = BTreeMap::new();
    for o in &outcomes {
        let cell = table
            .entry(o.invariant)
            .or_default()
            .entry(o.family.clone())
            .or_default();
        cell.1 += 1;
        if o.failure.is_some() {
            cell.0 += 1;
        }
    }
    println!(
        "Corpus report: {} emails x {} clients ({total_pairs} pairs) in {:.0} s",
        emails.len(),
        clients.len(),
        elapsed.as_secs_f64()
    );
    for invariant in Invariant::ALL {
        let Some(families) = table.get(&invariant) else {
            println!("\n{}: not applicable to any pair", invariant.name());
            continue;
        };
        let (failing, total) = families
            .values()
            .fold((0, 0), |(f, t), (cf, ct)| (f + cf, t + ct));
        println!("\n{}: {failing} failing / {total}", invariant.name());
        for (family, (f, t)) in families {
            println!("  {family:<24} {f:>5} / {t}");
        }
    }
    let failures: Vec<&Outcome> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    if !failures.is_empty() {
        println!(
            "\nFailures ({}, first {} shown):",
            failures.len(),
            args.show
        );
        for o in failures.iter().take(args.show) {
            println!(
                "  {} on {} [{}]: {}",
                o.email,
                o.client,
                o.invariant.name(),
                o.failure.as_deref().unwrap_or_default()
            );
        }
        std::process::exit(1);
    }
    Ok(())
}
