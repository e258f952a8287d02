//! Prints warm per-capture times of the WebKit engine at 600@1x and 390@3x.
//!
//! `cargo build -p webkit && cargo run -p webkit --example webkit_bench [-- page.html [runs]]`; without a
//! page it renders the Cerberus responsive template from the shared corpus.

use std::time::{Duration, Instant};
use webkit::{CaptureRequest, WebkitConfig, WebkitEngine};

const DEFAULT_PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/cerberus--responsive.html"
);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let page = args.next().unwrap_or_else(|| DEFAULT_PAGE.to_owned());
    let runs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(20);
    let html = std::fs::read_to_string(&page).map_err(|e| format!("reading {page}: {e}"))?;
    let work_dir = tempfile::tempdir()?;

    let started = Instant::now();
    let mut cfg = WebkitConfig::new(work_dir.path().to_path_buf());
    cfg.warm_scales = vec![1, 3];
    // The templates' remote images and fonts would wait on DNS that this offline machine lacks;
    // a proxy on a closed loopback port makes every remote fetch fail at once, deterministically.
    cfg.proxy = Some(format!("http://127.0.0.1:{}", closed_port()?));
    let engine = WebkitEngine::start(cfg).await?;
    println!(
        "engine start (Xvfb + helpers at 1x and 3x): {} ms",
        started.elapsed().as_millis()
    );

    for (width, scale) in [(600, 1), (390, 3)] {
        let request = CaptureRequest {
            html: html.clone(),
            document_url: "http://mailproof.invalid/bench".into(),
            width,
            height: 800,
            scale,
            dark: false,
            block_images: false,
        };
        let first = Instant::now();
        let capture = engine.capture(&request).await?;
        let first = first.elapsed();
        let mut times = Vec::with_capacity(runs);
        let mut last = capture.timings;
        for _ in 0..runs {
            let t = Instant::now();
            last = engine.capture(&request).await?.timings;
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "{width}@{scale}x -> {}x{} px, {} KiB PNG: first {} ms, warm median {} ms, p90 {} ms, min {} ms ({runs} runs)",
            capture.width_px,
            capture.height_px,
            capture.png.len() / 1024,
            first.as_millis(),
            ms(times[times.len() / 2]),
            ms(times[times.len() * 9 / 10]),
            ms(times[0]),
        );
        println!(
            "    last run inside the helper: load {} ms, snapshot {} ms, PNG encode {} ms",
            last.load_ms, last.snapshot_ms, last.encode_ms
        );
    }
    println!(
        "processes {:?}, summed RSS {} MiB",
        engine.pids(),
        procs::rss_bytes(&engine.pids()) / (1024 * 1024)
    );
    engine.shutdown().await;
    Ok(())
}

fn closed_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}
