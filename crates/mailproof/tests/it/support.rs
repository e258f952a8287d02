//! Test harness: runs the real `mailproof serve` binary (through `testkit::service`) on an
//! ephemeral port with a temporary data directory, creates accounts through the real CLI, and
//! speaks HTTP to it.
//!
//! The database is SQLite in the data directory, or with `MAILPROOF_TEST_DB=postgres` a fresh
//! PostgreSQL database per test (in one cluster per test binary, from `store::testing`). Its URL is
//! kept beside the data directory, so a server restarted on the same directory finds it again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use testkit::service::{Launch, Service};
pub use testkit::service::{ADMIN_KEY, ADMIN_PASS};

pub const BIN: &str = env!("CARGO_BIN_EXE_mailproof");

pub struct Server {
    pub dir: tempfile::TempDir,
    pub base: String,
    service: Service,
    pub http: reqwest::Client,
}

#[derive(Default)]
pub struct Options {
    /// Extra TOML for the config file.
    pub config: String,
}

impl Server {
    pub async fn start() -> Server {
        Server::start_with(Options::default()).await
    }

    pub async fn start_with(opts: Options) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        Server::start_in(dir, opts).await
    }

    /// Starts a server on an existing data directory (for restart tests).
    pub async fn start_in(dir: tempfile::TempDir, opts: Options) -> Server {
        Server::start_at(dir, opts, "127.0.0.1:0").await
    }

    /// Starts a server whose HTTP port listens on `http` (e.g. `0.0.0.0:0`).
    pub async fn start_listening_on(http: &str, opts: Options) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        Server::start_at(dir, opts, http).await
    }

    async fn start_at(dir: tempfile::TempDir, opts: Options, http: &str) -> Server {
        // Tests that do not ask for rendering run without engines: starting three browsers for
        // every API test would only slow the suite down.
        let mut text = opts.config.clone();
        if !text.contains("[render]") {
            text.push_str("\n[render]\nengines = []\n");
        }
        if !text.contains("[spam]") {
            text.push_str("\n[spam]\ndaemons = false\n");
        }
        let server = Server::launch(dir, &text, http).await;
        let health = server
            .http
            .get(format!("{}/healthz", server.base))
            .send()
            .await
            .expect("healthz");
        assert_eq!(health.status(), 200, "healthz must answer 200 once ready");
        server
    }

    /// `mailproof serve` on `dir` (its database prepared) with `config`, once it has announced
    /// its addresses.
    async fn launch(dir: tempfile::TempDir, config: &str, http: &str) -> Server {
        prepare_database(dir.path()).await;
        let config_path = dir.path().join("mailproof.toml");
        std::fs::write(&config_path, config).expect("write config");
        let service = Launch::serve(Path::new(BIN), "mailproof serve")
            .http(http)
            .args(["--smtp", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(config_path)
            .envs(database_env(dir.path()))
            .start()
            .unwrap_or_else(|e| panic!("mailproof serve did not start: {e}"));
        Server {
            dir,
            base: service.base.clone(),
            service,
            http: api_client(),
        }
    }

    /// Closes the kept-alive connections of [`Server::call`] (healthz's at least), for tests
    /// that count the listener's places: each holds one until the server's idle limit.
    pub fn close_idle_connections(&mut self) {
        self.http = api_client();
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The service's process id.
    pub fn pid(&self) -> u32 {
        self.service.pid()
    }

    /// Kills the process at once (SIGKILL), keeping the data directory.
    pub fn kill(self) -> tempfile::TempDir {
        let Server {
            dir, mut service, ..
        } = self;
        service.kill();
        dir
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited successfully.
    pub fn terminate(self) -> (bool, tempfile::TempDir) {
        let Server {
            dir, mut service, ..
        } = self;
        let status = service.terminate(Duration::from_secs(30));
        (status.is_some_and(|s| s.success()), dir)
    }

    /// `mailproof accounts add` against this server's data directory, while it runs.
    pub fn add_account(&self, key: &str, plan: &str, extra: &[&str]) {
        accounts_cli(&self.data_dir(), key, plan, extra);
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        auth: Option<(&str, &str)>,
        body: Option<&Value>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, self.url(path));
        if let Some((u, p)) = auth {
            req = req.header("Authorization", basic(u, p));
        }
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        Reply::from(req.send().await.expect("request sent")).await
    }

    /// As the admin (enterprise) account.
    pub async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, Some((ADMIN_KEY, ADMIN_PASS)), None)
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call("POST", path, Some((ADMIN_KEY, ADMIN_PASS)), Some(body))
            .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.call("PUT", path, Some((ADMIN_KEY, ADMIN_PASS)), Some(body))
            .await
    }

    /// Waits until no client of email test `id` is processing (each Complete or Bounced) and
    /// returns the test info.
    pub async fn wait_processed(&self, id: &str, limit: Duration) -> Value {
        wait_processed_at(self, id, limit).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.call("DELETE", path, Some((ADMIN_KEY, ADMIN_PASS)), None)
            .await
    }
}

fn api_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("http client")
}

/// Where a test directory keeps its PostgreSQL database's URL.
fn database_url_file(dir: &Path) -> PathBuf {
    dir.join("database_url")
}

/// With `MAILPROOF_TEST_DB=postgres`, gives `dir` a fresh database unless it has one already.
async fn prepare_database(dir: &Path) {
    if store::Backend::from_env() != store::Backend::Postgres || database_url_file(dir).exists() {
        return;
    }
    let db = store::testing::database(store::Backend::Postgres).await;
    std::fs::write(database_url_file(dir), &db.url).expect("write the database URL");
}

/// The URL of `dir`'s database when it is not SQLite in the data dir.
pub fn database_url(dir: &Path) -> Option<String> {
    std::fs::read_to_string(database_url_file(dir)).ok()
}

/// The environment that points the binary at `dir`'s database.
pub fn database_env(dir: &Path) -> Option<(&'static str, String)> {
    database_url(dir).map(|url| ("MAILPROOF_DATABASE_URL", url))
}

pub fn accounts_cli(data_dir: &Path, key: &str, plan: &str, extra: &[&str]) {
    let url = data_dir.parent().and_then(database_url);
    let mut args = vec!["--api-key", key, "--password", "password-1", "--plan", plan];
    args.extend_from_slice(extra);
    testkit::service::add_account(Path::new(BIN), data_dir, url.as_deref(), &args)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The seed addresses of a creation response (`address_list`, spec §2.2).
pub fn address_list(created: &Value) -> Vec<String> {
    created["address_list"]
        .as_array()
        .expect("address_list")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

pub fn basic(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub async fn from(r: reqwest::Response) -> Reply {
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let bytes = r.bytes().await.expect("body").to_vec();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
        }
    }

    /// The §7.1 error name, if this is an error reply.
    pub fn error(&self) -> &str {
        self.body["error"]["name"].as_str().unwrap_or("")
    }

    #[track_caller]
    pub fn expect_error(&self, name: &str, status: u16) {
        assert_eq!(
            self.error(),
            name,
            "expected error {name}, got {} {}",
            self.status,
            self.body
        );
        assert_eq!(self.status, status, "status of {name}: {}", self.body);
        let msg = self.body["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.len() > 10,
            "error {name} must carry a helpful message, got {msg:?}"
        );
    }

    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(
            self.status, 200,
            "expected 200, got {} {}",
            self.status, self.body
        );
        &self.body
    }
}

pub fn header(r: &Reply, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Reads a raw connection until the server closes it; what it sent, or `None` if it kept the connection for `wait`.
pub async fn closed_within(c: &mut tokio::net::TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    tokio::time::timeout(wait, async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()
    .map(|()| String::from_utf8_lossy(&got).to_string())
}

/// A web sign-in through the form (from the local address `from`, if given): the status, the
/// session cookie (`name=value`) if one was set, and the `Location` answered.
pub async fn web_sign_in(
    s: &Server,
    from: Option<std::net::IpAddr>,
    key: &str,
    pass: &str,
    next: &str,
) -> (u16, Option<String>, String) {
    let mut http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(ip) = from {
        http = http.local_address(ip);
    }
    let http = http.build().expect("client");
    let form = http
        .get(s.url("/signin"))
        .send()
        .await
        .expect("sign-in form");
    let pair = form
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .expect("sign-in CSRF cookie")
        .to_string();
    let token = pair.split_once('=').expect("name=value").1.to_string();
    let r = http
        .post(s.url("/signin"))
        .header("cookie", &pair)
        .form(&[
            ("csrf", token.as_str()),
            ("next", next),
            ("api_key", key),
            ("password", pass),
        ])
        .send()
        .await
        .expect("sign in");
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("mp_session="))
        .and_then(|c| c.split(';').next())
        .map(str::to_string);
    (status, cookie, location)
}

/// A minimal HTTP server on loopback answering every request with `body`, for `url` sources.
pub async fn serve_static(body: &'static str, content_type: &'static str) -> String {
    testkit::http::HttpStub::fixed(content_type, body)
        .await
        .base()
}

// The mail helpers below serve `spam_e2e` and `auto_inbox` (issue 4); until those modules are
// listed in main.rs they are unused.
/// A server with its SMTP listener's address. Dropping it also stops the spam filter daemons it
/// started (the service runs in its own process group, which `testkit` kills whole).
pub struct MailServer {
    pub server: Server,
    pub smtp: std::net::SocketAddr,
}

impl std::ops::Deref for MailServer {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

/// A `[keys]` section that has the SMTP listener offer STARTTLS, with a self-signed certificate
/// written into `dir`.
pub fn starttls_keys(dir: &Path) -> String {
    let (cert, key) = testkit::http::self_signed_files(dir);
    format!(
        "[keys]\nsmtp_tls_cert_file = {:?}\nsmtp_tls_key_file = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    )
}

impl MailServer {
    pub async fn start() -> MailServer {
        MailServer::start_with("").await
    }

    /// With `extra` appended to the config file.
    pub async fn start_with(extra: &str) -> MailServer {
        MailServer::start_in(tempfile::tempdir().expect("temp dir"), extra).await
    }

    /// In `dir` (the data dir is `dir/data`), with `extra` appended to the config file.
    pub async fn start_in(dir: tempfile::TempDir, extra: &str) -> MailServer {
        // Spam tests need the filters, not the browsers (unless `extra` asks for some). The `smtp`
        // method's test relay listens on loopback, which the network policy admits only when
        // allow-listed.
        let render = if extra.contains("[render]") {
            ""
        } else {
            "[render]\nengines = []\n"
        };
        let config = format!("{render}[fetch]\nallow = [\"127.0.0.1/32\"]\n{extra}");
        let server = Server::launch(dir, &config, "127.0.0.1:0").await;
        let smtp = server
            .service
            .smtp
            .expect("mailproof serve printed `mailproof: smtp on <addr>` before the HTTP line");
        MailServer { server, smtp }
    }
}

/// A plain SMTP client for the tests: every reply is read and returned, nothing is hidden.
pub struct SmtpConn {
    stream: tokio::io::BufReader<tokio::net::TcpStream>,
}

const SMTP_REPLY_WAIT: Duration = Duration::from_secs(120);

impl SmtpConn {
    /// Connects and reads the greeting, which must be 220.
    pub async fn connect(addr: std::net::SocketAddr) -> SmtpConn {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connect to the SMTP listener");
        let mut conn = SmtpConn {
            stream: tokio::io::BufReader::new(stream),
        };
        let (code, text) = conn.reply().await;
        assert_eq!(code, 220, "greeting: {text}");
        let (code, text) = conn.cmd("EHLO client.test").await;
        assert_eq!(code, 250, "EHLO: {text}");
        conn
    }

    /// One (possibly multi-line) reply.
    pub async fn reply(&mut self) -> (u16, String) {
        use tokio::io::AsyncBufReadExt as _;
        let mut text = String::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(SMTP_REPLY_WAIT, self.stream.read_line(&mut line))
                .await
                .expect("an SMTP reply in time")
                .expect("read an SMTP reply");
            assert!(n > 0, "the server closed the connection; so far: {text}");
            text.push_str(&line);
            if line.as_bytes().get(3) != Some(&b'-') {
                let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
                return (code, text);
            }
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt as _;
        self.stream
            .get_mut()
            .write_all(bytes)
            .await
            .expect("write to the SMTP listener");
    }

    pub async fn cmd(&mut self, line: &str) -> (u16, String) {
        self.send_raw(format!("{line}\r\n").as_bytes()).await;
        self.reply().await
    }

    /// MAIL and RCPTs (each must be accepted), then DATA with the dot-stuffed message; returns the
    /// reply to the final dot.
    pub async fn send(&mut self, from: &str, rcpts: &[String], message: &[u8]) -> (u16, String) {
        let (code, text) = self.cmd(&format!("MAIL FROM:<{from}>")).await;
        assert_eq!(code, 250, "MAIL FROM: {text}");
        for rcpt in rcpts {
            let (code, text) = self.cmd(&format!("RCPT TO:<{rcpt}>")).await;
            assert_eq!(code, 250, "RCPT TO {rcpt}: {text}");
        }
        let (code, text) = self.cmd("DATA").await;
        assert_eq!(code, 354, "DATA: {text}");
        self.send_raw(&dot_stuffed(message)).await;
        self.reply().await
    }
}

/// The message as DATA carries it: leading dots doubled, CRLF line ends, ending in CRLF.CRLF.
pub fn dot_stuffed(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 16);
    for line in message.split_inclusive(|&b| b == b'\n') {
        let body = line
            .strip_suffix(b"\n")
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .unwrap_or(line);
        if body.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

/// Polls `GET /v5/spam/tests/<id>` (as `auth`) until every filter has answered, for at most
/// `wait`; returns the entries.
pub async fn spam_verdicts(s: &Server, auth: (&str, &str), id: &str, wait: Duration) -> Vec<Value> {
    spam_verdicts_at(&(s, auth), id, wait).await
}

/// A GET to the API of one running service (a `Server`, a role process) as one caller, so that
/// the waits below are written once for both.
pub trait ApiGet {
    fn api_get(&self, path: &str) -> impl std::future::Future<Output = Reply>;
}

impl ApiGet for Server {
    async fn api_get(&self, path: &str) -> Reply {
        self.get(path).await
    }
}

impl ApiGet for (&Server, (&str, &str)) {
    async fn api_get(&self, path: &str) -> Reply {
        self.0.call("GET", path, Some(self.1), None).await
    }
}

/// Waits until no client of email test `id` is processing (each Complete or Bounced) and
/// returns the test info.
pub async fn wait_processed_at(api: &impl ApiGet, id: &str, limit: Duration) -> Value {
    let start = std::time::Instant::now();
    loop {
        let info = api
            .api_get(&format!("/v5/email/tests/{id}"))
            .await
            .ok()
            .clone();
        if info["processing"].as_array().map_or(0, Vec::len) == 0 {
            return info;
        }
        assert!(
            start.elapsed() < limit,
            "test {id} still processing after {limit:?}: {info}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Polls `GET /v5/spam/tests/<id>` until every filter has answered, for at most `wait`; returns
/// the entries.
pub async fn spam_verdicts_at(api: &impl ApiGet, id: &str, wait: Duration) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let r = api.api_get(&format!("/v5/spam/tests/{id}")).await;
        let entries = r.ok().as_array().cloned().unwrap_or_default();
        if !entries.is_empty() && entries.iter().all(|e| !e["spam"].is_null()) {
            return entries;
        }
        assert!(
            started.elapsed() < wait,
            "not every spam filter answered for test {id} within {wait:?} (are spamd and rspamd installed? install them with scripts/setup.sh): {entries:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
