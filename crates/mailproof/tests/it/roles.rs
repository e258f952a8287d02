//! Process roles (issue 13, points 3 and 6): `mailproof serve --role api|render|mail`, each process
//! running only its part, several processes sharing one database, one blob store and the keys of
//! `[keys]`.

use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use testkit::http::{HttpStub, Response};
use testkit::service::{Deployment, Service};

use crate::support::*;

/// What every process of one test service shares (`testkit::service::Deployment`), started from
/// this build's binary.
pub(crate) struct Shared(Deployment);

impl Shared {
    /// The harness's database (`MAILPROOF_TEST_DB`) and local blobs.
    pub(crate) async fn new() -> Shared {
        Shared(Deployment::new(Path::new(BIN)).await)
    }

    /// PostgreSQL and an S3-compatible server, whatever the harness runs on.
    pub(crate) async fn on_postgres_and_s3() -> Shared {
        Shared(Deployment::on_postgres_and_s3(Path::new(BIN)).await)
    }

    pub(crate) fn with(
        database: Option<store::testing::TestDb>,
        s3: Option<store::test_s3::S3Server>,
    ) -> Shared {
        Shared(Deployment::with(Path::new(BIN), database, s3))
    }
}

impl Deref for Shared {
    type Target = Deployment;
    fn deref(&self) -> &Deployment {
        &self.0
    }
}

impl DerefMut for Shared {
    fn deref_mut(&mut self) -> &mut Deployment {
        &mut self.0
    }
}

/// The configuration file of one process of `role`, with `extra` TOML appended.
pub(crate) fn process_config(shared: &Shared, role: &str, extra: &str) -> String {
    shared.process_config(role, extra)
}

/// One `mailproof serve` process with an HTTP client speaking to it as the admin account.
pub(crate) struct Proc {
    service: Service,
    pub(crate) base: String,
    pub(crate) smtp: Option<std::net::SocketAddr>,
    pub(crate) http: reqwest::Client,
}

/// A started `mailproof serve` whose address lines are still to be read.
pub(crate) struct Starting(testkit::service::Starting);

impl Deref for Starting {
    type Target = testkit::service::Starting;
    fn deref(&self) -> &testkit::service::Starting {
        &self.0
    }
}

impl DerefMut for Starting {
    fn deref_mut(&mut self) -> &mut testkit::service::Starting {
        &mut self.0
    }
}

impl Proc {
    /// Starts a process with `config` (written beside the shared data) and extra arguments.
    pub(crate) fn start(shared: &Shared, name: &str, config: &str, args: &[&str]) -> Proc {
        Proc::spawn(shared, name, config, args).ready()
    }

    /// Starts a process without waiting for it to be ready.
    pub(crate) fn spawn(shared: &Shared, name: &str, config: &str, args: &[&str]) -> Starting {
        Starting(
            shared
                .launch(name, config, args)
                .spawn()
                .expect("start mailproof serve"),
        )
    }

    /// SIGKILL to the whole group: the service and its engines or daemons die at once.
    pub(crate) fn kill9(&mut self) {
        self.service.kill_group();
    }

    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS));
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        Reply::from(req.send().await.expect("request sent")).await
    }

    pub(crate) async fn healthz(&self) -> Value {
        let r = Reply::from(
            self.http
                .get(format!("{}/healthz", self.base))
                .send()
                .await
                .expect("healthz"),
        )
        .await;
        assert_eq!(r.status, 200, "healthz: {}", r.body);
        r.body
    }
}

impl Starting {
    /// Waits for the process's "listening on" line (its roles are running).
    pub(crate) fn ready(self) -> Proc {
        let name = self.0.name.clone();
        let service = self
            .0
            .ready()
            .unwrap_or_else(|e| panic!("{name} did not start: {e}"));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        Proc {
            base: service.base.clone(),
            smtp: service.smtp,
            service,
            http,
        }
    }
}

#[track_caller]
fn assert_not_this_role(health: &Value, pointer: &str) {
    let c = health
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{pointer} missing from {health}"));
    assert_eq!(c["state"], "off", "{pointer}: {health}");
    assert_eq!(
        c["reason"], "not this process's role",
        "{pointer}: {health}"
    );
}

#[tokio::test]
async fn each_process_runs_only_its_roles_and_healthz_says_which() {
    let shared = Shared::new().await;
    // A port already taken: a process that bound SMTP could not start on it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = taken.local_addr().expect("addr").to_string();
    let api = Proc::start(
        &shared,
        "api",
        &process_config(&shared, "api", ""),
        &["--smtp", &taken],
    );
    assert!(api.smtp.is_none(), "an api process announces no SMTP");
    let health = api.healthz().await;
    assert_eq!(health["components"]["database"]["state"], "ok");
    assert_not_this_role(&health, "/components/smtp");
    assert_not_this_role(&health, "/components/engines");
    assert_not_this_role(&health, "/components/filters/spamassassin");
    assert_not_this_role(&health, "/components/filters/rspamd");
    api.call("GET", "/v5/auth", None).await.ok();

    let render = Proc::start(
        &shared,
        "render",
        &process_config(&shared, "render", ""),
        &["--smtp", &taken],
    );
    let health = render.healthz().await;
    assert_not_this_role(&health, "/components/smtp");
    assert_not_this_role(&health, "/components/filters/rspamd");
    // Its engines are its own: off here by configuration, not by role.
    assert_eq!(
        health["components"]["engines"]["reason"],
        "[render] engines = [] in the configuration"
    );
    let r = render.call("GET", "/v5/auth", None).await;
    r.expect_error("NotFound", 404);
    let msg = r.body["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("api role"), "{msg}");
    let metrics = render
        .http
        .get(format!("{}/metrics", render.base))
        .send()
        .await
        .expect("metrics");
    assert_eq!(metrics.status(), 200, "a render process serves /metrics");

    let mail = Proc::start(
        &shared,
        "mail",
        &process_config(&shared, "mail", ""),
        &["--smtp", "127.0.0.1:0"],
    );
    assert!(mail.smtp.is_some(), "a mail process listens for SMTP");
    let health = mail.healthz().await;
    assert_eq!(health["components"]["smtp"]["state"], "ok");
    assert_not_this_role(&health, "/components/engines");
}

/// Where the image puts the data files (`MAILPROOF_RESOURCES` in the Dockerfile).
const IMAGE_RESOURCES: &str = "/usr/share/mailproof";

/// The data files the Dockerfile copies into the image, laid out in `into` as the image has them
/// under [`IMAGE_RESOURCES`]: what a container of any role finds at start. Read from the
/// Dockerfile's `COPY` lines (no container runtime on the project's machines to build it), and
/// each source must also pass `.dockerignore`, or the build would not see it.
fn image_resources(into: &Path) {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dockerfile = std::fs::read_to_string(top.join("Dockerfile")).expect("read Dockerfile");
    let ignore = std::fs::read_to_string(top.join(".dockerignore")).expect("read .dockerignore");
    assert!(
        dockerfile.contains(&format!("MAILPROOF_RESOURCES={IMAGE_RESOURCES} ")),
        "the image's MAILPROOF_RESOURCES is {IMAGE_RESOURCES}"
    );
    for line in dockerfile.lines().map(str::trim) {
        let Some(args) = line.strip_prefix("COPY ") else {
            continue;
        };
        let args: Vec<&str> = args.split_whitespace().collect();
        let Some((dest, sources)) = args.split_last() else {
            continue;
        };
        let Some(dest) = dest.strip_prefix(IMAGE_RESOURCES) else {
            continue;
        };
        let dest = into.join(dest.trim_start_matches('/'));
        std::fs::create_dir_all(&dest).expect("image dir");
        for source in sources {
            assert!(
                ignore.lines().any(|l| l == format!("!{source}")),
                ".dockerignore leaves {source} out of the build context"
            );
            let from = top.join(source);
            if from.is_dir() {
                copy_tree(&from, &dest);
            } else {
                let name = from.file_name().expect("a file name");
                std::fs::copy(&from, dest.join(name)).unwrap_or_else(|e| panic!("{source}: {e}"));
            }
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Every file under `root`, by its path from `root`.
fn files_under(root: &Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.insert(rel.display().to_string());
            }
        }
    }
    out
}

/// Issue 31, scope 4, without a container runtime: the image holds every data file of the source
/// tree, and a process of each role started from exactly what the image holds serves. A file the
/// image lacks fails its start, naming the file (the image once left out `behaviours.toml`).
#[tokio::test]
async fn each_role_starts_from_the_data_files_the_image_holds() {
    let image = tempfile::tempdir().expect("temp dir");
    image_resources(image.path());
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let shipped: std::collections::BTreeSet<String> = files_under(&top)
        .into_iter()
        .filter(|f| {
            Command::new("git")
                .args(["ls-files", "--error-unmatch", f])
                .current_dir(&top)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    assert!(shipped.contains("behaviours.toml"), "{shipped:?}");
    let in_image = files_under(image.path());
    let missing: Vec<&String> = shipped.difference(&in_image).collect();
    assert!(
        missing.is_empty(),
        "data files the image leaves out: {missing:?}"
    );

    let shared = Shared::new().await;
    shared.make_dkim_key();
    let resources = image.path().display().to_string();
    for (role, extra, args) in [
        ("api", "", vec![]),
        (
            "render",
            "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n",
            vec![],
        ),
        ("mail", "", vec!["--smtp", "127.0.0.1:0"]),
    ] {
        let started = Starting(
            shared
                .launch(role, &process_config(&shared, role, extra), &args)
                .env("MAILPROOF_RESOURCES", &resources)
                .spawn()
                .expect("start mailproof serve"),
        )
        .ready();
        // 200: every component of its role is up.
        started.healthz().await;
    }

    // The check can fail: without one of the files, the start stops and names it.
    std::fs::remove_file(image.path().join("behaviours.toml")).expect("remove");
    let mut child = shared
        .launch("api-short", &process_config(&shared, "api", ""), &[])
        .env("MAILPROOF_RESOURCES", &resources)
        .command()
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailproof serve");
    let waited = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if waited.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("started without behaviours.toml");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert!(!status.success());
    assert!(err.contains("behaviours.toml"), "{err}");
    // The harness says the process ended, at once, rather than waiting for its address.
    let started = std::time::Instant::now();
    let refused = match shared
        .launch("api-short", &process_config(&shared, "api", ""), &[])
        .env("MAILPROOF_RESOURCES", &resources)
        .start()
    {
        Ok(_) => panic!("started without behaviours.toml"),
        Err(e) => e.to_string(),
    };
    assert!(
        refused.contains("exited (exit status: ")
            && refused.contains("before it reported its address"),
        "{refused}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn an_unknown_role_is_refused_with_the_valid_ones_named() {
    let out = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0", "--role", "api,worker"])
        .env_remove("MAILPROOF_ROLE")
        .output()
        .expect("run mailproof serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown role \"worker\"") && err.contains("api, render and mail"),
        "{err}"
    );
}

/// Finishes every queued render job of the shared database as a renderer would, with `png` as
/// each screenshot: the key test needs stored screenshots, not browsers.
async fn render_all(shared: &Shared, png: &[u8]) {
    let store = shared.store().await;
    let blobs = shared.blobs();
    let now = chrono::Utc::now().timestamp();
    while let Some(job) = store.claim_job("test", now, 60).await.expect("claim") {
        finish_as_renderer(&store, &blobs, &job, "test", png).await;
    }
    store.close().await;
}

/// Stores `png` as every image of `job` and records it done by `worker`, as a renderer would.
pub(crate) async fn finish_as_renderer(
    store: &store::Store,
    blobs: &store::Blobs,
    job: &store::ClaimedJob,
    worker: &str,
    png: &[u8],
) {
    for picture in [
        domain::Picture::Shot(job.variant),
        domain::Picture::Thumbnail,
        domain::Picture::FullThumbnail,
    ] {
        blobs
            .put(
                &store::screenshot_key(&job.test_id, &job.client_id, &picture),
                png.to_vec(),
            )
            .await
            .expect("put");
    }
    let done = store::JobOutcome::Done {
        engine: "blink".into(),
        shot: Default::default(),
    };
    let now = chrono::Utc::now().timestamp();
    assert!(store
        .finish_job(job, worker, now, &done)
        .await
        .expect("finish"));
}

/// A tiny PNG standing for a screenshot.
pub(crate) fn tiny_png() -> Vec<u8> {
    let mut png = Vec::new();
    image::DynamicImage::ImageRgb8(image::RgbImage::new(4, 4))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("encode png");
    png
}

/// The presigned URLs of a test's default screenshots, as the results give them.
async fn presigned_urls(p: &Proc, id: &str) -> Vec<String> {
    let results = p
        .call("GET", &format!("/v5/email/tests/{id}/results"), None)
        .await
        .ok()
        .clone();
    let urls: Vec<String> = results
        .as_object()
        .expect("results by client")
        .values()
        .filter_map(|c| c["screenshots"]["default"].as_str().map(str::to_owned))
        .collect();
    assert!(!urls.is_empty(), "no screenshot URLs in {results}");
    urls
}

async fn status_without_credentials(p: &Proc, url: &str, from: &Proc) -> u16 {
    let url = url.replacen(&from.base, &p.base, 1);
    p.http
        .get(&url)
        .send()
        .await
        .expect("get screenshot")
        .status()
        .as_u16()
}

#[tokio::test]
async fn api_processes_given_one_key_file_accept_each_others_presigned_urls() {
    let shared = Shared::new().await;
    let config = process_config(&shared, "api", "");
    let a = Proc::start(&shared, "api-a", &config, &["--smtp", "127.0.0.1:0"]);
    let b = Proc::start(&shared, "api-b", &config, &["--smtp", "127.0.0.1:0"]);
    // A third api process with a key of its own is refused at start: the key's fingerprint is
    // not the one a and b published.
    let other_key = shared.root.path().join("other.key");
    std::fs::write(&other_key, rand::random::<[u8; 32]>()).expect("write key");
    let other_key = other_key.to_str().expect("utf-8 path");
    let mut refused = Proc::spawn(
        &shared,
        "api-c-refused",
        &config,
        &["--smtp", "127.0.0.1:0", "--url-signing-key-file", other_key],
    );
    let status = refused.child.wait().expect("wait for the refused process");
    assert!(!status.success(), "an api process with another key starts");
    assert!(
        refused
            .lines
            .try_iter()
            .all(|l| !l.starts_with("listening on")),
        "the refused process served"
    );
    // Started anyway on purpose (a key replaced deliberately): the check of the URLs can fail.
    let c = Proc::start(
        &shared,
        "api-c",
        &config,
        &[
            "--smtp",
            "127.0.0.1:0",
            "--url-signing-key-file",
            other_key,
            "--replace-signing-key",
        ],
    );
    let created = a
        .call(
            "POST",
            "/v5/email/tests",
            Some(&json!({"subject": "Keys", "html": "<p>x</p>", "clients": ["gmail_chrome_web"]})),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id").to_owned();
    render_all(&shared, &tiny_png()).await;
    for url in presigned_urls(&a, &id).await {
        assert_eq!(status_without_credentials(&a, &url, &a).await, 200, "{url}");
        assert_eq!(status_without_credentials(&b, &url, &a).await, 200, "{url}");
        assert_eq!(status_without_credentials(&c, &url, &a).await, 403, "{url}");
    }
    for url in presigned_urls(&b, &id).await {
        assert_eq!(status_without_credentials(&a, &url, &b).await, 200, "{url}");
    }
}

#[test]
fn a_configured_key_file_that_is_missing_or_short_stops_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let short = dir.path().join("short.key");
    std::fs::write(&short, b"too short").expect("write");
    for (flag, path, expected) in [
        (
            "--url-signing-key-file",
            short.clone(),
            "at least 32 random bytes",
        ),
        (
            "--url-signing-key-file",
            dir.path().join("missing.key"),
            "cannot read [keys] url_signing_key_file",
        ),
        (
            "--dkim-key-file",
            dir.path().join("missing.pem"),
            "openssl genrsa",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["serve", "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg(flag)
            .arg(&path)
            .env_remove("MAILPROOF_ROLE")
            .env("MAILPROOF_API_KEY", ADMIN_KEY)
            .env("MAILPROOF_PASSWORD", ADMIN_PASS)
            .stdout(Stdio::null())
            .output()
            .expect("run mailproof serve");
        assert!(!out.status.success(), "{flag} {}", path.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{flag}: {err}");
    }
}

/// A loopback image server that holds requests unanswered while `hold` is set.
struct SlowImage {
    url: String,
    stub: HttpStub,
    hold: Arc<AtomicBool>,
}

async fn slow_image() -> SlowImage {
    let mut png = Vec::new();
    image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(32, 32, image::Rgb([0, 0, 255])))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("encode png");
    let png: Arc<[u8]> = png.into();
    let hold = Arc::new(AtomicBool::new(true));
    let held = hold.clone();
    let stub = HttpStub::start(std::net::Ipv4Addr::LOCALHOST.into(), move |_| {
        let (held, png) = (held.clone(), png.clone());
        async move {
            while held.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Response::ok("image/png", png.to_vec()).header("Cache-Control", "no-store")
        }
    })
    .await;
    SlowImage {
        url: stub.url("/blue.png"),
        stub,
        hold,
    }
}

/// Two Blink clients with the default variant only.
const BLINK_CLIENTS: [&str; 2] = ["gmail_chrome_web", "outlook2016_win"];

/// A render process: Blink only, one page at a time, and a short render timeout. (The lease a
/// killed process leaves behind runs out within about 10 s: it is renewed while alive.)
const RENDER_EXTRA: &str = "[fetch]\nallow = [\"127.0.0.1/32\"]\n[render]\nengines = [\"blink\"]\nslots_per_engine = 1\nrender_timeout = 10\nresource_wait = 8\n";

#[tokio::test]
async fn api_render_and_mail_processes_complete_tests_through_a_killed_renderer() {
    let shared = Shared::on_postgres_and_s3().await;
    shared.make_dkim_key();
    let image = slow_image().await;
    let api = Proc::start(
        &shared,
        "api",
        &process_config(&shared, "api", "[fetch]\nallow = [\"127.0.0.1/32\"]\n"),
        &[],
    );
    let mail = Proc::start(
        &shared,
        "mail",
        &process_config(&shared, "mail", "[spam]\ndaemons = true\n"),
        &["--smtp", "127.0.0.1:0"],
    );
    let mut render_a = Proc::start(
        &shared,
        "render-a",
        &process_config(&shared, "render", RENDER_EXTRA),
        &[],
    );

    let html = format!(
        "<!doctype html><html><body><h1>Roles</h1><img src=\"{}\" width=\"100\" height=\"100\" alt=\"\"></body></html>",
        image.url
    );
    let created = api
        .call(
            "POST",
            "/v5/email/tests",
            Some(&json!({"subject": "Three processes", "html": html, "clients": BLINK_CLIENTS})),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id").to_owned();

    // Mid-render: the engine asked for the image, which is not answered yet.
    let started = std::time::Instant::now();
    while image.stub.requests().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "render process A never started drawing test {id}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    render_a.kill9();
    image.hold.store(false, Ordering::SeqCst);
    // Two render processes take over and compete for the same queue.
    let render_b = Proc::start(
        &shared,
        "render-b",
        &process_config(&shared, "render", RENDER_EXTRA),
        &[],
    );
    let render_c = Proc::start(
        &shared,
        "render-c",
        &process_config(&shared, "render", RENDER_EXTRA),
        &[],
    );

    // The seed spam test meanwhile: created at the api process, mail taken by the mail process.
    let seed = api
        .call(
            "POST",
            "/v5/spam/tests",
            Some(&json!({"subject": "Roles seed", "html": "<p>Hello Jane, the November report is ready.</p>", "test_method": "seed"})),
        )
        .await
        .ok()
        .clone();
    let seed_id = seed["id"].as_str().expect("id").to_owned();
    let message = format!(
        "From: news@mail.acme.example\r\nTo: jane@example.org\r\nSubject: Roles seed\r\nDate: {}\r\nMessage-ID: <{:x}@mail.acme.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello Jane, the November report is ready.</p>\r\n",
        chrono::Utc::now().to_rfc2822(),
        rand::random::<u64>()
    );
    let mut conn = SmtpConn::connect(mail.smtp.expect("the mail process's SMTP address")).await;
    let (code, text) = conn
        .send(
            "news@mail.acme.example",
            &address_list(&seed),
            message.as_bytes(),
        )
        .await;
    assert_eq!(code, 250, "seed mail accepted by the mail process: {text}");
    // And an svc test: a row the api process writes and the mail process's sender sends.
    let svc = api
        .call(
            "POST",
            "/v5/spam/tests",
            Some(&json!({"subject": "Roles svc", "html": "<p>Hello Jane.</p>", "test_method": "svc"})),
        )
        .await
        .ok()
        .clone();
    let svc_id = svc["id"].as_str().expect("id").to_owned();

    let info = wait_processed(&api, &id, Duration::from_secs(240)).await;
    assert_eq!(
        info["completed"].as_array().map(Vec::len),
        Some(BLINK_CLIENTS.len()),
        "every client completes after the kill: {info}"
    );
    for test in [&seed_id, &svc_id] {
        let verdicts = spam_verdicts_at(&api, test, Duration::from_secs(180)).await;
        assert!(
            verdicts.len() >= 3,
            "spam test {test}: a verdict from every filter: {verdicts:#?}"
        );
    }

    // No job done twice: the killed process's job was claimed once more, every other job once,
    // although two live render processes competed for them.
    let store = shared.store().await;
    let clients = store.test_clients(&id).await.expect("test clients");
    let attempts: Vec<i64> = clients.iter().map(|c| c.attempts).collect();
    assert_eq!(
        attempts.iter().sum::<i64>(),
        BLINK_CLIENTS.len() as i64 + 1,
        "claims per client {attempts:?}: one per job plus one for the job of the killed process"
    );
    store.close().await;
    // The screenshots, through the api process, from the shared blob store.
    for url in presigned_urls(&api, &id).await {
        let r = api.http.get(&url).send().await.expect("screenshot");
        assert_eq!(r.status(), 200, "{url}");
    }
    // Shared state lives in PostgreSQL and the S3 server, none in the data directory.
    let in_bucket = shared.s3.as_ref().expect("the S3 server").keys_on_disk();
    for client in BLINK_CLIENTS {
        let key = format!("shots/{id}/{client}/default.png");
        assert!(in_bucket.contains(&key), "{key} not in {in_bucket:?}");
    }
    assert!(
        !shared.data_dir.join("mailproof.sqlite").exists(),
        "no process fell back to SQLite"
    );
    drop((render_b, render_c, mail));
}

pub(crate) async fn wait_processed(p: &Proc, id: &str, limit: Duration) -> Value {
    wait_processed_at(p, id, limit).await
}

impl ApiGet for Proc {
    async fn api_get(&self, path: &str) -> Reply {
        self.call("GET", path, None).await
    }
}
