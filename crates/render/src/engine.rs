//! What the pool needs from a running engine, whichever of the three it is.

use std::path::PathBuf;
use std::time::Duration;

use domain::{ColorScheme, Engine};
pub(crate) use webkit::protocol::{DrawnPage, PageFacts};

use crate::chromium::Chromium;
use crate::error::RenderError;
use crate::firefox::Firefox;
use crate::webkit::Webkit;

/// How to start one engine instance.
#[derive(Clone)]
pub(crate) struct EngineSetup {
    pub slots: usize,
    pub work_dir: PathBuf,
    pub proxy_url: String,
    pub env: Vec<(String, String)>,
    pub start_timeout: Duration,
    pub command_timeout: Duration,
    /// Upper bound for one render attempt (WebKit's helper answers a whole capture at once).
    pub render_timeout: Duration,
    /// The browser program (WebKit: the helper binary); `None` for the engine's usual one.
    pub program: Option<PathBuf>,
    pub resource_wait: Duration,
    pub faults: crate::Faults,
}

/// One screenshot for a slot; the document is already registered with the proxy at `url`.
pub(crate) struct ShotRequest<'a> {
    pub url: &'a str,
    /// The document itself, for WebKit's helper, which loads it without the proxy.
    pub html: &'a str,
    pub width: u32,
    pub height: u32,
    pub scale: f32,
    pub mobile: bool,
    pub color_scheme: ColorScheme,
    pub block_images: bool,
    /// Tallest document captured, in CSS px; longer documents are cut there.
    pub max_css_height: u32,
}

pub(crate) struct Shot {
    pub png: Vec<u8>,
    /// Whether the page had text a reader would see, as the page itself said when it was drawn:
    /// a blank picture of such a page is refused.
    pub visible_text: bool,
    /// The page's resources and content width as it was drawn
    /// ([`webkit::protocol::DRAWN_PAGE_SCRIPT`]).
    pub drawn: DrawnPage,
}

/// [`webkit::protocol::DRAWN_PAGE_SCRIPT`]'s answer (JSON text), read.
pub(crate) fn drawn_page(engine: Engine, text: &str) -> Result<DrawnPage, RenderError> {
    serde_json::from_str(text).map_err(|e| {
        RenderError::Document(format!(
            "the drawn page's read-back answered unexpected data in {engine}: {e}"
        ))
    })
}

/// A running engine with its slots.
pub(crate) enum Instance {
    Chromium(Chromium),
    Firefox(Firefox),
    /// Boxed: its helpers' bookkeeping is twice the size of the others, and an instance is made
    /// once per start.
    Webkit(Box<Webkit>),
}

impl Instance {
    pub(crate) async fn start(
        engine: Engine,
        setup: &EngineSetup,
    ) -> Result<Instance, RenderError> {
        match engine {
            Engine::Blink => Ok(Instance::Chromium(Chromium::start(setup).await?)),
            Engine::Gecko => Ok(Instance::Firefox(Firefox::start(setup).await?)),
            Engine::Webkit => Ok(Instance::Webkit(Box::new(Webkit::start(setup).await?))),
        }
    }

    pub(crate) async fn shoot(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
    ) -> Result<Shot, RenderError> {
        match self {
            Instance::Chromium(c) => c.shoot(slot, req).await,
            Instance::Firefox(f) => f.shoot(slot, req).await,
            Instance::Webkit(w) => w.shoot(slot, req).await,
        }
    }

    /// Loads the page and evaluates `expression` on it; only Chromium offers this, through CDP's
    /// `Runtime.evaluate` (the other engines' protocols here drive screenshots only).
    pub(crate) async fn evaluate(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
        expression: &str,
    ) -> Result<String, RenderError> {
        match self {
            Instance::Chromium(c) => c.evaluate(slot, req, expression).await,
            Instance::Firefox(_) => Err(probe_unsupported(Engine::Gecko)),
            Instance::Webkit(_) => Err(probe_unsupported(Engine::Webkit)),
        }
    }

    /// Puts a fresh page in `slot` in place of one a render hung or crashed in, leaving the
    /// other slots' renders alone (Firefox: a new tab, or a new browser for the slot when its
    /// browser no longer answers; WebKit: the helper the slot drew with is ended, and the next
    /// capture at its scale starts a new one). An error means the browser itself no longer
    /// answers.
    pub(crate) async fn replace_page(&self, slot: usize) -> Result<(), RenderError> {
        match self {
            Instance::Chromium(c) => c.replace_tab(slot).await,
            Instance::Firefox(f) => f.replace_page(slot).await,
            Instance::Webkit(w) => {
                w.abandon(slot);
                Ok(())
            }
        }
    }

    /// Where the proxy serves this engine's documents. Firefox's are sites of their own, so a
    /// document that holds its page has a content process of its own to end
    /// ([`Firefox::replace_page`]); Chromium and WebKit end a page's process without that, and keep
    /// the process they have.
    pub(crate) fn doc_site(&self) -> crate::proxy::DocSite {
        match self {
            Instance::Firefox(_) => crate::proxy::DocSite::Own,
            Instance::Chromium(_) | Instance::Webkit(_) => crate::proxy::DocSite::Shared,
        }
    }

    /// Loads the blank page in `slot` after a render, so that the email drawn there neither runs
    /// its animations on while the slot waits nor shows through the next render (WebKit's
    /// helper clears its view itself, after answering).
    pub(crate) async fn clear(&self, slot: usize) -> Result<(), RenderError> {
        match self {
            Instance::Chromium(c) => c.clear(slot).await,
            Instance::Firefox(f) => f.clear(slot).await,
            Instance::Webkit(_) => Ok(()),
        }
    }

    /// The browser's main process; WebKit's Xvfb, helpers and the processes under them.
    pub(crate) fn pids(&self) -> Vec<u32> {
        match self {
            Instance::Chromium(c) => vec![c.running.pid],
            Instance::Firefox(f) => f.pids(),
            Instance::Webkit(w) => w.pids(),
        }
    }

    pub(crate) async fn is_alive(&self) -> bool {
        match self {
            Instance::Chromium(c) => c.running.is_alive().await,
            Instance::Firefox(f) => f.is_alive().await,
            Instance::Webkit(w) => w.is_alive(),
        }
    }

    pub(crate) async fn shutdown(&self) {
        match self {
            Instance::Chromium(c) => c.running.shutdown("Browser.close").await,
            Instance::Firefox(f) => f.shutdown().await,
            Instance::Webkit(w) => w.shutdown().await,
        }
    }
}

/// Starts a browser (`program`, with `args` and `env`) whose profile is `profile`, waits for the
/// stderr line with `marker` that gives its protocol's WebSocket address, and connects to that
/// address plus `ws_path`. Until the tabs exist, commands may take as long as the start itself: a
/// browser that has just printed its address can still be busy loading on a starved machine.
pub(crate) async fn launch(
    engine: Engine,
    setup: &EngineSetup,
    program: &std::path::Path,
    args: &[String],
    env: &[(String, String)],
    marker: &'static str,
    ws_path: &str,
) -> Result<
    (
        crate::process::Browser,
        std::sync::Arc<crate::ws::Connection>,
    ),
    RenderError,
> {
    let (browser, ws_url) =
        crate::process::Browser::spawn(engine, program, args, env, marker, setup.start_timeout)
            .await?;
    let conn =
        crate::ws::Connection::open(engine, &format!("{ws_url}{ws_path}"), setup.start_timeout)
            .await?;
    Ok((browser, std::sync::Arc::new(conn)))
}

/// The PNG in a protocol's screenshot answer (`data`, base64 in both CDP and BiDi).
pub(crate) fn screenshot_png(
    engine: Engine,
    answer: &serde_json::Value,
) -> Result<Vec<u8>, RenderError> {
    use base64::Engine as _;
    let data = answer
        .get("data")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| RenderError::Document(format!("{engine} returned no screenshot data")))?;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| RenderError::Image(format!("{engine} screenshot is not base64: {e}")))
}

/// The error for a protocol command the browser answered with an error: a crash when `gone`
/// (the tab or session the command was for no longer exists), else a refused command.
pub(crate) fn command_failed(
    engine: Engine,
    method: &str,
    message: String,
    gone: bool,
) -> RenderError {
    if gone {
        RenderError::EngineDied {
            engine,
            reason: format!("{method}: {message}"),
        }
    } else {
        RenderError::Protocol {
            engine,
            method: method.to_string(),
            message,
        }
    }
}

pub(crate) fn probe_unsupported(engine: Engine) -> RenderError {
    RenderError::InvalidRequest(format!(
        "page probes run only in Chromium (blink), not in {engine}; ask for the blink engine"
    ))
}

/// A started browser with its protocol connection and private profile.
pub(crate) struct Running {
    pub browser: tokio::sync::Mutex<crate::process::Browser>,
    pub pid: u32,
    pub conn: std::sync::Arc<crate::ws::Connection>,
    pub _profile: crate::chromium::tempdir::Dir,
}

impl Running {
    pub(crate) fn new(
        browser: crate::process::Browser,
        conn: std::sync::Arc<crate::ws::Connection>,
        profile: crate::chromium::tempdir::Dir,
    ) -> Running {
        Running {
            pid: browser.pid(),
            browser: tokio::sync::Mutex::new(browser),
            conn,
            _profile: profile,
        }
    }

    pub(crate) async fn is_alive(&self) -> bool {
        self.conn.is_open() && self.browser.lock().await.is_alive()
    }

    /// Kills the browser's process group now.
    pub(crate) async fn kill(&self) {
        self.browser.lock().await.kill().await;
    }

    /// Asks the browser to close (`close` is the protocol's command), then kills what is left.
    pub(crate) async fn shutdown(&self, close: &str) {
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.conn.call_raw(close, serde_json::json!({}), None),
        )
        .await;
        self.browser.lock().await.kill().await;
    }
}

/// What an engine makes of one event while a page loads.
pub(crate) enum LoadEvent {
    /// The document's load event: stop waiting.
    Loaded,
    /// Anything else (an intercepted request that was answered, ...): keep waiting.
    Other,
}

/// Drives `navigate` and feeds `events` to `on_event` until the page has loaded or `wait` has
/// passed since the call; the page is then shot as it is. Events are handled while the navigate
/// command is still pending, because an intercepted request can hold the navigation up.
pub(crate) async fn wait_for_load<N, F, Fut>(
    engine: Engine,
    navigate: N,
    events: &mut crate::ws::Events,
    wait: Duration,
    mut on_event: F,
) -> Result<(), RenderError>
where
    N: std::future::Future<Output = Result<(), RenderError>>,
    F: FnMut(serde_json::Value) -> Fut,
    Fut: std::future::Future<Output = Result<LoadEvent, RenderError>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    tokio::pin!(navigate);
    let mut navigated = false;
    loop {
        let event = tokio::select! {
            result = &mut navigate, if !navigated => {
                result?;
                navigated = true;
                continue;
            }
            _ = tokio::time::sleep_until(deadline), if navigated => {
                tracing::info!(%engine, ?wait, "load not finished; shooting the page as it is");
                return Ok(());
            }
            event = events.next() => event.ok_or_else(|| RenderError::EngineDied {
                engine,
                reason: "the connection closed during a page load".into(),
            })?,
        };
        if let LoadEvent::Loaded = on_event(event).await? {
            if !navigated {
                (&mut navigate).await?;
            }
            return Ok(());
        }
    }
}

/// Runs `answer` on every event named `method`, in a task of its own, for as long as the
/// connection lives (events that must be answered whichever render is running, e.g. dialogs).
pub(crate) fn answer_every<F, Fut>(
    conn: &std::sync::Arc<crate::ws::Connection>,
    method: &'static str,
    answer: F,
) where
    F: Fn(std::sync::Arc<crate::ws::Connection>, serde_json::Value) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut events = conn
        .subscribe(move |m| m.get("method").and_then(serde_json::Value::as_str) == Some(method));
    let conn = std::sync::Arc::downgrade(conn);
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let Some(conn) = conn.upgrade() else { break };
            answer(conn, event).await;
        }
    });
}

/// Whether to accept the dialog (`alert`, `confirm`, `prompt`, `beforeunload`) an event of
/// either protocol reports: only `beforeunload`, so that the next render may leave the page;
/// everything else is dismissed. Script is off, so a dialog is worth a warning.
pub(crate) fn accept_dialog(engine: Engine, event: &serde_json::Value) -> bool {
    let kind = event
        .pointer("/params/type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("unknown");
    tracing::warn!(%engine, dialog = kind, "a page opened a dialog; answering it");
    kind == "beforeunload"
}

/// Refuses a document that is not the one `url` asked for: the engine still held an earlier
/// document (a load that never committed), or a navigation replaced it. Every document is loaded
/// under its own one-time address and the page reports it back, so this cannot be fooled by
/// anything an email contains.
pub(crate) fn check_document(
    engine: Engine,
    facts: &PageFacts,
    url: &str,
) -> Result<(), RenderError> {
    if facts.url == url {
        return Ok(());
    }
    Err(RenderError::WrongDocument {
        engine,
        found: if facts.url == "about:blank" || facts.url.is_empty() {
            "a blank page".into()
        } else {
            "another document".into()
        },
    })
}

/// How often the web fonts' state is read again while they load.
const FONT_POLL: Duration = Duration::from_millis(25);

/// Draws a loaded page only once it is the page asked for and settled, and refuses a picture
/// that may be of anything else: reads the page back (`read`) and checks its address, waits
/// (until `deadline`) for its web fonts, draws (`draw`, given the facts read), reads it back
/// again, and draws once more if the page's height changed while it was drawn (a late font or
/// image laid it out again), then reads what the drawn page says of itself (`drawn`). The same steps for
/// every engine driven from here; WebKit's helper takes them in its own process and reports both
/// readings.
pub(crate) async fn checked_capture<R, RF, D, DF, S, SF>(
    engine: Engine,
    url: &str,
    deadline: tokio::time::Instant,
    read: R,
    draw: D,
    drawn: S,
) -> Result<Shot, RenderError>
where
    R: Fn() -> RF,
    RF: std::future::Future<Output = Result<PageFacts, RenderError>>,
    D: Fn(PageFacts) -> DF,
    DF: std::future::Future<Output = Result<Vec<u8>, RenderError>>,
    S: FnOnce() -> SF,
    SF: std::future::Future<Output = Result<DrawnPage, RenderError>>,
{
    let mut before = read().await?;
    check_document(engine, &before, url)?;
    while !before.fonts_loaded && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(FONT_POLL).await;
        before = read().await?;
        check_document(engine, &before, url)?;
    }
    let visible_text = before.visible_text;
    let height = before.height;
    let mut png = draw(before).await?;
    let after = read().await?;
    check_document(engine, &after, url)?;
    if after.height != height {
        png = draw(after).await?;
        check_document(engine, &read().await?, url)?;
    }
    let drawn = drawn().await?;
    Ok(Shot {
        png,
        visible_text,
        drawn,
    })
}

/// A browser's pages, one per slot, each replaceable alone (the tabs of Chromium and Firefox).
pub(crate) struct Pages<T> {
    engine: Engine,
    slots: Vec<std::sync::Mutex<std::sync::Arc<T>>>,
}

impl<T> Pages<T> {
    pub(crate) fn new(engine: Engine, pages: Vec<T>) -> Pages<T> {
        Pages {
            engine,
            slots: pages
                .into_iter()
                .map(|page| std::sync::Mutex::new(std::sync::Arc::new(page)))
                .collect(),
        }
    }

    /// The page of `slot` now.
    pub(crate) fn get(&self, slot: usize) -> Result<std::sync::Arc<T>, RenderError> {
        self.slots
            .get(slot)
            .and_then(|page| page.lock().ok().map(|page| page.clone()))
            .ok_or_else(|| RenderError::InvalidRequest(format!("no {} slot {slot}", self.engine)))
    }

    /// Every slot's page now.
    pub(crate) fn all(&self) -> Vec<std::sync::Arc<T>> {
        self.slots
            .iter()
            .filter_map(|page| page.lock().ok().map(|page| page.clone()))
            .collect()
    }

    /// Puts `fresh` in `slot` in place of its page.
    pub(crate) fn put(&self, slot: usize, fresh: T) {
        if let Some(Ok(mut page)) = self.slots.get(slot).map(|page| page.lock()) {
            *page = std::sync::Arc::new(fresh);
        }
    }
}
