//! Real screenshots of (already transformed) email HTML in Chromium, Firefox ESR and WebKitGTK.
//!
//! [`Renderer`] keeps one warm instance per engine with `slots_per_engine` slots (Chromium's tabs;
//! a Firefox browser per slot; WebKit's helpers on their Xvfb, driven through the `webkit` crate),
//! and a loopback
//! forward proxy ([`proxy::Proxy`]) that every engine sends all its traffic through: it serves
//! the documents from memory under one-time addresses and fetches what emails reference under the
//! [`NetPolicy`]. All three engines take one path: a request is checked against one set of
//! limits before any engine sees it, waits for a free slot of its engine, and a crashed or hung
//! page is replaced alone (the whole engine when its browser no longer answers) and the render
//! retried once before a retryable error is returned.

mod chromium;
mod dark;
mod engine;
mod error;
mod failed;
mod firefox;
pub mod process;
pub mod proxy;
mod thumb;
mod webkit;
mod ws;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex, RwLock};
use std::time::Duration;

use content::netpolicy::NetPolicy;
use domain::catalog::Viewport;
use domain::{ColorScheme, Engine};
use tokio::sync::{Mutex, Semaphore};

use engine::{EngineSetup, Instance, ShotRequest};
pub use error::RenderError;
pub use thumb::{
    thumbnail_size, FULL_THUMBNAIL_MAX_HEIGHT, FULL_THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT,
    THUMBNAIL_WIDTH, WIDE_CROP_CSS, WIDE_PAGE_CSS, WIDE_THUMBNAIL_HEIGHT, WIDE_THUMBNAIL_WIDTH,
};

/// Widest and tallest viewport accepted, in CSS px.
pub const MAX_VIEWPORT_CSS_PX: u32 = 4096;
/// Smallest and largest device scale accepted (WebKit draws a fractional one at the next whole
/// scale and narrows it).
pub const MIN_SCALE: f32 = 0.5;
pub const MAX_SCALE: f32 = 4.0;
/// Largest HTML document accepted, in bytes: the service's one limit (the WebKit helper's pipe is
/// sized for it).
pub const MAX_HTML_BYTES: usize = domain::MAX_HTML_BYTES;
/// Tallest screenshot produced, in device pixels; longer documents are cut at the bottom.
pub const MAX_SHOT_DEVICE_PX: u32 = 32_000;

/// Longest wait for one protocol command (a screenshot of a tall 3x page takes about a second).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How the renderer runs; built once by the caller.
#[derive(Clone, Debug)]
pub struct RenderConfig {
    /// Slots per engine, i.e. renders one engine runs at once.
    pub slots_per_engine: usize,
    /// Which engines to start.
    pub engines: Vec<Engine>,
    /// What remote resources (images, stylesheets) documents may load.
    pub net_policy: NetPolicy,
    /// Scratch space for browser profiles; created if missing.
    pub work_dir: PathBuf,
    /// Upper bound for one render attempt, slot wait excluded.
    pub render_timeout: Duration,
    /// How long a page may wait for its remote resources before it is shot as it is.
    pub resource_wait: Duration,
    /// Time an engine may take to start, per attempt (its first commands included).
    pub start_timeout: Duration,
    /// Attempts to start each engine before giving up.
    pub start_attempts: u32,
    /// Browser programs to run instead of the usual ones (e.g. a wrapper script).
    pub chromium_program: Option<PathBuf>,
    pub firefox_program: Option<PathBuf>,
    /// fontconfig file the engines use (`FONTCONFIG_FILE`); `None` keeps the system's.
    pub fonts_conf: Option<PathBuf>,
    /// WebKit helper binary; `None` lets the webkit crate look for it.
    pub webkit_helper: Option<PathBuf>,
    /// Misbehaviour for tests; none by default.
    pub faults: Faults,
}

/// Ways a test makes the real engines misbehave, so that the checks which guard against each
/// can be shown to work where they run. All off in service (the configuration file cannot set
/// them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// No engine clears its page after a render, and none loads a document into a page that
    /// holds one: every render after a slot's first is drawn on that first document.
    pub keep_previous_document: bool,
    /// Every picture an engine draws is replaced by a blank one of the same size.
    pub blank_capture: bool,
}

impl RenderConfig {
    /// All three engines, one slot per core, a 30 s render timeout, a 5 s resource wait and the
    /// repository's `data/fonts/fonts.conf` when it exists.
    pub fn new(work_dir: PathBuf) -> RenderConfig {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        RenderConfig {
            slots_per_engine: cores,
            engines: Engine::ALL.to_vec(),
            net_policy: NetPolicy::default(),
            work_dir,
            render_timeout: Duration::from_secs(30),
            resource_wait: Duration::from_secs(5),
            start_timeout: Duration::from_secs(60),
            start_attempts: 3,
            chromium_program: None,
            firefox_program: None,
            fonts_conf: default_fonts_conf(),
            webkit_helper: None,
            faults: Faults::default(),
        }
    }
}

/// `MAILPROOF_FONTS_CONF`, else the repository's `data/fonts/fonts.conf`.
pub fn default_fonts_conf() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MAILPROOF_FONTS_CONF") {
        return Some(PathBuf::from(path));
    }
    let repo = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/fonts/fonts.conf"
    ));
    repo.is_file().then_some(repo)
}

/// One screenshot to take.
#[derive(Clone, Debug)]
pub struct RenderRequest {
    pub html: String,
    pub engine: Engine,
    /// CSS px, already rotated by the caller for horizontal profiles.
    pub viewport: Viewport,
    /// Device scale factor: the PNG is `viewport.width x scale` pixels wide.
    pub scale: f32,
    /// Mobile viewport semantics (meta viewport, touch); honoured by Chromium.
    pub mobile: bool,
    pub color_scheme: ColorScheme,
    /// Images are never requested from the network.
    pub block_images: bool,
}

/// A finished render.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The whole document.
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// The top of the page, [`thumbnail_size`]: a phone's whole width, a wider window's email
    /// column.
    pub thumbnail: Vec<u8>,
    /// The whole page, [`FULL_THUMBNAIL_WIDTH`] wide.
    pub full_thumbnail: Vec<u8>,
    /// The images and stylesheets the page could not load, with why.
    pub failed: Vec<domain::FailedResource>,
    /// How far the email's content reaches to the right, in CSS px; wider than the viewport when
    /// the email overflows the client's window and the picture is cut at its edge.
    pub content_width: u32,
}

/// The warm engines; share it behind an `Arc` and call [`Renderer::render`] concurrently.
pub struct Renderer {
    cfg: RenderConfig,
    proxy: proxy::Proxy,
    pools: Vec<Arc<Pool>>,
}

/// The slots of one engine and the instance they live in.
struct Pool {
    engine: Engine,
    setup: EngineSetup,
    /// The running instance and its generation; `None` after a failed restart.
    current: RwLock<Option<(u64, Arc<Instance>)>>,
    generation: AtomicU64,
    restart: Mutex<()>,
    permits: Arc<Semaphore>,
    free: SyncMutex<Vec<usize>>,
}

/// A slot borrowed from a pool; returned on drop. It owns its share of the pool, so that a
/// slot can be settled after its render has been answered.
struct SlotLease {
    pool: Arc<Pool>,
    slot: usize,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        if let Ok(mut free) = self.pool.free.lock() {
            free.push(self.slot);
        }
    }
}

impl Pool {
    async fn lease(self: &Arc<Self>) -> Result<SlotLease, RenderError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| RenderError::EngineUnavailable(self.engine))?;
        let slot = self
            .free
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .ok_or(RenderError::EngineUnavailable(self.engine))?;
        Ok(SlotLease {
            pool: self.clone(),
            slot,
            _permit: permit,
        })
    }

    fn current(&self) -> Option<(u64, Arc<Instance>)> {
        self.current.read().ok().and_then(|c| c.clone())
    }

    /// Replaces the instance of generation `seen` (or a missing one) with a fresh browser. When
    /// another render already replaced it, returns at once.
    async fn restart(&self, seen: Option<u64>) -> Result<(), RenderError> {
        let _one_at_a_time = self.restart.lock().await;
        let now = self.current();
        if let (Some(seen), Some((generation, _))) = (seen, &now) {
            if *generation != seen {
                return Ok(());
            }
        } else if seen.is_none() && now.is_some() {
            return Ok(());
        }
        if let Ok(mut current) = self.current.write() {
            *current = None;
        }
        if let Some((_, old)) = now {
            tracing::warn!(engine = %self.engine, pids = ?old.pids(), "restarting the engine");
            telemetry::global().engine_restart(self.engine.as_str());
            old.shutdown().await;
        }
        let fresh = Instance::start(self.engine, &self.setup).await?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        if let Ok(mut current) = self.current.write() {
            *current = Some((generation, Arc::new(fresh)));
        }
        Ok(())
    }
}

impl Pool {
    /// Leaves `slot` ready for the next render after one ended (`failed` says how): a good render's
    /// page is cleared; a page that crashed, hung or held another document is replaced alone; the
    /// whole engine is restarted only when it is dead or its browser does not answer for a page.
    async fn settle(
        &self,
        instance: &Instance,
        generation: u64,
        slot: usize,
        failed: Option<&RenderError>,
    ) {
        let broken = failed
            .is_some_and(|e| e.is_retryable() || matches!(e, RenderError::WrongDocument { .. }));
        let command_timeout = self.setup.command_timeout;
        if !broken {
            let cleared = tokio::time::timeout(command_timeout, instance.clear(slot)).await;
            if matches!(cleared, Ok(Ok(()))) {
                return;
            }
            tracing::warn!(engine = %self.engine, slot, "the page did not clear after a render; replacing it");
        }
        if instance.is_alive().await {
            // A page replacement may start a browser for the slot (Firefox), which takes a start.
            let replace_wait = command_timeout + self.setup.start_timeout;
            let replaced = tokio::time::timeout(replace_wait, instance.replace_page(slot)).await;
            if matches!(replaced, Ok(Ok(()))) {
                telemetry::global().page_replacement(self.engine.as_str());
                return;
            }
        }
        if let Err(start) = self.restart(Some(generation)).await {
            tracing::error!(engine = %self.engine, error = %start, "engine restart failed");
        }
    }
}

impl Renderer {
    /// Starts the proxy and every engine in `cfg.engines`, with their slots warm.
    pub async fn start(cfg: RenderConfig) -> Result<Renderer, RenderError> {
        if cfg.slots_per_engine == 0 {
            return Err(RenderError::InvalidRequest(
                "slots_per_engine must be at least 1".into(),
            ));
        }
        tokio::fs::create_dir_all(&cfg.work_dir)
            .await
            .map_err(|e| RenderError::io(format!("creating {}", cfg.work_dir.display()), e))?;
        let proxy = proxy::Proxy::start(cfg.net_policy.clone()).await?;
        let mut env = Vec::new();
        if let Some(fonts) = &cfg.fonts_conf {
            env.push(("FONTCONFIG_FILE".to_string(), fonts.display().to_string()));
        }
        let mut engines = cfg.engines.clone();
        engines.sort();
        engines.dedup();

        let mut pools = Vec::new();
        for engine in engines {
            let setup = EngineSetup {
                slots: cfg.slots_per_engine,
                work_dir: cfg.work_dir.clone(),
                proxy_url: proxy.url(),
                env: env.clone(),
                start_timeout: cfg.start_timeout,
                // A single command never legitimately takes long; a hung one is found sooner
                // than the whole render's timeout, leaving time for the retry.
                command_timeout: cfg.render_timeout.min(COMMAND_TIMEOUT),
                render_timeout: cfg.render_timeout,
                resource_wait: cfg.resource_wait,
                program: match engine {
                    Engine::Blink => cfg.chromium_program.clone(),
                    Engine::Gecko => cfg.firefox_program.clone(),
                    Engine::Webkit => cfg.webkit_helper.clone(),
                },
                faults: cfg.faults,
            };
            let instance = start_with_retries(engine, &setup, cfg.start_attempts).await?;
            pools.push(Arc::new(Pool {
                engine,
                setup,
                current: RwLock::new(Some((0, Arc::new(instance)))),
                generation: AtomicU64::new(0),
                restart: Mutex::new(()),
                permits: Arc::new(Semaphore::new(cfg.slots_per_engine)),
                free: SyncMutex::new((0..cfg.slots_per_engine).rev().collect()),
            }));
        }
        Ok(Renderer { cfg, proxy, pools })
    }

    /// `http://127.0.0.1:PORT` of the policy proxy all engines use.
    pub fn proxy_url(&self) -> String {
        self.proxy.url()
    }

    /// Requests the proxy refused under the network policy so far.
    pub fn refused_requests(&self) -> u64 {
        self.proxy.refused_count()
    }

    /// Main process id of each running engine (WebKit: every process it owns).
    pub fn engine_pids(&self) -> Vec<(Engine, u32)> {
        self.pools
            .iter()
            .filter_map(|p| p.current().map(|(_, i)| (p.engine, i)))
            .flat_map(|(engine, i)| i.pids().into_iter().map(move |pid| (engine, pid)))
            .collect()
    }

    /// Summed resident memory of all engine processes and their children, in bytes.
    pub fn engine_rss_bytes(&self) -> u64 {
        let mut all: Vec<u32> = Vec::new();
        for (_, pid) in self.engine_pids() {
            for p in procs::tree(pid) {
                if !all.contains(&p) {
                    all.push(p);
                }
            }
        }
        procs::rss_bytes(&all)
    }

    /// Renders `req` and returns the whole-document PNG and its thumbnails.
    pub async fn render(&self, req: RenderRequest) -> Result<Rendered, RenderError> {
        let started = std::time::Instant::now();
        let engine = req.engine;
        let result = self.render_inner(req).await;
        telemetry::global().screenshot(engine.as_str(), result.is_ok(), started.elapsed());
        result
    }

    async fn render_inner(&self, mut req: RenderRequest) -> Result<Rendered, RenderError> {
        validate(&req)?;
        req.html = without_refresh(&req.html);
        let expected_width = (req.viewport.width as f32 * req.scale).round() as u32;
        // A blank picture of a page with visible text is drawn once more, then refused: never a
        // silent blank stored as Complete.
        for attempt in 1..=2 {
            let since = std::time::Instant::now();
            let shot = match self.run(&req, Op::Shoot).await? {
                Output::Png(shot) => shot,
                Output::Json(_) => {
                    return Err(RenderError::Document(
                        "the engine answered a probe to a screenshot".into(),
                    ))
                }
            };
            let png = if self.cfg.faults.blank_capture {
                thumb::blank_like(&shot.png)?
            } else {
                shot.png
            };
            let scale = req.scale;
            let thumbs =
                tokio::task::spawn_blocking(move || thumb::make(&png, scale).map(|t| (t, png)))
                    .await
                    .map_err(|e| RenderError::Image(format!("thumbnail task failed: {e}")))?;
            let (thumbs, png) = thumbs?;
            if thumbs.blank && shot.visible_text {
                telemetry::global().drawn_refused(req.engine.as_str(), "blank");
                tracing::warn!(engine = %req.engine, attempt, "a blank picture of a page with visible text; not kept");
                continue;
            }
            if thumbs.width != expected_width {
                tracing::warn!(engine = %req.engine, got = thumbs.width, expected_width, "screenshot width differs from viewport x scale");
            }
            let failed = failed::failed_resources(
                &self.proxy,
                &shot.drawn.resources,
                since,
                req.block_images,
            );
            return Ok(Rendered {
                png,
                width: thumbs.width,
                height: thumbs.height,
                thumbnail: thumbs.top,
                full_thumbnail: thumbs.full,
                failed,
                content_width: shot.drawn.content_width.max(0.0).floor() as u32,
            });
        }
        Err(RenderError::BlankRender { engine: req.engine })
    }

    /// Loads `req`'s document as [`Renderer::render`] would (same viewport, colour scheme, image
    /// blocking, network policy) and evaluates the JavaScript `expression` on it instead of taking
    /// a screenshot; returns the expression's value as JSON text. Chromium (`Engine::Blink`) only:
    /// the other engines answer `RenderError::InvalidRequest`.
    pub async fn evaluate(
        &self,
        req: RenderRequest,
        expression: &str,
    ) -> Result<String, RenderError> {
        validate(&req)?;
        let req = RenderRequest {
            html: without_refresh(&req.html),
            ..req
        };
        if req.engine != Engine::Blink {
            return Err(engine::probe_unsupported(req.engine));
        }
        match self.run(&req, Op::Evaluate(expression)).await? {
            Output::Json(json) => Ok(json),
            Output::Png(_) => Err(RenderError::Document(
                "the engine answered a screenshot to a probe".into(),
            )),
        }
    }

    /// `req`'s document recoloured the way the client's dark mode does it, computed on the page
    /// loaded in Chromium (same viewport, colour scheme and image blocking; see the `dark`
    /// module). Whatever `req.engine`, the colours are read in Chromium; draw the result with
    /// [`Renderer::render`] in the profile's engine. Needs the Blink engine running.
    pub async fn recolour_dark(
        &self,
        req: &RenderRequest,
        pass: emulate::color::DarkPass,
    ) -> Result<String, RenderError> {
        let probe_req = RenderRequest {
            engine: Engine::Blink,
            ..req.clone()
        };
        let json = self.evaluate(probe_req, dark::PROBE).await?;
        let probed: dark::Probed = serde_json::from_str(&json).map_err(|e| {
            RenderError::Document(format!("the dark-mode probe answered unexpected data: {e}"))
        })?;
        dark::apply(probed, pass)
    }

    /// Runs `op` on `req`'s document in a slot of its engine. A page that crashed, hung or held
    /// another document is replaced alone (the whole engine only when its browser no longer
    /// answers); a crash or a wrong document is drawn once more, a render that spent its time
    /// budget is not (the email's own weight: the job's attempts decide).
    async fn run(&self, req: &RenderRequest, op: Op<'_>) -> Result<Output, RenderError> {
        let pool = self
            .pools
            .iter()
            .find(|p| p.engine == req.engine)
            .ok_or(RenderError::EngineUnavailable(req.engine))?;
        let lease = pool.lease().await?;
        let max_css_height = ((MAX_SHOT_DEVICE_PX as f32 / req.scale) as u32).max(1);
        let mut last_error = None;
        let mut attempt = 0;
        while attempt < 2 {
            let Some((generation, instance)) = pool.current() else {
                // A previous restart failed; try once more now, then give up on this render.
                if let Err(e) = pool.restart(None).await {
                    return Err(last_error.unwrap_or(e));
                }
                continue;
            };
            let ticket = self.proxy.add_document(&req.html, instance.doc_site());
            let shot_req = ShotRequest {
                url: ticket.url(),
                html: &req.html,
                width: req.viewport.width,
                height: req.viewport.height,
                scale: req.scale,
                mobile: req.mobile,
                color_scheme: req.color_scheme,
                block_images: req.block_images,
                max_css_height,
            };
            let work = async {
                match op {
                    Op::Shoot => instance.shoot(lease.slot, &shot_req).await.map(Output::Png),
                    Op::Evaluate(expression) => instance
                        .evaluate(lease.slot, &shot_req, expression)
                        .await
                        .map(Output::Json),
                }
            };
            let result = tokio::time::timeout(self.cfg.render_timeout, work)
                .await
                .unwrap_or(Err(RenderError::Timeout {
                    engine: req.engine,
                    timeout: self.cfg.render_timeout,
                }));
            drop(ticket);
            attempt += 1;
            let error = match result {
                Ok(output) => {
                    // Answered at once: the page is cleared while the slot stays leased, and a
                    // page too busy to clear (another email hogging the engine) delays no one's
                    // picture, only the slot's next render.
                    tokio::spawn(async move {
                        let pool = lease.pool.clone();
                        pool.settle(&instance, generation, lease.slot, None).await;
                        drop(lease);
                    });
                    return Ok(output);
                }
                Err(e) => e,
            };
            if let RenderError::WrongDocument { .. } = error {
                telemetry::global().drawn_refused(req.engine.as_str(), "wrong_document");
            }
            tracing::warn!(engine = %req.engine, attempt, error = %error, "render failed");
            pool.settle(&instance, generation, lease.slot, Some(&error))
                .await;
            let draw_again = matches!(
                error,
                RenderError::WrongDocument { .. } | RenderError::EngineDied { .. }
            ) || matches!(&error, RenderError::Webkit(e) if e.is_retryable() && !e.is_timeout());
            if !draw_again {
                return Err(error);
            }
            last_error = Some(error);
        }
        Err(last_error.unwrap_or(RenderError::EngineUnavailable(req.engine)))
    }

    /// Stops every engine and the proxy.
    pub async fn shutdown(self) {
        for pool in &self.pools {
            if let Some((_, instance)) = pool.current() {
                instance.shutdown().await;
            }
        }
    }
}

/// What a slot does with a loaded document.
#[derive(Clone, Copy)]
enum Op<'a> {
    Shoot,
    Evaluate(&'a str),
}

enum Output {
    Png(engine::Shot),
    Json(String),
}

/// A first start on a busy machine can miss its timeout although the browser is fine: try again
/// (a fresh process each time) before giving up, and then say what happened.
async fn start_with_retries(
    engine: Engine,
    setup: &EngineSetup,
    attempts: u32,
) -> Result<Instance, RenderError> {
    let attempts = attempts.max(1);
    let mut attempt = 1;
    loop {
        match Instance::start(engine, setup).await {
            Ok(instance) => return Ok(instance),
            Err(e) if !e.is_start_retryable() => return Err(e),
            Err(e) if attempt >= attempts => {
                return Err(RenderError::NotReady {
                    engine,
                    attempts,
                    timeout: setup.start_timeout,
                    last: Box::new(e),
                })
            }
            Err(e) => {
                tracing::warn!(%engine, attempt, attempts, error = %e, "engine did not start; trying again");
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                attempt += 1;
            }
        }
    }
}

/// `html` without `<meta http-equiv="refresh">`: a message that reloads or leaves itself would be
/// shot as some other page, and no mail client follows one. The engines refuse such navigations
/// too; this keeps them from being tried at all.
fn without_refresh(html: &str) -> String {
    use lol_html::html_content::ContentType;
    use lol_html::{element, rewrite_str, text, RewriteStrSettings};
    // lol_html reads <noscript> as text (as a browser with script on would), but the engines run
    // without script and parse it as markup: its content is cleaned the same way, in one piece.
    let mut noscript = String::new();
    let rewritten = rewrite_str(
        html,
        RewriteStrSettings::new()
            .append_element_content_handler(element!("meta[http-equiv]", |el| {
                let refresh = el
                    .get_attribute("http-equiv")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("refresh"));
                if refresh {
                    el.remove();
                }
                Ok(())
            }))
            .append_element_content_handler(text!("noscript", |chunk| {
                noscript.push_str(chunk.as_str());
                if chunk.last_in_text_node() {
                    let cleaned = without_refresh(&std::mem::take(&mut noscript));
                    chunk.replace(&cleaned, ContentType::Html);
                } else {
                    chunk.remove();
                }
                Ok(())
            })),
    );
    match rewritten {
        Ok(html) => html,
        Err(e) => {
            // The engines still refuse the navigation; the message is rendered as it came.
            tracing::warn!(error = %e, "could not scan the document for meta refresh");
            html.to_string()
        }
    }
}

fn validate(req: &RenderRequest) -> Result<(), RenderError> {
    let v = req.viewport;
    if v.width == 0
        || v.width > MAX_VIEWPORT_CSS_PX
        || v.height == 0
        || v.height > MAX_VIEWPORT_CSS_PX
    {
        return Err(RenderError::InvalidRequest(format!(
            "viewport {}x{} is outside 1..={MAX_VIEWPORT_CSS_PX} CSS px",
            v.width, v.height
        )));
    }
    if !(req.scale.is_finite() && (MIN_SCALE..=MAX_SCALE).contains(&req.scale)) {
        return Err(RenderError::InvalidRequest(format!(
            "scale {} is outside {MIN_SCALE}..={MAX_SCALE}",
            req.scale
        )));
    }
    if req.html.len() > MAX_HTML_BYTES {
        return Err(RenderError::InvalidRequest(format!(
            "HTML of {} bytes is over the {MAX_HTML_BYTES}-byte limit",
            req.html.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(width: u32, scale: f32) -> RenderRequest {
        RenderRequest {
            html: "<p>x</p>".into(),
            engine: Engine::Blink,
            viewport: Viewport { width, height: 800 },
            scale,
            mobile: false,
            color_scheme: ColorScheme::Light,
            block_images: false,
        }
    }

    #[test]
    fn requests_outside_the_limits_are_refused_and_not_retryable() {
        for bad in [
            request(0, 1.0),
            request(5000, 1.0),
            request(600, 0.0),
            request(600, f32::NAN),
        ] {
            let e = validate(&bad).expect_err("refused");
            assert!(!e.is_retryable());
        }
        assert!(validate(&request(390, 3.0)).is_ok());
    }

    #[test]
    fn meta_refresh_is_removed_and_other_meta_kept() {
        let html = "<html><head><meta charset=utf-8><META HTTP-EQUIV=' Refresh ' CONTENT=\"0;url=http://x/\">\
                    <meta http-equiv=\"content-type\" content=\"text/html\"></head><body>hi</body></html>";
        let out = without_refresh(html);
        // With script off, engines parse <noscript> as markup: a refresh there counts too.
        let hidden = without_refresh(
            "<head><noscript><meta http-equiv=refresh content=0></noscript></head>",
        );
        assert!(!hidden.contains("refresh"), "{hidden}");
        let kept = without_refresh("<noscript><p>shown without script</p></noscript>");
        assert_eq!(kept, "<noscript><p>shown without script</p></noscript>");
        assert!(!out.to_ascii_lowercase().contains("refresh"), "{out}");
        assert!(
            out.contains("content-type") && out.contains("charset=utf-8") && out.contains("hi")
        );
    }

    #[test]
    fn crashes_and_hangs_are_retryable_and_bad_documents_are_not() {
        let died = RenderError::EngineDied {
            engine: Engine::Blink,
            reason: "x".into(),
        };
        assert!(died.is_retryable());
        assert!(RenderError::Timeout {
            engine: Engine::Gecko,
            timeout: Duration::from_secs(1)
        }
        .is_retryable());
        assert!(!RenderError::Document("x".into()).is_retryable());
        assert!(!RenderError::EngineUnavailable(Engine::Webkit).is_retryable());
    }
}
