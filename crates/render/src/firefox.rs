//! Firefox ESR driven over its built-in WebDriver BiDi server (no geckodriver): one warm browser
//! per slot, each with one tab (why a browser per slot: [`Firefox`]).
//!
//! Viewport, device pixel ratio and image blocking are per tab (`setViewport`, a network intercept
//! answered with `failRequest` for images, cache bypass). The colour scheme is not: Firefox ESR
//! only follows the browser-wide `ui.systemUsesDarkTheme` pref, flipped from the chrome scope. A
//! [`SchemeGate`] therefore lets any number of renders of one scheme run together and makes a
//! render of the other scheme wait until they drain, in batches so neither side starves. With one
//! tab per browser the gate rarely waits, but it is still what knows the browser's scheme and
//! flips it; it costs far less memory than a second, dark browser per slot.

use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{Mutex, Notify};

use crate::chromium::tempdir;
use crate::engine::{
    accept_dialog, answer_every, checked_capture, command_failed, drawn_page, launch,
    screenshot_png, wait_for_load, EngineSetup, LoadEvent, PageFacts, Pages, Running, Shot,
    ShotRequest,
};
use crate::error::RenderError;
use crate::ws::Connection;
use domain::{ColorScheme, Engine};

pub(crate) const FIREFOX_BINARY: &str = "firefox-esr";

/// A slot's browser has one tab, at this place of its [`Pages`] (so it is replaced like any
/// engine's page).
const ONLY_TAB: usize = 0;

/// How long the chrome scope may take to name a document's content process.
const CONTENT_PID_WAIT: Duration = Duration::from_secs(2);

/// A chrome-scope function of a URL: the operating-system ids of the content processes whose
/// current top document is at that URL, as JSON.
const CONTENT_PIDS_SCRIPT: &str = r#"((url) => {
  const pids = [];
  for (const win of Services.wm.getEnumerator("navigator:browser")) {
    for (const browser of win.gBrowser.browsers) {
      const global = browser.browsingContext && browser.browsingContext.currentWindowGlobal;
      if (global && browser.currentURI && browser.currentURI.spec === url) {
        pids.push(global.osPid);
      }
    }
  }
  return JSON.stringify(pids);
})"#;

#[derive(Default)]
struct TabState {
    /// Viewport last set: (width, height, scale bits).
    viewport: Option<(u32, u32, u32)>,
    /// The image-blocking intercept while one is installed.
    intercept: Option<String>,
}

struct Tab {
    context: String,
    state: Mutex<TabState>,
    /// The document last sent to the tab (its one-time URL): names the content process to end
    /// when the tab is replaced.
    shown: SyncMutex<Option<String>>,
}

/// Firefox, one browser process per slot. Firefox draws a screenshot in its parent process: the
/// content process records the page's painting and the parent replays it, filters included, on
/// its main thread, which also answers WebDriver BiDi. A costly document (an SVG filter that
/// takes minutes to paint) therefore holds the whole browser, every tab and command in it, for
/// as long as its capture runs; ending the content process does not stop the replay. With a
/// browser per slot it holds only its own slot, whose browser is replaced when the render's
/// budget has passed, while the other slots' renders go on. The price is memory: a browser
/// (parent, its helpers and a content process) per slot instead of one (see BENCHMARKS.md).
pub(crate) struct Firefox {
    browsers: Pages<SlotFirefox>,
    /// How a slot's browser is started again.
    setup: EngineSetup,
}

impl Firefox {
    pub(crate) async fn start(setup: &EngineSetup) -> Result<Firefox, RenderError> {
        let browsers = futures::future::try_join_all(
            (0..setup.slots.max(1)).map(|_| SlotFirefox::start(setup)),
        )
        .await?;
        Ok(Firefox {
            browsers: Pages::new(Engine::Gecko, browsers),
            setup: setup.clone(),
        })
    }

    pub(crate) async fn shoot(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
    ) -> Result<Shot, RenderError> {
        self.browsers.get(slot)?.shoot(req).await
    }

    pub(crate) async fn clear(&self, slot: usize) -> Result<(), RenderError> {
        self.browsers.get(slot)?.clear().await
    }

    /// A fresh page for `slot`: a new tab in the slot's browser when that browser still answers
    /// (its hung document's content process ended first), else a new browser for the slot alone.
    pub(crate) async fn replace_page(&self, slot: usize) -> Result<(), RenderError> {
        let browser = self.browsers.get(slot)?;
        if browser.running.is_alive().await {
            let replaced =
                tokio::time::timeout(self.setup.command_timeout, browser.replace_tab()).await;
            match replaced {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => {
                    tracing::warn!(slot, error = %e, "Firefox could not replace a tab; replacing the slot's browser");
                }
                Err(_) => {
                    tracing::warn!(
                        slot,
                        "Firefox did not replace a tab in time; replacing the slot's browser"
                    );
                }
            }
        }
        browser.running.kill().await;
        drop(browser);
        self.browsers
            .put(slot, SlotFirefox::start(&self.setup).await?);
        Ok(())
    }

    /// Every slot's browser.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.browsers
            .all()
            .iter()
            .map(|browser| browser.running.pid)
            .collect()
    }

    /// While any slot's browser runs: a slot whose browser died gets a new one on its next
    /// failure ([`Firefox::replace_page`]); all of them dead is the engine's restart.
    pub(crate) async fn is_alive(&self) -> bool {
        for browser in self.browsers.all() {
            if browser.running.is_alive().await {
                return true;
            }
        }
        false
    }

    pub(crate) async fn shutdown(&self) {
        futures::future::join_all(
            self.browsers
                .all()
                .iter()
                .map(|browser| browser.running.shutdown("browser.close")),
        )
        .await;
    }
}

/// One slot's Firefox: the browser and its one tab.
struct SlotFirefox {
    running: Running,
    chrome_context: String,
    /// Its one tab ([`ONLY_TAB`]), replaced when a render hangs or crashes in it.
    tabs: Pages<Tab>,
    gate: SchemeGate,
    resource_wait: Duration,
    faults: crate::Faults,
}

/// Profile prefs. Remote automation already applies Firefox's recommended automation prefs; these
/// add what a faithful, private screenshot needs.
fn user_js(proxy: &std::net::SocketAddr) -> String {
    let host = proxy.ip();
    let port = proxy.port();
    let prefs: Vec<(&str, String)> = vec![
        // Without overlay scrollbars headless reserves a 12 px gutter and pages come out narrower.
        ("ui.useOverlayScrollbars", "1".into()),
        ("ui.systemUsesDarkTheme", "0".into()),
        // Everything through the policy proxy, loopback included, and no DNS of our own.
        ("network.proxy.type", "1".into()),
        ("network.proxy.http", format!("\"{host}\"")),
        ("network.proxy.http_port", port.to_string()),
        ("network.proxy.ssl", format!("\"{host}\"")),
        ("network.proxy.ssl_port", port.to_string()),
        ("network.proxy.share_proxy_settings", "false".into()),
        ("network.proxy.no_proxies_on", "\"\"".into()),
        ("network.proxy.allow_hijacking_localhost", "true".into()),
        ("network.proxy.socks_remote_dns", "true".into()),
        ("network.dns.disablePrefetch", "true".into()),
        ("network.prefetch-next", "false".into()),
        ("network.http.speculative-parallel-limit", "0".into()),
        ("network.dns.disableIPv6", "false".into()),
        // The proxy serves documents over plain http; nothing may upgrade them.
        ("dom.security.https_first", "false".into()),
        ("dom.security.https_first_pbm", "false".into()),
        ("dom.security.https_first_schemeless", "false".into()),
        ("dom.security.https_only_mode", "false".into()),
        ("network.captive-portal-service.enabled", "false".into()),
        ("network.connectivity-service.enabled", "false".into()),
        ("browser.safebrowsing.malware.enabled", "false".into()),
        ("browser.safebrowsing.phishing.enabled", "false".into()),
        ("app.normandy.enabled", "false".into()),
        (
            "messaging-system.rsexperimentloader.enabled",
            "false".into(),
        ),
        ("datareporting.policy.dataSubmissionEnabled", "false".into()),
        ("toolkit.telemetry.enabled", "false".into()),
        ("browser.cache.disk.enable", "false".into()),
        ("media.autoplay.default", "5".into()),
        // Nothing in an email runs: no script in any document or frame (our own evaluation runs
        // in the privileged chrome scope, which this does not touch), no meta refresh.
        ("javascript.enabled", "false".into()),
        ("accessibility.blockautorefresh", "true".into()),
        ("dom.disable_beforeunload", "true".into()),
        ("dom.serviceWorkers.enabled", "false".into()),
        ("pdfjs.disabled", "true".into()),
        // No network path that bypasses the proxy: WebRTC (UDP to any address), HTTP/3 (QUIC),
        // DNS over HTTPS.
        ("media.peerconnection.enabled", "false".into()),
        ("media.peerconnection.ice.proxy_only", "true".into()),
        ("media.navigator.enabled", "false".into()),
        ("network.http.http3.enable", "false".into()),
        ("network.trr.mode", "5".into()),
    ];
    prefs
        .iter()
        .map(|(k, v)| format!("user_pref(\"{k}\", {v});\n"))
        .collect()
}

impl SlotFirefox {
    async fn start(setup: &EngineSetup) -> Result<SlotFirefox, RenderError> {
        let engine = Engine::Gecko;
        let profile = tempdir::Dir::new(&setup.work_dir, "firefox")?;
        let proxy: std::net::SocketAddr = setup
            .proxy_url
            .trim_start_matches("http://")
            .parse()
            .map_err(|_| RenderError::EngineStart {
                engine,
                reason: format!("proxy URL {} is not http://IP:PORT", setup.proxy_url),
            })?;
        let user_js_path = profile.path().join("user.js");
        std::fs::write(&user_js_path, user_js(&proxy))
            .map_err(|e| RenderError::io(format!("writing {}", user_js_path.display()), e))?;
        let args: Vec<String> = vec![
            "--headless".into(),
            "--no-remote".into(),
            "--profile".into(),
            profile.path().display().to_string(),
            "--remote-debugging-port=0".into(),
            "--remote-allow-hosts=127.0.0.1".into(),
            "-remote-allow-system-access".into(),
            "about:blank".into(),
        ];
        let binary = match &setup.program {
            Some(program) => program.clone(),
            None => which(FIREFOX_BINARY).ok_or_else(|| RenderError::ProgramMissing {
                engine,
                program: format!("{FIREFOX_BINARY} (not on PATH)"),
            })?,
        };
        let mut env = setup.env.clone();
        env.push(("MOZ_CRASHREPORTER_DISABLE".into(), "1".into()));
        let (browser, conn) = launch(
            engine,
            setup,
            &binary,
            &args,
            &env,
            "WebDriver BiDi listening on ",
            "/session",
        )
        .await?;
        let pid = browser.pid();
        call(
            &conn,
            "session.new",
            json!({"capabilities": {"alwaysMatch": {"unhandledPromptBehavior": {"default": "dismiss"}}}}),
        )
        .await?;
        call(
            &conn,
            "session.subscribe",
            json!({"events": [
                "browsingContext.load",
                "network.beforeRequestSent",
                "browsingContext.userPromptOpened",
            ]}),
        )
        .await?;
        dismiss_prompts(&conn);
        let tree = call(
            &conn,
            "browsingContext.getTree",
            json!({"moz:scope": "chrome"}),
        )
        .await?;
        let chrome_context = tree
            .pointer("/contexts/0/context")
            .and_then(Value::as_str)
            .ok_or_else(|| RenderError::EngineStart {
                engine,
                reason: format!(
                    "no chrome context (is -remote-allow-system-access honoured?): {tree}"
                ),
            })?
            .to_string();
        let tab = open_tab(&conn).await?;
        conn.set_command_timeout(setup.command_timeout);
        tracing::info!(pid, "Firefox ready");
        Ok(SlotFirefox {
            running: Running::new(browser, conn, profile),
            chrome_context,
            tabs: Pages::new(Engine::Gecko, vec![tab]),
            gate: SchemeGate::new(2),
            resource_wait: setup.resource_wait,
            faults: setup.faults,
        })
    }

    /// Closes the tab and opens a fresh one. The content process of the tab's last
    /// document is ended first: a document still painting (an endless animation, a filter that
    /// takes minutes) keeps its process busy, and closing the tab waits for that process, past
    /// the command time-out, which would then restart the whole browser and everyone's renders.
    async fn replace_tab(&self) -> Result<(), RenderError> {
        let old = self.tabs.get(ONLY_TAB)?;
        let shown = old.shown.lock().ok().and_then(|mut s| s.take());
        if let Some(url) = shown {
            self.end_content_process(&url).await;
        }
        let conn = &self.running.conn;
        // A tab that is already gone answers with an error; the new one is what matters.
        let _ = call(
            conn,
            "browsingContext.close",
            json!({"context": old.context, "promptUnload": false}),
        )
        .await;
        self.tabs.put(ONLY_TAB, open_tab(conn).await?);
        Ok(())
    }

    /// Ends the content process showing the document at `url`, asked of the chrome scope (which
    /// knows each tab's process) with a short time-out. Only a process under this browser is
    /// signalled, and only one whose document is `url`: a document's URL is a site of its own
    /// ([`crate::proxy::DocSite::Own`]), so Fission gives it a process no other tab shares.
    async fn end_content_process(&self, url: &str) {
        let Ok(quoted) = serde_json::to_string(url) else {
            return;
        };
        let expression = format!("{CONTENT_PIDS_SCRIPT}({quoted})");
        let asked = tokio::time::timeout(CONTENT_PID_WAIT, self.in_chrome(&expression)).await;
        let answer = match asked {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not ask Firefox which process shows a document");
                return;
            }
            Err(_) => {
                tracing::warn!("Firefox did not say which process shows a document in time");
                return;
            }
        };
        let pids: Vec<u32> = answer
            .pointer("/result/value")
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        let browser = self.running.pid;
        let ours = procs::tree(browser);
        for pid in pids {
            if pid != browser && ours.contains(&pid) {
                let ended = procs::signal(pid, procs::Signal::KILL);
                tracing::info!(
                    pid,
                    ended,
                    "ended the content process of a replaced Firefox tab"
                );
            }
        }
    }

    /// Under the test fault [`crate::Faults::keep_previous_document`]: whether the page holds a
    /// document already, which is then kept instead of loading the one asked for.
    async fn keeps_previous_document(&self, page: &str) -> Result<bool, RenderError> {
        if !self.faults.keep_previous_document {
            return Ok(false);
        }
        Ok(self.facts(page).await?.url != "about:blank")
    }

    async fn clear(&self) -> Result<(), RenderError> {
        if self.faults.keep_previous_document {
            return Ok(());
        }
        let tab = self.tabs.get(ONLY_TAB)?;
        call(
            &self.running.conn,
            "browsingContext.navigate",
            json!({"context": tab.context, "url": "about:blank", "wait": "complete"}),
        )
        .await
        .map(drop)
    }

    /// [`webkit::protocol::PAGE_FACTS_SCRIPT`] on the tab's page, in a sandbox of its own: it
    /// sees the page's DOM, nothing the page defines, and runs although page script is off.
    async fn facts(&self, context: &str) -> Result<PageFacts, RenderError> {
        let text = self
            .sandboxed(context, webkit::protocol::PAGE_FACTS_SCRIPT)
            .await?;
        serde_json::from_str(&text).map_err(|e| {
            RenderError::Document(format!("the page read-back answered unexpected data: {e}"))
        })
    }

    /// `script` (one that answers text) on the tab's page, in the `mailproof` sandbox.
    async fn sandboxed(&self, context: &str, script: &str) -> Result<String, RenderError> {
        let answer = call(
            &self.running.conn,
            "script.evaluate",
            json!({
                "expression": script,
                "target": {"context": context, "sandbox": "mailproof"},
                "awaitPromise": false,
                "resultOwnership": "none",
            }),
        )
        .await?;
        match answer.pointer("/result/value").and_then(Value::as_str) {
            Some(text) => Ok(text.to_string()),
            None => Err(RenderError::Document(format!(
                "the page read-back failed in Firefox: {answer}"
            ))),
        }
    }

    async fn shoot(&self, req: &ShotRequest<'_>) -> Result<Shot, RenderError> {
        let tab = self.tabs.get(ONLY_TAB)?;
        let _scheme = self.enter_scheme(req.color_scheme).await?;
        let mut state = tab.state.lock().await;
        let conn = &self.running.conn;
        let viewport = (req.width, req.height, req.scale.to_bits());
        if state.viewport != Some(viewport) {
            state.viewport = None;
            call(
                conn,
                "browsingContext.setViewport",
                json!({
                    "context": tab.context,
                    "viewport": {"width": req.width, "height": req.height},
                    "devicePixelRatio": req.scale,
                }),
            )
            .await?;
            state.viewport = Some(viewport);
        }
        match (&state.intercept, req.block_images) {
            (None, true) => {
                let added = call(
                    conn,
                    "network.addIntercept",
                    json!({"phases": ["beforeRequestSent"], "contexts": [tab.context]}),
                )
                .await?;
                let id = added
                    .get("intercept")
                    .and_then(Value::as_str)
                    .ok_or_else(|| RenderError::Protocol {
                        engine: Engine::Gecko,
                        method: "network.addIntercept".into(),
                        message: format!("no intercept id in {added}"),
                    })?;
                state.intercept = Some(id.to_string());
            }
            (Some(id), false) => {
                call(conn, "network.removeIntercept", json!({"intercept": id})).await?;
                state.intercept = None;
            }
            _ => {}
        }

        if let Ok(mut shown) = tab.shown.lock() {
            *shown = Some(req.url.to_string());
        }
        let context = tab.context.clone();
        let url = req.url.to_string();
        let intercept = state.intercept.clone();
        let mut events = conn.subscribe(move |m| {
            let params = m.get("params");
            match m.get("method").and_then(Value::as_str) {
                Some("browsingContext.load") => {
                    params
                        .and_then(|p| p.get("context"))
                        .and_then(Value::as_str)
                        == Some(context.as_str())
                        && params.and_then(|p| p.get("url")).and_then(Value::as_str)
                            == Some(url.as_str())
                }
                Some("network.beforeRequestSent") => {
                    let Some(id) = &intercept else { return false };
                    params
                        .and_then(|p| p.get("isBlocked"))
                        .and_then(Value::as_bool)
                        == Some(true)
                        && params
                            .and_then(|p| p.get("intercepts"))
                            .and_then(Value::as_array)
                            .is_some_and(|ids| ids.iter().any(|i| i.as_str() == Some(id)))
                }
                _ => false,
            }
        });
        let navigate = async {
            call(
                conn,
                "browsingContext.navigate",
                json!({"context": tab.context, "url": req.url, "wait": "none"}),
            )
            .await
            .map(drop)
        };
        if self.keeps_previous_document(&tab.context).await? {
            drop(navigate);
        } else {
            wait_for_load(
                Engine::Gecko,
                navigate,
                &mut events,
                self.resource_wait,
                |event| async move {
                    if event.get("method").and_then(Value::as_str) == Some("browsingContext.load") {
                        return Ok(LoadEvent::Loaded);
                    }
                    let request = event.pointer("/params/request");
                    let Some(id) = request
                        .and_then(|r| r.get("request"))
                        .and_then(Value::as_str)
                    else {
                        return Ok(LoadEvent::Other);
                    };
                    let (method, params) = if request.is_some_and(is_image_request) {
                        ("network.failRequest", json!({"request": id}))
                    } else {
                        ("network.continueRequest", json!({"request": id}))
                    };
                    // The request may be gone already (navigation replaced); that is not an
                    // error here.
                    match call(conn, method, params).await {
                        Err(e) if e.is_retryable() => Err(e),
                        _ => Ok(LoadEvent::Other),
                    }
                },
            )
            .await?;
        }
        drop(events);
        // The tab's settings stay locked until the picture is taken.
        let deadline = tokio::time::Instant::now() + self.resource_wait;
        let context = tab.context.as_str();
        let shot = checked_capture(
            Engine::Gecko,
            req.url,
            deadline,
            || self.facts(context),
            |_| async {
                let shot = call(
                    conn,
                    "browsingContext.captureScreenshot",
                    json!({
                        "context": context,
                        "origin": "document",
                        "format": {"type": "image/png"},
                        "clip": {"type": "box", "x": 0, "y": 0, "width": req.width, "height": req.max_css_height},
                    }),
                )
                .await?;
                screenshot_png(Engine::Gecko, &shot)
            },
            || async {
                let text = self
                    .sandboxed(context, webkit::protocol::DRAWN_PAGE_SCRIPT)
                    .await?;
                drawn_page(Engine::Gecko, &text)
            },
        )
        .await;
        drop(state);
        shot
    }

    /// Evaluates `expression` in the browser's privileged chrome scope (prefs, tabs, processes).
    async fn in_chrome(&self, expression: &str) -> Result<Value, RenderError> {
        call(
            &self.running.conn,
            "script.evaluate",
            json!({
                "expression": expression,
                "target": {"context": self.chrome_context},
                "awaitPromise": false,
            }),
        )
        .await
    }

    /// Waits until `scheme` is the browser's scheme (switching it when no render needs the other).
    async fn enter_scheme(&self, scheme: ColorScheme) -> Result<SchemeGuard<'_>, RenderError> {
        match self.gate.enter(scheme).await {
            Entry::Ready(guard) => Ok(guard),
            Entry::MustFlip(guard) => {
                let dark = matches!(scheme, ColorScheme::Dark) as i32;
                let expression =
                    format!("Services.prefs.setIntPref(\"ui.systemUsesDarkTheme\", {dark})");
                let result = self.in_chrome(&expression).await;
                // On failure the gate no longer knows the browser's scheme: the next render flips.
                self.gate.flipped(scheme, result.is_ok());
                result?;
                Ok(guard)
            }
        }
    }
}

/// Opens a tab that bypasses the cache.
async fn open_tab(conn: &Connection) -> Result<Tab, RenderError> {
    let created = call(conn, "browsingContext.create", json!({"type": "tab"})).await?;
    let context = created
        .get("context")
        .and_then(Value::as_str)
        .ok_or_else(|| RenderError::EngineStart {
            engine: Engine::Gecko,
            reason: format!("browsingContext.create without a context: {created}"),
        })?
        .to_string();
    call(
        conn,
        "network.setCacheBehavior",
        json!({"cacheBehavior": "bypass", "contexts": [context]}),
    )
    .await?;
    Ok(Tab {
        context,
        state: Mutex::new(TabState::default()),
        shown: SyncMutex::new(None),
    })
}

/// True for requests that fetch an image: by fetch destination when Firefox reports it, else by
/// initiator or file extension.
fn is_image_request(request: &Value) -> bool {
    if let Some(destination) = request.get("destination").and_then(Value::as_str) {
        if !destination.is_empty() {
            return destination == "image";
        }
    }
    if let Some(initiator) = request.get("initiatorType").and_then(Value::as_str) {
        if matches!(initiator, "img" | "image" | "imageset" | "css" | "icon") {
            return true;
        }
    }
    let url = request.get("url").and_then(Value::as_str).unwrap_or("");
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    [
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".avif", ".bmp", ".ico",
    ]
    .iter()
    .any(|ext| path.ends_with(ext))
}

/// Closes every user prompt as it opens: script is off and the session dismisses unhandled
/// prompts, but a prompt left open would hold its tab until the render timed out.
fn dismiss_prompts(conn: &Arc<Connection>) {
    answer_every(
        conn,
        "browsingContext.userPromptOpened",
        |conn, event| async move {
            let Some(context) = event.pointer("/params/context").and_then(Value::as_str) else {
                return;
            };
            let accept = accept_dialog(Engine::Gecko, &event);
            // The session's own handler may have closed it already; that error is expected.
            let _ = call(
                &conn,
                "browsingContext.handleUserPrompt",
                json!({"context": context, "accept": accept}),
            )
            .await;
        },
    );
}

async fn call(conn: &Connection, method: &str, params: Value) -> Result<Value, RenderError> {
    let answer = conn.call_raw(method, params, None).await?;
    if answer.get("type").and_then(Value::as_str) == Some("error") {
        let error = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("error");
        let message = answer.get("message").and_then(Value::as_str).unwrap_or("");
        let gone = error == "no such frame" || error == "invalid session id";
        return Err(command_failed(
            Engine::Gecko,
            method,
            format!("{error}: {message}"),
            gone,
        ));
    }
    Ok(answer.get("result").cloned().unwrap_or(Value::Null))
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Admission of renders by colour scheme for a browser whose scheme is global.
struct SchemeGate {
    state: SyncMutex<GateState>,
    changed: Notify,
    /// Renders of the current scheme admitted while the other waits, before it gets its turn.
    batch: usize,
}

struct GateState {
    /// The browser's scheme; `None` when unknown (a flip failed).
    current: Option<ColorScheme>,
    active: usize,
    flipping: bool,
    waiting_light: usize,
    waiting_dark: usize,
    admitted_while_other_waits: usize,
}

enum Entry<'a> {
    Ready(SchemeGuard<'a>),
    /// The caller must switch the browser to its scheme, then report with [`SchemeGate::flipped`].
    MustFlip(SchemeGuard<'a>),
}

struct SchemeGuard<'a> {
    gate: &'a SchemeGate,
}

impl Drop for SchemeGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.gate.state.lock() {
            s.active = s.active.saturating_sub(1);
        }
        self.gate.changed.notify_waiters();
    }
}

impl SchemeGate {
    fn new(batch: usize) -> SchemeGate {
        SchemeGate {
            state: SyncMutex::new(GateState {
                current: Some(ColorScheme::Light),
                active: 0,
                flipping: false,
                waiting_light: 0,
                waiting_dark: 0,
                admitted_while_other_waits: 0,
            }),
            changed: Notify::new(),
            batch,
        }
    }

    async fn enter(&self, want: ColorScheme) -> Entry<'_> {
        let mut counted = false;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let Ok(mut s) = self.state.lock() else {
                    return Entry::Ready(SchemeGuard { gate: self });
                };
                let other_waiting = match want {
                    ColorScheme::Light => s.waiting_dark,
                    ColorScheme::Dark => s.waiting_light,
                } > 0;
                if counted {
                    match want {
                        ColorScheme::Light => s.waiting_light -= 1,
                        ColorScheme::Dark => s.waiting_dark -= 1,
                    }
                }
                if !s.flipping && s.current == Some(want) {
                    let turn_over = other_waiting && s.admitted_while_other_waits >= self.batch;
                    if !turn_over {
                        s.active += 1;
                        if other_waiting {
                            s.admitted_while_other_waits += 1;
                        }
                        return Entry::Ready(SchemeGuard { gate: self });
                    }
                } else if !s.flipping && s.active == 0 {
                    s.flipping = true;
                    s.active += 1;
                    s.admitted_while_other_waits = 0;
                    return Entry::MustFlip(SchemeGuard { gate: self });
                }
                match want {
                    ColorScheme::Light => s.waiting_light += 1,
                    ColorScheme::Dark => s.waiting_dark += 1,
                }
                counted = true;
            }
            notified.await;
        }
    }

    fn flipped(&self, scheme: ColorScheme, ok: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.flipping = false;
            s.current = ok.then_some(scheme);
        }
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_recognised_by_destination_before_extension() {
        assert!(is_image_request(
            &json!({"url": "http://x/a", "destination": "image"})
        ));
        assert!(!is_image_request(
            &json!({"url": "http://x/a.png", "destination": "style"})
        ));
        assert!(is_image_request(&json!({"url": "http://x/a.PNG?x=1"})));
        assert!(!is_image_request(&json!({"url": "http://x/doc"})));
    }

    #[tokio::test]
    async fn renders_of_one_scheme_share_the_browser_and_the_other_waits_its_turn() {
        let gate = Arc::new(SchemeGate::new(2));
        let a = match gate.enter(ColorScheme::Light).await {
            Entry::Ready(g) => g,
            Entry::MustFlip(_) => panic!("light is the starting scheme"),
        };
        let b = match gate.enter(ColorScheme::Light).await {
            Entry::Ready(g) => g,
            Entry::MustFlip(_) => panic!("a second light render needs no flip"),
        };
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move {
                match gate.enter(ColorScheme::Dark).await {
                    Entry::MustFlip(g) => {
                        drop(g);
                        gate.flipped(ColorScheme::Dark, true);
                        true
                    }
                    Entry::Ready(_) => false,
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "dark must wait while light renders run"
        );
        drop(a);
        drop(b);
        let flipped = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("dark render admitted once light drained")
            .expect("task");
        assert!(flipped, "the dark render is told to flip the pref");
    }
}
