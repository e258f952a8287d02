//! A loopback HTTP forward proxy that every engine sends all its traffic through.
//!
//! It does two jobs. It serves the documents to render from memory, under one-time unguessable
//! addresses on private host names that never reach DNS ([`DOC_HOST`] paths, or a `.invalid`
//! site per document, [`DocSite`]). And it fetches everything
//! else an email references under the [`NetPolicy`]: names are resolved here and the connection
//! goes to an address the policy admits (so DNS rebinding cannot slip past the check), with a
//! time and size limit per resource. `CONNECT` tunnels carry https the same way.
//!
//! It remembers, for a short while, how each fetch ended ([`Fetched`]): a page's image that did not
//! load is then reported with why (refused by the policy, no such host, too slow, an HTTP status).
//! Plain http is remembered by address; https only by host, at the tunnel, whose status the proxy
//! cannot see.
//!
//! Every document it serves carries a Content-Security-Policy that runs no script and opens no
//! nested document ([`DOCUMENT_CSP`]); every response it forwards over plain http carries a
//! sandboxing one ([`FORWARDED_CSP`]), so HTML from elsewhere cannot run script either. These back
//! up the engines' own script switches, they do not replace them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use content::netpolicy::NetPolicy;
use domain::FetchFailure;
use rand::RngCore;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::error::RenderError;

/// Host name of the documents the proxy serves itself. `.invalid` is reserved (RFC 6761), so it
/// can never be a real site; engines never resolve it because everything goes to the proxy.
pub const DOC_HOST: &str = "mailproof-render.invalid";

/// First label of a document host that is a site of its own: `mp` and the document's token, in
/// `.invalid` (no public-suffix entry, so each such host is its own site to the engine).
const OWN_SITE_PREFIX: &str = "mp";

/// Where a document is served: what the engine's process model sees of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DocSite {
    /// `http://mailproof-render.invalid/TOKEN`: every document of one site.
    Shared,
    /// `http://mpTOKEN.invalid/`: a site of its own, so a site-isolating engine (Firefox's
    /// Fission) gives it a content process no other document shares, which can then be ended
    /// alone when the document holds its page.
    Own,
}

/// The policy of the documents to render: images, styles, fonts and media from anywhere (as the
/// mail clients load them), and nothing that runs or nests: no script (inline, handler or
/// `javascript:`), no plugin, frame, worker or fetch, no form. `base-uri` stays open: a `<base>`
/// only changes where images and styles come from, which is what a mail client does with it.
pub const DOCUMENT_CSP: &str = "default-src 'none'; img-src * data: blob:; \
    style-src * data: 'unsafe-inline'; font-src * data:; media-src * data:; script-src 'none'; \
    script-src-attr 'none'; object-src 'none'; frame-src 'none'; child-src 'none'; \
    worker-src 'none'; connect-src 'none'; manifest-src 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// Added to every forwarded response: ignored on images, styles and fonts, it makes any HTML or
/// SVG document from elsewhere a sandbox without script, plugins, forms or navigation.
pub const FORWARDED_CSP: &str = "sandbox; script-src 'none'; object-src 'none'; \
    frame-src 'none'; child-src 'none'; worker-src 'none'; connect-src 'none'; form-action 'none'";

/// Largest request or response head accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Time a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Documents not fetched within this time are dropped (their render has failed long since).
const DOC_TTL: Duration = Duration::from_secs(600);

struct Doc {
    html: Arc<str>,
    added: std::time::Instant,
}

#[derive(Default)]
struct Counters {
    refused: AtomicU64,
    forwarded: AtomicU64,
}

/// How long, and for how many addresses, the proxy remembers how fetches ended: long enough for
/// the render that asked to read it back, bounded whatever emails ask for.
const FETCH_LOG_TTL: Duration = Duration::from_secs(120);
const FETCH_LOG_MAX: usize = 8192;

/// How the proxy saw one fetch end (or not yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetched {
    /// Asked for, no answer yet.
    Pending,
    /// The host answered with this status.
    Status(u16),
    /// A tunnel to the host was opened; what went through it is not visible.
    Tunnelled,
    Failed(FetchFailure),
}

/// The recent fetches by key (see [`fetch_key`]).
#[derive(Default)]
struct FetchLog {
    entries: HashMap<String, (Fetched, std::time::Instant)>,
}

impl FetchLog {
    fn note(&mut self, key: String, fetched: Fetched) {
        if self.entries.len() >= FETCH_LOG_MAX && !self.entries.contains_key(&key) {
            self.entries
                .retain(|_, (_, at)| at.elapsed() < FETCH_LOG_TTL);
            if self.entries.len() >= FETCH_LOG_MAX {
                return;
            }
        }
        self.entries
            .insert(key, (fetched, std::time::Instant::now()));
    }
}

/// The key a fetch of `url` is remembered under: the whole address for plain http (the proxy
/// sees each request), `host:port` for https (it sees only the tunnel).
pub(crate) fn fetch_key(url: &url::Url) -> Option<String> {
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    match url.scheme() {
        "http" => {
            let mut plain = url.clone();
            plain.set_fragment(None);
            Some(plain.to_string())
        }
        "https" => Some(tunnel_key(host, port)),
        _ => None,
    }
}

fn tunnel_key(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    format!("{}:{port}", host.to_ascii_lowercase())
}

struct Shared {
    policy: NetPolicy,
    docs: Mutex<HashMap<String, Doc>>,
    counters: Counters,
    fetches: Mutex<FetchLog>,
}

impl Shared {
    fn note(&self, key: &str, fetched: Fetched) {
        if let Ok(mut log) = self.fetches.lock() {
            log.note(key.to_string(), fetched);
        }
    }
}

/// The running proxy; dropping it stops accepting connections.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

/// A document registered with the proxy; it is removed when served or when this is dropped.
pub(crate) struct DocTicket {
    url: String,
    token: String,
    shared: Arc<Shared>,
}

impl DocTicket {
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for DocTicket {
    fn drop(&mut self) {
        if let Ok(mut docs) = self.shared.docs.lock() {
            docs.remove(&self.token);
        }
    }
}

impl Proxy {
    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn start(policy: NetPolicy) -> Result<Proxy, RenderError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| RenderError::io("binding the render proxy on 127.0.0.1", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| RenderError::io("reading the render proxy address", e))?;
        let shared = Arc::new(Shared {
            policy,
            docs: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            fetches: Mutex::default(),
        });
        let accept_shared = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let shared = accept_shared.clone();
                        tokio::spawn(async move {
                            if let Err(e) = serve(stream, &shared).await {
                                tracing::debug!(error = %e, "render proxy connection ended");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "render proxy accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
        Ok(Proxy { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`, for engines' proxy settings.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests refused by the network policy so far.
    pub fn refused_count(&self) -> u64 {
        self.shared.counters.refused.load(Ordering::Relaxed)
    }

    /// Requests and tunnels forwarded so far.
    pub fn forwarded_count(&self) -> u64 {
        self.shared.counters.forwarded.load(Ordering::Relaxed)
    }

    /// How the last fetch of `url` made at or after `since` ended, as far as the proxy saw it.
    pub(crate) fn fetched(&self, url: &str, since: std::time::Instant) -> Option<Fetched> {
        let key = fetch_key(&url::Url::parse(url).ok()?)?;
        let log = self.shared.fetches.lock().ok()?;
        log.entries
            .get(&key)
            .filter(|(_, at)| *at >= since)
            .map(|(fetched, _)| *fetched)
    }

    /// Registers `html` and returns its one-time URL, on `site`.
    pub(crate) fn add_document(&self, html: &str, site: DocSite) -> DocTicket {
        let mut bytes = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut bytes);
        let token = hex::encode(bytes);
        if let Ok(mut docs) = self.shared.docs.lock() {
            docs.retain(|_, d| d.added.elapsed() < DOC_TTL);
            docs.insert(
                token.clone(),
                Doc {
                    html: Arc::from(html),
                    added: std::time::Instant::now(),
                },
            );
        }
        DocTicket {
            url: match site {
                DocSite::Shared => format!("http://{DOC_HOST}/{token}"),
                DocSite::Own => format!("http://{OWN_SITE_PREFIX}{token}.invalid/"),
            },
            token,
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, thiserror::Error)]
enum ProxyError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Bad(String),
    #[error("timed out")]
    Timeout,
}

struct Head {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    /// Bytes read past the head (the start of a body).
    rest: Vec<u8>,
}

/// Reads up to the end of an HTTP head (`\r\n\r\n`).
async fn read_head<R: AsyncRead + Unpin>(r: &mut R) -> Result<(Vec<u8>, Vec<u8>), ProxyError> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find_head_end(&buf) {
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(ProxyError::Bad("head too large".into()));
        }
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(ProxyError::Bad(
                "connection closed before the head ended".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_request(head: Vec<u8>, rest: Vec<u8>) -> Result<Head, ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ProxyError::Bad("malformed request head".into())),
    }
    Ok(Head {
        method: request.method.unwrap_or("").to_string(),
        target: request.path.unwrap_or("").to_string(),
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        rest,
    })
}

async fn serve(mut client: TcpStream, shared: &Shared) -> Result<(), ProxyError> {
    let (head, rest) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client))
        .await
        .map_err(|_| ProxyError::Timeout)??;
    let head = parse_request(head, rest)?;
    if head.method.eq_ignore_ascii_case("CONNECT") {
        return tunnel(client, shared, &head.target).await;
    }
    let Ok(url) = url::Url::parse(&head.target) else {
        return reply(&mut client, 400, "the proxy only takes absolute http URLs").await;
    };
    if let Some(token) = document_token(&url) {
        return serve_document(&mut client, shared, &head, token).await;
    }
    if url.scheme() != "http" {
        return reply(
            &mut client,
            400,
            "only http URLs are forwarded; https goes by CONNECT",
        )
        .await;
    }
    forward(client, shared, head, &url).await
}

/// The token of a URL on one of the proxy's own document hosts (either [`DocSite`] form); an
/// empty token (another path of an own-site host, such as a relative image) matches no document.
fn document_token(url: &url::Url) -> Option<&str> {
    let host = url.host_str()?;
    if host == DOC_HOST {
        return Some(url.path().trim_start_matches('/'));
    }
    let token = host
        .strip_suffix(".invalid")?
        .strip_prefix(OWN_SITE_PREFIX)?;
    let is_token = token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit());
    is_token.then_some(if url.path() == "/" { token } else { "" })
}

async fn serve_document(
    client: &mut TcpStream,
    shared: &Shared,
    head: &Head,
    token: &str,
) -> Result<(), ProxyError> {
    let doc = if head.method == "GET" {
        shared
            .docs
            .lock()
            .ok()
            .and_then(|mut docs| docs.remove(token))
    } else {
        None
    };
    let Some(doc) = doc else {
        return reply(client, 404, "no such document").await;
    };
    let header = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Content-Security-Policy: {DOCUMENT_CSP}\r\nX-Content-Type-Options: nosniff\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        doc.html.len()
    );
    client.write_all(header.as_bytes()).await?;
    client.write_all(doc.html.as_bytes()).await?;
    client.flush().await?;
    Ok(())
}

/// Why the proxy could not reach a host: the status it answers, its words, the failure to
/// remember.
type Unreachable = (u16, String, FetchFailure);

/// Resolves `host:port` and connects to the first address the policy admits.
async fn connect_checked(shared: &Shared, host: &str, port: u16) -> Result<TcpStream, Unreachable> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let timeout = shared.policy.timeout;
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout(timeout, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(addrs)) => addrs.collect(),
            Ok(Err(e)) => {
                return Err((
                    502,
                    format!("cannot resolve {host}: {e}"),
                    FetchFailure::Dns,
                ))
            }
            Err(_) => {
                return Err((
                    504,
                    format!("resolving {host} timed out"),
                    FetchFailure::Timeout,
                ))
            }
        };
    let Some(addr) = addrs
        .iter()
        .copied()
        .find(|a| shared.policy.permits(a.ip()))
    else {
        shared.counters.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(%host, ?addrs, "render proxy refused a host outside the network policy");
        return Err((
            403,
            format!("{host} is not reachable under the network policy"),
            FetchFailure::RefusedByPolicy,
        ));
    };
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => {
            shared.counters.forwarded.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(e)) => Err((
            502,
            format!("cannot connect to {addr}: {e}"),
            FetchFailure::Connect,
        )),
        Err(_) => Err((
            504,
            format!("connecting to {addr} timed out"),
            FetchFailure::Timeout,
        )),
    }
}

async fn forward(
    mut client: TcpStream,
    shared: &Shared,
    head: Head,
    url: &url::Url,
) -> Result<(), ProxyError> {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return reply(&mut client, 400, "URL without a host").await;
    };
    let content_length: u64 = header(&head.headers, "content-length")
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
        .unwrap_or(0);
    if header(&head.headers, "transfer-encoding").is_some() {
        return reply(&mut client, 411, "chunked request bodies are not forwarded").await;
    }
    if content_length > shared.policy.max_bytes {
        return reply(&mut client, 413, "request body too large").await;
    }
    let key = fetch_key(url).unwrap_or_default();
    shared.note(&key, Fetched::Pending);
    let mut upstream = match connect_checked(shared, host, port).await {
        Ok(stream) => stream,
        Err((status, message, failure)) => {
            shared.note(&key, Fetched::Failed(failure));
            return reply(&mut client, status, &message).await;
        }
    };
    let deadline = shared.policy.timeout;
    let limit = shared.policy.max_bytes;
    let work = async {
        let mut path = url.path().to_string();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        let mut out = format!("{} {} HTTP/1.1\r\n", head.method, path).into_bytes();
        for (name, value) in &head.headers {
            if is_hop_by_hop(name) {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        upstream.write_all(&out).await?;
        let body_start = head.rest.len().min(content_length as usize);
        upstream.write_all(&head.rest[..body_start]).await?;
        let remaining = content_length - body_start as u64;
        if remaining > 0 {
            let mut body = (&mut client).take(remaining);
            tokio::io::copy(&mut body, &mut upstream).await?;
        }
        // The response head is rewritten to `Connection: close`: one request per connection keeps
        // the proxy free of HTTP framing, and the engine then knows not to reuse the socket.
        let (response_head, rest) = read_head(&mut upstream).await?;
        let (rewritten, status) = rewrite_response_head(&response_head)?;
        shared.note(&key, Fetched::Status(status));
        client.write_all(&rewritten).await?;
        let first = rest.len().min(usize::try_from(limit).unwrap_or(usize::MAX));
        client.write_all(&rest[..first]).await?;
        let mut body = (&mut upstream).take(limit.saturating_sub(first as u64));
        tokio::io::copy(&mut body, &mut client).await?;
        client.flush().await?;
        Ok::<(), ProxyError>(())
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            // No answer read: the host closed or broke the connection. (After the head, the
            // status stays what is remembered.)
            if let Ok(mut log) = shared.fetches.lock() {
                if let Some((fetched @ Fetched::Pending, _)) = log.entries.get_mut(&key) {
                    *fetched = Fetched::Failed(FetchFailure::Connect);
                }
            }
            Err(e)
        }
        Err(_) => {
            tracing::info!(%url, ?deadline, "render proxy gave up on a slow resource");
            shared.note(&key, Fetched::Failed(FetchFailure::Timeout));
            Err(ProxyError::Timeout)
        }
    }
}

/// The response head as it is passed on, and its status.
fn rewrite_response_head(head: &[u8]) -> Result<(Vec<u8>, u16), ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ProxyError::Bad("malformed response head".into())),
    }
    let status = response.code.unwrap_or(502);
    let mut out = format!("HTTP/1.1 {status} {}\r\n", response.reason.unwrap_or("")).into_bytes();
    for h in response.headers.iter() {
        if is_hop_by_hop(h.name) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    // A second policy only narrows what the origin's own allows.
    out.extend_from_slice(format!("Content-Security-Policy: {FORWARDED_CSP}\r\n").as_bytes());
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok((out, status))
}

fn is_hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "upgrade",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

fn header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

async fn tunnel(mut client: TcpStream, shared: &Shared, target: &str) -> Result<(), ProxyError> {
    let Some((host, port)) = target
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
    else {
        return reply(&mut client, 400, "CONNECT needs host:port").await;
    };
    let key = tunnel_key(host, port);
    let upstream = match connect_checked(shared, host, port).await {
        Ok(stream) => stream,
        Err((status, message, failure)) => {
            shared.note(&key, Fetched::Failed(failure));
            return reply(&mut client, status, &message).await;
        }
    };
    shared.note(&key, Fetched::Tunnelled);
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    let limit = shared.policy.max_bytes;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let up = async {
        let mut limited = (&mut client_read).take(limit);
        let r = tokio::io::copy(&mut limited, &mut up_write).await;
        let _ = up_write.shutdown().await;
        r
    };
    let down = async {
        let mut limited = (&mut up_read).take(limit);
        let r = tokio::io::copy(&mut limited, &mut client_write).await;
        let _ = client_write.shutdown().await;
        r
    };
    // A tunnel may carry several requests, so its limits are per connection rather than per
    // resource; they still bound what one email can make the service download.
    match tokio::time::timeout(shared.policy.timeout, futures::future::join(up, down)).await {
        Ok(_) => Ok(()),
        Err(_) => Err(ProxyError::Timeout),
    }
}

async fn reply<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    message: &str,
) -> Result<(), ProxyError> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        411 => "Length Required",
        413 => "Payload Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("{message}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    w.write_all(text.as_bytes()).await?;
    w.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_heads_lose_keep_alive_and_say_close() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 3\r\n\r\n";
        let (out, status) = rewrite_response_head(head).expect("valid head");
        assert_eq!(status, 200);
        let out = String::from_utf8(out).expect("utf8");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(out.contains("Content-Length: 3\r\n"));
        assert!(!out.to_ascii_lowercase().contains("keep-alive"));
        assert!(out.contains(&format!("Content-Security-Policy: {FORWARDED_CSP}\r\n")));
        assert!(FORWARDED_CSP.starts_with("sandbox;"));
        assert!(out.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn head_end_is_found_after_the_blank_line() {
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[tokio::test]
    async fn documents_are_served_once_and_unknown_tokens_are_not_found() {
        let proxy = Proxy::start(NetPolicy::default()).await.expect("proxy");
        for site in [DocSite::Shared, DocSite::Own] {
            served_once(&proxy, proxy.add_document("<p>hello</p>", site)).await;
        }
        // A relative resource of an own-site document is not the document again.
        let ticket = proxy.add_document("<p>hello</p>", DocSite::Own);
        let image = format!("{}logo.png", ticket.url());
        let out = exchange(proxy.addr(), format!("GET {image} HTTP/1.1\r\n\r\n")).await;
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        served_once(&proxy, ticket).await;
    }

    /// Sends `request` to the proxy at `addr` and reads the whole answer.
    async fn exchange(addr: SocketAddr, request: String) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(request.as_bytes()).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    }

    async fn served_once(proxy: &Proxy, ticket: DocTicket) {
        let get = |url: &str| {
            exchange(
                proxy.addr(),
                format!("GET {url} HTTP/1.1\r\nHost: {DOC_HOST}\r\n\r\n"),
            )
        };
        let first = get(ticket.url()).await;
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(
            first.contains(&format!("Content-Security-Policy: {DOCUMENT_CSP}\r\n")),
            "{first}"
        );
        assert!(
            DOCUMENT_CSP.contains("script-src 'none'")
                && DOCUMENT_CSP.contains("object-src 'none'")
        );
        assert!(first.ends_with("<p>hello</p>"));
        let second = get(ticket.url()).await;
        assert!(second.starts_with("HTTP/1.1 404"), "{second}");
    }

    #[tokio::test]
    async fn loopback_hosts_are_refused_unless_allow_listed() {
        let proxy = Proxy::start(NetPolicy::default()).await.expect("proxy");
        let out = exchange(
            proxy.addr(),
            "GET http://127.0.0.1:9/x.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".into(),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        assert_eq!(proxy.refused_count(), 1);
        let out = exchange(proxy.addr(), "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n".into()).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    }

    fn loopback_policy(max_bytes: u64) -> NetPolicy {
        NetPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("net")],
            max_bytes,
            timeout: Duration::from_secs(5),
            ..NetPolicy::default()
        }
    }

    /// A server that answers every connection with `body` (after reading the request head).
    async fn origin(body: Vec<u8>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let _ = read_head(&mut s).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    let _ = s.write_all(&body).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn allowed_hosts_are_forwarded_and_bodies_cut_at_the_size_limit() {
        let addr = origin(vec![b'x'; 5000]).await;
        let proxy = Proxy::start(loopback_policy(1000)).await.expect("proxy");
        let mut s = TcpStream::connect(proxy.addr()).await.expect("connect");
        s.write_all(format!("GET http://{addr}/img HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("Connection: close"));
        let body = &out[find_head_end(&out).expect("head")..];
        assert_eq!(body.len(), 1000, "body is cut at max_bytes");
        assert_eq!(proxy.forwarded_count(), 1);
    }

    #[tokio::test]
    async fn connect_tunnels_reach_allowed_hosts() {
        let addr = origin(b"tunnelled".to_vec()).await;
        let proxy = Proxy::start(loopback_policy(1 << 20)).await.expect("proxy");
        let mut s = TcpStream::connect(proxy.addr()).await.expect("connect");
        s.write_all(format!("CONNECT {addr} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let (head, _) = read_head(&mut s).await.expect("proxy answer");
        assert!(head.starts_with(b"HTTP/1.1 200"));
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        assert!(String::from_utf8_lossy(&out).ends_with("tunnelled"));
    }
}
