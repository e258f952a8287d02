//! Measures, for every client profile of the catalog, which analytics signals of the tracking
//! code reach the service, by drawing the code as a screenshot does (the profile's emulation,
//! then its engine through the render proxy) and watching which hit URLs the engine requests.
//!
//! Usage:
//! - `analytics-matrix write <data dir>`: measures every profile, writes
//!   `<data dir>/analytics-matrix.toml`.
//! - `analytics-matrix check <data dir> <client id>...`: re-measures those profiles and fails
//!   when a signal differs from the file.
//!
//! Per profile: (1) images as the profile shows them by default (blocked where data/behaviours.toml
//! says `remote-images-blocked-by-default`) → open counted or blocked;
//! (2) images shown, the open image held open 3.5 s by the recorder (so the engine keeps the page
//! loading, as a reader keeps it open) → open, and reading time: the animation's `r2.gif` (at
//! 2 s), or the held-open image `h.gif` requested (the service times that one itself);
//! (3) dark mode: the profile's dark twin in the catalog (the same client and platform, same viewport first,
//! `color_scheme = dark`: it carries the client's dark-mode behaviours), or the profile itself
//! with a dark colour scheme when it has none → dark hit for any email (`always`), only for one
//! whose CSS declares `color-scheme: light dark` (`when-opted-in`), or `never`;
//! (4) the email inside the forward wrapper the profile's family adds → forward hit;
//! (5) print: the screenshot path has no print media, so the profile's emulated document is
//! loaded in Chromium and its stylesheets asked whether a `print` rule gives the beacon element
//! the print image.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use analytics::matrix::{ClientSignals, DarkSignal, Matrix, OpenSignal, MATRIX_FILE};
use analytics::{guid_from, tracking_code, HitKind};
use anyhow::{anyhow, bail, Context};
use axum::extract::{Path as UrlPath, State};
use axum::response::IntoResponse;
use axum::routing::get;
use domain::{Catalog, Client, ColorScheme, Engine, Variant};
use emulate::{Implementation, RuleBook};
use render::{RenderConfig, RenderRequest, Renderer};

/// How long the recorder holds the open image in the reading-time condition: past the first
/// reading step (2 s), well inside the render's resource wait.
const HOLD: Duration = Duration::from_millis(3500);

const METHOD: &str = "analytics-matrix (crates/jobs/src/bin/analytics-matrix.rs): each profile's \
emulate transform of an email carrying the tracking code, drawn by the profile's engine through the \
render proxy as a screenshot is, a loopback recorder noting the hit URLs requested. open: images as the \
profile shows them by default (blocked where data/behaviours.toml says remote-images-blocked-by-default), then shown. read: images shown, the open image held 3.5 s; r2.gif \
fetched (the animation) or h.gif requested (the held-open image the service times). dark: the profile's dark twin (the same client and platform, same viewport first), else the profile with a dark colour scheme, through its emulation, for a plain email and for one whose CSS declares color-scheme: light dark. forward: the email \
inside the forward wrapper of the profile's family. print: the emulated document's stylesheets in \
Chromium (no print media on the screenshot path): a print rule giving the beacon the print image. \
Proxy facts (Gmail, Yahoo, Apple MPP) are not measured: analytics::matrix::proxy_fact.";

#[derive(Default)]
struct Recorded {
    /// guid → files requested.
    hits: BTreeMap<String, BTreeSet<String>>,
    /// guids whose open image is held.
    hold: BTreeSet<String>,
}

type Recorder = Arc<Mutex<Recorded>>;

const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21,
    0xf9, 4, 1, 0, 0, 0, 0, 0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3b,
];

async fn hit(
    State(rec): State<Recorder>,
    UrlPath((guid, file)): UrlPath<(String, String)>,
) -> impl IntoResponse {
    let held = {
        let Ok(mut r) = rec.lock() else {
            return ([("content-type", "image/gif")], GIF);
        };
        r.hits.entry(guid.clone()).or_default().insert(file.clone());
        file == HitKind::Open.file() && r.hold.contains(&guid)
    };
    if held {
        tokio::time::sleep(HOLD).await;
    }
    ([("content-type", "image/gif")], GIF)
}

/// The wrapper a client of `family` puts around a message it forwards, with `email` inside;
/// the class names are those the tracking code's forward rule was written for (Litmus's code,
/// analytics.md §3.1), and a `blockquote` for every other client.
fn forwarded(family: &str, email: &str) -> String {
    let header = "<b>From:</b> Sender &lt;news@example.org&gt;<br><b>Subject:</b> Acme news";
    match family {
        "outlook" => format!(
            "<div class=\"OutlookMessageHeader\">{header}</div><div>{email}</div>"
        ),
        "thunderbird" => format!(
            "<div class=\"moz-forward-container\"><table class=\"moz-email-headers-table\"><tr><td>{header}</td></tr></table>{email}</div>"
        ),
        _ => format!("<div>{header}</div><blockquote type=\"cite\">{email}</blockquote>"),
    }
}

/// What a reader sees above the tracking code.
const CONTENT: &str = "<h1>Acme news</h1><p>Hello, this month the team shipped the reports.</p>";

fn document(body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Acme</title></head>\
         <body>{body}</body></html>"
    )
}

fn email(code: &str) -> String {
    document(&format!("{CONTENT}{code}"))
}

/// An email that opts in to dark mode the way Apple Mail asks: its CSS declares the schemes.
fn opted_in_email(code: &str) -> String {
    document(&format!(
        "<style>:root {{ color-scheme: light dark; supported-color-schemes: light dark; }}</style>{CONTENT}{code}"
    ))
}

/// Asked of the emulated document in Chromium: does a `print` media rule give an element of the
/// document a background image that is the print beacon?
const PRINT_PROBE: &str = r#"(() => {
  const found = [];
  const walk = (rules, inPrint) => {
    for (const r of rules) {
      if (r.media && r.cssRules) { walk(r.cssRules, inPrint || /\bprint\b/.test(r.media.mediaText)); continue; }
      if (inPrint && r.selectorText && /p\.gif/.test(r.style.backgroundImage || '')) {
        try { if (document.querySelector(r.selectorText)) found.push(r.selectorText); } catch (e) {}
      }
    }
  };
  for (const s of document.styleSheets) { try { walk(s.cssRules, false); } catch (e) {} }
  return found.length > 0;
})()"#;

struct Measurer {
    renderer: Renderer,
    rules: RuleBook,
    recorder: Recorder,
    base: String,
    counter: Mutex<u32>,
}

impl Measurer {
    fn guid(&self) -> String {
        let mut n = self.counter.lock().map(|g| *g).unwrap_or(0);
        n += 1;
        if let Ok(mut g) = self.counter.lock() {
            *g = n;
        }
        let mut bytes = [0u8; 16];
        bytes[12..].copy_from_slice(&n.to_be_bytes());
        guid_from(bytes)
    }

    fn request(
        &self,
        client: &Client,
        html: &str,
        block_images: bool,
    ) -> anyhow::Result<RenderRequest> {
        let t = emulate::transform(html, client, &self.rules)
            .with_context(|| format!("emulating {}", client.id))?;
        let mut req = jobs::render_request(client, Variant::Default, t);
        req.block_images = block_images;
        Ok(req)
    }

    /// Draws `html` as `client` shows it and returns the files the engine requested.
    async fn draw(
        &self,
        client: &Client,
        html_of: impl Fn(&str) -> String,
        block_images: bool,
        hold: bool,
    ) -> anyhow::Result<BTreeSet<String>> {
        let guid = self.guid();
        if hold {
            if let Ok(mut r) = self.recorder.lock() {
                r.hold.insert(guid.clone());
            }
        }
        let html = html_of(&tracking_code(&self.base, &guid, None));
        let req = self.request(client, &html, block_images)?;
        self.renderer
            .render(req)
            .await
            .with_context(|| format!("drawing {} in {}", client.id, client.engine))?;
        // A beacon requested just as the shot was taken may still be on its way.
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(self
            .recorder
            .lock()
            .map_err(|_| anyhow!("recorder lock"))?
            .hits
            .remove(&guid)
            .unwrap_or_default())
    }

    async fn measure(&self, catalog: &Catalog, client: &Client) -> anyhow::Result<ClientSignals> {
        let open = HitKind::Open.file();
        // The client's documented default (data/behaviours.toml), not the catalog's
        // `image_blocking`, which says only that a no_images screenshot exists.
        let blocks_by_default = self
            .rules
            .behaviours()
            .of(client)
            .has(Implementation::RemoteImagesBlockedByDefault);
        let by_default = self.draw(client, email, blocks_by_default, false).await?;
        let shown = self.draw(client, email, false, true).await?;
        if shown.contains(&HitKind::Print.file()) || shown.contains(&HitKind::Forward.file()) {
            bail!(
                "{}: the print or forward beacon fired on a plain screen render: {shown:?}",
                client.id
            );
        }
        let dark_client = dark_twin(catalog, client);
        let dark = if self
            .draw(&dark_client, email, false, false)
            .await?
            .contains(&HitKind::Dark.file())
        {
            DarkSignal::Always
        } else if self
            .draw(&dark_client, opted_in_email, false, false)
            .await?
            .contains(&HitKind::Dark.file())
        {
            DarkSignal::WhenOptedIn
        } else {
            DarkSignal::Never
        };
        let family = client.family.clone();
        let forward = self
            .draw(
                client,
                |code| document(&forwarded(&family, &format!("{CONTENT}{code}"))),
                false,
                false,
            )
            .await?;
        let print = {
            let guid = self.guid();
            let req = self.request(
                client,
                &email(&tracking_code(&self.base, &guid, None)),
                false,
            )?;
            let req = RenderRequest {
                engine: Engine::Blink,
                ..req
            };
            let answer = self
                .renderer
                .evaluate(req, PRINT_PROBE)
                .await
                .with_context(|| format!("asking Chromium about {}'s print rule", client.id))?;
            answer.trim() == "true"
        };
        Ok(ClientSignals {
            id: client.id.clone(),
            engine: client.engine.to_string(),
            open: match (by_default.contains(&open), shown.contains(&open)) {
                (true, _) => OpenSignal::Counted,
                (false, true) => OpenSignal::BlockedByDefault,
                (false, false) => OpenSignal::Never,
            },
            // The animation's first step, or the held-open image the service times itself (the
            // fallback where animations do not run).
            read: shown.contains(&HitKind::Read(2).file()) || shown.contains(&HitKind::Hold.file()),
            print,
            forward: forward.contains(&HitKind::Forward.file()),
            dark,
            measured_at: chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        })
    }
}

async fn start(data: &Path, engines: Vec<Engine>) -> anyhow::Result<(Measurer, tempfile::TempDir)> {
    let rules = RuleBook::load(&data.join("rules")).context("loading the rules")?;
    let recorder: Recorder = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let app = axum::Router::new()
        .route("/t/{guid}/{file}", get(hit))
        .with_state(recorder.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("analytics-matrix: recorder stopped: {e}");
        }
    });
    let work = tempfile::tempdir().context("scratch directory")?;
    let mut cfg = RenderConfig::new(work.path().to_path_buf());
    cfg.engines = engines;
    cfg.slots_per_engine = 1;
    cfg.net_policy.allow = vec!["127.0.0.1/32".parse()?];
    let renderer = Renderer::start(cfg).await.context("starting the engines")?;
    Ok((
        Measurer {
            renderer,
            rules,
            recorder,
            base: format!("http://127.0.0.1:{port}/t"),
            counter: Mutex::new(0),
        },
        work,
    ))
}

/// The profile a reader of `client` in dark mode sees: `client` itself when it is dark, else its
/// dark twin in the catalog (the same client on the same platform, the same viewport where there
/// is one; it carries the dark-mode behaviours), else `client` with a dark colour scheme.
fn dark_twin(catalog: &Catalog, client: &Client) -> Client {
    if client.color_scheme == ColorScheme::Dark {
        return client.clone();
    }
    let dark = |c: &&Client| {
        c.color_scheme == ColorScheme::Dark
            && c.client == client.client
            && c.family == client.family
            && c.platform == client.platform
    };
    // The twin of the same screen first; else one of the same client on the same platform (an
    // iPhone SE reads dark mode as the iPhone 15 does).
    let twins = catalog.clients().iter().filter(dark);
    twins
        .clone()
        .find(|c| c.viewport == client.viewport)
        .or_else(|| twins.clone().next())
        .cloned()
        .unwrap_or_else(|| Client {
            color_scheme: ColorScheme::Dark,
            ..client.clone()
        })
}

fn load_catalog(data: &Path) -> anyhow::Result<Catalog> {
    let path = data.join("clients.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Catalog::parse(&text)?)
}

async fn run(args: &[String]) -> anyhow::Result<()> {
    let (mode, data, ids) = match args {
        [mode, data, ids @ ..] => (mode.as_str(), PathBuf::from(data), ids),
        _ => bail!("usage: analytics-matrix write <data dir> | check <data dir> <client id>..."),
    };
    let catalog = load_catalog(&data)?;
    let clients: Vec<&Client> = match mode {
        "write" => catalog.clients().iter().collect(),
        "check" if !ids.is_empty() => ids
            .iter()
            .map(|id| {
                catalog
                    .get(id)
                    .ok_or_else(|| anyhow!("no client {id} in the catalog"))
            })
            .collect::<anyhow::Result<_>>()?,
        _ => bail!("usage: analytics-matrix write <data dir> | check <data dir> <client id>..."),
    };
    let mut engines: Vec<Engine> = clients.iter().map(|c| c.engine).collect();
    // The print probe runs in Chromium whatever the profile's engine.
    engines.push(Engine::Blink);
    engines.sort_by_key(|e| e.to_string());
    engines.dedup();
    let (m, _work) = start(&data, engines).await?;
    let mut rows = Vec::new();
    for c in &clients {
        let row = m.measure(&catalog, c).await?;
        eprintln!(
            "{:28} {:6} open={:?} read={} print={} forward={} dark={}",
            row.id,
            row.engine,
            row.open,
            row.read,
            row.print,
            row.forward,
            row.dark.as_str()
        );
        rows.push(row);
    }
    let path = data.join(MATRIX_FILE);
    if mode == "write" {
        let matrix = Matrix {
            method: METHOD.into(),
            clients: rows,
        };
        matrix.check_ids(catalog.clients().iter().map(|c| c.id.as_str()))?;
        let text = format!(
            "# Written by `analytics-matrix write data` (crates/jobs/src/bin/analytics-matrix.rs);\n\
             # read and checked against clients.toml at start-up. Re-run it when a rule set or engine changes.\n{}",
            matrix.to_toml()?
        );
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!(
            "wrote {} ({} profiles)",
            path.display(),
            matrix.clients.len()
        );
        return Ok(());
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let stored = Matrix::parse(&text)?;
    let mut differ = Vec::new();
    for row in &rows {
        match stored.get(&row.id) {
            Some(s) if s.same_signals(row) => {
                println!("{}: same as measured at {}", row.id, s.measured_at)
            }
            Some(s) => differ.push(format!("{}: file {s:?}, now {row:?}", row.id)),
            None => differ.push(format!("{}: no row in the file", row.id)),
        }
    }
    if !differ.is_empty() {
        bail!(
            "the matrix no longer matches the engines:\n{}",
            differ.join("\n")
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("analytics-matrix: {e:#}");
            ExitCode::FAILURE
        }
    }
}
