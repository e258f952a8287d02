//! The HTTP listener: hyper over an accept loop of our own, so that open connections are bounded,
//! a stalled request head or body is cut off, the client address reaches the API (per-address
//! login limits), and hyper's own bare parse-error answers are sent as §7 JSON errors.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use api::ErrorName;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

/// Limits of the HTTP listener (`[http_limits]` in the config file).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Time a client has to send a request line and all headers (also how long an idle
    /// keep-alive connection stays open).
    pub header_timeout: Duration,
    /// Longest pause while a request body is being sent.
    pub body_timeout: Duration,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
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

/// Serves `router` on `listener` until `shutdown` completes, then lets requests in progress
/// finish (for at most [`SHUTDOWN_GRACE`]).
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let body_timeout = limits.body_timeout;
    tokio::pin!(shutdown);
    loop {
        // The permit is taken before accepting: over the limit, clients wait in the kernel's
        // backlog rather than holding memory here.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed; retrying shortly (raise `ulimit -n` or lower [http_limits] max_connections)");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let svc = router
            .clone()
            .map_request(move |req: Request<Incoming>| with_limits(req, remote, body_timeout));
        let conn = builder
            .serve_connection(
                TokioIo::new(Section7Io::new(stream)),
                TowerToHyperService::new(svc),
            )
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, client = %remote, "HTTP connection ended with an error");
            }
            drop(permit);
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

/// The client's address for the API, and the body timeout.
fn with_limits(
    req: Request<Incoming>,
    remote: SocketAddr,
    body_timeout: Duration,
) -> Request<axum::body::Body> {
    let mut req =
        req.map(|b| axum::body::Body::new(tower_http::timeout::TimeoutBody::new(body_timeout, b)));
    req.extensions_mut().insert(ConnectInfo(remote));
    req
}

/// A TCP stream that replaces hyper's own answer to an unparsable request (a bare 400, 414 or
/// 431 with `content-length: 0`, which the API never sends: it answers every error in JSON) with
/// the same status and a §7 JSON body. hyper has no hook for that answer, so it is recognised
/// where it is written.
struct Section7Io {
    inner: TcpStream,
    /// The replacement reply and how much of it has been written.
    replacement: Option<(Vec<u8>, usize)>,
    linger: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

impl Section7Io {
    fn new(inner: TcpStream) -> Section7Io {
        Section7Io {
            inner,
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
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
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
        Pin::new(&mut this.inner).poll_write(cx, buf)
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
    use super::replacement_for;

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
