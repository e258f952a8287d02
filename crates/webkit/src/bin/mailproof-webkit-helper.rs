//! The WebKitGTK helper process: one offscreen WebView that turns HTML into full-document PNGs.
//!
//! It reads [`webkit::protocol::RenderRequest`] lines on stdin and answers each with one
//! [`webkit::protocol::Reply`] line on stdout. It needs an X display (`DISPLAY`) and takes its device
//! scale from `GDK_SCALE`, because GTK fixes both per process; the engine runs one helper per scale.
//! It exits when stdin closes, so it never outlives the engine that started it.

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use gtk::glib;
use gtk::prelude::*;
use javascriptcore::ValueExt;
use std::cell::RefCell;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};
use webkit::protocol::{
    DrawnPage, Faults, HelperOptions, PageFacts, RenderRequest, Reply, Timings, DRAWN_PAGE_SCRIPT,
    MAX_REQUEST_LINE_BYTES, MAX_SURFACE_PX, PAGE_FACTS_SCRIPT,
};
use webkit2gtk::{
    CacheModel, HardwareAccelerationPolicy, LoadEvent, NavigationPolicyDecision,
    NavigationPolicyDecisionExt, NetworkProxyMode, NetworkProxySettings, PolicyDecisionExt,
    PolicyDecisionType, SettingsExt, SnapshotOptions, SnapshotRegion, URIRequestExt, WebContext,
    WebContextExt, WebView, WebViewExt, WebsiteDataManager, WebsiteDataManagerExt,
};

/// How long a resize may take to reach the WebView before the page is loaded anyway.
const RESIZE_WAIT: Duration = Duration::from_secs(2);

/// Head-room below the surface limit for body margins and rounding, in CSS px.
const CLIP_MARGIN_CSS_PX: u32 = 64;

/// Returns 0 when the document fits `max` CSS px; otherwise makes the root and the body clip at
/// `max` and returns the new scroll height. The body must become the clipping box: overflow on
/// the root only moves to the viewport, whose snapshot still covers the whole content.
const CLIP_SCRIPT: &str = r#"(function (max) {
  var html = document.documentElement, body = document.body;
  if (!html || html.scrollHeight <= max) return 0;
  function set(el, k, v) { el.style.setProperty(k, v, 'important'); }
  set(html, 'height', max + 'px');
  set(html, 'overflow', 'hidden');
  if (body) {
    var cs = getComputedStyle(body);
    var margins = (parseFloat(cs.marginTop) || 0) + (parseFloat(cs.marginBottom) || 0);
    set(body, 'box-sizing', 'border-box');
    set(body, 'height', Math.max(0, max - margins) + 'px');
    set(body, 'overflow', 'hidden');
  }
  return html.scrollHeight;
})"#;

/// How long a stopped load may take to report that it finished.
const STOP_SETTLE: Duration = Duration::from_secs(1);

/// How long the blank document that clears the view after a capture may take to load; a web
/// process that cannot manage that is still busy with the email it drew and is ended.
const CLEAR_WAIT: Duration = Duration::from_secs(1);

/// The blank document that clears the view between requests.
const BLANK: &str = "about:blank";

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            send(&Reply::Failed {
                message,
                fatal: true,
            });
            return ExitCode::from(2);
        }
    };
    if let Err(error) = gtk::init() {
        send(&Reply::Failed {
            message: format!("GTK could not start (is DISPLAY an X server?): {error}"),
            fatal: true,
        });
        return ExitCode::from(2);
    }
    let renderer = Renderer::new(&options);
    let requests = spawn_stdin_reader();
    send(&Reply::Ready {
        pid: std::process::id(),
    });
    glib::MainContext::default().spawn_local(async move {
        serve(renderer, requests).await;
        gtk::main_quit();
    });
    gtk::main();
    ExitCode::SUCCESS
}

/// The options come as one JSON argument so the engine and the helper share one definition.
fn parse_options() -> Result<HelperOptions, String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (Some("--options"), Some(json)) => {
            serde_json::from_str(&json).map_err(|e| format!("bad --options JSON: {e}"))
        }
        _ => Err("usage: mailproof-webkit-helper --options '<HelperOptions JSON>'".to_owned()),
    }
}

fn send(reply: &Reply) {
    // A serialisation failure cannot happen for these plain types; if stdout is gone the engine is
    // gone too, and the next read of stdin ends this process.
    if let Ok(line) = serde_json::to_string(reply) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// Stdin is read on its own thread because GTK owns the main thread; lines reach the GTK main
/// loop through a channel that the async serve loop awaits.
fn spawn_stdin_reader() -> mpsc::UnboundedReceiver<Result<String, String>> {
    let (tx, rx) = mpsc::unbounded();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        loop {
            let mut line = Vec::new();
            let limit = MAX_REQUEST_LINE_BYTES as u64 + 1;
            match std::io::Read::take(&mut input, limit).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let item = if line.len() > MAX_REQUEST_LINE_BYTES {
                // Drop the rest of the oversized line so the next request starts cleanly.
                let mut rest = Vec::new();
                if input.read_until(b'\n', &mut rest).is_err() {
                    break;
                }
                Err(format!(
                    "request line longer than {MAX_REQUEST_LINE_BYTES} bytes"
                ))
            } else {
                String::from_utf8(line).map_err(|_| "request line is not UTF-8".to_owned())
            };
            if tx.unbounded_send(item).is_err() {
                break;
            }
        }
    });
    rx
}

async fn serve(renderer: Renderer, mut requests: mpsc::UnboundedReceiver<Result<String, String>>) {
    while let Some(line) = requests.next().await {
        let request = line.and_then(|l| {
            serde_json::from_str::<RenderRequest>(&l).map_err(|e| format!("bad request JSON: {e}"))
        });
        let reply = match request {
            Ok(request) => renderer.render(&request).await,
            Err(message) => Reply::Failed {
                message,
                fatal: false,
            },
        };
        let fatal = matches!(reply, Reply::Failed { fatal: true, .. });
        send(&reply);
        if fatal {
            break;
        }
        // Cleared after the answer is sent, so it costs the caller nothing: the email's
        // animations stop using the CPU now, and the next email is never laid out or shown
        // over this one.
        renderer.clear().await;
    }
}

/// What ended the wait for a page load.
enum LoadOutcome {
    Finished,
    WebProcessGone(String),
    TimedOut,
}

struct Renderer {
    window: gtk::OffscreenWindow,
    view: WebView,
    settings: webkit2gtk::Settings,
    resource_wait: Duration,
    faults: Faults,
    /// The one document the view may load next: the request's own address, or the blank page
    /// that clears the view. Taken by the first navigation that matches, so a frame or a second
    /// navigation to the same address is refused.
    allowed: Rc<RefCell<Option<String>>>,
}

impl Renderer {
    fn new(options: &HelperOptions) -> Renderer {
        // Ephemeral: nothing of one email (cookies, cache, storage) survives into the next.
        let data_manager = WebsiteDataManager::new_ephemeral();
        match &options.proxy {
            Some(proxy) => {
                // An empty ignore list: loopback addresses go through the proxy too, so the
                // network policy enforced there sees every request.
                let mut proxy_settings = NetworkProxySettings::new(Some(proxy), &[]);
                data_manager.set_network_proxy_settings(
                    NetworkProxyMode::Custom,
                    Some(&mut proxy_settings),
                );
            }
            // No proxy from the environment either: what the engine was told is what happens.
            None => data_manager.set_network_proxy_settings(NetworkProxyMode::NoProxy, None),
        }
        let context = WebContext::with_website_data_manager(&data_manager);
        context.set_cache_model(CacheModel::DocumentViewer);

        let settings = webkit2gtk::Settings::new();
        // Mail clients run no scripts, plugins or media in messages: script elements and event
        // attributes are dropped while parsing, in the page and in every frame of it, and no
        // `javascript:` URL runs (render's hostile-email tests check all of these). JavaScript itself stays on only because WebKit refuses the API's own
        // evaluation otherwise ("Cannot execute JavaScript in this document"): the helper's
        // measuring script runs in an isolated world.
        settings.set_enable_javascript(true);
        settings.set_enable_javascript_markup(false);
        settings.set_javascript_can_open_windows_automatically(false);
        // (Plugins and Java are gone from WebKitGTK since 2.32; their settings do nothing.)
        // No WebRTC (UDP past the proxy), no camera or microphone, no media at all.
        settings.set_enable_webrtc(false);
        settings.set_enable_media_stream(false);
        settings.set_enable_mediasource(false);
        settings.set_enable_webaudio(false);
        settings.set_enable_media(false);
        settings.set_enable_webgl(false);
        settings.set_enable_page_cache(false);
        settings.set_enable_dns_prefetching(false);
        settings.set_enable_smooth_scrolling(false);
        // Xvfb has no GPU; software painting is also what makes snapshots deterministic.
        settings.set_hardware_acceleration_policy(HardwareAccelerationPolicy::Never);

        let view = WebView::builder()
            .web_context(&context)
            .settings(&settings)
            .build();
        let allowed: Rc<RefCell<Option<String>>> = Rc::default();
        let allowed_in_policy = allowed.clone();
        view.connect_decide_policy(move |_, decision, kind| match kind {
            PolicyDecisionType::NavigationAction | PolicyDecisionType::NewWindowAction => {
                if !is_allowed_document(decision, &allowed_in_policy) {
                    // Mail clients follow no meta refresh, form or frame navigation inside a
                    // message; letting one through would shoot some other page.
                    decision.ignore();
                    return true;
                }
                false
            }
            _ => false,
        });
        let window = gtk::OffscreenWindow::new();
        window.add(&view);
        window.show_all();
        Renderer {
            window,
            view,
            settings,
            resource_wait: Duration::from_millis(options.resource_wait_ms),
            faults: options.faults,
            allowed,
        }
    }

    /// Loads the blank page, so that no email stays in the view between requests; a web process
    /// too busy to load it within [`CLEAR_WAIT`] is ended (the next load starts a fresh one).
    async fn clear(&self) {
        if self.faults.keep_previous_document {
            return;
        }
        self.allowed.replace(Some(BLANK.to_owned()));
        let (tx, mut finished) = mpsc::unbounded();
        let on_load = self.view.connect_load_changed(move |_, event| {
            if event == LoadEvent::Finished {
                let _ = tx.unbounded_send(());
            }
        });
        self.view.load_uri(BLANK);
        let timeout = glib::timeout_future(CLEAR_WAIT).fuse();
        futures::pin_mut!(timeout);
        let cleared = futures::select! {
            done = finished.next() => done.is_some(),
            () = timeout => false,
        };
        self.view.disconnect(on_load);
        if !cleared {
            eprintln!("the web process did not clear the view within {CLEAR_WAIT:?}; ending it");
            self.view.terminate_web_process();
        }
    }

    /// [`PAGE_FACTS_SCRIPT`] on the page as it is now.
    async fn facts(&self) -> Result<PageFacts, Reply> {
        self.read_back(PAGE_FACTS_SCRIPT, "the page read-back")
            .await
    }

    /// A read-back `script` (one answering JSON text) in the `mailproof` world, its answer read
    /// as `T`; `what` names it in errors.
    async fn read_back<T: serde::de::DeserializeOwned>(
        &self,
        script: &str,
        what: &str,
    ) -> Result<T, Reply> {
        let value = self
            .view
            .evaluate_javascript_future(script, Some("mailproof"), None)
            .await
            .map_err(|e| Reply::Failed {
                message: format!("{what} failed: {e}"),
                fatal: false,
            })?;
        let text = value.to_str();
        serde_json::from_str(text.as_str()).map_err(|e| Reply::Failed {
            message: format!("{what} answered unexpected data ({e})"),
            fatal: false,
        })
    }

    /// Waits, within `until`, for the page's web fonts to settle; text drawn before that would
    /// be drawn in a fallback font.
    async fn settle_fonts(&self, mut facts: PageFacts, until: Instant) -> Result<PageFacts, Reply> {
        while !facts.fonts_loaded && Instant::now() < until {
            glib::timeout_future(Duration::from_millis(25)).await;
            facts = self.facts().await?;
        }
        Ok(facts)
    }

    async fn snapshot(&self) -> Result<cairo::Surface, Reply> {
        self.view
            .snapshot_future(SnapshotRegion::FullDocument, SnapshotOptions::NONE)
            .await
            .map_err(|e| Reply::Failed {
                message: format!("WebKit snapshot failed: {e}"),
                fatal: true,
            })
    }

    async fn render(&self, request: &RenderRequest) -> Reply {
        match self.try_render(request).await {
            Ok(reply) => reply,
            Err(reply) => reply,
        }
    }

    async fn try_render(&self, request: &RenderRequest) -> Result<Reply, Reply> {
        self.resize(request.width, request.height).await;
        self.settings.set_auto_load_images(!request.block_images);
        if let Some(gtk_settings) = gtk::Settings::default() {
            // WebKitGTK derives prefers-color-scheme from the GTK theme's dark preference.
            gtk_settings.set_gtk_application_prefer_dark_theme(request.dark);
        }

        let started = Instant::now();
        let keep =
            self.faults.keep_previous_document && self.view.uri().is_some_and(|uri| uri != BLANK);
        let loaded = if keep {
            true
        } else {
            match self.load(&request.html, &request.document_url).await {
                LoadOutcome::Finished => true,
                LoadOutcome::TimedOut => false,
                LoadOutcome::WebProcessGone(why) => {
                    return Err(Reply::Failed {
                        message: format!("WebKit web process ended: {why}"),
                        fatal: true,
                    })
                }
            }
        };

        let scale = self.view.scale_factor().max(1) as u32;
        self.clip_to_surface_limit(MAX_SURFACE_PX / scale - CLIP_MARGIN_CSS_PX)
            .await?;
        let before = self.facts().await?;
        let before = self
            .settle_fonts(before, started + self.resource_wait)
            .await?;
        let loaded_at = Instant::now();
        let mut surface = self.snapshot().await?;
        let mut after = self.facts().await?;
        if after.height != before.height {
            // Laid out again while it was being drawn (a late font or image): draw the settled
            // page once more rather than store a half-done one.
            surface = self.snapshot().await?;
            after = self.facts().await?;
        }
        let snapshot_at = Instant::now();
        let drawn = self.drawn().await?;
        let device_width = request.width.saturating_mul(scale);
        let (width_px, height_px) =
            write_png(&surface, device_width, &request.out).map_err(|message| Reply::Failed {
                message,
                fatal: false,
            })?;
        let timings = Timings {
            load_ms: millis(loaded_at - started),
            snapshot_ms: millis(snapshot_at - loaded_at),
            encode_ms: millis(snapshot_at.elapsed()),
        };
        Ok(Reply::Rendered {
            width_px,
            height_px,
            loaded,
            timings,
            before,
            after,
            drawn,
        })
    }

    /// [`DRAWN_PAGE_SCRIPT`] on the page as it was drawn.
    async fn drawn(&self) -> Result<DrawnPage, Reply> {
        self.read_back(DRAWN_PAGE_SCRIPT, "the drawn page's read-back")
            .await
    }

    /// Cuts a document taller than `max_css_px` to that height: WebKit cannot snapshot more
    /// device pixels than cairo's surface limit, and a cut long newsletter beats no screenshot.
    async fn clip_to_surface_limit(&self, max_css_px: u32) -> Result<(), Reply> {
        let script = format!("{CLIP_SCRIPT}({max_css_px})");
        let result = self
            .view
            .evaluate_javascript_future(&script, Some("mailproof"), None)
            .await
            .map_err(|e| Reply::Failed {
                message: format!("measuring the document failed: {e}"),
                fatal: false,
            })?;
        let clipped_to = result.to_double();
        if clipped_to > 0.0 {
            eprintln!("document taller than {max_css_px} CSS px; cut to {clipped_to} px");
        }
        Ok(())
    }

    /// Media queries see the viewport of the first layout, so the new size must reach the WebView
    /// before the page loads.
    async fn resize(&self, width: u32, height: u32) {
        let (w, h) = (width as i32, height as i32);
        if self.view.allocated_width() == w && self.view.allocated_height() == h {
            return;
        }
        self.view.set_size_request(w, h);
        self.window.resize(w, h);
        let deadline = Instant::now() + RESIZE_WAIT;
        while (self.view.allocated_width() != w || self.view.allocated_height() != h)
            && Instant::now() < deadline
        {
            glib::timeout_future(Duration::from_millis(2)).await;
        }
    }

    async fn load(&self, html: &str, document_url: &str) -> LoadOutcome {
        self.allowed.replace(Some(document_url.to_owned()));
        let (tx, mut events) = mpsc::unbounded();
        let finished_tx = tx.clone();
        let on_load = self.view.connect_load_changed(move |_, event| {
            if event == LoadEvent::Finished {
                let _ = finished_tx.unbounded_send(LoadOutcome::Finished);
            }
        });
        let on_crash = self.view.connect_web_process_terminated(move |_, reason| {
            let _ = tx.unbounded_send(LoadOutcome::WebProcessGone(format!("{reason:?}")));
        });
        self.view.load_html(html, Some(document_url));
        let timeout = glib::timeout_future(self.resource_wait).map(|()| LoadOutcome::TimedOut);
        let outcome = futures::select! {
            event = events.next() => event.unwrap_or(LoadOutcome::TimedOut),
            timed_out = timeout.fuse() => timed_out,
        };
        if matches!(outcome, LoadOutcome::TimedOut) {
            // Slow subresources must not stall the queue: stop and shoot what has arrived. The
            // stopped load still reports Finished; it is awaited here so that it cannot arrive
            // during the next capture and end that one's wait too early.
            self.view.stop_loading();
            let settle = glib::timeout_future(STOP_SETTLE).fuse();
            futures::pin_mut!(settle);
            loop {
                futures::select! {
                    event = events.next() => match event {
                        Some(LoadOutcome::Finished) | None => break,
                        Some(_) => {}
                    },
                    () = settle => break,
                }
            }
        }
        self.view.disconnect(on_load);
        self.view.disconnect(on_crash);
        outcome
    }
}

/// Writes the snapshot as PNG, cropped to the viewport width: a document wider than the viewport
/// (an email with a fixed 600px table on a 390px phone) is cut like the phone's screen cuts it,
/// and every engine returns the same width for the same request.
///
/// GdkPixbuf turns cairo's premultiplied BGRA into RGB in C, and the `png` crate's fast preset
/// compresses: cairo's own PNG writer spent about 420 ms of a 580 ms 390@3x capture compressing.
fn write_png(
    surface: &cairo::Surface,
    device_width: u32,
    out: &Path,
) -> Result<(u32, u32), String> {
    let image = cairo::ImageSurface::try_from(surface.clone())
        .map_err(|_| "WebKit snapshot is not an image surface".to_owned())?;
    // The snapshot is already in device pixels; its device scale would make GDK shrink it again.
    image.set_device_scale(1.0, 1.0);
    let width = (image.width().max(1) as u32).min(device_width.max(1));
    let height = (image.height().max(1) as u32).min(MAX_SURFACE_PX);
    let pixbuf = gtk::gdk::pixbuf_get_from_surface(&image, 0, 0, width as i32, height as i32)
        .ok_or_else(|| format!("cannot convert the {width}x{height} snapshot to pixels"))?;
    let (color, channels) = match pixbuf.has_alpha() {
        true => (png::ColorType::Rgba, 4),
        false => (png::ColorType::Rgb, 3),
    };
    let row_bytes = width as usize * channels;
    let stride = pixbuf.rowstride().max(0) as usize;
    let bytes = pixbuf.read_pixel_bytes();
    // GdkPixbuf pads rows to 4 bytes; PNG wants them packed.
    let mut packed = Vec::with_capacity(row_bytes * height as usize);
    for row in 0..height as usize {
        let start = row * stride;
        let line = bytes
            .get(start..start + row_bytes)
            .ok_or_else(|| format!("pixel row {row} lies outside the converted snapshot"))?;
        packed.extend_from_slice(line);
    }
    let file =
        std::fs::File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(color);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder
        .write_header()
        .map_err(|e| format!("PNG header: {e}"))?;
    writer
        .write_image_data(&packed)
        .map_err(|e| format!("PNG data: {e}"))?;
    writer.finish().map_err(|e| format!("PNG end: {e}"))?;
    Ok((width, height))
}

/// Only the document the helper itself asked for may load, once: the message by `load_html`
/// under its request's address, or the blank page that clears the view. Every other navigation
/// is something the message tries to do on its own.
fn is_allowed_document(
    decision: &webkit2gtk::PolicyDecision,
    allowed: &RefCell<Option<String>>,
) -> bool {
    let uri = decision
        .downcast_ref::<NavigationPolicyDecision>()
        .and_then(|d| d.navigation_action())
        .and_then(|action| action.request())
        .and_then(|request| request.uri());
    let mut allowed = allowed.borrow_mut();
    let matches = uri.is_some_and(|uri| allowed.as_deref() == Some(uri.as_str()));
    if matches {
        allowed.take();
    }
    matches
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}
