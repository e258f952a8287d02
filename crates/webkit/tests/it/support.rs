//! Shared fixtures: one runtime, one warm engine, and a loopback forward proxy that serves images.
//!
//! The engine and its helpers' pipes belong to one tokio runtime, so every test drives its async
//! code on this shared runtime instead of a per-test one from `#[tokio::test]`.

use std::io::Cursor;
use std::net::Ipv4Addr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use testkit::http::{HttpStub, Response};
use webkit::{Capture, CaptureRequest, WebkitConfig, WebkitEngine};

/// The colour of every image the proxy serves.
pub const IMAGE_RGB: [u8; 3] = [220, 20, 60];

/// How long the proxy holds back a path starting with `/slow`.
pub const SLOW_RESPONSE: Duration = Duration::from_secs(60);

/// The resource wait of the shared engine; short so the slow-image test stays quick.
pub const RESOURCE_WAIT: Duration = Duration::from_secs(2);

pub struct Fixture {
    pub engine: WebkitEngine,
    pub proxy: ImageProxy,
    _work_dir: tempfile::TempDir,
}

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("test runtime starts")
    })
}

/// The engine shared by every test that does not kill processes.
pub fn shared() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        runtime().block_on(async {
            let proxy = ImageProxy::start().await;
            let (engine, work_dir) = start_engine(Some(&proxy), Duration::from_secs(30)).await;
            Fixture {
                engine,
                proxy,
                _work_dir: work_dir,
            }
        })
    })
}

/// A fresh engine of its own, for tests that kill its processes.
pub async fn start_engine(
    proxy: Option<&ImageProxy>,
    capture_timeout: Duration,
) -> (WebkitEngine, tempfile::TempDir) {
    let work_dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = WebkitConfig::new(work_dir.path().to_path_buf());
    cfg.proxy = proxy.map(|p| format!("http://{}", p.addr));
    cfg.resource_wait = RESOURCE_WAIT;
    cfg.capture_timeout = capture_timeout;
    cfg.helper_path = Some(env!("CARGO_BIN_EXE_mailproof-webkit-helper").into());
    let engine = WebkitEngine::start(cfg).await.unwrap_or_else(|e| {
        panic!(
            "the WebKit engine must start (install Xvfb and WebKitGTK with scripts/setup.sh): {e}"
        )
    });
    (engine, work_dir)
}

/// A request under an address of its own, as `render` gives each document.
pub fn request(html: &str, width: u32, scale: u32) -> CaptureRequest {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    CaptureRequest {
        html: html.to_owned(),
        document_url: format!("http://mailproof.invalid/document/{n}"),
        width,
        height: 800,
        scale,
        dark: false,
        block_images: false,
    }
}

pub fn decode(capture: &Capture) -> image::RgbaImage {
    let image = image::load_from_memory(&capture.png).expect("the capture is a decodable PNG");
    assert_eq!(
        (image.width(), image.height()),
        (capture.width_px, capture.height_px)
    );
    image.to_rgba8()
}

pub fn rgb_at(image: &image::RgbaImage, x: u32, y: u32) -> [u8; 3] {
    let p = image.get_pixel(x, y).0;
    [p[0], p[1], p[2]]
}

/// A forward proxy on 127.0.0.1 that answers every GET with a solid-colour PNG itself, counting
/// requests by path. Because the engine is configured with it as proxy, an image URL on a closed
/// loopback port still loads: proof that requests, loopback ones too, go through the proxy.
#[derive(Clone)]
pub struct ImageProxy {
    pub addr: std::net::SocketAddr,
    stub: HttpStub,
}

impl ImageProxy {
    pub async fn start() -> ImageProxy {
        let pngs = Arc::new((solid_png(40), solid_png(2400)));
        let stub = HttpStub::start(Ipv4Addr::LOCALHOST.into(), move |request| {
            let pngs = pngs.clone();
            async move {
                if request.path.starts_with("/slow") {
                    tokio::time::sleep(SLOW_RESPONSE).await;
                }
                // Paths starting with /large get a 2400x2400 image, big enough for WebKit to
                // decode it asynchronously (which once left large images out of WebDriver
                // screenshots).
                let png = if request.path.starts_with("/large") {
                    &pngs.1
                } else {
                    &pngs.0
                };
                Response::ok("image/png", png.clone()).header("Cache-Control", "no-store")
            }
        })
        .await;
        ImageProxy {
            addr: stub.addr,
            stub,
        }
    }

    pub fn hits(&self, path: &str) -> usize {
        self.stub.hits(path)
    }
}

fn solid_png(side: u32) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(side, side, image::Rgb(IMAGE_RGB));
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encode the test PNG");
    out.into_inner()
}
