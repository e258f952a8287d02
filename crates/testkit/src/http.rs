//! One stub for the outside HTTP servers a test talks to: it binds a loopback address the test
//! chooses (`127.0.0.2` to stand for another host, `::1`), answers each request with what the
//! test's responder returns (which may wait, e.g. to hold an image back mid-render), and records
//! every request so the test can assert what the service asked. Requests in proxy form
//! (`GET http://host/path`) are answered too, so the stub also serves as a forward proxy.
//! [`counting_listener`] is the stub's mute sibling: it counts connections and answers nothing
//! or fixed bytes.
//!
//! Written here rather than with `wiremock`: the tests need a responder that waits on the test's
//! own signal, binding other loopback addresses, and proxy-form requests, none of which wiremock
//! offers; what they need fits in this one small type.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls;

/// The largest request head the stub reads; nothing a test sends comes near it.
const MAX_HEAD: usize = 64 * 1024;

/// One request as the stub received it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent: a path, or an absolute URL for a proxy request.
    pub target: String,
    /// The target's path and query (the absolute URL's host removed).
    pub path: String,
    /// The request line and headers, as text.
    pub head: String,
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// What the stub answers.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// 200 with `body` of `content_type`.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response::status(200)
            .header("Content-Type", content_type)
            .body(body)
    }

    /// `status` with an empty body.
    pub fn status(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Response {
        self.body = body.into();
        self
    }
}

/// A self-signed certificate for `localhost` and its key, written as PEM files `cert.pem` and
/// `key.pem` in `dir`, for a server under test to offer TLS with (e.g. the SMTP listener's
/// STARTTLS); returns their paths.
pub fn self_signed_files(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .unwrap_or_else(|e| panic!("a self-signed certificate: {e}"));
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem())
        .unwrap_or_else(|e| panic!("write {}: {e}", cert.display()));
    std::fs::write(&key, certified.signing_key.serialize_pem())
        .unwrap_or_else(|e| panic!("write {}: {e}", key.display()));
    (cert, key)
}

type Responder = Arc<dyn Fn(Request) -> BoxFuture<'static, Response> + Send + Sync>;

/// A running stub; it stops when the test's runtime ends.
#[derive(Clone)]
pub struct HttpStub {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    /// In https mode, the PEM of the self-signed certificate a client must trust.
    certificate: Option<String>,
}

impl HttpStub {
    /// A stub on `ip` (port chosen by the system) answering every request with `respond`.
    pub async fn start<F, Fut>(ip: IpAddr, respond: F) -> HttpStub
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        HttpStub::listen(ip, None, Arc::new(move |r| Box::pin(respond(r)))).await
    }

    /// A page's resources, some of which fail, on `ip`: a path starting `/gone` answers 404, one
    /// starting `/slow` never answers (two minutes), any other answers `png` as an image. For the
    /// tests of what a screenshot could not load.
    pub async fn resources(ip: IpAddr, png: Vec<u8>) -> HttpStub {
        let png: Arc<[u8]> = png.into();
        HttpStub::start(ip, move |r: Request| {
            let png = png.clone();
            async move {
                if r.path.starts_with("/slow") {
                    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
                }
                if r.path.starts_with("/gone") {
                    return Response::status(404).body(b"no such file".to_vec());
                }
                Response::ok("image/png", png.to_vec())
            }
        })
        .await
    }

    /// [`HttpStub::start`] over TLS on 127.0.0.1, with a self-signed certificate for `localhost`
    /// ([`HttpStub::certificate_pem`]): for what must be https, such as RFC 8058's one-click
    /// unsubscribe URL. Its URLs name `localhost`.
    pub async fn start_tls<F, Fut>(respond: F) -> HttpStub
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .unwrap_or_else(|e| panic!("a self-signed certificate: {e}"));
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_no_client_auth()
                .with_single_cert(vec![certified.cert.der().clone()], key)
        })
        .unwrap_or_else(|e| panic!("a TLS server configuration: {e}"));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let mut stub = HttpStub::listen(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(acceptor),
            Arc::new(move |r| Box::pin(respond(r))),
        )
        .await;
        stub.certificate = Some(certified.cert.pem());
        stub
    }

    /// Binds `ip` and serves each connection (through `tls` when given) with `respond`.
    async fn listen(
        ip: IpAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
        respond: Responder,
    ) -> HttpStub {
        let listener = TcpListener::bind((ip, 0))
            .await
            .unwrap_or_else(|e| panic!("bind a stub HTTP server on {ip}: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the stub's address: {e}"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (tls, seen, respond) = (tls.clone(), seen.clone(), respond.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, seen, respond).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, seen, respond).await;
                            }
                        }
                    }
                });
            }
        });
        HttpStub {
            addr,
            requests,
            certificate: None,
        }
    }

    /// The certificate to trust for an https stub; `None` for plain http.
    pub fn certificate_pem(&self) -> Option<&str> {
        self.certificate.as_deref()
    }

    /// A stub on 127.0.0.1 answering every request with `body` as `content_type`, uncacheable
    /// (so that every load in a browser reaches it).
    pub async fn fixed(content_type: &'static str, body: impl Into<Vec<u8>>) -> HttpStub {
        let body: Arc<[u8]> = body.into().into();
        HttpStub::start(IpAddr::V4(Ipv4Addr::LOCALHOST), move |_| {
            let response =
                Response::ok(content_type, body.to_vec()).header("Cache-Control", "no-store");
            async move { response }
        })
        .await
    }

    /// `http://<addr>` (IPv6 addresses in brackets), or `https://localhost:<port>` over TLS.
    pub fn base(&self) -> String {
        match self.certificate {
            Some(_) => format!("https://localhost:{}", self.addr.port()),
            None => format!("http://{}", self.addr),
        }
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many requests were for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.requests().iter().filter(|r| r.path == path).count()
    }
}

/// What a [`counting_listener`] does with each connection it accepts.
#[derive(Clone, Copy, Debug)]
pub enum OnAccept {
    /// Closes it at once.
    Close,
    /// Keeps it open, reading nothing and answering nothing (a host that never responds).
    Hold,
    /// Reads what the client sends first (one read), writes these bytes (e.g. a whole HTTP
    /// response), then closes it.
    Reply(&'static [u8]),
}

/// A loopback port on `ip` that counts the connections made to it, for tests that prove the
/// service connected, or never did (a policy refusal): connections, not requests, so that even a
/// connection that sent nothing counts.
pub async fn counting_listener(ip: IpAddr, on_accept: OnAccept) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0))
        .await
        .unwrap_or_else(|e| panic!("bind a counting listener on {ip}: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("the listener's address: {e}"));
    let accepted = Arc::new(AtomicUsize::new(0));
    tokio::spawn(count(listener, on_accept, accepted.clone()));
    (addr, accepted)
}

/// A [`counting_listener`] on one port of both loopbacks: 127.0.0.1, and ::1 where the machine
/// has IPv6 (without it a connection to `[::1]` cannot succeed anyway), so that every spelling
/// of "this host" reaches the same count.
pub async fn counting_loopback(on_accept: OnAccept) -> (u16, Arc<AtomicUsize>) {
    let (v4, accepted) = counting_listener(Ipv4Addr::LOCALHOST.into(), on_accept).await;
    if let Ok(v6) = TcpListener::bind((Ipv6Addr::LOCALHOST, v4.port())).await {
        tokio::spawn(count(v6, on_accept, accepted.clone()));
    }
    (v4.port(), accepted)
}

async fn count(listener: TcpListener, on_accept: OnAccept, accepted: Arc<AtomicUsize>) {
    let mut held = Vec::new();
    while let Ok((mut conn, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::SeqCst);
        match on_accept {
            OnAccept::Close => drop(conn),
            OnAccept::Hold => held.push(conn),
            OnAccept::Reply(bytes) => {
                tokio::spawn(async move {
                    let mut buf = [0u8; 8192];
                    let _ = conn.read(&mut buf).await;
                    let _ = conn.write_all(bytes).await;
                });
            }
        }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    seen: Arc<Mutex<Vec<Request>>>,
    respond: Responder,
) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let method = request.method.clone();
    if let Ok(mut seen) = seen.lock() {
        seen.push(request.clone());
    }
    let response = respond(request).await;
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        reason(response.status),
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    if method != "HEAD" {
        let _ = stream.write_all(&response.body).await;
    }
    let _ = stream.shutdown().await;
}

/// One request: the head up to the blank line, then `Content-Length` bytes of body.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or("/").to_owned();
    let path = match target.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map_or("/".to_owned(), |i| rest[i..].to_owned()),
        None => target.clone(),
    };
    let mut request = Request {
        method,
        target,
        path,
        head,
        body: buf[head_end..].to_vec(),
    };
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while request.body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => request.body.extend_from_slice(&chunk[..n]),
        }
    }
    Some(request)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpStream;

    use super::*;

    async fn send(addr: SocketAddr, raw: &str) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(raw.as_bytes()).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn answers_with_the_responder_and_records_requests() {
        let stub = HttpStub::start(IpAddr::V4(Ipv4Addr::LOCALHOST), |r: Request| async move {
            let echoed = format!(
                "{} {} {}",
                r.method,
                r.path,
                String::from_utf8_lossy(&r.body)
            );
            Response::status(404).header("X-Seen", "yes").body(echoed)
        })
        .await;
        let reply = send(
            stub.addr,
            "POST /hook?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        )
        .await;
        assert!(reply.starts_with("HTTP/1.1 404 Not Found\r\n"), "{reply}");
        assert!(reply.contains("X-Seen: yes\r\n"), "{reply}");
        assert!(reply.ends_with("POST /hook?a=1 hello"), "{reply}");
        let seen = stub.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].header("HOST"), Some("x"));
        assert_eq!(stub.hits("/hook?a=1"), 1);
    }

    #[tokio::test]
    async fn head_gets_no_body_and_connections_are_counted_even_without_a_request() {
        let stub = HttpStub::fixed("text/plain", b"body".to_vec()).await;
        let reply = send(stub.addr, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(reply.contains("Content-Length: 4\r\n"), "{reply}");
        assert!(reply.ends_with("\r\n\r\n"), "{reply}");

        let (addr, accepted) =
            counting_listener(IpAddr::V4(Ipv4Addr::LOCALHOST), OnAccept::Reply(b"hi")).await;
        assert_eq!(send(addr, "GET / HTTP/1.1\r\n\r\n").await, "hi");
        let silent = TcpStream::connect(addr).await.expect("connect");
        drop(silent);
        let started = std::time::Instant::now();
        while accepted.load(Ordering::SeqCst) < 2 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "2 connections counted"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn counting_loopback_counts_both_loopbacks_on_one_port() {
        let (port, accepted) = counting_loopback(OnAccept::Close).await;
        let mut expected = 0;
        for ip in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ] {
            // Without IPv6 on the machine only 127.0.0.1 is bound (and reachable).
            if TcpStream::connect((ip, port)).await.is_ok() {
                expected += 1;
            }
        }
        assert!(expected >= 1, "127.0.0.1:{port} accepts");
        let started = std::time::Instant::now();
        while accepted.load(Ordering::SeqCst) < expected {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "{expected} connections counted"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_proxy_request_is_counted_by_its_path() {
        let stub = HttpStub::fixed("image/png", b"png".to_vec()).await;
        let reply = send(
            stub.addr,
            "GET http://images.example/a.png HTTP/1.1\r\nHost: images.example\r\n\r\n",
        )
        .await;
        assert!(reply.contains("Content-Type: image/png"), "{reply}");
        assert!(reply.ends_with("\r\n\r\npng"), "{reply}");
        assert_eq!(stub.hits("/a.png"), 1);
        assert_eq!(stub.hits("/b.png"), 0);
        assert_eq!(stub.requests()[0].target, "http://images.example/a.png");
    }
}
