//! The HTTP listener: hyper over an accept loop of our own, so that open connections are bounded,
//! each address holds a bounded share of them, every connection (HTTP/1 and HTTP/2) that has no
//! request in progress or a body that takes too long is cut off, the client address (read from
//! trusted proxies' headers) reaches the API (per-address login limits), and hyper's own bare
//! parse-error answers are sent as §7 JSON errors.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use admission::{Admission, Busy, Listener, Place, Refusal};
use api::ErrorName;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, Request};
use futures::FutureExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use ipnet::IpNet;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt as _;

/// Limits of the HTTP listener (`[http_limits]` in the config file).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Time a client has, with no request in progress on the connection, to send a complete
    /// request head (HTTP/1 request line and headers, HTTP/2 header block). It is also how long
    /// an idle connection, of either version, stays open.
    pub header_timeout: Duration,
    /// Longest time one request body may take to arrive, in all (not only the longest pause);
    /// also how long a response may wait for a client that does not read it.
    pub body_timeout: Duration,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64 counting as one, [`domain::address_group`])
    /// may hold at once; more are refused with `RateLimited`. Trusted proxies are exempt: many
    /// clients share their address.
    pub max_connections_per_address: usize,
    /// Peers whose `Forwarded` / `X-Forwarded-For` headers name the client address.
    pub trusted_proxies: Vec<IpNet>,
}

/// Largest request head (request line plus headers) hyper buffers. Above the URI limit of the
/// `http` crate (64 KB) so that a long URI is reported as such (414), and small enough that
/// `max_connections` heads stay a bounded amount of memory.
pub const MAX_HEAD_BYTES: usize = 128 * 1024;
/// Most headers in one request.
pub const MAX_HEADERS: usize = 100;
/// How long shutdown waits for requests in progress.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);
/// After a parse error the rest of the request is read and discarded for at most this long, so
/// that closing does not reset the connection before the client has read the error.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;
/// Connections refused a place that are told so at the same time, at most; under a flood the
/// others are closed without a word.
const MAX_PENDING_REFUSALS: usize = 64;
/// Connections that wait at once for a place at a full listener (see [`wait_for_place`]).
const MAX_WAITING: usize = 64;

/// Serves `router` on `listener` until `shutdown` completes, then lets requests in progress
/// finish (for at most [`SHUTDOWN_GRACE`]).
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let admission = Admission::new(
        Listener::Http,
        limits.max_connections,
        limits.max_connections_per_address,
    );
    let refusals = Arc::new(Semaphore::new(MAX_PENDING_REFUSALS));
    let waiting = Arc::new(Semaphore::new(MAX_WAITING));
    // Connections that waited for a place come back to this loop to be served.
    let (admitted_tx, mut admitted) = mpsc::unbounded_channel::<(TcpStream, SocketAddr, Place)>();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    // A peer that stops answering pings is gone; the connection watchdog handles the others.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout)
        .max_header_list_size(MAX_HEAD_BYTES as u32);
    let graceful = GracefulShutdown::new();
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    loop {
        // Accepted before a place is found: a full listener must see who is asking to decide
        // whether the newcomer pushes out one of the largest holder's connections.
        let (stream, remote, place) = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, remote)) => {
                    let from_proxy = is_trusted(&limits.trusted_proxies, remote.ip());
                    match admission.admit(remote.ip(), from_proxy) {
                        Ok(place) => (stream, remote, place),
                        Err(Refusal::ClientFull) => {
                            refuse(stream, remote, &refusals, Refusal::ClientFull, &limits);
                            continue;
                        }
                        Err(Refusal::Full) => {
                            wait_for_place(WaitingConnection {
                                stream,
                                remote,
                                from_proxy,
                                admission: admission.clone(),
                                waiting: &waiting,
                                refusals: &refusals,
                                limits: &limits,
                                admitted: &admitted_tx,
                            });
                            continue;
                        }
                    }
                }
                Err(e) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed; retrying shortly (raise `ulimit -n` or lower [http_limits] max_connections)");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some(waited) = admitted.recv() => waited,
            () = &mut shutdown => break,
        };
        let from_proxy = is_trusted(&limits.trusted_proxies, remote.ip());
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let place = Arc::new(place);
        let activity = Arc::new(Activity::new());
        let svc = {
            let (router, limits, activity, place) = (
                router.clone(),
                limits.clone(),
                activity.clone(),
                place.clone(),
            );
            tower::service_fn(move |req: Request<Incoming>| {
                let request = activity.begin();
                let busy = place.busy();
                let req = with_limits(req, remote, from_proxy, &limits);
                router.clone().oneshot(req).map(move |resp| {
                    // The request counts as in progress until its answer has been handed over.
                    resp.map(|r| {
                        // A held-open image is pushed out as readily as an idle connection.
                        let busy = r
                            .extensions()
                            .get::<admission::HeldOpen>()
                            .is_none()
                            .then_some(busy);
                        r.map(|body| {
                            axum::body::Body::new(Answer {
                                body,
                                _request: request,
                                _busy: busy,
                            })
                        })
                    })
                })
            })
        };
        let conn = builder
            .serve_connection(
                TokioIo::new(Section7Io::new(stream, activity.clone())),
                TowerToHyperService::new(svc),
            )
            .into_owned();
        let conn = graceful.watch(conn);
        let watched = watchdog(activity, limits.header_timeout, limits.body_timeout);
        tokio::spawn(async move {
            tokio::select! {
                r = conn => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, client = %remote, "HTTP connection ended with an error");
                    }
                }
                why = watched => {
                    tracing::debug!(client = %remote, "HTTP connection cut: {why}");
                }
                () = place.pushed_out() => {
                    tracing::debug!(client = %remote, "HTTP connection closed: pushed out of a full listener");
                }
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("HTTP requests still running after {SHUTDOWN_GRACE:?}; stopping anyway");
        }
    }
}

/// A connection that arrived at a full listener and may push out nobody.
struct WaitingConnection<'a> {
    stream: TcpStream,
    remote: SocketAddr,
    from_proxy: bool,
    admission: Admission,
    waiting: &'a Arc<Semaphore>,
    refusals: &'a Arc<Semaphore>,
    limits: &'a Arc<Limits>,
    admitted: &'a mpsc::UnboundedSender<(TcpStream, SocketAddr, Place)>,
}

/// Lets the connection wait, with at most [`MAX_WAITING`] others, up to `header_timeout` for a
/// place given back, then hands it to the accept loop; refuses it when too many wait already or
/// no place came back in time.
fn wait_for_place(c: WaitingConnection<'_>) {
    let Ok(permit) = c.waiting.clone().try_acquire_owned() else {
        refuse(c.stream, c.remote, c.refusals, Refusal::Full, c.limits);
        return;
    };
    let (refusals, limits, admitted) = (c.refusals.clone(), c.limits.clone(), c.admitted.clone());
    let WaitingConnection {
        stream,
        remote,
        from_proxy,
        admission,
        ..
    } = c;
    tokio::spawn(async move {
        let place = admission
            .admit_or_wait(remote.ip(), from_proxy, limits.header_timeout)
            .await;
        drop(permit);
        match place {
            // A closed channel: the listener is stopping, and the connection goes with it.
            Ok(place) => drop(admitted.send((stream, remote, place))),
            Err(why) => refuse(stream, remote, &refusals, why, &limits),
        }
    });
}

/// Tells a client that gets no place why (in HTTP/1.1, which nearly every client speaks first),
/// then closes.
fn refuse(
    mut stream: TcpStream,
    remote: SocketAddr,
    refusals: &Arc<Semaphore>,
    why: Refusal,
    limits: &Limits,
) {
    let message = match why {
        Refusal::ClientFull => {
            let cap = limits.max_connections_per_address;
            tracing::info!(client = %remote, "HTTP connection refused: the address holds {cap} already");
            telemetry::global().connection_refused_per_address();
            format!("this address (for IPv6, its /64) already holds {cap} open connections, the most one address may hold; reuse them or close some, then retry")
        }
        Refusal::Full => {
            let max = limits.max_connections;
            tracing::info!(client = %remote, "HTTP connection refused: all {max} places are taken and this address holds its share");
            telemetry::global().connection_refused_full();
            format!("the service is serving all the {max} connections it can and this address holds its share of them; retry shortly")
        }
    };
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        let body = api::error::error_body(ErrorName::RateLimited.as_str(), &message);
        let mut reply = format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: {}\r\n{}connection: close\r\n\r\n",
            body.len(),
            security_header_lines(),
        )
        .into_bytes();
        reply.extend_from_slice(&body);
        let _ = tokio::time::timeout(LINGER, async {
            let _ = stream.write_all(&reply).await;
            let _ = stream.shutdown().await;
            // Reading what the client sent before closing spares it a reset that could
            // discard the answer.
            let mut scratch = [0u8; 4096];
            while matches!(stream.read(&mut scratch).await, Ok(n) if n > 0) {}
        })
        .await;
        drop(permit);
    });
}

/// The headers [`api::security_headers`] adds, for the answers written here by hand.
fn security_header_lines() -> String {
    format!(
        "content-security-policy: {}\r\nx-content-type-options: nosniff\r\n",
        api::CONTENT_SECURITY_POLICY
    )
}

/// What a connection is doing, for the watchdog: requests in progress, when the last one ended,
/// and since when a write has been waiting for a client that does not read.
struct Activity {
    started: Instant,
    in_progress: AtomicUsize,
    /// Milliseconds after `started` when the connection last became idle.
    idle_since: AtomicU64,
    /// Milliseconds after `started`, plus one, since when a write has been blocked (0: none is).
    blocked_since: AtomicU64,
}

/// A request in progress; ends when dropped.
struct InProgress(Arc<Activity>);

/// An answer's body, holding its request in progress until hyper has taken all of it (and
/// passing on its size, so that `content-length` is kept).
struct Answer {
    body: axum::body::Body,
    _request: InProgress,
    /// Until the answer is handed over, the connection is not pushed out before idle ones.
    _busy: Option<Busy>,
}

impl http_body::Body for Answer {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Activity {
    fn new() -> Activity {
        Activity {
            started: Instant::now(),
            in_progress: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            blocked_since: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn begin(self: &Arc<Self>) -> InProgress {
        self.in_progress.fetch_add(1, Ordering::SeqCst);
        InProgress(self.clone())
    }

    fn write_blocked(&self, blocked: bool) {
        if blocked {
            let _ = self.blocked_since.compare_exchange(
                0,
                self.now_ms() + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        } else {
            self.blocked_since.store(0, Ordering::SeqCst);
        }
    }

    /// Why the connection should be cut now, if it should.
    fn overdue(&self, idle: Duration, stuck: Duration) -> Option<&'static str> {
        let now = self.now_ms();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let blocked = self.blocked_since.load(Ordering::SeqCst);
        if blocked != 0 && now.saturating_sub(blocked - 1) >= ms(stuck) {
            return Some("the client stopped reading its answer");
        }
        if self.in_progress.load(Ordering::SeqCst) == 0
            && now.saturating_sub(self.idle_since.load(Ordering::SeqCst)) >= ms(idle)
        {
            return Some("no complete request within the header timeout");
        }
        None
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.idle_since.store(self.0.now_ms(), Ordering::SeqCst);
        self.0.in_progress.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Completes when the connection has had no request in progress for `idle` (idle, or a request
/// head that never completes, in HTTP/1 and HTTP/2 alike), or a write has waited for `stuck`.
/// Request bodies have their own total deadline (see [`with_limits`]).
async fn watchdog(activity: Arc<Activity>, idle: Duration, stuck: Duration) -> &'static str {
    let tick = (idle.min(stuck) / 4).clamp(Duration::from_millis(25), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        if let Some(why) = activity.overdue(idle, stuck) {
            return why;
        }
    }
}

fn is_trusted(proxies: &[IpNet], ip: IpAddr) -> bool {
    let ip = canonical(ip);
    proxies.iter().any(|net| net.contains(&ip))
}

/// IPv4 addresses arriving on an IPv6 socket as `::ffff:a.b.c.d`, as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The client's address: the peer's, or, when the peer is a trusted proxy, the nearest address
/// in `Forwarded` (or else `X-Forwarded-For`) that is not itself a trusted proxy. Entries to the
/// left of that one were written by the client and are not believed.
fn client_address(headers: &HeaderMap, peer: SocketAddr, proxies: &[IpNet]) -> SocketAddr {
    let forwarded: Vec<Option<IpAddr>> = headers
        .get_all(header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.trim().split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                .and_then(|(_, value)| forwarded_node(value))
        })
        .collect();
    let hops = if forwarded.is_empty() {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|hop| forwarded_node(hop.trim()))
            .collect()
    } else {
        forwarded
    };
    for hop in hops.into_iter().rev() {
        // An unreadable or hidden hop: whoever is behind it cannot be named, so the last
        // proxy's view stands.
        let Some(ip) = hop else { break };
        if !is_trusted(proxies, ip) {
            return SocketAddr::new(canonical(ip), 0);
        }
    }
    peer
}

/// An address out of a `Forwarded` node (`192.0.2.1`, `"[2001:db8::1]:4711"`, `192.0.2.1:80`);
/// `None` for `unknown`, obfuscated names and anything else.
fn forwarded_node(value: &str) -> Option<IpAddr> {
    let value = value.trim().trim_matches('"');
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .and_then(|v| v.parse::<IpAddr>().ok())
}

/// The client's address for the API, and the body deadline.
fn with_limits(
    req: Request<Incoming>,
    remote: SocketAddr,
    from_proxy: bool,
    limits: &Limits,
) -> Request<axum::body::Body> {
    let client = if from_proxy {
        client_address(req.headers(), remote, &limits.trusted_proxies)
    } else {
        remote
    };
    let mut req =
        req.map(|b| axum::body::Body::new(api::params::DeadlineBody::new(b, limits.body_timeout)));
    req.extensions_mut().insert(ConnectInfo(client));
    req
}

/// A TCP stream that replaces hyper's own answer to an unparsable request (a bare 400, 414 or
/// 431 with `content-length: 0`, which the API never sends: it answers every error in JSON) with
/// the same status and a §7 JSON body. hyper has no hook for that answer, so it is recognised
/// where it is written.
struct Section7Io {
    inner: TcpStream,
    /// Told when writes block and unblock (a client that does not read its answer).
    activity: Arc<Activity>,
    /// The replacement reply and how much of it has been written.
    replacement: Option<(Vec<u8>, usize)>,
    linger: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

impl Section7Io {
    fn new(inner: TcpStream, activity: Arc<Activity>) -> Section7Io {
        Section7Io {
            inner,
            activity,
            replacement: None,
            linger: None,
        }
    }

    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some((bytes, written)) = &mut self.replacement {
            while *written < bytes.len() {
                let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Reads and drops what the client still sends, until it stops, the time is up or enough
    /// has been read.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some((deadline, drained)) = &mut self.linger else {
            return Poll::Ready(());
        };
        let mut scratch = [0u8; 8192];
        loop {
            if deadline.as_mut().poll(cx).is_ready() || *drained > LINGER_BYTES {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => *drained += buf.filled().len(),
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The §7 reply standing in for hyper's bare error head, if `buf` is one.
fn replacement_for(buf: &[u8]) -> Option<Vec<u8>> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let status = rest.get(..3)?;
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.lines().any(|l| l.trim() == "content-length: 0") {
        return None;
    }
    let (status, reason, name, message) = match status {
        b"400" => (
            400,
            "Bad Request",
            ErrorName::BadRequest,
            "the request is not valid HTTP/1.1: its request line or a header is malformed (for example a NUL or other control character in a header, or a byte the path may not hold: percent-encode it)".to_string(),
        ),
        b"414" => (
            414,
            "URI Too Long",
            ErrorName::InvalidParameter,
            format!(
                "the request target is longer than 64 KB; send at most {} bytes of query string",
                api::MAX_QUERY_BYTES
            ),
        ),
        b"431" => (
            431,
            "Request Header Fields Too Large",
            ErrorName::BadRequest,
            format!(
                "the request line and headers are too large: at most {MAX_HEADERS} headers and {} KB in all are accepted",
                MAX_HEAD_BYTES / 1024
            ),
        ),
        _ => return None,
    };
    let body = api::error::error_body(name.as_str(), &message);
    let mut reply = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}connection: close\r\n\r\n",
        body.len(),
        security_header_lines(),
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    Some(reply)
}

impl AsyncRead for Section7Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Section7Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacement.is_some() {
            // hyper writes nothing after its error head; anything else is not sent.
            ready!(this.poll_replacement(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        if let Some(reply) = replacement_for(buf) {
            this.replacement = Some((reply, 0));
            this.linger = Some((Box::pin(tokio::time::sleep(LINGER)), 0));
            // What is not written now is written on flush.
            if let Poll::Ready(Err(e)) = this.poll_replacement(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.activity.write_blocked(written.is_pending());
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_replacement(cx))?;
        ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
        ready!(this.poll_linger(cx));
        Poll::Ready(Ok(()))
    }

    // Whole heads arrive in one write only without vectored writes (hyper then flattens its
    // buffer), which is what `replacement_for` needs to recognise them.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::{client_address, replacement_for};
    use axum::http::HeaderMap;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, value.parse().expect("header value"));
        }
        h
    }

    /// The nearest untrusted hop names the client; hops a client wrote itself, unreadable or
    /// hidden ones do not move it further.
    #[test]
    fn the_client_is_the_nearest_address_no_trusted_proxy_wrote() {
        let proxies = vec![
            "10.0.0.0/8".parse().expect("net"),
            "127.0.0.1/32".parse().expect("net"),
        ];
        let peer = "127.0.0.1:5000".parse().expect("addr");
        let ip = |h: &HeaderMap| client_address(h, peer, &proxies).ip().to_string();
        let h = headers(&[("x-forwarded-for", "203.0.113.9, 198.51.100.1, 10.1.2.3")]);
        assert_eq!(ip(&h), "198.51.100.1");
        let h = headers(&[
            ("x-forwarded-for", "198.51.100.1"),
            ("x-forwarded-for", "10.1.2.3"),
        ]);
        assert_eq!(ip(&h), "198.51.100.1");
        // `Forwarded` wins over `X-Forwarded-For`, in any of its spellings.
        let h = headers(&[
            (
                "forwarded",
                "for=192.0.2.60;proto=https, for=\"[2001:db8::7]:4711\"",
            ),
            ("x-forwarded-for", "198.51.100.1"),
        ]);
        assert_eq!(ip(&h), "2001:db8::7");
        let h = headers(&[("forwarded", "for=unknown, for=10.0.0.2")]);
        assert_eq!(ip(&h), "127.0.0.1");
        assert_eq!(ip(&HeaderMap::new()), "127.0.0.1");
        let h = headers(&[("x-forwarded-for", "::ffff:198.51.100.4")]);
        assert_eq!(ip(&h), "198.51.100.4");
    }

    #[test]
    fn only_bare_error_heads_are_replaced() {
        let bare =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let reply = replacement_for(bare).map(|r| String::from_utf8_lossy(&r).to_string());
        let reply = reply.unwrap_or_default();
        assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
        assert!(
            reply.contains(r#"{"error":{"name":"BadRequest","message":"#),
            "{reply}"
        );
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n{";
        assert!(replacement_for(ours).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement_for(ok).is_none());
    }
}
