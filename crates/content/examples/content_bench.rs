//! Prints how long decoding, CSS inlining and the text view take on the shared corpus of real
//! templates: `cargo run -p content --example content_bench [rounds]`.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: u32 = std::env::args()
        .nth(1)
        .map(|r| r.parse())
        .transpose()?
        .unwrap_or(5);
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut templates = Vec::new();
    for entry in std::fs::read_dir(&corpus)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "html") {
            templates.push((path.clone(), std::fs::read_to_string(&path)?));
        }
    }
    templates.sort();
    println!(
        "{:<48} {:>8} {:>10} {:>10} {:>10}",
        "template", "bytes", "decode ms", "inline ms", "text ms"
    );
    let mut totals = [Duration::ZERO; 3];
    for (path, html) in &templates {
        let encoded = base64::engine::general_purpose::STANDARD.encode(html);
        let mut spent = [Duration::ZERO; 3];
        for _ in 0..rounds {
            let started = Instant::now();
            content::decode_source(&encoded, Some("base64"), None, "html")?;
            spent[0] += started.elapsed();
            let started = Instant::now();
            content::inline_css(html)?;
            spent[1] += started.elapsed();
            let started = Instant::now();
            content::text_only(html);
            spent[2] += started.elapsed();
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0 / f64::from(rounds);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        println!(
            "{:<48} {:>8} {:>10.2} {:>10.2} {:>10.2}",
            name,
            html.len(),
            ms(spent[0]),
            ms(spent[1]),
            ms(spent[2])
        );
        for (total, part) in totals.iter_mut().zip(spent) {
            *total += part;
        }
    }
    let count = u32::try_from(templates.len())?.max(1) * rounds;
    let mean = |d: Duration| d.as_secs_f64() * 1000.0 / f64::from(count);
    println!(
        "mean over {} templates x {rounds} rounds: decode {:.2} ms, inline {:.2} ms, text {:.2} ms",
        templates.len(),
        mean(totals[0]),
        mean(totals[1]),
        mean(totals[2])
    );
    Ok(())
}
