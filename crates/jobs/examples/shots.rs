//! Draws one email for some client profiles exactly as the service does (transform, dark-mode
//! pass, the profile's engine) and saves each PNG as `<DIR>/<email stem>__<client>.png`: for
//! looking at what a profile shows without running the service.
//!
//! `cargo run -p jobs --example shots -- EMAIL.html DIR client_id [client_id ...]`

use std::path::PathBuf;
use std::time::Duration;

use domain::{Catalog, Variant};
use emulate::RuleBook;
use render::{RenderConfig, Renderer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: shots EMAIL.html DIR client_id [client_id ...]";
    let email = PathBuf::from(args.next().ok_or(usage)?);
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    let ids: Vec<String> = args.collect();
    if ids.is_empty() {
        return Err(usage.into());
    }
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let catalog = Catalog::parse(&std::fs::read_to_string(repo.join("data/clients.toml"))?)?;
    let book = RuleBook::load(&repo.join("data/rules"))?;
    let html = std::fs::read_to_string(&email)?;
    let stem = email
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("the email's file name is not UTF-8")?;
    std::fs::create_dir_all(&dir)?;
    let work = tempfile::tempdir()?;
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.slots_per_engine = 1;
    // Only the engines the named profiles use: a WebKit-less build can still draw Blink ones.
    let mut engines = Vec::new();
    for id in &ids {
        let engine = catalog
            .get(id)
            .ok_or_else(|| format!("unknown client {id}"))?
            .engine;
        if !engines.contains(&engine) {
            engines.push(engine);
        }
    }
    cfg.engines = engines;
    cfg.resource_wait = Duration::from_secs(2);
    let renderer = Renderer::start(cfg).await?;
    for id in &ids {
        let client = catalog
            .get(id)
            .ok_or_else(|| format!("unknown client {id}"))?;
        let transformed = emulate::transform(&html, client, &book)?;
        let jobs::Prepared {
            request: req,
            rule_set,
            ..
        } = jobs::prepared_request(&renderer, client, Variant::Default, transformed).await?;
        let shot = renderer.render(req).await?;
        let path = dir.join(format!("{stem}__{id}.png"));
        std::fs::write(&path, &shot.png)?;
        println!(
            "{} ({}x{}; {rule_set})",
            path.display(),
            shot.width,
            shot.height
        );
    }
    renderer.shutdown().await;
    Ok(())
}
