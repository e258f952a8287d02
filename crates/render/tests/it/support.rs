//! Shared renderer, a counting image server (the test kit's HTTP stub) and pixel helpers.

use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use content::netpolicy::NetPolicy;
use domain::catalog::Viewport;
use domain::{ColorScheme, Engine};
use image::{Rgba, RgbaImage};
use render::{RenderConfig, RenderRequest, Rendered, Renderer};
use testkit::http::{HttpStub, Request, Response};

pub const ENGINES: [Engine; 3] = [Engine::Blink, Engine::Gecko, Engine::Webkit];

/// How long pages wait for slow images in these tests.
pub const RESOURCE_WAIT: Duration = Duration::from_secs(2);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("test runtime")
    })
}

/// Runs a test body on the shared runtime.
pub fn run<F: Future<Output = ()>>(body: F) {
    runtime().block_on(body)
}

/// Log lines into the test's output (`RUST_LOG` chooses; render and webkit at info otherwise).
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "render=info,webkit=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// The renderer every test shares: all engines, two slots each, loopback 127.0.0.1 allow-listed
/// (127.0.0.2 stays refused), a short resource wait.
pub async fn renderer() -> Arc<Renderer> {
    static SHARED: tokio::sync::OnceCell<Arc<Renderer>> = tokio::sync::OnceCell::const_new();
    SHARED
        .get_or_init(|| async {
            logs();
            let dir = tempfile::tempdir().expect("temp dir");
            let mut cfg = config(dir.keep(), &ENGINES);
            cfg.render_timeout = Duration::from_secs(30);
            Arc::new(start(cfg).await)
        })
        .await
        .clone()
}

/// The shared renderer's settings for `engines`, in `work_dir`: two slots each, loopback
/// 127.0.0.1 allow-listed, the tests' resource wait.
pub fn config(work_dir: std::path::PathBuf, engines: &[Engine]) -> RenderConfig {
    let mut cfg = RenderConfig::new(work_dir);
    cfg.slots_per_engine = 2;
    cfg.engines = engines.to_vec();
    cfg.resource_wait = RESOURCE_WAIT;
    cfg.net_policy = NetPolicy {
        allow: vec!["127.0.0.1/32".parse().expect("net")],
        timeout: Duration::from_secs(5),
        ..NetPolicy::default()
    };
    cfg
}

/// Starts a renderer of its own, failing with what to install when an engine is missing.
pub async fn start(cfg: RenderConfig) -> Renderer {
    Renderer::start(cfg).await.unwrap_or_else(|e| {
        panic!("renderer did not start: {e} (install the browsers with scripts/setup.sh; the WebKit helper is built by `cargo build -p webkit`)")
    })
}

/// A request with the usual test defaults.
pub fn request(engine: Engine, html: String, width: u32, scale: f32) -> RenderRequest {
    RenderRequest {
        html,
        engine,
        viewport: Viewport { width, height: 800 },
        scale,
        mobile: scale > 1.0,
        color_scheme: ColorScheme::Light,
        block_images: false,
    }
}

pub async fn render(req: RenderRequest) -> Rendered {
    let engine = req.engine;
    renderer()
        .await
        .render(req)
        .await
        .unwrap_or_else(|e| panic!("{engine} render failed: {e}"))
}

/// What the image server does with a request.
#[derive(Clone, Copy, PartialEq)]
pub enum Behaviour {
    /// Answers with a solid red 200x200 PNG.
    RedPng,
    /// Accepts the connection and never answers.
    Hang,
    /// Answers paths containing `/img-` with the red PNG and every other path with a red HTML
    /// page (what a navigation to it would show).
    Trap,
}

/// A loopback HTTP server counting requests per path (the test kit's stub).
pub struct ImageServer {
    stub: HttpStub,
}

impl ImageServer {
    pub async fn start(ip: &str, behaviour: Behaviour) -> ImageServer {
        let ip: IpAddr = ip.parse().expect("a loopback address");
        let png: Arc<[u8]> = red_png().into();
        let stub = HttpStub::start(ip, move |r: Request| {
            let png = png.clone();
            async move {
                if behaviour == Behaviour::Hang {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
                let response = if behaviour == Behaviour::Trap && !r.path.contains("/img-") {
                    Response::ok(
                        "text/html",
                        b"<body style=\"background:#ff0000\">trap</body>".to_vec(),
                    )
                } else {
                    Response::ok("image/png", png.to_vec())
                };
                response.header("Cache-Control", "max-age=3600")
            }
        })
        .await;
        ImageServer { stub }
    }

    pub fn url(&self, path: &str) -> String {
        self.stub.url(path)
    }

    pub fn hits(&self, path: &str) -> u64 {
        self.stub.hits(path) as u64
    }

    /// Every path requested so far, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.stub.requests().into_iter().map(|r| r.path).collect();
        paths.sort();
        paths.dedup();
        paths
    }

    pub fn total(&self) -> u64 {
        self.stub.requests().len() as u64
    }
}

pub fn red_png() -> Vec<u8> {
    let img = RgbaImage::from_pixel(200, 200, Rgba([255, 0, 0, 255]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("png");
    out.into_inner()
}

/// A page with a 100 px colour bar (blue, green in dark mode) over a 200x200 image at y=100.
pub fn page(image_url: &str) -> String {
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body {{ margin: 0; background: #ffffff; font-family: Arial, sans-serif; }}
  .bar {{ height: 100px; background: #0000ff; }}
  @media (prefers-color-scheme: dark) {{ body {{ background: #000000; }} .bar {{ background: #00ff00; }} }}
</style></head>
<body><div class="bar"></div><img src="{image_url}" width="200" height="200" alt="" style="display:block">
<p style="height:600px">Hello from mailproof</p></body></html>"#
    )
}

/// The pixel at CSS coordinates (x, y) of a screenshot taken at `scale`.
pub fn pixel(shot: &Rendered, x: u32, y: u32, scale: f32) -> [u8; 4] {
    let img = image::load_from_memory(&shot.png)
        .expect("screenshot is a PNG")
        .to_rgba8();
    let (px, py) = ((x as f32 * scale) as u32, (y as f32 * scale) as u32);
    img.get_pixel(px, py).0
}

pub fn is_red(p: [u8; 4]) -> bool {
    p[0] > 200 && p[1] < 60 && p[2] < 60
}

/// The value of the process-wide counter `series` (name and labels, as `/metrics` writes them:
/// `mailproof_engine_restarts_total{engine="webkit"}`); 0 before it was first counted.
pub fn counter(series: &str) -> u64 {
    let text = telemetry::encode(telemetry::global(), &[], 0).expect("metrics encode");
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a counter"))
}

/// How many times the pool has restarted `engine` in this test process.
/// The restart counter is process-wide: tests that count restarts, or cause them, take turns
/// ([`restart_turn`]), so that each sees only its own.
static RESTART_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test's turn among those that count or cause engine restarts; held until dropped.
pub fn restart_turn() -> std::sync::MutexGuard<'static, ()> {
    RESTART_TESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn restarts(engine: Engine) -> u64 {
    counter(&format!(
        "mailproof_engine_restarts_total{{engine=\"{engine}\"}}"
    ))
}

/// How many pages (tabs, WebKit helpers) the pool has replaced alone for `engine`.
pub fn page_replacements(engine: Engine) -> u64 {
    counter(&format!(
        "mailproof_engine_page_replacements_total{{engine=\"{engine}\"}}"
    ))
}

/// A path nobody else uses, so request counts belong to one test. It has no file extension, so
/// engines must recognise images by how they are requested, not by name.
pub fn unique_path(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("/{name}-{}", N.fetch_add(1, Ordering::SeqCst))
}
