//! The web interface, driven in headless Chromium against the real `mailproof serve`: one walk
//! through the whole scenario of issue 10 in one browser and one server, with axe-core checking
//! each page for serious or critical accessibility violations.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::*;

pub(crate) const AXE: &str = "/opt/mailproof/axe-core/node_modules/axe-core/axe.min.js";
/// A client and its dark-mode twin, both drawn by Chromium (the one engine this test starts).
const CLIENTS: [&str; 2] = ["outlook365_win", "outlook365_win_dm"];

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A very small CDP client for one page: navigate, evaluate, wait, press a key.
pub(crate) struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: Ws,
    next_id: AtomicU64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    pub(crate) async fn start() -> Browser {
        assert!(
            std::path::Path::new("/usr/bin/chromium").exists(),
            "/usr/bin/chromium is missing: run scripts/setup.sh"
        );
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new("/usr/bin/chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium (run scripts/setup.sh)");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let browser_ws = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium did not print its DevTools address within 30 s");
        let http_base = browser_ws
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("host:port")
            .to_string();
        let targets: Value = reqwest::get(format!("http://{http_base}/json/list"))
            .await
            .expect("DevTools target list")
            .json()
            .await
            .expect("target list JSON");
        let page_ws = targets
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_string();
        let (ws, _) = tokio_tungstenite::connect_async(page_ws)
            .await
            .expect("connect to the page");
        let mut b = Browser {
            child,
            _profile: profile,
            ws,
            next_id: AtomicU64::new(1),
        };
        b.call("Page.enable", json!({})).await;
        b.call("Runtime.enable", json!({})).await;
        b
    }

    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params).await {
            Ok(result) => result,
            Err(error) => panic!("{method} failed: {error}"),
        }
    }

    /// A CDP command's result, or the error the browser answered (e.g. while a page navigates).
    pub(crate) async fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::text(msg)).await.expect("send CDP");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = tokio::time::timeout(left, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} within 60 s"))
                .expect("CDP socket open")
                .expect("CDP frame");
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).expect("CDP JSON");
            if v["id"] == json!(id) {
                return match v.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(v["result"].clone()),
                };
            }
        }
    }

    /// Evaluates JavaScript in the page (promises awaited) and returns its value.
    pub(crate) async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(
            r.get("exceptionDetails").is_none(),
            "script failed: {expr}\n{}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is true in the page. A navigation in between is fine: while the page
    /// is replaced the browser answers "target navigated", which counts as "not yet".
    pub(crate) async fn wait_for(&mut self, expr: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            let r = self
                .try_call(
                    "Runtime.evaluate",
                    json!({"expression": format!("!!({expr})"), "returnByValue": true}),
                )
                .await
                .unwrap_or_default();
            if r["result"]["value"] == json!(true) {
                return;
            }
            let url = self
                .try_call(
                    "Runtime.evaluate",
                    json!({"expression": "location.href", "returnByValue": true}),
                )
                .await
                .map(|r| r["result"]["value"].clone())
                .unwrap_or_default();
            assert!(
                start.elapsed() < limit,
                "waited {limit:?} for `{expr}` on {url}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_loaded(url).await;
    }

    pub(crate) async fn wait_loaded(&mut self, hint: &str) {
        let _ = hint;
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(30),
        )
        .await;
    }

    /// Clicks an element that navigates, and waits for the next page.
    pub(crate) async fn click_and_wait(&mut self, selector: &str) {
        self.eval("window.__before_nav = 1").await;
        let found = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({selector:?}); if (!e) return false; e.click(); return true; }})()"
            ))
            .await;
        assert_eq!(found, json!(true), "no element {selector}");
        self.wait_for(
            "window.__before_nav === undefined && document.readyState === 'complete'",
            Duration::from_secs(60),
        )
        .await;
    }

    pub(crate) async fn set_value(&mut self, selector: &str, value: &str) {
        let ok = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({selector:?}); if (!e) return false; e.value = {value:?}; return true; }})()"
            ))
            .await;
        assert_eq!(ok, json!(true), "no field {selector}");
    }

    /// A real keystroke, as a person would press it.
    pub(crate) async fn press(&mut self, key: &str) {
        for kind in ["keyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "text": if kind == "keyDown" { key } else { "" }}),
            )
            .await;
        }
    }

    /// Runs axe-core on the current page; fails on serious or critical violations.
    pub(crate) async fn check_accessibility(&mut self, axe: &str, what: &str) {
        self.eval(axe).await;
        let found = self
            .eval(
                "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
                    .filter(v => v.impact === 'serious' || v.impact === 'critical')
                    .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).join(', ')))",
            )
            .await;
        assert_eq!(
            found,
            json!([]),
            "accessibility violations on the {what} page"
        );
    }

    pub(crate) async fn text(&mut self, selector: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({selector:?}) || {{}}).textContent || ''"
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }
}

#[tokio::test]
async fn the_web_interface_end_to_end_in_chromium() {
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    s.add_account("other-key", "enterprise", &[]);
    let other = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(("other-key", "password-1")),
            Some(&json!({"subject": "Not yours", "html": "<p>x</p>", "clients": ["gmail_chrome_web"]})),
        )
        .await;
    let other_id = other.ok()["id"].as_str().expect("id").to_string();

    let mut b = Browser::start().await;

    // Signed out, a page sends you to sign in; sign in with the admin account.
    b.goto(&s.url("/tests")).await;
    assert!(b.eval("location.pathname").await == json!("/signin"));
    b.check_accessibility(&axe, "sign-in").await;
    b.set_value("#api_key", ADMIN_KEY).await;
    b.set_value("#password", ADMIN_PASS).await;
    b.click_and_wait("form[action='/signin'] button").await;
    assert_eq!(b.eval("location.pathname").await, json!("/tests"));
    // The header tells the account by its key's ends, never the whole key (half the credentials).
    let who = b.text(".who").await;
    assert!(
        who.starts_with("Signed in as ") && !who.contains(ADMIN_KEY),
        "{who}"
    );
    b.check_accessibility(&axe, "tests list").await;

    // A form post without the CSRF token is refused, and changes nothing.
    let refused = b
        .eval("fetch('/signout', {method: 'POST', body: new URLSearchParams({})}).then(r => r.status)")
        .await;
    assert_eq!(refused, json!(403));
    let still_in = b
        .eval("fetch('/tests', {redirect: 'manual'}).then(r => r.status)")
        .await;
    assert_eq!(
        still_in,
        json!(200),
        "a refused sign-out must not end the session"
    );

    // Another account's test is not found, exactly as a missing one.
    let theirs = b
        .eval(&format!("fetch('/tests/{other_id}').then(r => r.status)"))
        .await;
    assert_eq!(theirs, json!(404));

    // New test from the form: an API rule's error shows next to its field.
    b.goto(&s.url("/tests/new")).await;
    b.check_accessibility(&axe, "new test").await;
    b.set_value("#html", "<p>no subject</p>").await;
    b.click_and_wait("form[action='/tests/new'] button[type=submit]")
        .await;
    assert!(
        b.text("#err-subject").await.contains("subject"),
        "the NoSubject message belongs next to the subject field"
    );
    b.eval("document.querySelectorAll('input[name=clients]').forEach(c => c.checked = false)")
        .await;
    for c in CLIENTS {
        b.eval(&format!("document.getElementById('cl-{c}').checked = true"))
            .await;
    }
    b.set_value("#subject", "Spring newsletter").await;
    b.set_value(
        "#html",
        "<!doctype html><html><body style='background:#fff'><h1 style='color:#222'>Spring</h1><p>Hello there.</p></body></html>",
    )
    .await;
    b.eval("document.getElementById('image_blocking').checked = true; document.getElementById('spam').checked = true; document.getElementById('spam_method').value = 'seed'")
        .await;
    b.click_and_wait("form[action='/tests/new'] button[type=submit]")
        .await;
    let path = b.eval("location.pathname").await;
    let test_path = path.as_str().expect("path").to_string();
    assert!(test_path.starts_with("/tests/"), "{test_path}");
    assert_eq!(b.text("h1").await, "Spring newsletter");

    // Thumbnails arrive without a reload: a marker set now survives until both are shown.
    b.eval("window.__same_page = 1").await;
    b.wait_for(
        "document.querySelectorAll('.card[data-status=Complete] img').length === 2 && [...document.querySelectorAll('.card img')].every(i => i.complete && i.naturalWidth > 0)",
        Duration::from_secs(150),
    )
    .await;
    assert_eq!(
        b.eval("window.__same_page").await,
        json!(1),
        "the page reloaded"
    );
    assert_eq!(
        b.eval("document.getElementById('progress').value").await,
        json!(2)
    );
    b.check_accessibility(&axe, "test").await;

    // Spam verdicts: one row per filter.
    let filters = b
        .eval("document.querySelectorAll('#spam tbody tr').length")
        .await;
    assert!(filters.as_u64().unwrap_or(0) > 0, "no spam filter rows");

    // Full-size screenshot; the second variant is one keystroke away.
    b.click_and_wait(&format!(".card[data-client={}] a.shot", CLIENTS[0]))
        .await;
    b.wait_for(
        "document.getElementById('full-shot') && document.getElementById('full-shot').complete && document.getElementById('full-shot').naturalWidth > 0",
        Duration::from_secs(30),
    )
    .await;
    assert!(b.text("dl.meta").await.contains("blink"), "engine shown");
    b.check_accessibility(&axe, "full view").await;
    b.eval("window.__before_nav = 1").await;
    b.press("2").await;
    b.wait_for(
        "window.__before_nav === undefined && location.search.includes('variant=no_images') && document.getElementById('full-shot').complete && document.getElementById('full-shot').naturalWidth > 0",
        Duration::from_secs(30),
    )
    .await;

    // Side by side: the client and its dark-mode twin.
    b.goto(&s.url(&test_path)).await;
    for c in CLIENTS {
        b.eval(&format!(
            "document.getElementById('cmp-{c}').checked = true"
        ))
        .await;
    }
    b.click_and_wait("#compare button").await;
    b.wait_for(
        "document.querySelectorAll('.compare img').length === 2 && [...document.querySelectorAll('.compare img')].every(i => i.complete && i.naturalWidth > 0)",
        Duration::from_secs(30),
    )
    .await;
    b.check_accessibility(&axe, "side by side").await;

    // Share a proof, sign out, open it signed out.
    b.goto(&s.url(&test_path)).await;
    b.click_and_wait("form[action$='/shares'] button").await;
    let link = b
        .eval("document.getElementById('share-link').value")
        .await
        .as_str()
        .expect("share link")
        .to_string();
    assert!(link.contains("/share/"), "{link}");
    b.click_and_wait("form[action='/signout'] button").await;
    assert_eq!(b.eval("location.pathname").await, json!("/signin"));
    b.goto(&s.url(&test_path)).await;
    assert_eq!(
        b.eval("location.pathname").await,
        json!("/signin"),
        "signed out, the test page must ask to sign in"
    );
    b.goto(&link).await;
    assert_eq!(b.text("h1").await, "Spring newsletter");
    assert_eq!(
        b.text(".who").await,
        "",
        "a shared proof shows nothing of the account"
    );
    b.wait_for(
        "document.querySelectorAll('.card img').length === 2 && [...document.querySelectorAll('.card img')].every(i => i.complete && i.naturalWidth > 0)",
        Duration::from_secs(30),
    )
    .await;
    b.check_accessibility(&axe, "shared proof").await;
}
