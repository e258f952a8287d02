//! Cost of one screenshot diff: `cargo run --release -p shotdiff --example diff_bench -- <png>...`
//!
//! For each screenshot given (e.g. the corpus' largest templates rendered by the service), times
//! `shotdiff::diff` of the screenshot against itself and against a copy with one block recoloured
//! (a 300×150 px area a third of the way down), decode and highlight encoding included, and prints
//! the median and the worst of several runs in milliseconds per pair.

use std::time::Instant;

const RUNS: usize = 7;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        return Err("give one or more PNG screenshots: cargo run --release -p shotdiff --example diff_bench -- a.png b.png".into());
    }
    println!("| screenshot | size (px) | pair | median ms | max ms | changed share | boxes |");
    println!("|---|---|---|---|---|---|---|");
    for f in &files {
        let png =
            std::fs::read(f).map_err(|e| format!("cannot read {f}: {e}; give a PNG file path"))?;
        let img = image::load_from_memory(&png)
            .map_err(|e| format!("{f} is not a readable image: {e}"))?
            .to_rgb8();
        let (w, h) = img.dimensions();
        let mut changed = img.clone();
        let (bx, by) = (w / 4, h / 3);
        for y in by..(by + 150).min(h) {
            for x in bx..(bx + 300).min(w) {
                let p = changed.get_pixel_mut(x, y);
                p.0 = [255 - p.0[0], p.0[1] / 2, 255 - p.0[2]];
            }
        }
        let mut changed_png = Vec::new();
        image::DynamicImage::ImageRgb8(changed)
            .write_to(
                &mut std::io::Cursor::new(&mut changed_png),
                image::ImageFormat::Png,
            )
            .map_err(|e| format!("encoding the changed copy of {f} failed: {e}"))?;
        for (label, other) in [("identical", &png), ("one block recoloured", &changed_png)] {
            let mut times = Vec::with_capacity(RUNS);
            let mut last = None;
            for _ in 0..RUNS {
                let start = Instant::now();
                let d = shotdiff::diff(&png, other, &shotdiff::Options::default())?;
                times.push(start.elapsed().as_secs_f64() * 1000.0);
                last = Some(d);
            }
            times.sort_by(f64::total_cmp);
            let d = last.ok_or("no run")?;
            println!(
                "| {f} | {w}×{h} | {label} | {:.1} | {:.1} | {:.4} | {} |",
                times[RUNS / 2],
                times[RUNS - 1],
                d.changed_share(),
                d.boxes.len()
            );
        }
    }
    Ok(())
}
