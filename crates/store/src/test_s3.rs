//! A real S3-compatible server for tests: `s3s-fs` (installed by scripts/setup.sh) serving a
//! temporary directory on a loopback port, with one bucket and one pair of credentials.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::BlobsConfig;

/// Where scripts/setup.sh installs the server (`cargo install --root /opt/mailproof/s3s-fs`).
const INSTALLED: &str = "/opt/mailproof/s3s-fs/bin/s3s-fs";
const BUCKET: &str = "mailproof-test";
const ACCESS_KEY_ID: &str = "mailproof-test-key";
const SECRET_ACCESS_KEY: &str = "mailproof-test-secret-0123456789";
const READY_WITHIN: Duration = Duration::from_secs(20);
/// Another process may take the port between our choosing it and the server binding it.
const START_ATTEMPTS: usize = 3;

/// A running `s3s-fs`; stopped (SIGKILL, then reaped) when dropped, also when a test panics.
pub struct S3Server {
    child: Child,
    dir: tempfile::TempDir,
    endpoint: String,
}

impl S3Server {
    /// Starts the server on a free loopback port and waits until it answers HTTP.
    ///
    /// Panics (this is test support) when the binary is missing or the server does not come up,
    /// with its log in the message.
    pub async fn start() -> S3Server {
        let bin = binary();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::tempdir().expect("a temporary directory for the S3 server");
            let root = dir.path().join("root");
            // s3s-fs keeps a bucket as a directory under its root; making it here spares a
            // CreateBucket call that mailproof itself never makes.
            std::fs::create_dir_all(root.join(BUCKET)).expect("the S3 server's bucket directory");
            let port = free_port();
            let log_path = dir.path().join("s3s-fs.log");
            let child = spawn(&bin, &root, port, &log_path);
            let mut server = S3Server {
                child,
                dir,
                endpoint: format!("http://127.0.0.1:{port}"),
            };
            match server.wait_ready().await {
                Ok(()) => return server,
                Err(why) => failures.push(format!("{why}; its log: {}", read_log(&log_path))),
            }
        }
        panic!(
            "the S3 server {} did not start: {}",
            bin.display(),
            failures.join(" | ")
        );
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("it exited with {status}"));
            }
            if let Ok(status_line) = http_status_line(&addr).await {
                if status_line.starts_with("HTTP/1.1 ") {
                    return Ok(());
                }
            }
            if started.elapsed() > READY_WITHIN {
                return Err(format!(
                    "it did not answer HTTP on {addr} within {READY_WITHIN:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the server (SIGKILL, an outage as sudden as a crash); its objects stay on disk for
    /// [`S3Server::restart`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and objects, and waits until it answers.
    pub async fn restart(&mut self) {
        let port: u16 = self
            .endpoint
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the endpoint ends with its port");
        let root = self.dir.path().join("root");
        let log_path = self.dir.path().join("s3s-fs.log");
        self.child = spawn(&binary(), &root, port, &log_path);
        if let Err(why) = self.wait_ready().await {
            panic!(
                "the S3 server did not restart: {why}; its log: {}",
                read_log(&log_path)
            );
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn bucket(&self) -> &str {
        BUCKET
    }

    /// The configuration that points [`crate::Blobs`] at this server.
    pub fn config(&self) -> BlobsConfig {
        BlobsConfig::S3 {
            bucket: BUCKET.to_string(),
            endpoint: Some(self.endpoint.clone()),
            region: "us-east-1".to_string(),
            access_key_id: ACCESS_KEY_ID.to_string(),
            secret_access_key: SECRET_ACCESS_KEY.to_string(),
            allow_http: true,
        }
    }

    /// The same as a `[blobs]` table of mailproof's configuration file.
    pub fn config_toml(&self) -> String {
        format!(
            "[blobs]\nkind = \"s3\"\nbucket = \"{BUCKET}\"\nendpoint = \"{}\"\nregion = \"us-east-1\"\naccess_key_id = \"{ACCESS_KEY_ID}\"\nsecret_access_key = \"{SECRET_ACCESS_KEY}\"\nallow_http = true\n",
            self.endpoint
        )
    }

    /// The directory where the server keeps the bucket's objects, one file per key.
    pub fn bucket_dir(&self) -> PathBuf {
        self.dir.path().join("root").join(BUCKET)
    }

    /// The keys of every object the server holds on disk, sorted.
    pub fn keys_on_disk(&self) -> Vec<String> {
        files_under(&self.bucket_dir())
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        // SIGKILL takes effect at once, so reaping the child does not wait on anything.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir`, as `/`-separated paths relative to it, sorted; empty when `dir` is
/// missing.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// Starts `s3s-fs` serving `root` on `port`, logging to `log_path` (appended: a restart keeps the
/// earlier log).
fn spawn(bin: &Path, root: &Path, port: u16, log_path: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .expect("the S3 server's log file");
    let log_err = log.try_clone().expect("the S3 server's log file");
    Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--access-key",
            ACCESS_KEY_ID,
            "--secret-key",
            SECRET_ACCESS_KEY,
        ])
        .arg(root)
        .env("RUST_LOG", "s3s=warn,s3s_fs=warn")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
}

fn binary() -> PathBuf {
    let installed = PathBuf::from(INSTALLED);
    if installed.is_file() {
        return installed;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("s3s-fs"))
            .find(|p| p.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "the S3-compatible test server s3s-fs is not installed (looked at {INSTALLED} and on \
             PATH): install it with scripts/setup.sh"
        )
    })
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("the bound port").port()
}

/// The status line of an unauthenticated `GET /`: any answer shows the server is serving.
async fn http_status_line(addr: &str) -> std::io::Result<String> {
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    sock.write_all(request.as_bytes()).await?;
    let mut buf = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(2), sock.read(&mut buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))??;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn read_log(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if text.trim().is_empty() {
        "(empty)".to_string()
    } else {
        text
    }
}
