//! Real WebKitGTK screenshots of email HTML from a warm helper process on a private Xvfb display.
//!
//! [`WebkitEngine`] owns one Xvfb and one helper process per device scale (GTK fixes the scale per
//! process). Each helper keeps one offscreen WebView for its whole life, so a capture costs a page
//! load and a snapshot, not a browser start. This crate is the helper protocol and its Xvfb
//! plumbing, as `render`'s chromium module is CDP: `render` drives it as its third engine, behind
//! the same pool, request limits and restart policy as the other two. A capture here is one
//! attempt: a helper or web process that died or hung makes it fail with a retryable error, and
//! that helper alone is replaced at its scale's next capture (a browser's tab is replaced the
//! same way); an Xvfb that died makes [`WebkitEngine::is_alive`] false, and the caller replaces
//! the whole engine.
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
use protocol::{Faults, HelperOptions, PageFacts, RenderRequest};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;
use tokio::sync::Mutex;
use xvfb::Xvfb;

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
    /// Misbehaviour for tests ([`Faults`]); none by default.
    pub faults: Faults,
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
            faults: Faults::default(),
        }
    }
}

/// One screenshot to take.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    pub html: String,
    /// The address the document is loaded under (see [`protocol::RenderRequest::document_url`]).
    pub document_url: String,
    /// Viewport width in CSS pixels.
    pub width: u32,
    /// Viewport height in CSS pixels; the capture is of the whole document regardless.
    pub height: u32,
    /// Device scale factor; GTK scales by whole numbers only (at least 1).
    pub scale: u32,
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
    /// What the page said about itself just before and just after the capture; the caller
    /// checks them against what it asked for.
    pub before: PageFacts,
    pub after: PageFacts,
    /// What the page said of itself once drawn: its resources, its content's width.
    pub drawn: protocol::DrawnPage,
}

/// A warm WebKitGTK engine; share it behind an `Arc` and call [`WebkitEngine::capture`]
/// concurrently: captures at the same scale queue for their helper, other scales run in parallel.
/// Requests are not checked here: the caller applies its limits first (`render` does).
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
            let slot = engine.slot(scale);
            let mut helper = slot.lock().await;
            *helper = Some(engine.spawn_helper(scale).await?);
        }
        Ok(engine)
    }

    /// Renders `req` and returns a PNG of the whole document, `width x scale` pixels wide: one
    /// attempt. The helper of a scale not used yet starts now; one that died or hung is not
    /// replaced here (a retryable error), because its Xvfb and web process may have gone with it.
    pub async fn capture(&self, req: &CaptureRequest) -> Result<Capture, WebkitError> {
        let slot = self.slot(req.scale);
        let mut helper = slot.lock().await;
        let result = self.capture_once(&mut helper, req).await;
        if result.as_ref().is_err_and(WebkitError::is_retryable) {
            // A helper that failed this way cannot be trusted with the next email. It is
            // replaced alone, at the next capture of its scale: the other scales' helpers and
            // their captures go on.
            if let Some(dead) = helper.take() {
                dead.stop().await;
            }
            self.forget_pid(&helper_role(req.scale));
        }
        result
    }

    /// False once Xvfb has exited: the engine must be replaced. A helper that died or hung is
    /// not a reason (the next capture at its scale replaces it alone). Reads process states
    /// only, so it answers at once even while captures hold their helpers.
    pub fn is_alive(&self) -> bool {
        self.display_alive()
    }

    fn display_alive(&self) -> bool {
        self.pids
            .lock()
            .ok()
            .and_then(|pids| pids.get(XVFB_ROLE).copied())
            .is_some_and(procs::alive)
    }

    /// Ends the helper of `scale` now, whatever it is doing (a capture that ran out of its
    /// caller's time may have left it drawing an email that never ends); the next capture at
    /// that scale starts a new one.
    pub fn abandon(&self, scale: u32) {
        let role = helper_role(scale);
        // Forgotten at once, so that the next capture replaces it even before the kill lands.
        let pid = self
            .pids
            .lock()
            .ok()
            .and_then(|mut pids| pids.remove(&role));
        if let Some(pid) = pid {
            procs::signal(pid, procs::Signal::KILL);
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

    /// Stops the helpers, then Xvfb. A helper busy with a capture is killed first, so that
    /// replacing a broken engine never waits for a capture on it to time out.
    pub async fn shutdown(&self) {
        let slots: Vec<_> = match self.helpers.lock() {
            Ok(mut helpers) => helpers.drain().collect(),
            Err(_) => Vec::new(),
        };
        for (scale, slot) in slots {
            let mut helper = match slot.try_lock() {
                Ok(idle) => idle,
                Err(_) => {
                    let busy = self
                        .pids
                        .lock()
                        .ok()
                        .and_then(|pids| pids.get(&helper_role(scale)).copied());
                    if let Some(pid) = busy {
                        procs::signal(pid, procs::Signal::KILL);
                    }
                    slot.lock().await
                }
            };
            if let Some(helper) = helper.take() {
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
        req: &CaptureRequest,
    ) -> Result<Capture, WebkitError> {
        // Checked first: a capture might even succeed on a helper whose Xvfb has gone, and
        // leave the engine broken for the next one.
        if !self.display_alive() {
            return Err(WebkitError::HelperDied("Xvfb exited".into()));
        }
        let role = helper_role(req.scale);
        let counted = |h: &Helper| {
            self.pids
                .lock()
                .is_ok_and(|pids| pids.get(&role) == Some(&h.pid()))
        };
        if let Some(stale) = helper.take_if(|h| !h.usable() || !counted(h)) {
            // Killed from outside, abandoned midway by a caller that stopped waiting, or ended
            // by `abandon` (perhaps not yet dead): a new helper takes its place, the engine's
            // other helpers are left alone.
            tracing::info!(
                pid = stale.pid(),
                scale = req.scale,
                "replacing a WebKit helper that cannot take requests"
            );
            stale.stop().await;
        }
        if helper.is_none() {
            *helper = Some(self.spawn_helper(req.scale).await?);
        }
        let Some(running) = helper.as_mut() else {
            return Err(WebkitError::HelperDied("no helper after a start".into()));
        };
        let out = self.cfg.work_dir.join(format!(
            "capture-{}-{}.png",
            std::process::id(),
            self.next_file.fetch_add(1, Ordering::Relaxed)
        ));
        let request = RenderRequest {
            html: req.html.clone(),
            document_url: req.document_url.clone(),
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
            before: rendered.before,
            after: rendered.after,
            drawn: rendered.drawn,
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

    /// Returns the display to use, starting Xvfb the first time. An Xvfb that died is not
    /// replaced: the helpers on it died too, and the whole engine is replaced instead.
    async fn ensure_display(&self) -> Result<String, WebkitError> {
        let mut xvfb = self.xvfb.lock().await;
        if let Some(running) = xvfb.as_mut() {
            if running.is_alive() {
                return Ok(running.display());
            }
            return Err(WebkitError::HelperDied(format!(
                "Xvfb pid {} exited",
                running.pid()
            )));
        }
        let started = Xvfb::start().await?;
        let display = started.display();
        self.remember_pid(XVFB_ROLE.into(), started.pid());
        *xvfb = Some(started);
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
            faults: self.cfg.faults,
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

    fn forget_pid(&self, role: &str) {
        if let Ok(mut pids) = self.pids.lock() {
            pids.remove(role);
        }
    }

    fn remember_pid(&self, role: String, pid: u32) {
        if let Ok(mut pids) = self.pids.lock() {
            pids.insert(role, pid);
        }
    }
}

const XVFB_ROLE: &str = "xvfb";

fn helper_role(scale: u32) -> String {
    format!("helper@{scale}x")
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

    #[test]
    fn the_engine_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<WebkitEngine>();
        shareable::<WebkitError>();
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
