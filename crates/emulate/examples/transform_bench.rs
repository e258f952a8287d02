//! Prints how long the transformation and the code analysis take: every corpus template through
//! every profile.
//! `cargo run -p emulate --example transform_bench --release` (or without `--release` for debug figures).

use std::path::Path;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let catalog =
        domain::Catalog::parse(&std::fs::read_to_string(root.join("data/clients.toml"))?)?;
    let book = emulate::RuleBook::load(&root.join("data/rules"))?;
    book.check_catalog(&catalog)?;
    let mut templates = Vec::new();
    for entry in std::fs::read_dir(root.join("../shared/corpus"))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("html") {
            templates.push(std::fs::read_to_string(path)?);
        }
    }
    let bytes: usize = templates.iter().map(String::len).sum();
    let start = Instant::now();
    let mut runs = 0u32;
    let mut worst = std::time::Duration::ZERO;
    for html in &templates {
        for c in catalog.clients() {
            let t = Instant::now();
            emulate::transform(html, c, &book)?;
            worst = worst.max(t.elapsed());
            runs += 1;
        }
    }
    let total = start.elapsed();
    println!(
        "{} templates ({} KB) x {} profiles = {runs} transforms in {:.2?}: mean {:.2?}, worst {:.2?}",
        templates.len(),
        bytes / 1024,
        catalog.clients().len(),
        total,
        total / runs.max(1),
        worst
    );
    let start = Instant::now();
    let mut worst = std::time::Duration::ZERO;
    let mut findings = 0usize;
    for html in &templates {
        for c in catalog.clients() {
            let t = Instant::now();
            findings += emulate::analyze(html, c, &book)?.findings.len();
            worst = worst.max(t.elapsed());
        }
    }
    let total = start.elapsed();
    println!(
        "{runs} code analyses ({findings} findings) in {:.2?}: mean {:.2?}, worst {:.2?}",
        total,
        total / runs.max(1),
        worst
    );
    Ok(())
}
