//! Real WebKitGTK screenshots of email HTML from a warm helper process on a private Xvfb display.
//!
//! [`WebkitEngine`] owns one Xvfb and one helper process per device scale (GTK fixes the scale per
//! process). Each helper keeps one offscreen WebView for its whole life, so a capture costs a page
//! load and a snapshot, not a browser start. A helper, its web process or Xvfb that dies or hangs
//! is replaced on the next capture, which is retried once.
//!
//! The helper is this crate's binary `mailproof-webkit-helper`; cargo builds it with the crate's
//! own tests and with workspace builds, but not for a dependent crate alone, so a dependent's
//! tests need `cargo build -p webkit` first (or `WebkitConfig::helper_path`). Messages render as
//! mail clients show them: no script runs and the message cannot navigate anywhere. Documents
//! taller than cairo's 32767-device-pixel surface limit are cut at that height.

mod error;
mod helper;
pub mod protocol;
pub mod tied;
mod xvfb;

pub use error::WebkitError;
pub use helper::HELPER_BINARY;

use helper::{Helper, Spawn};
use protocol::{HelperOptions, RenderRequest, MAX_HTML_BYTES};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;
use tokio::sync::Mutex;
use xvfb::Xvfb;

/// Widest and tallest viewport accepted, in CSS pixels.
pub const MAX_VIEWPORT_CSS_PX: u32 = 4096;

/// Largest device scale accepted; GTK only supports whole numbers.
pub const MAX_SCALE: u32 = 4;

/// How the engine runs; built once by the caller.
#[derive(Debug, Clone)]
pub struct WebkitConfig {
    /// Scratch space for screenshots in flight and the helpers' caches. Created if missing.
    pub work_dir: PathBuf,
    /// `http://127.0.0.1:PORT` forward proxy that every request goes through, loopback included.
    /// `None` means direct connections and no proxy from the environment either.
    pub proxy: Option<String>,
    /// Extra environment for the helpers, e.g. `FONTCONFIG_FILE` for a pinned font set.
    pub env: Vec<(String, String)>,
    /// Upper bound for one capture, page load and snapshot included. Past it the helper is killed.
    pub capture_timeout: Duration,
    /// How long subresources (images, web fonts) may take; then the page is shot as it is.
    pub resource_wait: Duration,
    /// The helper binary; `None` looks in `MAILPROOF_WEBKIT_HELPER` and next to the executable.
    pub helper_path: Option<PathBuf>,
    /// Device scales whose helpers start with the engine; others start on first use.
    pub warm_scales: Vec<u32>,
}

impl WebkitConfig {
    /// A configuration with no proxy, a 30 s capture timeout and a 10 s resource wait.
    pub fn new(work_dir: PathBuf) -> WebkitConfig {
        WebkitConfig {
            work_dir,
            proxy: None,
            env: Vec::new(),
            capture_timeout: Duration::from_secs(30),
            resource_wait: Duration::from_secs(10),
            helper_path: None,
            warm_scales: vec![1],
        }
    }
}

/// One screenshot to take.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    pub html: String,
    /// Viewport width in CSS pixels.
    pub width: u32,
    /// Viewport height in CSS pixels; the capture is of the whole document regardless.
    pub height: u32,
    /// Device scale factor: a whole number from 1 to [`MAX_SCALE`].
    pub scale: f32,
    /// Whether `prefers-color-scheme: dark` matches.
    pub dark: bool,
    /// Whether images stay unloaded: they are never requested from the network, and WebKit
    /// leaves their boxes empty (no alt text, as with WebKit's `auto-load-images` off).
    pub block_images: bool,
}

/// A finished screenshot of the whole document.
#[derive(Debug, Clone)]
pub struct Capture {
    pub png: Vec<u8>,
    /// `width x scale` device pixels.
    pub width_px: u32,
    pub height_px: u32,
    /// Where the time went inside the helper (load, snapshot, PNG encoding).
    pub timings: protocol::Timings,
}

/// A warm WebKitGTK engine; share it behind an `Arc` and call [`WebkitEngine::capture`]
/// concurrently: captures at the same scale queue for their helper, other scales run in parallel.
pub struct WebkitEngine {
    cfg: WebkitConfig,
    helper_binary: PathBuf,
    xvfb: Mutex<Option<Xvfb>>,
    helpers: SyncMutex<HashMap<u32, Arc<Mutex<Option<Helper>>>>>,
    /// Process ids by role, readable without awaiting any lock held across a capture.
    pids: SyncMutex<BTreeMap<String, u32>>,
    next_file: AtomicU64,
}

impl WebkitEngine {
    /// Starts Xvfb and the helpers of `cfg.warm_scales`.
    pub async fn start(cfg: WebkitConfig) -> Result<WebkitEngine, WebkitError> {
        let helper_binary = helper::locate(cfg.helper_path.as_deref())?;
        tokio::fs::create_dir_all(&cfg.work_dir)
            .await
            .map_err(|e| WebkitError::io(format!("creating {}", cfg.work_dir.display()), e))?;
        let engine = WebkitEngine {
            helper_binary,
            xvfb: Mutex::new(None),
            helpers: SyncMutex::new(HashMap::new()),
            pids: SyncMutex::new(BTreeMap::new()),
            next_file: AtomicU64::new(0),
            cfg,
        };
        engine.ensure_display().await?;
        for &scale in &engine.cfg.warm_scales {
            check_scale(scale as f32)?;
            let slot = engine.slot(scale);
            let mut helper = slot.lock().await;
            *helper = Some(engine.spawn_helper(scale).await?);
        }
        Ok(engine)
    }

    /// Renders `req` and returns a PNG of the whole document, `width x scale` pixels wide. A dead
    /// or hung helper (or Xvfb) is replaced and the capture tried once more.
    pub async fn capture(&self, req: &CaptureRequest) -> Result<Capture, WebkitError> {
        let scale = validate(req)?;
        let slot = self.slot(scale);
        let mut helper = slot.lock().await;
        let mut retried = false;
        loop {
            let result = self.capture_once(&mut helper, scale, req).await;
            match result {
                Err(e) if e.is_retryable() => {
                    if let Some(dead) = helper.take() {
                        dead.stop().await;
                    }
                    self.forget_pid(&helper_role(scale));
                    if retried {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "WebKit capture failed; retrying on a fresh helper");
                    retried = true;
                }
                other => return other,
            }
        }
    }

    /// Process ids of Xvfb, the helpers and the WebKit processes under them, for memory accounting
    /// and health checks.
    pub fn pids(&self) -> Vec<u32> {
        let own: Vec<u32> = match self.pids.lock() {
            Ok(pids) => pids.values().copied().collect(),
            Err(_) => Vec::new(),
        };
        let mut all = own.clone();
        all.extend(procs::descendants(&own));
        all
    }

    /// Stops the helpers, then Xvfb.
    pub async fn shutdown(self) {
        let slots: Vec<_> = match self.helpers.lock() {
            Ok(mut helpers) => helpers.drain().map(|(_, slot)| slot).collect(),
            Err(_) => Vec::new(),
        };
        for slot in slots {
            if let Some(helper) = slot.lock().await.take() {
                helper.stop().await;
            }
        }
        if let Some(xvfb) = self.xvfb.lock().await.take() {
            xvfb.stop().await;
        }
    }

    async fn capture_once(
        &self,
        helper: &mut Option<Helper>,
        scale: u32,
        req: &CaptureRequest,
    ) -> Result<Capture, WebkitError> {
        if !helper.as_mut().is_some_and(Helper::is_alive) {
            if let Some(dead) = helper.take() {
                tracing::warn!(
                    pid = dead.pid(),
                    "WebKit helper found dead; starting a new one"
                );
                dead.stop().await;
            }
            *helper = Some(self.spawn_helper(scale).await?);
        }
        let Some(running) = helper.as_mut() else {
            return Err(WebkitError::HelperDied("no helper after a restart".into()));
        };
        let out = self.cfg.work_dir.join(format!(
            "capture-{}-{}.png",
            std::process::id(),
            self.next_file.fetch_add(1, Ordering::Relaxed)
        ));
        let request = RenderRequest {
            html: req.html.clone(),
            width: req.width,
            height: req.height,
            dark: req.dark,
            block_images: req.block_images,
            out: out.clone(),
        };
        let result = self.render_and_read(running, &request).await;
        // The file goes whatever happened, so failed captures do not pile up in the work dir.
        let _ = tokio::fs::remove_file(&out).await;
        let (rendered, png) = result?;
        if png_size(&png) != Some((rendered.width_px, rendered.height_px)) {
            return Err(WebkitError::Render(format!(
                "the helper's PNG does not match its reported size {}x{}",
                rendered.width_px, rendered.height_px
            )));
        }
        tracing::debug!(timings = ?rendered.timings, width_px = rendered.width_px, height_px = rendered.height_px, "WebKit capture");
        if !rendered.loaded {
            tracing::info!(wait = ?self.cfg.resource_wait, "WebKit shot the page before all resources loaded");
        }
        Ok(Capture {
            png,
            width_px: rendered.width_px,
            height_px: rendered.height_px,
            timings: rendered.timings,
        })
    }

    async fn render_and_read(
        &self,
        helper: &mut Helper,
        request: &RenderRequest,
    ) -> Result<(helper::Rendered, Vec<u8>), WebkitError> {
        let rendered = helper.render(request, self.cfg.capture_timeout).await?;
        let png = tokio::fs::read(&request.out)
            .await
            .map_err(|e| WebkitError::io(format!("reading {}", request.out.display()), e))?;
        Ok((rendered, png))
    }

    fn slot(&self, scale: u32) -> Arc<Mutex<Option<Helper>>> {
        match self.helpers.lock() {
            Ok(mut helpers) => helpers.entry(scale).or_default().clone(),
            // A poisoned map only means a panic elsewhere; a private slot still works.
            Err(_) => Arc::default(),
        }
    }

    /// Returns the display to use, starting or restarting Xvfb when it is not running.
    async fn ensure_display(&self) -> Result<String, WebkitError> {
        let mut xvfb = self.xvfb.lock().await;
        if let Some(running) = xvfb.as_mut() {
            if running.is_alive() {
                return Ok(running.display());
            }
            tracing::warn!(pid = running.pid(), "Xvfb died; starting a new one");
        }
        let started = Xvfb::start().await?;
        let display = started.display();
        self.remember_pid("xvfb".into(), started.pid());
        if let Some(old) = xvfb.replace(started) {
            old.stop().await;
        }
        Ok(display)
    }

    async fn spawn_helper(&self, scale: u32) -> Result<Helper, WebkitError> {
        let display = self.ensure_display().await?;
        let options = HelperOptions {
            proxy: self.cfg.proxy.clone(),
            resource_wait_ms: self
                .cfg
                .resource_wait
                .as_millis()
                .try_into()
                .unwrap_or(u64::MAX),
        };
        let home = self.cfg.work_dir.join("helper-home");
        let spec = Spawn {
            binary: &self.helper_binary,
            display: &display,
            scale,
            options: &options,
            env: &self.cfg.env,
            home: &home,
        };
        let helper = Helper::spawn(&spec).await?;
        self.remember_pid(helper_role(scale), helper.pid());
        Ok(helper)
    }

    fn remember_pid(&self, role: String, pid: u32) {
        if let Ok(mut pids) = self.pids.lock() {
            pids.insert(role, pid);
        }
    }

    fn forget_pid(&self, role: &str) {
        if let Ok(mut pids) = self.pids.lock() {
            pids.remove(role);
        }
    }
}

fn helper_role(scale: u32) -> String {
    format!("helper@{scale}x")
}

/// Checks the request against the engine's limits and returns its whole-number scale.
fn validate(req: &CaptureRequest) -> Result<u32, WebkitError> {
    let scale = check_scale(req.scale)?;
    for (name, value) in [("width", req.width), ("height", req.height)] {
        if value == 0 || value > MAX_VIEWPORT_CSS_PX {
            return Err(WebkitError::InvalidRequest(format!(
                "{name} {value} is outside 1..={MAX_VIEWPORT_CSS_PX} CSS px"
            )));
        }
    }
    if req.html.len() > MAX_HTML_BYTES {
        return Err(WebkitError::InvalidRequest(format!(
            "HTML of {} bytes is over the {MAX_HTML_BYTES}-byte limit",
            req.html.len()
        )));
    }
    Ok(scale)
}

fn check_scale(scale: f32) -> Result<u32, WebkitError> {
    if scale.fract() == 0.0 && (1.0..=MAX_SCALE as f32).contains(&scale) {
        Ok(scale as u32)
    } else {
        Err(WebkitError::InvalidRequest(format!(
            "device scale {scale} is not a whole number from 1 to {MAX_SCALE}: WebKitGTK scales \
             by whole numbers only"
        )))
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || &png[..8] != SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(png[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(png[20..24].try_into().ok()?);
    Some((width, height))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(scale: f32, width: u32) -> CaptureRequest {
        CaptureRequest {
            html: String::new(),
            width,
            height: 800,
            scale,
            dark: false,
            block_images: false,
        }
    }

    #[test]
    fn the_engine_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<WebkitEngine>();
        shareable::<WebkitError>();
    }

    #[test]
    fn whole_scales_up_to_the_maximum_are_accepted() {
        for scale in 1..=MAX_SCALE {
            assert_eq!(validate(&request(scale as f32, 600)).ok(), Some(scale));
        }
    }

    #[test]
    fn fractional_zero_and_huge_scales_are_refused_and_not_retryable() {
        for scale in [0.0, 1.5, 2.625, 5.0, f32::NAN, f32::INFINITY] {
            let error = validate(&request(scale, 600)).expect_err("scale must be refused");
            assert!(!error.is_retryable(), "{error}");
        }
    }

    #[test]
    fn zero_and_oversized_viewports_are_refused() {
        assert!(validate(&request(1.0, 0)).is_err());
        assert!(validate(&request(1.0, MAX_VIEWPORT_CSS_PX + 1)).is_err());
        assert!(validate(&request(1.0, 390)).is_ok());
    }

    #[test]
    fn png_size_reads_the_ihdr_chunk_and_rejects_other_bytes() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&1170u32.to_be_bytes());
        png.extend_from_slice(&9057u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((1170, 9057)));
        assert_eq!(png_size(b"GIF89a not a png at all, no"), None);
    }
}
