//! Draws the inbox rows of emails for every catalog profile, as the inbox-row worker does
//! (preview, one Chromium measuring page, one picture per family and colour scheme in its engine),
//! and prints how long each email took after a warm-up, for BENCHMARKS.md; with `--out DIR` it
//! saves the pictures as `<DIR>/<email stem>__<row>-<scheme>.png` to be looked at.
//!
//! `cargo run --release -p jobs --example inbox_rows -- [--out DIR] EMAIL.html [EMAIL.html ...]`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use content::inbox::{self, InboxRows};
use domain::Catalog;
use jobs::inbox_rows::{draw_rows, RowsInput};
use render::{RenderConfig, Renderer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxError> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.iter().position(|a| a == "--out") {
        Some(i) if i + 1 < args.len() => {
            let dir = PathBuf::from(args.remove(i + 1));
            args.remove(i);
            Some(dir)
        }
        _ => None,
    };
    if args.is_empty() {
        return Err("usage: inbox_rows [--out DIR] EMAIL.html [EMAIL.html ...]".into());
    }
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let catalog = Catalog::parse(&std::fs::read_to_string(repo.join("data/clients.toml"))?)?;
    let rows = InboxRows::parse(&std::fs::read_to_string(
        repo.join("data").join(inbox::INBOX_ROWS_FILE),
    )?)?;
    let clients: Vec<String> = catalog.clients().iter().map(|c| c.id.clone()).collect();
    let work = tempfile::tempdir()?;
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.slots_per_engine = 1;
    cfg.resource_wait = Duration::from_secs(1);
    let fonts = repo.join("data/fonts/fonts.conf");
    if fonts.is_file() {
        cfg.fonts_conf = Some(fonts);
    }
    let renderer = Renderer::start(cfg).await?;
    for (n, path) in args.iter().enumerate() {
        let html = std::fs::read_to_string(path)?;
        let stem = PathBuf::from(path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("email")
            .to_string();
        let input = RowsInput {
            subject: &stem,
            from: Some("\"Mailproof\" <rows@example.com>"),
            clients: &clients,
        };
        // The first email also warms the engines: it is drawn twice and timed the second time.
        let runs = if n == 0 { 2 } else { 1 };
        let mut took = Duration::ZERO;
        let mut drawn = None;
        for _ in 0..runs {
            let started = Instant::now();
            let preview = inbox::preview(&html);
            let result = draw_rows(&renderer, &rows, &catalog, &input, preview)
                .await
                .map_err(|e| format!("{stem}: {e}"))?;
            took = started.elapsed();
            drawn = Some(result);
        }
        let Some((report, pictures)) = drawn else {
            continue;
        };
        println!(
            "{stem}: {} rows, {} pictures, {} ms, warnings: {}",
            report.rows.len(),
            pictures.len(),
            took.as_millis(),
            report
                .warnings
                .iter()
                .map(|w| w.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(dir) = &out {
            std::fs::create_dir_all(dir)?;
            for p in &pictures {
                let scheme = if p.scheme == domain::ColorScheme::Dark {
                    "dark"
                } else {
                    "light"
                };
                std::fs::write(dir.join(format!("{stem}__{}-{scheme}.png", p.row)), &p.png)?;
            }
        }
    }
    renderer.shutdown().await;
    Ok(())
}
