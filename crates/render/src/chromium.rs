//! Chromium driven over the Chrome DevTools Protocol: one warm browser, one tab per slot.
//!
//! Everything a render varies (viewport, scale, mobile, colour scheme, image blocking) is a per-tab
//! CDP setting, so slots never wait for each other. Images are blocked with Fetch interception of
//! resource type `Image` (failed before any byte leaves the browser), and the cache is disabled so a
//! cached image can neither dodge the block nor hide a slow host.
//!
//! Nothing in an email runs: script is off browser-wide (`--blink-settings`) and per tab
//! (`Emulation.setScriptExecutionDisabled`), every document request other than the one being
//! rendered is failed (Fetch interception of `Document`), dialogs are dismissed as they open, and
//! WebRTC may not use UDP the proxy does not carry. Probes of our own run in an isolated world.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::engine::{
    accept_dialog, answer_every, checked_capture, command_failed, drawn_page, launch,
    screenshot_png, wait_for_load, EngineSetup, LoadEvent, PageFacts, Pages, Running, Shot,
    ShotRequest,
};
use crate::error::RenderError;
use crate::ws::Connection;
use domain::{ColorScheme, Engine};

pub(crate) const CHROMIUM_BINARY: &str = "/usr/lib/chromium/chromium";

struct Tab {
    session: String,
    /// The tab's target id, which is also its main frame's id.
    target: String,
    /// Whether Fetch interception of images is on in this tab (documents always are).
    blocking: Mutex<bool>,
}

/// Fetch interception patterns: documents always (only the one being rendered may load), images
/// when they are blocked.
fn fetch_patterns(block_images: bool) -> Value {
    let mut patterns =
        vec![json!({"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"})];
    if block_images {
        patterns
            .push(json!({"urlPattern": "*", "resourceType": "Image", "requestStage": "Request"}));
    }
    json!({ "patterns": patterns })
}

/// Per tab (session id): the main frame and the one document URL it may load next.
type Expected = Arc<SyncMutex<HashMap<String, (String, String)>>>;

pub(crate) struct Chromium {
    pub(crate) running: Running,
    /// One tab per slot; a slot's tab is replaced alone when a render hangs or crashes in it.
    tabs: Pages<Tab>,
    documents: Expected,
    resource_wait: Duration,
    faults: crate::Faults,
}

/// Flags from the measured notes, plus the proxy and what keeps a headless browser quiet.
fn flags(profile: &std::path::Path, proxy: &str) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-breakpad",
        "--mute-audio",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        // Every slot is a tab and only one can be in front: background tabs must still produce
        // frames, or a screenshot of one can wait forever.
        "--disable-background-timer-throttling",
        "--disable-backgrounding-occluded-windows",
        "--disable-renderer-backgrounding",
        // http documents must stay http: the proxy serves them, there is no TLS to upgrade to.
        // Paint holding keeps showing the previous page after a same-origin navigation until
        // the new one paints, and every document comes from the proxy's one origin: a capture
        // must never see the previous email.
        "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,MediaRouter,Translate,PaintHolding",
        "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        // No script in any frame of any page, whatever the tab settings say: email content is
        // never meant to run, and a frame in another renderer process would escape a per-tab
        // setting made too late.
        "--blink-settings=scriptEnabled=false",
        // WebRTC only over the proxy, which carries no UDP: no STUN or TURN packet to any address.
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        // `<-loopback>` removes Chromium's implicit loopback bypass: loopback goes through the
        // proxy and its policy too.
        "--proxy-bypass-list=<-loopback>",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--proxy-server={proxy}"),
        format!("--user-data-dir={}", profile.display()),
        "about:blank".to_string(),
    ])
    .collect()
}

impl Chromium {
    pub(crate) async fn start(setup: &EngineSetup) -> Result<Chromium, RenderError> {
        let engine = Engine::Blink;
        let profile = tempdir::Dir::new(&setup.work_dir, "chromium")?;
        let binary = setup
            .program
            .clone()
            .unwrap_or_else(|| PathBuf::from(CHROMIUM_BINARY));
        if !binary.is_file() {
            return Err(RenderError::ProgramMissing {
                engine,
                program: binary.display().to_string(),
            });
        }
        let (browser, conn) = launch(
            engine,
            setup,
            &binary,
            &flags(profile.path(), &setup.proxy_url),
            &setup.env,
            "DevTools listening on ",
            "",
        )
        .await?;
        let pid = browser.pid();
        dismiss_dialogs(&conn);
        let documents = Expected::default();
        answer_requests(&conn, documents.clone());
        let mut tabs = Vec::with_capacity(setup.slots);
        for _ in 0..setup.slots {
            tabs.push(open_tab(&conn).await?);
        }
        // From here on a hung command is found within the command timeout, as in Firefox.
        conn.set_command_timeout(setup.command_timeout);
        tracing::info!(pid, slots = setup.slots, "Chromium ready");
        Ok(Chromium {
            running: Running::new(browser, conn, profile),
            tabs: Pages::new(Engine::Blink, tabs),
            documents,
            resource_wait: setup.resource_wait,
            faults: setup.faults,
        })
    }

    /// Closes `slot`'s tab (its renderer process goes with it) and opens a fresh one there.
    pub(crate) async fn replace_tab(&self, slot: usize) -> Result<(), RenderError> {
        let old = self.tabs.get(slot)?;
        let conn = &self.running.conn;
        // A tab that is already gone answers with an error; the new one is what matters.
        let _ = call(
            conn,
            None,
            "Target.closeTarget",
            json!({"targetId": old.target}),
        )
        .await;
        if let Ok(mut expected) = self.documents.lock() {
            expected.remove(&old.session);
        }
        self.tabs.put(slot, open_tab(conn).await?);
        Ok(())
    }

    /// Under the test fault [`crate::Faults::keep_previous_document`]: whether the page holds a
    /// document already, which is then kept instead of loading the one asked for.
    async fn keeps_previous_document(&self, page: &str) -> Result<bool, RenderError> {
        if !self.faults.keep_previous_document {
            return Ok(false);
        }
        Ok(self.facts(page).await?.url != "about:blank")
    }

    pub(crate) async fn clear(&self, slot: usize) -> Result<(), RenderError> {
        if self.faults.keep_previous_document {
            return Ok(());
        }
        let tab = self.tabs.get(slot)?;
        call(
            &self.running.conn,
            Some(&tab.session),
            "Page.navigate",
            json!({"url": "about:blank"}),
        )
        .await
        .map(drop)
    }

    /// [`webkit::protocol::PAGE_FACTS_SCRIPT`] on the tab's page, in a world of its own.
    async fn facts(&self, session: &str) -> Result<PageFacts, RenderError> {
        let text = self
            .isolated(session, webkit::protocol::PAGE_FACTS_SCRIPT)
            .await?;
        let text: String = serde_json::from_value(text)
            .map_err(|e| RenderError::Document(format!("the page read-back is not text: {e}")))?;
        serde_json::from_str(&text).map_err(|e| {
            RenderError::Document(format!("the page read-back answered unexpected data: {e}"))
        })
    }

    /// Evaluates `expression` in an isolated world of the tab's main frame: it sees the page's
    /// DOM and computed styles, but nothing the page defines (its globals, overridden
    /// built-ins), and it is not page script.
    async fn isolated(&self, session: &str, expression: &str) -> Result<Value, RenderError> {
        let conn = &self.running.conn;
        let tree = call(conn, Some(session), "Page.getFrameTree", json!({})).await?;
        let frame = tree
            .pointer("/frameTree/frame/id")
            .and_then(Value::as_str)
            .ok_or_else(|| RenderError::Document("Chromium reported no main frame".into()))?;
        let world = call(
            conn,
            Some(session),
            "Page.createIsolatedWorld",
            json!({"frameId": frame, "worldName": "mailproof-probe", "grantUniveralAccess": false}),
        )
        .await?;
        let context = world
            .get("executionContextId")
            .and_then(Value::as_i64)
            .ok_or_else(|| RenderError::Document(format!("no isolated world: {world}")))?;
        let answer = call(
            conn,
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expression, "contextId": context, "returnByValue": true, "awaitPromise": true}),
        )
        .await?;
        if let Some(details) = answer.get("exceptionDetails") {
            let text = details
                .pointer("/exception/description")
                .or_else(|| details.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("unknown exception");
            return Err(RenderError::Document(format!(
                "the probe script failed in Chromium: {text}"
            )));
        }
        answer.pointer("/result/value").cloned().ok_or_else(|| {
            RenderError::Document(
                "the probe script's result is not JSON-serialisable; return plain data".into(),
            )
        })
    }

    pub(crate) async fn shoot(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
    ) -> Result<Shot, RenderError> {
        let tab = self.load(slot, req).await?;
        let session = tab.session.as_str();
        let conn = &self.running.conn;
        let deadline = tokio::time::Instant::now() + self.resource_wait;
        checked_capture(
            Engine::Blink,
            req.url,
            deadline,
            || self.facts(session),
            |_| async {
                let metrics = call(conn, Some(session), "Page.getLayoutMetrics", json!({})).await?;
                let content_height = metrics
                    .pointer("/cssContentSize/height")
                    .and_then(Value::as_f64)
                    .unwrap_or(req.height as f64);
                let height = (content_height.ceil() as u32).clamp(1, req.max_css_height);
                let shot = call(
                    conn,
                    Some(session),
                    "Page.captureScreenshot",
                    json!({
                        "format": "png",
                        "captureBeyondViewport": true,
                        "fromSurface": true,
                        "clip": {"x": 0, "y": 0, "width": req.width, "height": height, "scale": 1},
                    }),
                )
                .await?;
                screenshot_png(Engine::Blink, &shot)
            },
            || async {
                let text = self
                    .isolated(session, webkit::protocol::DRAWN_PAGE_SCRIPT)
                    .await?;
                drawn_page(Engine::Blink, text.as_str().unwrap_or_default())
            },
        )
        .await
    }

    /// Evaluates `expression` on the loaded page (once it is the page asked for) and returns
    /// its value as JSON text.
    pub(crate) async fn evaluate(
        &self,
        slot: usize,
        req: &ShotRequest<'_>,
        expression: &str,
    ) -> Result<String, RenderError> {
        let tab = self.load(slot, req).await?;
        let facts = self.facts(&tab.session).await?;
        crate::engine::check_document(Engine::Blink, &facts, req.url)?;
        Ok(self.isolated(&tab.session, expression).await?.to_string())
    }

    /// Sets the tab up for `req` and loads its document; returns the tab.
    async fn load(&self, slot: usize, req: &ShotRequest<'_>) -> Result<Arc<Tab>, RenderError> {
        let tab = self.tabs.get(slot)?;
        let session = tab.session.as_str();
        let conn = &self.running.conn;
        call(
            conn,
            Some(session),
            "Emulation.setDeviceMetricsOverride",
            json!({
                "width": req.width, "height": req.height,
                "deviceScaleFactor": req.scale, "mobile": req.mobile,
                "screenWidth": req.width, "screenHeight": req.height,
            }),
        )
        .await?;
        let scheme = match req.color_scheme {
            ColorScheme::Light => "light",
            ColorScheme::Dark => "dark",
        };
        call(
            conn,
            Some(session),
            "Emulation.setEmulatedMedia",
            json!({"media": "", "features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        )
        .await?;
        {
            let mut blocking = tab.blocking.lock().await;
            if *blocking != req.block_images {
                call(
                    conn,
                    Some(session),
                    "Fetch.enable",
                    fetch_patterns(req.block_images),
                )
                .await?;
                *blocking = req.block_images;
            }
        }

        // The document may be requested once; a second request for it, or any other document
        // (meta refresh, a frame, a form), is something the email does on its own.
        if let Ok(mut expected) = self.documents.lock() {
            expected.insert(
                session.to_string(),
                (tab.target.clone(), req.url.to_string()),
            );
        }
        let owner = session.to_string();
        let mut events = conn.subscribe(move |m| {
            m.get("sessionId").and_then(Value::as_str) == Some(owner.as_str())
                && m.get("method").and_then(Value::as_str) == Some("Page.loadEventFired")
        });
        let navigate = async {
            let result = call(
                conn,
                Some(session),
                "Page.navigate",
                json!({"url": req.url}),
            )
            .await?;
            match result.get("errorText").and_then(Value::as_str) {
                Some(error) if !error.is_empty() => Err(RenderError::Document(format!(
                    "Chromium could not load it: {error}"
                ))),
                _ => Ok(()),
            }
        };
        if self.keeps_previous_document(session).await? {
            drop(navigate);
        } else {
            wait_for_load(
                Engine::Blink,
                navigate,
                &mut events,
                self.resource_wait,
                |_| async { Ok(LoadEvent::Loaded) },
            )
            .await?;
        }
        drop(events);
        Ok(tab)
    }
}

/// Opens a tab set up for rendering: its own window, image and document interception, no cache,
/// no script.
async fn open_tab(conn: &Connection) -> Result<Tab, RenderError> {
    let target = call(
        conn,
        None,
        "Target.createTarget",
        json!({"url": "about:blank", "newWindow": true}),
    )
    .await?;
    let target_id = str_field(&target, "targetId")?;
    let attached = call(
        conn,
        None,
        "Target.attachToTarget",
        json!({"targetId": target_id, "flatten": true}),
    )
    .await?;
    let session = str_field(&attached, "sessionId")?;
    for (method, params) in [
        ("Page.enable", json!({})),
        ("Network.enable", json!({})),
        ("Network.setCacheDisabled", json!({"cacheDisabled": true})),
        (
            "Emulation.setScriptExecutionDisabled",
            json!({"value": true}),
        ),
        ("Fetch.enable", fetch_patterns(false)),
    ] {
        call(conn, Some(&session), method, params).await?;
    }
    Ok(Tab {
        session,
        target: target_id,
        blocking: Mutex::new(false),
    })
}

/// Answers every intercepted request of every tab, whenever it comes (a meta refresh may fire
/// after the load, while the page is shot): the expected document once, in its tab's main frame;
/// any other document with 204 No Content, which leaves the frame as it is (a failed navigation
/// would replace the email with an error page); images (intercepted only while blocked) fail.
fn answer_requests(conn: &Arc<Connection>, documents: Expected) {
    answer_every(conn, "Fetch.requestPaused", move |conn, event| {
        let session = event
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        let document = event
            .pointer("/params/resourceType")
            .and_then(Value::as_str)
            == Some("Document");
        let allow = document
            && session.as_deref().is_some_and(|session| {
                let Ok(mut expected) = documents.lock() else {
                    return false;
                };
                let matches = expected.get(session).is_some_and(|(frame, url)| {
                    event.pointer("/params/frameId").and_then(Value::as_str) == Some(frame)
                        && event.pointer("/params/request/url").and_then(Value::as_str) == Some(url)
                });
                if matches {
                    expected.remove(session);
                }
                matches
            });
        async move {
            let (Some(session), Some(id)) = (
                session,
                event.pointer("/params/requestId").and_then(Value::as_str),
            ) else {
                return;
            };
            let (method, params) = if allow {
                ("Fetch.continueRequest", json!({"requestId": id}))
            } else if document {
                (
                    "Fetch.fulfillRequest",
                    json!({"requestId": id, "responseCode": 204}),
                )
            } else {
                (
                    "Fetch.failRequest",
                    json!({"requestId": id, "errorReason": "BlockedByClient"}),
                )
            };
            // A request that already went away answers with an error; that is fine.
            let _ = call(&conn, Some(&session), method, params).await;
        }
    });
}

/// Answers every JavaScript dialog of every tab as it opens: script is off, so none should open,
/// but one that did would hold its tab (and every command to it) until the render timed out.
fn dismiss_dialogs(conn: &Arc<Connection>) {
    answer_every(
        conn,
        "Page.javascriptDialogOpening",
        |conn, event| async move {
            let Some(session) = event.get("sessionId").and_then(Value::as_str) else {
                return;
            };
            let accept = accept_dialog(Engine::Blink, &event);
            let _ = call(
                &conn,
                Some(session),
                "Page.handleJavaScriptDialog",
                json!({"accept": accept}),
            )
            .await;
        },
    );
}

/// Sends one CDP command (to a tab when `session` is set) and returns its `result`.
async fn call(
    conn: &Connection,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> Result<Value, RenderError> {
    let answer = conn
        .call_raw(method, params, session.map(|s| ("sessionId", s)))
        .await?;
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_string();
        // A tab or browser that went away is a crash, not a bad document.
        let gone = message.contains("Target closed")
            || message.contains("Session with given id not found");
        return Err(command_failed(Engine::Blink, method, message, gone));
    }
    Ok(answer.get("result").cloned().unwrap_or(Value::Null))
}

fn str_field(v: &Value, key: &str) -> Result<String, RenderError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| RenderError::EngineStart {
            engine: Engine::Blink,
            reason: format!("CDP answer without {key}: {v}"),
        })
}

/// A private scratch directory removed when dropped (browser profiles).
pub(crate) mod tempdir {
    use std::path::{Path, PathBuf};

    use rand::RngCore;

    use crate::error::RenderError;

    pub(crate) struct Dir(PathBuf);

    impl Dir {
        pub(crate) fn new(parent: &Path, prefix: &str) -> Result<Dir, RenderError> {
            let mut bytes = [0u8; 6];
            rand::thread_rng().fill_bytes(&mut bytes);
            let path = parent.join(format!("{prefix}-{}", hex::encode(bytes)));
            std::fs::create_dir_all(&path)
                .map_err(|e| RenderError::io(format!("creating {}", path.display()), e))?;
            Ok(Dir(path))
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
