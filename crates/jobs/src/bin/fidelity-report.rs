//! The fidelity report: does each client profile draw what the public support tables say that
//! client draws?
//!
//! `cargo build --release -p jobs -p webkit --bins && target/release/fidelity-report`
//! `[--caniemail ../shared/reference/caniemail/support.json] [--clients id,id] [--save-dir DIR]`
//!
//! Every probe of `emulate::probes` (one email per feature: green where the feature works, red
//! where it does not) goes through every profile exactly as a screenshot does in the service
//! (`emulate::transform`, then `jobs::render_request`, then a real engine). The colour at the
//! probe's sample point is compared with caniemail's verdict for that client, read from the
//! reference table itself at run time, not from our derived rule files: `y` for every feature the
//! probe involves means green, any `n` means red. Partial (`a`), unknown (`u`) and untested
//! features give no firm verdict; those points are listed apart and not scored.
//!
//! Prints agreement per profile and overall, then every disagreement. `--save-dir` keeps every
//! screenshot, named `<client>--<probe>--<agree|DISAGREE|open>.png`, for a look.
//!
//! Then the behaviour probes (`emulate::probes::BEHAVIOUR_PROBES`, one email per documented
//! behaviour of data/behaviours.toml) go through every profile the same way, and each is scored
//! per client against what the behaviours file says (with its sources): the behaviour's colour
//! where it applies, the other colour where it does not. Unverified or disputed behaviours, and
//! clients without the behaviour whose support for a feature the probe needs is not firm, are not
//! scored. Images-off probes are drawn in the `no_images` variant, as that screenshot is, and
//! scored only for clients whose blocked-image drawing the file describes. `--behaviours-only`
//! skips the caniemail probes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::{Catalog, Client, Variant};
use emulate::derive::Facts;
use emulate::probes::{
    expected, expected_behaviour, BehaviourExpectation, Probe, ProbeColour, BEHAVIOUR_PROBES,
    PROBES,
};
use emulate::RuleBook;
use render::{RenderConfig, Renderer};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Renders in flight at once: enough to keep every engine's slots busy.
const IN_FLIGHT: usize = 6;

/// A locator drawn right above each probe element: a blue cell whose bottom-left corner is the
/// probe element's top-left corner. Sized and coloured both by attributes and by CSS, because some
/// clients drop one or the other.
const MARKER: &str = "<table cellpadding=\"0\" cellspacing=\"0\" border=\"0\"><tr>\
<td bgcolor=\"#0000ff\" width=\"8\" height=\"8\" \
style=\"width:8px;height:8px;background-color:#0000ff;font-size:1px;line-height:1px\">&nbsp;</td>\
</tr></table>";

struct Args {
    repo: PathBuf,
    caniemail: PathBuf,
    clients: Option<Vec<String>>,
    save_dir: Option<PathBuf>,
    behaviours_only: bool,
}

fn parse_args() -> Result<Args, BoxError> {
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut args = Args {
        caniemail: repo.join("../shared/reference/caniemail/support.json"),
        repo,
        clients: None,
        save_dir: None,
        behaviours_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--caniemail" => args.caniemail = value()?.into(),
            "--clients" => {
                args.clients = Some(value()?.split(',').map(|s| s.trim().to_string()).collect())
            }
            "--save-dir" => args.save_dir = Some(value()?.into()),
            "--repo" => args.repo = value()?.into(),
            "--behaviours-only" => args.behaviours_only = true,
            other => return Err(format!("unknown argument {other}; see the file header").into()),
        }
    }
    Ok(args)
}

/// What caniemail says a client shows for a probe.
#[derive(Clone, Debug)]
enum Verdict {
    Firm(ProbeColour),
    /// A behaviour probe's expected colour, with the behaviours that make it so.
    Behaviour(ProbeColour, String),
    /// Partial, unknown or untested: the letters per involved feature.
    Open(String),
}

fn public_verdict(probe: &Probe, facts: &Facts, client: &Client, book: &RuleBook) -> Verdict {
    let fallback = book
        .get(&client.rules)
        .and_then(|set| set.policy.fallback_platform.clone());
    let mut red = false;
    let mut open = Vec::new();
    for slug in std::iter::once(probe.slug).chain(probe.requires.iter().copied()) {
        match facts.letter_for(slug, &client.family, &client.platform, fallback.as_deref()) {
            Some('y') => {}
            Some('n') => red = true,
            Some(l) => open.push(format!("{slug}={l}")),
            None => open.push(format!("{slug}=untested")),
        }
    }
    if red {
        Verdict::Firm(ProbeColour::Red)
    } else if open.is_empty() {
        Verdict::Firm(ProbeColour::Green)
    } else {
        Verdict::Open(open.join(", "))
    }
}

/// The probe's HTML with the locator inserted just before the element carrying `data-probe`.
fn with_marker(name: &str, html: &str) -> Result<String, BoxError> {
    let attr = format!("data-probe=\"{name}\"");
    let at = html
        .find(&attr)
        .and_then(|i| html[..i].rfind('<'))
        .ok_or_else(|| format!("probe {name} has no data-probe element"))?;
    Ok(format!("{}{MARKER}{}", &html[..at], &html[at..]))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Colour(ProbeColour),
    /// Neither green nor red at the sample point (the RGB found).
    Other([u8; 3]),
    /// The locator is not in the picture.
    NoMarker,
}

/// Forced dark modes keep hues but not lightness (pure green becomes dark green in Outlook's and
/// the full classes' models), so the sample is classified by its dominant hue rather than by
/// exact value.
fn classify(p: [u8; 3]) -> Option<ProbeColour> {
    let [r, g, b] = p.map(i32::from);
    if g > 60 && g > r + 40 && g > b + 40 {
        Some(ProbeColour::Green)
    } else if r > 60 && r > g + 40 && r > b + 40 {
        Some(ProbeColour::Red)
    } else {
        None
    }
}

/// Dark-mode probes: CIELAB lightness decides.
fn classify_lightness(p: [u8; 3]) -> Option<ProbeColour> {
    let l = emulate::color::Rgba {
        r: p[0],
        g: p[1],
        b: p[2],
        a: 1.0,
    }
    .lab_lightness();
    if l < 40.0 {
        Some(ProbeColour::Dark)
    } else if l > 70.0 {
        Some(ProbeColour::Light)
    } else {
        None
    }
}

/// The locator's blue, by dominant hue too: the full-inversion model turns `#0000ff` into a
/// lighter violet-blue (`#b97aff`).
fn is_marker(p: [u8; 3]) -> bool {
    let [r, g, b] = p.map(i32::from);
    b > 150 && b > r + 50 && b > g + 50
}

fn read_sample(
    png: &[u8],
    sample: (u32, u32),
    scale: f32,
    by_lightness: bool,
) -> Result<Seen, BoxError> {
    let img = image::load_from_memory(png)?.to_rgb8();
    // The locator's bottom-left blue pixel: the lowest row of the first blue column.
    let mut corner: Option<(u32, u32)> = None;
    for x in 0..img.width() {
        let mut bottom = None;
        for y in 0..img.height() {
            if is_marker(img.get_pixel(x, y).0) {
                bottom = Some(y);
            }
        }
        if let Some(y) = bottom {
            corner = Some((x, y));
            break;
        }
    }
    let Some((mx, my)) = corner else {
        return Ok(Seen::NoMarker);
    };
    let sx = mx + (sample.0 as f32 * scale).round() as u32;
    let sy = my + 1 + (sample.1 as f32 * scale).round() as u32;
    if sx >= img.width() || sy >= img.height() {
        return Ok(Seen::Other([255, 255, 255]));
    }
    let p = img.get_pixel(sx, sy).0;
    let seen = if by_lightness {
        classify_lightness(p)
    } else {
        classify(p)
    };
    Ok(seen.map_or(Seen::Other(p), Seen::Colour))
}

struct Point {
    client: String,
    probe: &'static str,
    verdict: Verdict,
    /// What our own rules expect (for the listing; the score is against `verdict`).
    ours: ProbeColour,
    seen: Seen,
    png: Vec<u8>,
    /// The rule set and behaviours the transformation reported.
    rule_set: String,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let catalog_path = args.repo.join("data/clients.toml");
    let catalog = Catalog::parse(
        &std::fs::read_to_string(&catalog_path)
            .map_err(|e| format!("reading {}: {e}", catalog_path.display()))?,
    )?;
    let book = RuleBook::load(&args.repo.join("data/rules"))?;
    let facts = Facts::parse(&std::fs::read_to_string(&args.caniemail).map_err(|e| {
        format!(
            "reading {}: {e} (pass --caniemail PATH to shared/reference/caniemail/support.json)",
            args.caniemail.display()
        )
    })?)?;
    let clients = catalog.chosen(args.clients.as_deref())?;

    let work = tempfile::tempdir()?;
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.resource_wait = Duration::from_millis(500);
    eprintln!("starting engines ...");
    let renderer = Arc::new(Renderer::start(cfg).await?);
    let book = Arc::new(book);
    let started = Instant::now();

    let mut jobs = JoinSet::new();
    let mut points = Vec::new();
    let caniemail_probes: &[Probe] = if args.behaviours_only { &[] } else { PROBES };
    let total = clients.len() * caniemail_probes.len();
    for client in &clients {
        for probe in caniemail_probes {
            while jobs.len() >= IN_FLIGHT {
                if let Some(done) = jobs.join_next().await {
                    points.push(done??);
                }
            }
            let verdict = public_verdict(probe, &facts, client, &book);
            let ours = book
                .get(&client.rules)
                .map_or(ProbeColour::Green, |set| expected(probe, set).colour);
            let html = with_marker(probe.slug, probe.html)?;
            let shot = Shot {
                probe: probe.slug,
                sample: probe.sample,
                verdict,
                ours,
                variant: Variant::Default,
            };
            jobs.spawn(shoot(
                html,
                client.clone(),
                renderer.clone(),
                book.clone(),
                shot,
            ));
        }
    }
    while let Some(done) = jobs.join_next().await {
        points.push(done??);
    }
    let elapsed = started.elapsed();
    let started = Instant::now();
    let mut bpoints = Vec::new();
    for client in &clients {
        for probe in BEHAVIOUR_PROBES {
            while jobs.len() >= IN_FLIGHT {
                if let Some(done) = bjobs_next(&mut jobs).await {
                    bpoints.push(done?);
                }
            }
            let expectation = expected_behaviour(probe, client, &book);
            let html = with_marker(probe.name, &probe.html())?;
            let shot = Shot {
                probe: probe.name,
                sample: probe.sample,
                verdict: match expectation {
                    BehaviourExpectation::Firm(c, why) => Verdict::Behaviour(c, why),
                    BehaviourExpectation::Open(why) => Verdict::Open(why),
                },
                ours: probe.applied,
                variant: if probe.images_off {
                    Variant::NoImages
                } else {
                    Variant::Default
                },
            };
            jobs.spawn(shoot(
                html,
                client.clone(),
                renderer.clone(),
                book.clone(),
                shot,
            ));
        }
    }
    while let Some(done) = bjobs_next(&mut jobs).await {
        bpoints.push(done?);
    }
    let behaviours_took = started.elapsed();
    if let Ok(r) = Arc::try_unwrap(renderer) {
        r.shutdown().await;
    }
    if !args.behaviours_only {
        report(&clients, &points, &facts, total, elapsed);
    }
    report_behaviours(&clients, &bpoints, behaviours_took);
    if let Some(dir) = &args.save_dir {
        save_screenshots(dir, &points)?;
        save_screenshots(dir, &bpoints)?;
    }
    Ok(())
}

/// One probe for one client, before it is drawn.
struct Shot {
    probe: &'static str,
    sample: (u32, u32),
    verdict: Verdict,
    ours: ProbeColour,
    /// The screenshot variant: images-off probes are drawn with images blocked.
    variant: Variant,
}

/// Draws `html` for `client` exactly as the service does (transform, then a real engine) and
/// reads the shot's sample point.
async fn shoot(
    html: String,
    client: Client,
    renderer: Arc<Renderer>,
    book: Arc<RuleBook>,
    shot: Shot,
) -> Result<Point, BoxError> {
    let transformed = emulate::transform_variant(&html, &client, &book, shot.variant)?;
    let jobs::Prepared {
        request: req,
        rule_set,
        ..
    } = jobs::prepared_request(renderer.as_ref(), &client, shot.variant, transformed).await?;
    // Auto fit draws at a smaller scale than the profile's: read the sample at the one used.
    let scale = req.scale;
    let rendered = renderer.render(req).await?;
    let by_lightness = matches!(shot.ours, ProbeColour::Dark | ProbeColour::Light);
    let seen = read_sample(&rendered.png, shot.sample, scale, by_lightness)?;
    Ok(Point {
        client: client.id,
        probe: shot.probe,
        verdict: shot.verdict,
        ours: shot.ours,
        seen,
        png: rendered.png,
        rule_set,
    })
}

type PointJob = Result<Result<Point, BoxError>, tokio::task::JoinError>;

async fn bjobs_next(
    jobs: &mut JoinSet<Result<Point, BoxError>>,
) -> Option<Result<Point, BoxError>> {
    let done: PointJob = jobs.join_next().await?;
    Some(done.map_err(BoxError::from).and_then(|r| r))
}

/// The behaviour probes' scores: per behaviour probe and per profile, then every disagreement and
/// every unscored point with its reason.
fn report_behaviours(clients: &[Client], points: &[Point], took: Duration) {
    println!(
        "\nBehaviour probes: {} probes x {} profiles = {} screenshots in {:.1} s; expected colours from data/behaviours.toml\n",
        BEHAVIOUR_PROBES.len(),
        clients.len(),
        points.len(),
        took.as_secs_f64()
    );
    let tally = |keep: &dyn Fn(&Point) -> bool| {
        let (mut a, mut s, mut o) = (0, 0, 0);
        for p in points.iter().filter(|p| keep(p)) {
            match agrees(p) {
                Some(true) => {
                    a += 1;
                    s += 1
                }
                Some(false) => s += 1,
                None => o += 1,
            }
        }
        (a, s, o)
    };
    let pct = |a: usize, s: usize| {
        if s == 0 {
            0.0
        } else {
            100.0 * a as f64 / s as f64
        }
    };
    println!("| behaviour probe | applied colour | agree / scored | % | not scored |");
    println!("|---|---|---|---|---|");
    for probe in BEHAVIOUR_PROBES {
        let (a, s, o) = tally(&|p| p.probe == probe.name);
        println!(
            "| {} | {:?} | {a} / {s} | {:.1}% | {o} |",
            probe.name,
            probe.applied,
            pct(a, s)
        );
    }
    let (a, s, o) = tally(&|_| true);
    println!(
        "\nBehaviour probes overall: {a} / {s} = {:.1}% ({o} points not scored)\n",
        pct(a, s)
    );
    println!("| profile | agree / scored | not scored |");
    println!("|---|---|---|");
    for c in clients {
        let (a, s, o) = tally(&|p| p.client == c.id);
        println!("| {} | {a} / {s} | {o} |", c.id);
    }
    list_points(
        points,
        "\nBehaviour disagreements (expected by data/behaviours.toml vs what the screenshot shows):",
        "\nBehaviour points not scored:",
        &|p| match &p.verdict {
            Verdict::Behaviour(c, why) => Some(format!(
                "{} / {}: expected {c:?} ({why}), screenshot shows {:?}; rule set {}",
                p.client, p.probe, p.seen, p.rule_set
            )),
            _ => None,
        },
    );
}

/// Prints every disagreement `describe` words (it returns `None` for points it does not judge),
/// then every point without a firm verdict, with what was drawn.
fn list_points(
    points: &[Point],
    disagreements: &str,
    unscored: &str,
    describe: &dyn Fn(&Point) -> Option<String>,
) {
    println!("{disagreements}");
    let lines: Vec<String> = points
        .iter()
        .filter(|p| agrees(p) == Some(false))
        .filter_map(describe)
        .collect();
    if lines.is_empty() {
        println!("- none");
    }
    for line in lines {
        println!("- {line}");
    }
    println!("{unscored}");
    for p in points {
        if let Verdict::Open(why) = &p.verdict {
            println!("- {} / {}: {why}; shows {:?}", p.client, p.probe, p.seen);
        }
    }
}

fn agrees(p: &Point) -> Option<bool> {
    match p.verdict {
        Verdict::Firm(c) | Verdict::Behaviour(c, _) => Some(p.seen == Seen::Colour(c)),
        Verdict::Open(_) => None,
    }
}

fn report(clients: &[Client], points: &[Point], facts: &Facts, total: usize, took: Duration) {
    let mut per: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for p in points {
        let e = per.entry(p.client.as_str()).or_default();
        match agrees(p) {
            Some(true) => {
                e.0 += 1;
                e.1 += 1
            }
            Some(false) => e.1 += 1,
            None => e.2 += 1,
        }
    }
    println!(
        "Fidelity report: {} probes x {} profiles = {total} screenshots in {:.1} s; verdicts from caniemail {} ({})\n",
        PROBES.len(),
        clients.len(),
        took.as_secs_f64(),
        facts.commit,
        facts.source
    );
    println!("| profile | engine | rule set | agree / scored | not scored (no firm verdict) |");
    println!("|---|---|---|---|---|");
    let (mut agree, mut scored, mut open) = (0, 0, 0);
    for c in clients {
        let (a, s, o) = per.get(c.id.as_str()).copied().unwrap_or_default();
        agree += a;
        scored += s;
        open += o;
        println!(
            "| {} | {} | {} | {a} / {s} | {o} |",
            c.id, c.engine, c.rules
        );
    }
    let pct = if scored == 0 {
        0.0
    } else {
        100.0 * agree as f64 / scored as f64
    };
    println!("\nOverall agreement: {agree} / {scored} = {pct:.1}% ({open} points without a firm verdict)\n");
    list_points(
        points,
        "Disagreements (public verdict vs what the screenshot shows):",
        "\nNot scored (partial, unknown or untested in caniemail), with what was drawn:",
        &|p| match &p.verdict {
            Verdict::Firm(said) => Some(format!(
                "{} / {}: caniemail says {said:?}, screenshot shows {:?}, our rules expect {:?}",
                p.client, p.probe, p.seen, p.ours
            )),
            _ => None,
        },
    );
}

fn save_screenshots(dir: &Path, points: &[Point]) -> Result<(), BoxError> {
    std::fs::create_dir_all(dir)?;
    for p in points {
        let mark = match agrees(p) {
            Some(true) => "agree",
            Some(false) => "DISAGREE",
            None => "open",
        };
        std::fs::write(
            dir.join(format!("{}--{}--{mark}.png", p.client, p.probe)),
            &p.png,
        )?;
    }
    Ok(())
}
