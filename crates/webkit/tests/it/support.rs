//! Shared fixtures: one runtime, one warm engine, and a loopback forward proxy that serves images.
//!
//! The engine and its helpers' pipes belong to one tokio runtime, so every test drives its async
//! code on this shared runtime instead of a per-test one from `#[tokio::test]`.

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
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

pub fn request(html: &str, width: u32, scale: f32) -> CaptureRequest {
    CaptureRequest {
        html: html.to_owned(),
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
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

impl ImageProxy {
    pub async fn start() -> ImageProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let hits = Arc::new(Mutex::new(HashMap::new()));
        let pngs = Arc::new(Pngs {
            small: solid_png(40),
            large: solid_png(2400),
        });
        let proxy = ImageProxy {
            addr,
            hits: hits.clone(),
        };
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, hits.clone(), pngs.clone()));
            }
        });
        proxy
    }

    pub fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .expect("hits lock")
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

struct Pngs {
    small: Vec<u8>,
    large: Vec<u8>,
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    pngs: Arc<Pngs>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // One request per connection is enough for these pages; headers end at the blank line.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 64 * 1024 {
            return;
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    // A proxy request names the absolute URL; keep only its path for counting.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map_or("/".to_owned(), |i| rest[i..].to_owned()),
        None => target,
    };
    *hits
        .lock()
        .expect("hits lock")
        .entry(path.clone())
        .or_default() += 1;
    if path.starts_with("/slow") {
        tokio::time::sleep(SLOW_RESPONSE).await;
    }
    // Paths starting with /large get a 2400x2400 image, big enough for WebKit to decode it
    // asynchronously (which once left large images out of WebDriver screenshots).
    let png = if path.starts_with("/large") {
        &pngs.large
    } else {
        &pngs.small
    };
    let header = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        png.len()
    );
    let _ = stream.write_all(header.as_bytes()).await;
    let _ = stream.write_all(png).await;
    let _ = stream.shutdown().await;
}

fn solid_png(side: u32) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(side, side, image::Rgb(IMAGE_RGB));
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encode the test PNG");
    out.into_inner()
}
