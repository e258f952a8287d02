//! Benchmark of the renderer against each engine's bare protocol and a fresh process per shot.
//!
//! `cargo run -p render --release --bin render-bench -- --corpus ../shared/corpus`
//! For each engine: warm per-screenshot latency (median, p95) of every corpus template at 600@1 and
//! 390@3 mobile, throughput with all slots busy, and peak RSS of the engine's process tree; beside
//! (a) the bare protocol (raw CDP / raw BiDi on one tab, or the webkit crate alone), (b) a fresh
//! browser per screenshot driven the same way, and (c) the browser's one-shot screenshot command.
//! Prints a Markdown table.
//! `--every-client data/clients.toml` then renders every template through every client profile
//! of the catalog and prints per-engine latency and overall throughput.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::catalog::Viewport;
use domain::{ColorScheme, Engine};
use futures::{SinkExt, StreamExt};
use render::{RenderConfig, RenderRequest, Renderer};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Profile {
    name: &'static str,
    width: u32,
    height: u32,
    scale: f32,
    mobile: bool,
}

const PROFILES: [Profile; 2] = [
    Profile {
        name: "600@1",
        width: 600,
        height: 800,
        scale: 1.0,
        mobile: false,
    },
    Profile {
        name: "390@3",
        width: 390,
        height: 844,
        scale: 3.0,
        mobile: true,
    },
];

/// Shots per engine for the fresh-process reference (each costs a whole browser start).
const FRESH_PROCESS_SHOTS: usize = 5;

#[derive(Default)]
struct Row {
    engine: String,
    ours: Vec<(String, Stats)>,
    throughput: f64,
    peak_rss: u64,
    errors: usize,
    bare: Option<Stats>,
    fresh: Option<Stats>,
    one_shot: Option<Stats>,
}

struct Stats {
    median_ms: f64,
    p95_ms: f64,
    n: usize,
}

fn stats(mut samples: Vec<Duration>) -> Option<Stats> {
    if samples.is_empty() {
        return None;
    }
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    Some(Stats {
        median_ms: at(0.5),
        p95_ms: at(0.95),
        n: samples.len(),
    })
}

#[tokio::main]
async fn main() -> BenchResult<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut corpus = PathBuf::from("../shared/corpus");
    let mut engines = Engine::ALL.to_vec();
    let mut catalog: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--corpus" => corpus = args.next().ok_or("--corpus needs a directory")?.into(),
            "--every-client" => {
                catalog = Some(
                    args.next()
                        .ok_or("--every-client needs data/clients.toml")?
                        .into(),
                )
            }
            "--engines" => {
                let list = args
                    .next()
                    .ok_or("--engines needs a list like blink,gecko")?;
                engines = list
                    .split(',')
                    .map(|e| match e {
                        "blink" => Ok(Engine::Blink),
                        "gecko" => Ok(Engine::Gecko),
                        "webkit" => Ok(Engine::Webkit),
                        other => Err(format!("unknown engine {other}")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let mut templates: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .map_err(|e| format!("reading {}: {e}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    templates.sort();
    if templates.is_empty() {
        return Err(format!("no .html templates in {}", corpus.display()).into());
    }
    let docs: Vec<(PathBuf, String)> = templates
        .iter()
        .map(|p| Ok((p.canonicalize()?, std::fs::read_to_string(p)?)))
        .collect::<std::io::Result<_>>()?;
    let work_dir = std::env::temp_dir().join(format!("render-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)?;
    let work = WorkDir(work_dir);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    eprintln!(
        "{} templates x {} profiles, {cores} slots per engine",
        docs.len(),
        PROFILES.len()
    );

    let mut rows = Vec::new();
    for &engine in &engines {
        eprintln!("== {engine}");
        let mut row = Row {
            engine: engine.to_string(),
            ..Row::default()
        };
        bench_ours(engine, &docs, work.path(), cores, &mut row).await?;
        row.bare = match bare(engine, &docs, work.path()).await {
            Ok(s) => stats(s),
            Err(e) => {
                eprintln!("bare {engine} reference failed: {e}");
                None
            }
        };
        row.fresh = match fresh_browser(engine, &docs, work.path()).await {
            Ok(s) => stats(s),
            Err(e) => {
                eprintln!("fresh-browser {engine} reference failed: {e}");
                None
            }
        };
        row.one_shot = match fresh_process(engine, &docs, work.path()) {
            Ok(s) => stats(s),
            Err(e) => {
                eprintln!("one-shot {engine} reference failed: {e}");
                None
            }
        };
        rows.push(row);
    }
    print_table(&rows);
    if let Some(path) = catalog {
        every_client(&path, &engines, &docs, work.path()).await?;
    }
    Ok(())
}

/// Every template through every client profile of the catalog (its engine, viewport, scale,
/// mobile flag and colour scheme; the HTML as submitted, since the client transformation is
/// `emulate`'s and is measured by its own bench). Engines run side by side, each one shot at a
/// time, so a shot's time is its own and not a queue's.
async fn every_client(
    catalog_path: &Path,
    engines: &[Engine],
    docs: &[(PathBuf, String)],
    work: &Path,
) -> BenchResult<()> {
    let text = std::fs::read_to_string(catalog_path)
        .map_err(|e| format!("reading {}: {e}", catalog_path.display()))?;
    let catalog = domain::Catalog::parse(&text)?;
    let mut cfg = RenderConfig::new(work.join("every-client"));
    cfg.engines = engines.to_vec();
    let renderer = Arc::new(Renderer::start(cfg).await?);
    let docs = Arc::new(docs.to_vec());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for &engine in engines {
        let clients: Vec<domain::Client> = catalog
            .clients()
            .iter()
            .filter(|c| c.engine == engine)
            .cloned()
            .collect();
        let (renderer, docs) = (renderer.clone(), docs.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut errors = 0usize;
            for c in &clients {
                for (path, html) in docs.iter() {
                    let req = RenderRequest {
                        html: html.clone(),
                        engine,
                        viewport: c.viewport,
                        scale: c.scale,
                        mobile: c.mobile,
                        color_scheme: c.color_scheme,
                        block_images: false,
                    };
                    let t = Instant::now();
                    match renderer.render(req).await {
                        Ok(_) => samples.push(t.elapsed()),
                        Err(e) => {
                            errors += 1;
                            eprintln!("{engine} {} {}: {e}", c.id, path.display());
                        }
                    }
                }
            }
            (engine, clients.len(), samples, errors)
        }));
    }
    let mut rows = Vec::new();
    for t in tasks {
        rows.push(t.await?);
    }
    let wall = started.elapsed();
    let total: usize = rows.iter().map(|(_, _, s, _)| s.len()).sum();
    println!(
        "\nEvery client profile x {} templates: {total} screenshots in {:.0} s, {:.2} shots/s with the three engines side by side",
        docs.len(),
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );
    println!("\n| engine | profiles | shots | median ms | p95 ms | errors |");
    println!("|---|---|---|---|---|---|");
    for (engine, profiles, samples, errors) in rows {
        let n = samples.len();
        match stats(samples) {
            Some(s) => println!(
                "| {engine} | {profiles} | {n} | {:.0} | {:.0} | {errors} |",
                s.median_ms, s.p95_ms
            ),
            None => println!("| {engine} | {profiles} | 0 | n/a | n/a | {errors} |"),
        }
    }
    if let Ok(renderer) = Arc::try_unwrap(renderer) {
        renderer.shutdown().await;
    }
    Ok(())
}

/// Scratch space removed at the end of the run.
struct WorkDir(PathBuf);

impl WorkDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn bench_ours(
    engine: Engine,
    docs: &[(PathBuf, String)],
    work: &Path,
    slots: usize,
    row: &mut Row,
) -> BenchResult<()> {
    let mut cfg = RenderConfig::new(work.join(format!("ours-{engine}")));
    cfg.engines = vec![engine];
    cfg.slots_per_engine = slots;
    let renderer = Arc::new(Renderer::start(cfg).await?);
    let peak = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (renderer, peak, sampling) = (renderer.clone(), peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(renderer.engine_rss_bytes(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let request = |html: &str, p: &Profile| RenderRequest {
        html: html.to_string(),
        engine,
        viewport: Viewport {
            width: p.width,
            height: p.height,
        },
        scale: p.scale,
        mobile: p.mobile,
        color_scheme: ColorScheme::Light,
        block_images: false,
    };
    // Warm-up: one shot per profile.
    for p in &PROFILES {
        renderer.render(request(&docs[0].1, p)).await?;
    }
    for p in &PROFILES {
        let mut samples = Vec::new();
        for (path, html) in docs {
            let started = Instant::now();
            match renderer.render(request(html, p)).await {
                Ok(_) => {
                    let took = started.elapsed();
                    if took > Duration::from_secs(2) {
                        eprintln!("slow: {engine} {} {} took {took:?}", p.name, path.display());
                    }
                    samples.push(took);
                }
                Err(e) => {
                    row.errors += 1;
                    eprintln!("{engine} {} {}: {e}", p.name, path.display());
                }
            }
        }
        if let Some(s) = stats(samples) {
            eprintln!(
                "{engine} {}: median {:.0} ms p95 {:.0} ms",
                p.name, s.median_ms, s.p95_ms
            );
            row.ours.push((p.name.to_string(), s));
        }
    }
    // Throughput: every template at every profile at once; the pool keeps all slots busy.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in &PROFILES {
        for (_, html) in docs {
            let renderer = renderer.clone();
            let req = request(html, p);
            tasks.push(tokio::spawn(
                async move { renderer.render(req).await.is_ok() },
            ));
        }
    }
    let mut ok = 0usize;
    for task in tasks {
        if task.await.unwrap_or(false) {
            ok += 1;
        } else {
            row.errors += 1;
        }
    }
    row.throughput = ok as f64 / started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    row.peak_rss = peak.load(Ordering::Relaxed);
    if let Ok(renderer) = Arc::try_unwrap(renderer) {
        renderer.shutdown().await;
    }
    Ok(())
}

/// A browser started by the bench itself, killed on drop.
struct RawBrowser(std::process::Child);

impl Drop for RawBrowser {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program` and returns it with the text after `marker` on its stderr.
fn launch(program: &str, args: &[String], marker: &str) -> BenchResult<(RawBrowser, String)> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let browser = RawBrowser(child);
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = marker.to_string();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(pos) = line.find(&wanted) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(line[pos + wanted.len()..].trim().to_string());
                }
            }
        }
    });
    let found = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| format!("{program} did not print {marker:?}"))?;
    Ok((browser, found))
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The simplest client: one command at a time, events skipped unless `until_event` names one.
struct Raw {
    socket: Socket,
    next: u64,
}

impl Raw {
    async fn open(url: &str) -> BenchResult<Raw> {
        let config = WebSocketConfig::default()
            .max_message_size(Some(512 << 20))
            .max_frame_size(Some(512 << 20));
        let (socket, _) =
            tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
        Ok(Raw { socket, next: 1 })
    }

    async fn call(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> BenchResult<Value> {
        let id = self.next;
        self.next += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        self.socket
            .send(Message::Text(message.to_string().into()))
            .await?;
        loop {
            let reply = self.read().await?;
            if reply.get("id").and_then(Value::as_u64) == Some(id) {
                if reply.get("error").is_some() && reply.get("type").is_none()
                    || reply.get("type").and_then(Value::as_str) == Some("error")
                {
                    return Err(format!("{method}: {reply}").into());
                }
                return Ok(reply.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    }

    async fn until_event(&mut self, method: &str) -> BenchResult<()> {
        loop {
            let message = self.read().await?;
            if message.get("method").and_then(Value::as_str) == Some(method) {
                return Ok(());
            }
        }
    }

    async fn read(&mut self) -> BenchResult<Value> {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(t.as_str())?),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => return Err("websocket closed".into()),
            }
        }
    }
}

/// One engine driven over its own protocol with nothing of ours around it, at 600@1.
enum BareSession {
    Blink {
        _browser: RawBrowser,
        raw: Raw,
        session: String,
    },
    Gecko {
        _browser: RawBrowser,
        raw: Raw,
        ctx: String,
    },
    Webkit(webkit::WebkitEngine),
}

impl BareSession {
    /// Starts the engine with a profile directory of its own (`tag` keeps them apart).
    async fn open(engine: Engine, work: &Path, tag: &str) -> BenchResult<BareSession> {
        let p = &PROFILES[0];
        match engine {
            Engine::Blink => {
                let profile = work.join(format!("bare-chromium-{tag}"));
                let args: Vec<String> = [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-dev-shm-usage",
                    "--hide-scrollbars",
                    "--remote-debugging-port=0",
                ]
                .iter()
                .map(|s| s.to_string())
                .chain([
                    format!("--user-data-dir={}", profile.display()),
                    "about:blank".into(),
                ])
                .collect();
                let (browser, ws) = launch(
                    "/usr/lib/chromium/chromium",
                    &args,
                    "DevTools listening on ",
                )?;
                let mut raw = Raw::open(&ws).await?;
                let target = raw
                    .call("Target.createTarget", json!({"url": "about:blank"}), None)
                    .await?;
                let attached = raw
                    .call(
                        "Target.attachToTarget",
                        json!({"targetId": target["targetId"], "flatten": true}),
                        None,
                    )
                    .await?;
                let session = attached["sessionId"]
                    .as_str()
                    .ok_or("no session")?
                    .to_string();
                let s = Some(session.as_str());
                raw.call("Page.enable", json!({}), s).await?;
                raw.call(
                    "Emulation.setDeviceMetricsOverride",
                    json!({"width": p.width, "height": p.height, "deviceScaleFactor": p.scale, "mobile": p.mobile}),
                    s,
                )
                .await?;
                Ok(BareSession::Blink {
                    _browser: browser,
                    raw,
                    session,
                })
            }
            Engine::Gecko => {
                let profile = work.join(format!("bare-firefox-{tag}"));
                std::fs::create_dir_all(&profile)?;
                std::fs::write(
                    profile.join("user.js"),
                    "user_pref(\"ui.useOverlayScrollbars\", 1);\n",
                )?;
                let args: Vec<String> = vec![
                    "--headless".into(),
                    "--no-remote".into(),
                    "--profile".into(),
                    profile.display().to_string(),
                    "--remote-debugging-port=0".into(),
                    "about:blank".into(),
                ];
                let (browser, ws) = launch("firefox-esr", &args, "WebDriver BiDi listening on ")?;
                let mut raw = Raw::open(&format!("{ws}/session")).await?;
                raw.call("session.new", json!({"capabilities": {}}), None)
                    .await?;
                let tree = raw.call("browsingContext.getTree", json!({}), None).await?;
                let ctx = tree["contexts"][0]["context"]
                    .as_str()
                    .ok_or("no context")?
                    .to_string();
                raw.call(
                    "browsingContext.setViewport",
                    json!({"context": ctx, "viewport": {"width": p.width, "height": p.height}, "devicePixelRatio": p.scale}),
                    None,
                )
                .await?;
                Ok(BareSession::Gecko {
                    _browser: browser,
                    raw,
                    ctx,
                })
            }
            Engine::Webkit => Ok(BareSession::Webkit(
                webkit::WebkitEngine::start(webkit::WebkitConfig::new(
                    work.join(format!("bare-webkit-{tag}")),
                ))
                .await?,
            )),
        }
    }

    /// A whole-document PNG of one template.
    async fn shot(&mut self, path: &Path, html: &str) -> BenchResult<()> {
        let p = &PROFILES[0];
        match self {
            BareSession::Blink { raw, session, .. } => {
                let s = Some(session.as_str());
                raw.call(
                    "Page.navigate",
                    json!({"url": format!("file://{}", path.display())}),
                    s,
                )
                .await?;
                raw.until_event("Page.loadEventFired").await?;
                let metrics = raw.call("Page.getLayoutMetrics", json!({}), s).await?;
                let h = metrics["cssContentSize"]["height"]
                    .as_f64()
                    .unwrap_or(800.0)
                    .ceil();
                raw.call(
                    "Page.captureScreenshot",
                    json!({"format": "png", "captureBeyondViewport": true,
                           "clip": {"x": 0, "y": 0, "width": p.width, "height": h, "scale": 1}}),
                    s,
                )
                .await?;
            }
            BareSession::Gecko { raw, ctx, .. } => {
                raw.call(
                    "browsingContext.navigate",
                    json!({"context": ctx, "url": format!("file://{}", path.display()), "wait": "complete"}),
                    None,
                )
                .await?;
                raw.call(
                    "browsingContext.captureScreenshot",
                    json!({"context": ctx, "origin": "document"}),
                    None,
                )
                .await?;
            }
            BareSession::Webkit(engine) => {
                engine
                    .capture(&webkit::CaptureRequest {
                        html: html.to_string(),
                        document_url: "http://mailproof.invalid/bench".into(),
                        width: p.width,
                        height: p.height,
                        scale: p.scale.ceil() as u32,
                        dark: false,
                        block_images: false,
                    })
                    .await?;
            }
        }
        Ok(())
    }

    /// Stops the engine and waits for it to be gone.
    async fn close(self) {
        match self {
            // Dropping the browser kills it and reaps the process.
            BareSession::Blink { .. } | BareSession::Gecko { .. } => {}
            BareSession::Webkit(engine) => engine.shutdown().await,
        }
    }
}

/// Reference (a): the engine's bare protocol, warm (the first shot is the warm-up).
async fn bare(
    engine: Engine,
    docs: &[(PathBuf, String)],
    work: &Path,
) -> BenchResult<Vec<Duration>> {
    let mut session = BareSession::open(engine, work, "warm").await?;
    let mut samples = Vec::new();
    for (i, (path, html)) in docs.iter().enumerate() {
        let started = Instant::now();
        session.shot(path, html).await?;
        if i > 0 {
            samples.push(started.elapsed());
        }
    }
    session.close().await;
    Ok(samples)
}

/// Reference (b): a fresh browser per screenshot doing the same work as (a): start the engine,
/// connect, take the whole-document shot, stop it. What a service without a warm pool would pay.
async fn fresh_browser(
    engine: Engine,
    docs: &[(PathBuf, String)],
    work: &Path,
) -> BenchResult<Vec<Duration>> {
    let mut samples = Vec::new();
    for (i, (path, html)) in docs.iter().take(FRESH_PROCESS_SHOTS).enumerate() {
        let started = Instant::now();
        let mut session = BareSession::open(engine, work, &format!("fresh-{i}")).await?;
        session.shot(path, html).await?;
        session.close().await;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// Reference (c): the browser's own one-shot screenshot command, a fresh process per shot (600
/// wide, 1x; Chromium's is viewport-only). WebKitGTK has none.
fn fresh_process(
    engine: Engine,
    docs: &[(PathBuf, String)],
    work: &Path,
) -> BenchResult<Vec<Duration>> {
    let mut samples = Vec::new();
    for (i, (path, _)) in docs.iter().take(FRESH_PROCESS_SHOTS).enumerate() {
        let out = work.join(format!("fresh-{engine}-{i}.png"));
        let url = format!("file://{}", path.display());
        let mut command = match engine {
            Engine::Blink => {
                let mut c = Command::new("/usr/lib/chromium/chromium");
                c.args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    "--window-size=600,800",
                ])
                .arg(format!(
                    "--user-data-dir={}",
                    work.join(format!("fresh-chromium-{i}")).display()
                ))
                .arg(format!("--screenshot={}", out.display()))
                .arg(&url);
                c
            }
            Engine::Gecko => {
                let profile = work.join(format!("fresh-firefox-{i}"));
                std::fs::create_dir_all(&profile)?;
                let mut c = Command::new("firefox-esr");
                c.args(["--headless", "--no-remote", "--profile"])
                    .arg(&profile)
                    .arg("--screenshot")
                    .arg(&out)
                    .arg("--window-size=600")
                    .arg(&url);
                c
            }
            // WebKitGTK has no one-shot screenshot command.
            Engine::Webkit => return Ok(Vec::new()),
        };
        let started = Instant::now();
        let status = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let elapsed = started.elapsed();
        if !status.success() || !out.is_file() {
            return Err(format!("{engine} one-shot screenshot failed ({status})").into());
        }
        samples.push(elapsed);
    }
    Ok(samples)
}

fn print_table(rows: &[Row]) {
    let fmt = |s: Option<&Stats>| match s {
        Some(s) => format!("{:.0} / {:.0} (n={})", s.median_ms, s.p95_ms, s.n),
        None => "n/a".to_string(),
    };
    let ratio = |a: Option<&Stats>, b: Option<&Stats>| match (a, b) {
        (Some(a), Some(b)) if b.median_ms > 0.0 => format!("{:.2}x", a.median_ms / b.median_ms),
        _ => "n/a".to_string(),
    };
    println!();
    println!(
        "| engine | ours 600@1 median / p95 ms | ours 390@3 mobile median / p95 ms | throughput shots/s (all slots) | peak RSS engine tree | errors | (a) bare protocol 600@1 median / p95 ms | (b) fresh browser per shot, same protocol, median / p95 ms | (c) one-shot CLI per shot median / p95 ms | ours / (a) | (b) / ours | (c) / ours |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let ours = |name: &str| row.ours.iter().find(|(n, _)| n == name).map(|(_, s)| s);
        println!(
            "| {} | {} | {} | {:.2} | {:.0} MiB | {} | {} | {} | {} | {} | {} | {} |",
            row.engine,
            fmt(ours("600@1")),
            fmt(ours("390@3")),
            row.throughput,
            row.peak_rss as f64 / (1024.0 * 1024.0),
            row.errors,
            fmt(row.bare.as_ref()),
            fmt(row.fresh.as_ref()),
            fmt(row.one_shot.as_ref()),
            ratio(ours("600@1"), row.bare.as_ref()),
            ratio(row.fresh.as_ref(), ours("600@1")),
            ratio(row.one_shot.as_ref(), ours("600@1")),
        );
    }
}
