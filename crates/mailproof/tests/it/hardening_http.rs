//! Issue 9, points 2-4: every malformed or oversized request gets a §7 error body (name before
//! message), failed logins are limited, and stalled clients are cut off while others are served.
//! Cases reqwest cannot send (NUL bytes, raw non-UTF-8, 2,000 headers) go over raw TCP.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Longest wait for any answer over raw TCP: only there so that a broken server fails the test
/// instead of hanging it.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

fn addr(s: &Server) -> String {
    s.base.trim_start_matches("http://").to_string()
}

/// A raw HTTP exchange's outcome.
#[derive(Debug)]
struct RawReply {
    status: u16,
    head: String,
    body: String,
}

impl RawReply {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The reply is a §7 error with this status and name, written name first.
    #[track_caller]
    fn expect_error(&self, status: u16, name: &str, case: &str) {
        assert_eq!(self.status, status, "{case}: status; reply {self:?}");
        let prefix = format!(r#"{{"error":{{"name":"{name}","message":""#);
        assert!(
            self.body.starts_with(&prefix),
            "{case}: the body must start with {prefix}; reply {self:?}"
        );
        let v: Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{case}: body is not JSON ({e}): {self:?}"));
        let msg = v["error"]["message"].as_str().unwrap_or("");
        assert!(msg.len() > 10, "{case}: message too short: {msg:?}");
        assert!(
            self.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "{case}: content type; reply {self:?}"
        );
    }
}

/// Sends `request` on a new connection (writing it from another task, since the server may answer
/// and close before reading all of it) and reads until the server closes.
async fn raw(addr: &str, request: Vec<u8>) -> RawReply {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&request).await;
        // Keep the write half open: closing it would look like a client that went away.
        tokio::time::sleep(ANSWER_WAIT).await;
        drop(wr);
    });
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let read = tokio::time::timeout(ANSWER_WAIT, async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if complete(&got) {
                        break;
                    }
                }
            }
        }
    })
    .await;
    writer.abort();
    assert!(
        read.is_ok(),
        "no complete answer within {ANSWER_WAIT:?}; got {:?}",
        String::from_utf8_lossy(&got)
    );
    let text = String::from_utf8_lossy(&got).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    RawReply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A whole response with a Content-Length has arrived.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .is_some_and(|len| body.len() >= len)
}

fn get_request(target: &[u8], extra_headers: &[u8]) -> Vec<u8> {
    let mut r = b"GET ".to_vec();
    r.extend_from_slice(target);
    r.extend_from_slice(b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: ");
    r.extend_from_slice(basic(ADMIN_KEY, ADMIN_PASS).as_bytes());
    r.extend_from_slice(b"\r\n");
    r.extend_from_slice(extra_headers);
    r.extend_from_slice(b"\r\n");
    r
}

#[tokio::test]
async fn oversized_and_malformed_requests_get_section_7_error_bodies() {
    let s = Server::start().await;
    let a = addr(&s);

    let long_query = format!("/v5/tests?subject={}", "a".repeat(100 * 1024));
    raw(&a, get_request(long_query.as_bytes(), b""))
        .await
        .expect_error(414, "InvalidParameter", "100 KB query string");

    let many_params = format!("/v5/tests?{}", "p&".repeat(10_000));
    raw(&a, get_request(many_params.as_bytes(), b""))
        .await
        .expect_error(400, "InvalidParameter", "10^4 query parameters");

    let big_header = format!("X-Big: {}\r\n", "b".repeat(1024 * 1024));
    raw(&a, get_request(b"/v5/auth", big_header.as_bytes()))
        .await
        .expect_error(431, "BadRequest", "1 MB header");

    let many_headers: String = (0..2000).map(|i| format!("X-H{i}: v\r\n")).collect();
    raw(&a, get_request(b"/v5/auth", many_headers.as_bytes()))
        .await
        .expect_error(431, "BadRequest", "2,000 headers");

    raw(&a, get_request(b"/v5/auth", b"X-Nul: a\0b\r\n"))
        .await
        .expect_error(400, "BadRequest", "NUL in a header");

    raw(&a, get_request(b"/v5/email/tests/\xff\xfe/results", b""))
        .await
        .expect_error(400, "BadRequest", "raw invalid UTF-8 in the path");

    raw(&a, get_request(b"/v5/email/tests/%FF%FE/results", b""))
        .await
        .expect_error(
            400,
            "BadRequest",
            "percent-encoded invalid UTF-8 in the path",
        );

    let shot = "/screenshots/0123456789abcdef0123456789abcdef/gmail/default.png\
                ?expires=1&expires=2&signature=ab";
    raw(&a, get_request(shot.as_bytes(), b""))
        .await
        .expect_error(
            400,
            "InvalidParameter",
            "duplicate screenshot query parameters",
        );

    // Within the parameter count, but more search filters than one query may carry.
    for n in [50, 999] {
        let filters: String = (0..n).map(|i| format!("headers[x-h{i}]=v&")).collect();
        let r = s.get(&format!("/v5/tests?{filters}")).await;
        r.expect_error("InvalidParameter", 400);
    }
    // A handful of filters is still a search.
    let r = s.get("/v5/tests?headers[x-a]=1&headers[x-b]=2").await;
    r.ok();
}

#[tokio::test]
async fn error_bodies_carry_the_name_before_the_message() {
    let s = Server::start().await;
    let r = s
        .http
        .get(s.url("/v5/auth"))
        .header("Authorization", basic("nobody", "wrong"))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    let text = r.text().await.expect("body");
    assert!(
        text.starts_with(r#"{"error":{"name":"AccessDenied","message":"#),
        "{text}"
    );
}

async fn auth_from(s: &Server, local: Option<IpAddr>, user: &str, pass: &str) -> Reply {
    let mut b = reqwest::Client::builder().timeout(ANSWER_WAIT);
    if let Some(ip) = local {
        b = b.local_address(ip);
    }
    let client = b.build().expect("client");
    let r = client
        .get(s.url("/v5/auth"))
        .header("Authorization", basic(user, pass))
        .send()
        .await
        .expect("send");
    Reply::from(r).await
}

#[tokio::test]
async fn failed_logins_are_limited_per_address_and_per_key() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nfailed_logins_per_address = 5\nfailed_logins_per_key = 8\n".into(),
    })
    .await;
    s.add_account("victim", "standard", &[]);
    s.add_account("other", "standard", &[]);
    s.get("/v5/auth").await.ok();
    // A client that logged in before the storm keeps working during it.
    auth_from(&s, None, "victim", "password-1").await.ok();

    // Per address: wrong passwords for various keys from one address.
    let one = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)));
    let mut limited = None;
    for i in 0..12 {
        let r = auth_from(&s, one, "other", &format!("wrong-{i}")).await;
        if r.status == 429 {
            limited = Some(r);
            break;
        }
        r.expect_error("AccessDenied", 401);
    }
    let r = limited.expect("wrong passwords from one address must end in RateLimited");
    r.expect_error("RateLimited", 429);
    let wait: u64 = header(&r, "retry-after")
        .parse()
        .expect("Retry-After seconds");
    assert!(wait >= 1, "Retry-After {wait}");
    // The limited address cannot try even a right password of an uncached key...
    auth_from(&s, one, "other", "password-1")
        .await
        .expect_error("RateLimited", 429);
    // ...but the cached login of the victim still works from it, as does another address.
    auth_from(&s, one, "victim", "password-1").await.ok();
    auth_from(
        &s,
        Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))),
        "other",
        "password-1",
    )
    .await
    .ok();

    // Per key: wrong passwords for one key from several addresses. (An address with no failed
    // login may still try a spent key once: see hostile_clients.)
    s.add_account("target", "standard", &[]);
    let mut limited = false;
    for i in 0..12u8 {
        let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 1, 10 + i % 2));
        let r = auth_from(&s, Some(ip), "target", "wrong").await;
        if r.status == 429 {
            r.expect_error("RateLimited", 429);
            assert!(!header(&r, "retry-after").is_empty(), "Retry-After");
            limited = true;
            break;
        }
        r.expect_error("AccessDenied", 401);
    }
    assert!(
        limited,
        "wrong passwords for one key must end in RateLimited"
    );
    // Cached clients of other accounts are untouched.
    s.get("/v5/auth").await.ok();
}

async fn stalled(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(addr).await.expect("connect");
    c.write_all(bytes).await.expect("write");
    c
}

/// Reads until the server closes the connection; returns what it sent, or `None` if it did not
/// close within [`ANSWER_WAIT`].
async fn until_closed(c: &mut TcpStream) -> Option<String> {
    closed_within(c, ANSWER_WAIT).await
}

#[tokio::test]
async fn a_stalled_head_or_short_body_is_cut_off() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 1\nbody_timeout = 1\n".into(),
    })
    .await;
    let a = addr(&s);
    let mut head = stalled(&a, b"GET /v5/auth HTTP/1.1\r\nHost: localhost\r\nX-Half: ").await;
    let auth = basic(ADMIN_KEY, ADMIN_PASS);
    let short_body = format!(
        "POST /v5/email/tests HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"subject\":"
    );
    let mut body = stalled(&a, short_body.as_bytes()).await;

    let cut = until_closed(&mut head).await;
    assert!(cut.is_some(), "a half-sent head must be cut off");
    let answer = until_closed(&mut body)
        .await
        .expect("a body shorter than its Content-Length must be answered and closed");
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "a stalled body answers 408: {answer}"
    );
    assert!(
        answer.contains(r#"{"error":{"name":"BadRequest","message":""#),
        "{answer}"
    );
}

#[tokio::test]
async fn other_requests_are_served_while_50_connections_stall() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 60\nbody_timeout = 60\nmax_connections = 80\n"
            .into(),
    })
    .await;
    let a = addr(&s);
    let mut hanging = Vec::new();
    for i in 0..50 {
        let bytes: &[u8] = if i % 2 == 0 {
            b"GET /v5/auth HTTP/1.1\r\nHost: x\r\n"
        } else {
            b"POST /v5/email/tests HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"
        };
        hanging.push(stalled(&a, bytes).await);
    }
    for _ in 0..5 {
        s.get("/v5/auth").await.ok();
    }
    drop(hanging);
}
