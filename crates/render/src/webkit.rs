//! WebKitGTK, driven through the `webkit` crate: one Xvfb and one helper process per device scale,
//! each with a single offscreen WebView (GTK fixes the scale per process).
//!
//! The pool treats it like the browsers: the same slots bound how many captures run, the same
//! limits were checked before it sees a request, and a dead or hung process (helper, web process
//! or Xvfb) fails the capture with a retryable error, after which the pool replaces this whole
//! instance and retries once. Captures at one scale queue for their helper; the slot number is
//! not used. The helper loads the HTML itself under the proxy document's address (so the page
//! reports that address back, as the browsers' pages do), and every subresource goes through the
//! policy proxy.

use crate::chromium::tempdir;
use crate::engine::{check_document, EngineSetup, Shot, ShotRequest};
use crate::error::RenderError;
use crate::thumb;
use domain::{ColorScheme, Engine};

pub(crate) struct Webkit {
    engine: webkit::WebkitEngine,
    /// The device scale each slot drew at last: whose helper a hung render in that slot holds.
    scale_of_slot: std::sync::Mutex<std::collections::HashMap<usize, u32>>,
    /// Screenshots in flight and the helpers' caches; removed with the instance.
    _work: tempdir::Dir,
}

impl Webkit {
    pub(crate) async fn start(setup: &EngineSetup) -> Result<Webkit, RenderError> {
        let work = tempdir::Dir::new(&setup.work_dir, "webkit")?;
        let mut cfg = webkit::WebkitConfig::new(work.path().to_path_buf());
        cfg.proxy = Some(setup.proxy_url.clone());
        cfg.env = setup.env.clone();
        cfg.capture_timeout = setup.render_timeout;
        cfg.resource_wait = setup.resource_wait;
        cfg.helper_path = setup.program.clone();
        cfg.faults.keep_previous_document = setup.faults.keep_previous_document;
        // Dropping a start that ran out of time kills what it had started.
        let engine = tokio::time::timeout(setup.start_timeout, webkit::WebkitEngine::start(cfg))
            .await
            .map_err(|_| RenderError::EngineStart {
                engine: Engine::Webkit,
                reason: format!(
                    "Xvfb and the helper were not ready within {:?}",
                    setup.start_timeout
                ),
            })??;
        tracing::info!(pids = ?engine.pids(), "WebKit ready");
        Ok(Webkit {
            engine,
            scale_of_slot: Default::default(),
            _work: work,
        })
    }

    pub(crate) async fn shoot(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
    ) -> Result<Shot, RenderError> {
        // WebKitGTK draws at whole device scales only. A fractional one (a client that zooms a
        // wide email out to its screen) is drawn at the next whole scale and narrowed to the
        // width asked for, as the zoomed-out page would be.
        let whole = req.scale.ceil().max(1.0);
        if let Ok(mut scales) = self.scale_of_slot.lock() {
            scales.insert(slot, whole as u32);
        }
        let capture = self
            .engine
            .capture(&webkit::CaptureRequest {
                html: req.html.to_string(),
                document_url: req.url.to_string(),
                width: req.width,
                height: req.height,
                scale: whole as u32,
                dark: req.color_scheme == ColorScheme::Dark,
                block_images: req.block_images,
            })
            .await?;
        check_document(Engine::Webkit, &capture.before, req.url)?;
        check_document(Engine::Webkit, &capture.after, req.url)?;
        let visible_text = capture.before.visible_text;
        let drawn = capture.drawn;
        if whole == req.scale {
            return Ok(Shot {
                png: capture.png,
                visible_text,
                drawn,
            });
        }
        let width = (req.width as f32 * req.scale).round() as u32;
        let png = tokio::task::spawn_blocking(move || thumb::narrow(&capture.png, width))
            .await
            .map_err(|e| RenderError::Image(format!("narrowing task failed: {e}")))??;
        Ok(Shot {
            png,
            visible_text,
            drawn,
        })
    }

    /// Ends the helper `slot` drew with last (a render there hung or crashed): the next capture
    /// at its scale starts a new one, while the other scales' helpers draw on.
    pub(crate) fn abandon(&self, slot: usize) {
        let scale = self
            .scale_of_slot
            .lock()
            .ok()
            .and_then(|scales| scales.get(&slot).copied());
        if let Some(scale) = scale {
            self.engine.abandon(scale);
        }
    }

    /// Xvfb and every helper, with the WebKit processes under them.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.engine.pids()
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.engine.is_alive()
    }

    pub(crate) async fn shutdown(&self) {
        self.engine.shutdown().await
    }
}
