//! Hostile emails (issue 17): every way an email could run script, navigate, open a nested
//! document or reach the network, rendered through every engine. Nothing may run, nothing may
//! arrive, no engine may restart, and a plain render beside them stays about as fast as before.
//!
//! The trap is a loopback HTTP listener on 127.0.0.1, which the test's network policy allows:
//! a script that ran would reach it through the proxy (its request arrives), and a path that
//! bypasses the proxy would reach it too. A UDP listener on 127.0.0.1 stands for the STUN/TURN
//! server WebRTC would send to. Each page also loads one harmless image from the trap, so the
//! trap is proven to count what reaches it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use domain::Engine;
use render::{RenderRequest, Rendered, Renderer};
use tokio::net::UdpSocket;

use crate::support::{
    self, page, pixel, request, run, unique_path, Behaviour, ImageServer, ENGINES,
};

/// Render timeout of the test's own renderer: the bound for how long a hostile page may delay
/// another render.
const RENDER_TIMEOUT: Duration = Duration::from_secs(15);

/// The trap: a loopback HTTP listener recording every request path, and a UDP listener counting
/// packets.
struct Trap {
    http: ImageServer,
    udp: SocketAddr,
    packets: Arc<AtomicU64>,
}

impl Trap {
    async fn start() -> Trap {
        let http = ImageServer::start("127.0.0.1", Behaviour::Trap).await;
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
        let udp = socket.local_addr().expect("udp addr");
        let packets = Arc::new(AtomicU64::new(0));
        let count = packets.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while socket.recv_from(&mut buf).await.is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        Trap { http, udp, packets }
    }

    fn url(&self, path: &str) -> String {
        self.http.url(path)
    }

    /// Requests whose path starts with `prefix`.
    fn hits(&self, prefix: &str) -> u64 {
        self.http
            .paths()
            .iter()
            .filter(|p| p.starts_with(prefix))
            .map(|p| self.http.hits(p))
            .sum()
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn attr(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What a script of case `name` does if it runs: paints its document red and calls the trap in
/// three ways (an image, fetch, a navigation of the top window).
fn payload(trap: &Trap, name: &str) -> String {
    let js = trap.url(&format!("/js-{name}"));
    format!(
        "try{{document.documentElement.style.background='#ff0000';\
         if(document.body)document.body.style.background='#ff0000';\
         var r=document.getElementById('r');if(r)r.setAttribute('fill','#ff0000');}}catch(e){{}}\
         try{{new Image().src='{js}-img';}}catch(e){{}}\
         try{{fetch('{js}-fetch');}}catch(e){{}}\
         try{{top.location.href='{js}-top';}}catch(e){{}}"
    )
}

/// A nested HTML document whose script paints it red and calls the trap.
fn nested_html(trap: &Trap, name: &str) -> String {
    format!(
        "<!doctype html><body style=\"margin:0;background:#ffffff\">nested<script>{}</script></body>",
        payload(trap, name)
    )
}

/// A nested SVG document whose script paints its rectangle red and calls the trap.
fn nested_svg(trap: &Trap, name: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"300\" height=\"200\">\
         <rect id=\"r\" width=\"300\" height=\"200\" fill=\"#ffffff\"/>\
         <script>{}</script></svg>",
        payload(trap, name)
    )
}

/// WebRTC towards the UDP trap: STUN and TURN servers there, a data channel and an offer so that
/// ICE gathering starts.
fn webrtc(trap: &Trap) -> String {
    let udp = trap.udp;
    format!(
        "try{{var pc=new RTCPeerConnection({{iceServers:[{{urls:'stun:{udp}'}},\
         {{urls:'turn:{udp}?transport=udp',username:'u',credential:'p'}}]}});\
         pc.createDataChannel('d');pc.createOffer().then(function(o){{return pc.setLocalDescription(o);}});\
         }}catch(e){{}}"
    )
}

/// The hostile part of each case: (name, in `<head>`, in `<body>`).
fn cases(trap: &Trap) -> Vec<(&'static str, String, String)> {
    let nested = |name: &str| b64(&nested_html(trap, name));
    let svg = |name: &str| b64(&nested_svg(trap, name));
    let frame = "width=\"300\" height=\"200\" style=\"display:block;border:0\"";
    vec![
        (
            "script",
            String::new(),
            format!("<script>{}</script>", payload(trap, "script")),
        ),
        (
            "handlers",
            String::new(),
            format!(
                "<img src=\"data:,\" alt=\"\" onerror=\"{p}\"><svg width=\"1\" height=\"1\" onload=\"{p}\"></svg>\
                 <details open ontoggle=\"{p}\"><summary>s</summary></details>",
                p = attr(&payload(trap, "handlers"))
            ),
        ),
        (
            "object-data-url",
            String::new(),
            format!(
                "<object data=\"data:text/html;base64,{}\" type=\"text/html\" {frame}></object>",
                nested("object-data-url")
            ),
        ),
        (
            "object-svg",
            String::new(),
            format!(
                "<object data=\"data:image/svg+xml;base64,{}\" type=\"image/svg+xml\" {frame}></object>",
                svg("object-svg")
            ),
        ),
        (
            "embed-svg",
            String::new(),
            format!(
                "<embed src=\"data:image/svg+xml;base64,{}\" type=\"image/svg+xml\" {frame}>",
                svg("embed-svg")
            ),
        ),
        (
            "object-http",
            String::new(),
            format!(
                "<object data=\"{}\" type=\"text/html\" {frame}></object>",
                trap.url("/nav-object")
            ),
        ),
        (
            "iframe-srcdoc",
            String::new(),
            format!(
                "<iframe srcdoc=\"{}\" {frame}></iframe>",
                attr(&nested_html(trap, "iframe-srcdoc"))
            ),
        ),
        (
            "javascript-url",
            String::new(),
            format!(
                "<iframe src=\"javascript:'&lt;body style=background:#ff0000&gt;&lt;img src={}&gt;'\" {frame}></iframe>\
                 <object data=\"javascript:{}\" {frame}></object>",
                trap.url("/js-javascript-url-frame"),
                attr(&payload(trap, "javascript-url"))
            ),
        ),
        (
            "meta-refresh",
            format!(
                "<meta http-equiv=\"refresh\" content=\"0;url={}\">\
                 <noscript><meta http-equiv=\"refresh\" content=\"0;url={}\"></noscript>",
                trap.url("/nav-refresh"),
                trap.url("/nav-noscript-refresh")
            ),
            String::new(),
        ),
        (
            "dialogs",
            String::new(),
            format!(
                "<script>window.onbeforeunload=function(){{return 'stay';}};alert(1);confirm('c');prompt('p');print();{}</script>\
                 <iframe srcdoc=\"&lt;script&gt;alert(2)&lt;/script&gt;\" {frame}></iframe>",
                payload(trap, "dialogs")
            ),
        ),
        (
            "busy-loop",
            String::new(),
            format!(
                "<script>{}while(true){{}}</script><img src=\"data:,\" alt=\"\" onerror=\"while(true){{}}\">",
                payload(trap, "busy-loop")
            ),
        ),
        (
            "webrtc",
            String::new(),
            format!(
                "<script>{}{}</script><object data=\"data:text/html;base64,{}\" type=\"text/html\" {frame}></object>",
                webrtc(trap),
                payload(trap, "webrtc"),
                b64(&format!(
                    "<body style=\"margin:0\"><script>{}{}</script></body>",
                    webrtc(trap),
                    payload(trap, "webrtc-nested")
                ))
            ),
        ),
    ]
}

/// A white page with a blue bar at the top, a control image from the trap, the hostile part at
/// y = 150..350 (nested documents are 300 x 200 there) and white below.
fn hostile_page(trap: &Trap, engine: Engine, name: &str, head: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">{head}\
         <style>html,body{{margin:0;background:#ffffff}}</style></head><body>\
         <div style=\"height:100px;background:#0000ff\"></div>\
         <img src=\"{}\" width=\"50\" height=\"50\" alt=\"\" style=\"display:block\">\
         {body}<div style=\"height:600px\"></div></body></html>",
        trap.url(&format!("/img-{engine}-{name}"))
    )
}

fn is_red(p: [u8; 4]) -> bool {
    p[0] > 200 && p[1] < 60 && p[2] < 60
}

fn is_blue(p: [u8; 4]) -> bool {
    p[0] < 60 && p[1] < 60 && p[2] > 200
}

async fn hostile_renderer() -> Arc<Renderer> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = support::config(dir.keep(), &ENGINES);
    cfg.render_timeout = RENDER_TIMEOUT;
    Arc::new(support::start(cfg).await)
}

async fn shoot(renderer: &Renderer, req: RenderRequest) -> Rendered {
    let engine = req.engine;
    renderer
        .render(req)
        .await
        .unwrap_or_else(|e| panic!("{engine} render failed: {e}"))
}

#[test]
fn hostile_emails_run_nothing_reach_nothing_and_restart_no_engine() {
    run(async {
        let trap = Trap::start().await;
        let images = ImageServer::start("127.0.0.1", Behaviour::RedPng).await;
        let renderer = hostile_renderer().await;
        let pids_before = renderer.engine_pids();
        let cases = cases(&trap);
        for engine in ENGINES {
            // A plain render first: the "normal time" of this engine here.
            let plain = || request(engine, page(&images.url(&unique_path("plain"))), 600, 1.0);
            let started = Instant::now();
            shoot(&renderer, plain()).await;
            let normal = started.elapsed();

            // Every hostile case at once (they queue for the two slots), and another client's
            // plain render among them.
            let hostile = cases.iter().map(|(name, head, body)| {
                let renderer = renderer.clone();
                let html = hostile_page(&trap, engine, name, head, body);
                let name = *name;
                async move {
                    let shot = shoot(&renderer, request(engine, html, 600, 1.0)).await;
                    (name, shot)
                }
            });
            let other = {
                let renderer = renderer.clone();
                async move {
                    let started = Instant::now();
                    shoot(&renderer, plain()).await;
                    started.elapsed()
                }
            };
            let (shots, other_took) =
                futures::future::join(futures::future::join_all(hostile), other).await;
            // The other client queued behind every hostile render (two slots): it may wait for
            // them as if each were a plain email, plus one render timeout, not more.
            let queued_ahead = cases.len() as u32 / 2 + 1;
            let bound = normal * queued_ahead + RENDER_TIMEOUT;
            assert!(
                other_took <= bound,
                "{engine}: another client's render took {other_took:?} beside hostile ones (alone {normal:?})"
            );
            for (name, shot) in &shots {
                assert!(
                    shot.height >= 600,
                    "{engine} {name}: the shot is {} px tall, not the email (navigated away?)",
                    shot.height
                );
                assert!(
                    is_blue(pixel(shot, 10, 50, 1.0)),
                    "{engine} {name}: the email itself was not shot (navigated away?)"
                );
                for (x, y) in [(150, 250), (500, 250), (300, 600)] {
                    assert!(
                        !is_red(pixel(shot, x, y, 1.0)),
                        "{engine} {name}: a script ran (red at {x},{y})"
                    );
                }
                assert!(
                    trap.hits(&format!("/img-{engine}-{name}")) >= 1,
                    "{engine} {name}: the control image never reached the trap, so it proves nothing"
                );
            }
            // After the hostile pages, one more plain render in normal time.
            let started = Instant::now();
            shoot(&renderer, plain()).await;
            let after = started.elapsed();
            assert!(
                after <= normal + RENDER_TIMEOUT,
                "{engine}: a plain render after hostile ones took {after:?} (before {normal:?})"
            );
        }
        // Late requests (a refresh timer, ICE gathering) get time to arrive before counting.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let scripted: Vec<String> = trap
            .http
            .paths()
            .into_iter()
            .filter(|p| !p.starts_with("/img-"))
            .collect();
        assert!(
            scripted.is_empty(),
            "requests a script, a navigation or a nested document made: {scripted:?}"
        );
        assert_eq!(trap.hits("/js-"), 0);
        assert_eq!(trap.hits("/nav-"), 0);
        assert_eq!(
            trap.packets.load(Ordering::SeqCst),
            0,
            "UDP (WebRTC STUN/TURN) reached the loopback listener"
        );
        // A restart replaces processes; WebKit may add some of its own (a web process) freely.
        let pids_after = renderer.engine_pids();
        for pid in &pids_before {
            assert!(
                pids_after.contains(pid),
                "{pid:?} is gone: an engine was restarted while rendering hostile emails (before {pids_before:?}, after {pids_after:?})"
            );
        }
        if let Ok(renderer) = Arc::try_unwrap(renderer) {
            renderer.shutdown().await;
        }
    });
}

#[test]
fn a_dialog_opened_by_our_own_probe_is_dismissed_rather_than_blocking_the_tab() {
    run(async {
        // Page script is off, so only an evaluation of ours can open a dialog; it must not hold
        // the tab until the command times out.
        let renderer = crate::support::renderer().await;
        let answer = renderer
            .evaluate(
                request(Engine::Blink, "<p>x</p>".into(), 600, 1.0),
                "alert(1), confirm('c'), 'after'",
            )
            .await
            .unwrap_or_else(|e| panic!("the probe failed: {e}"));
        // Held open, the dialog would time the command out and the probe would fail.
        assert_eq!(answer, "\"after\"");
    });
}

#[test]
fn page_script_cannot_reach_the_probe_and_the_probe_still_sees_the_page() {
    run(async {
        // The page would redefine what the probe calls if its script ran, and the probe runs in
        // its own world anyway: it reads the DOM and styles, not the page's globals.
        let html = "<p id=\"p\" style=\"color:#123456\">x</p>\
                    <script>window.marker = 'page'; document.getElementById('p').style.color = '#ff0000';</script>";
        let answer = crate::support::renderer()
            .await
            .evaluate(
                request(Engine::Blink, html.into(), 600, 1.0),
                "JSON.stringify([typeof window.marker, getComputedStyle(document.getElementById('p')).color])",
            )
            .await
            .unwrap_or_else(|e| panic!("the probe failed: {e}"));
        assert_eq!(answer, "\"[\\\"undefined\\\",\\\"rgb(18, 52, 86)\\\"]\"");
    });
}
