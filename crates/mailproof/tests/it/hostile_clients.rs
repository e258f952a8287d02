//! Issue 17, points 2, 3 and 5, as a stranger would try them: connections held without
//! credentials (idle HTTP/2, unfinished header blocks, trickled bodies, 200 connections from one
//! address), trusted proxies, the public sandbox credentials, login storms, and the smaller holes
//! (sign-in redirects, /metrics series, security headers, versions, the password rule). Each
//! figure of the issue is a count here; the timeouts are configured short and the waits only
//! bound a broken server.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::*;

/// Longest wait for anything: only there so that a broken server fails instead of hanging.
pub(crate) const WAIT: Duration = Duration::from_secs(30);
/// The HTTP/2 connection preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

pub(crate) fn local(a: u8, b: u8, c: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, a, b, c))
}

pub(crate) fn server_addr(s: &Server) -> SocketAddr {
    s.base
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address")
}

pub(crate) async fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from, 0)).expect("bind");
    socket.connect(to).await.expect("connect")
}

fn client_from(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .timeout(WAIT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// `GET /v5/auth` from `from` with these credentials and extra headers; the status.
pub(crate) async fn auth_status(
    s: &Server,
    from: IpAddr,
    user: &str,
    pass: &str,
    headers: &[(&str, &str)],
) -> u16 {
    let mut req = client_from(from)
        .get(s.url("/v5/auth"))
        .header("Authorization", basic(user, pass));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.expect("send").status().as_u16()
}

#[tokio::test]
async fn idle_http2_and_unfinished_header_blocks_are_cut_while_others_are_served() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 1\nbody_timeout = 5\n".into(),
    })
    .await;
    let to = server_addr(&s);
    let attacker = local(0, 0, 21);
    let mut idle = connect_from(attacker, to).await;
    idle.write_all(H2_PREFACE).await.expect("preface");
    // HEADERS for stream 1 (`:method GET`) without END_HEADERS: the block never ends.
    let mut unfinished = connect_from(attacker, to).await;
    let mut bytes = H2_PREFACE.to_vec();
    bytes.extend_from_slice(&[0, 0, 1, 0x1, 0x0, 0, 0, 0, 1, 0x82]);
    unfinished.write_all(&bytes).await.expect("headers");
    // An HTTP/1 connection that never sends a byte.
    let mut silent = connect_from(attacker, to).await;

    let other = local(0, 0, 22);
    assert_eq!(
        auth_status(&s, other, ADMIN_KEY, ADMIN_PASS, &[]).await,
        200
    );
    let mut cut = 0;
    for c in [&mut idle, &mut unfinished, &mut silent] {
        if closed_within(c, WAIT).await.is_some() {
            cut += 1;
        }
    }
    assert_eq!(
        cut, 3,
        "idle and unfinished connections must be closed (header_timeout = 1 s)"
    );
    assert_eq!(
        auth_status(&s, other, ADMIN_KEY, ADMIN_PASS, &[]).await,
        200
    );
}

/// Writes `piece` (one body byte) a hundred times, every 100 ms, until the server closes: never
/// a pause long enough for a per-pause timeout, 10 s in all. Counts the pieces written.
pub(crate) fn trickle(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    piece: &'static [u8],
) -> (tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let writer = tokio::spawn(async move {
        for _ in 0..100 {
            if wr.write_all(piece).await.is_err() {
                return;
            }
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (writer, sent)
}

#[tokio::test]
async fn a_trickled_body_is_cut_after_the_total_body_time() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 60\nbody_timeout = 2\n".into(),
    })
    .await;
    let stream = connect_from(local(0, 0, 31), server_addr(&s)).await;
    let (mut rd, mut wr) = stream.into_split();
    let head = format!(
        "POST /v5/email/tests HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        basic(ADMIN_KEY, ADMIN_PASS)
    );
    wr.write_all(head.as_bytes()).await.expect("head");
    let (writer, sent) = trickle(wr, b" ");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(WAIT, async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    writer.abort();
    let answer = String::from_utf8_lossy(&answer).to_string();
    let sent = sent.load(Ordering::SeqCst);
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "a body still arriving after body_timeout must be answered 408: {answer}"
    );
    assert!(
        sent < 60,
        "the answer must come before the body is through: {sent} of 100 bytes were sent"
    );
}

/// One HTTP/2 frame: type, flags, stream and payload.
async fn h2_frame<R: AsyncReadExt + Unpin>(rd: &mut R) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    rd.read_exact(&mut head).await.ok()?;
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], stream, payload))
}

#[tokio::test]
async fn a_trickled_http2_body_is_cut_after_the_total_body_time() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 60\nbody_timeout = 2\n".into(),
    })
    .await;
    let stream = connect_from(local(0, 0, 32), server_addr(&s)).await;
    let (mut rd, mut wr) = stream.into_split();
    wr.write_all(H2_PREFACE).await.expect("preface");
    loop {
        let (kind, flags, _, _) = h2_frame(&mut rd).await.expect("the server's SETTINGS");
        if kind == 0x4 && flags & 0x1 == 0 {
            break;
        }
    }
    // SETTINGS ACK, then HEADERS (END_HEADERS, no END_STREAM) for POST /v5/email/tests.
    let auth = basic(ADMIN_KEY, ADMIN_PASS);
    let mut block = vec![0x83, 0x86, 0x44, 15];
    block.extend_from_slice(b"/v5/email/tests");
    block.extend_from_slice(&[
        0x41,
        1,
        b'x',
        0x57,
        u8::try_from(auth.len()).expect("short"),
    ]);
    block.extend_from_slice(auth.as_bytes());
    let mut frames = vec![0, 0, 0, 0x4, 0x1, 0, 0, 0, 0];
    frames.extend_from_slice(&[
        0,
        0,
        u8::try_from(block.len()).expect("short"),
        0x1,
        0x4,
        0,
        0,
        0,
        1,
    ]);
    frames.extend_from_slice(&block);
    wr.write_all(&frames).await.expect("headers");
    // One-byte DATA frames on stream 1.
    let (writer, sent) = trickle(wr, &[0, 0, 1, 0x0, 0x0, 0, 0, 0, 1, b' ']);
    // The answer (HEADERS) or a reset of stream 1, whichever comes first.
    let answered = tokio::time::timeout(WAIT, async {
        while let Some((kind, _, stream, _)) = h2_frame(&mut rd).await {
            if stream == 1 && (kind == 0x1 || kind == 0x3) {
                return true;
            }
        }
        false
    })
    .await;
    let sent = sent.load(Ordering::SeqCst);
    writer.abort();
    assert_eq!(answered, Ok(true), "stream 1 must be answered or reset");
    assert!(
        sent < 60,
        "the answer must come before the body is through: {sent} of 100 bytes were sent"
    );
}

#[tokio::test]
async fn one_address_gets_its_share_of_connections_and_no_more() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nheader_timeout = 60\nmax_connections = 100\nmax_connections_per_address = 20\n"
            .into(),
    })
    .await;
    let to = server_addr(&s);
    let attacker = local(0, 0, 41);
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(connect_from(attacker, to).await);
    }
    // Refused connections are answered and closed at once; the admitted ones wait for a request.
    let outcomes = futures::future::join_all(
        held.iter_mut()
            .map(|c| closed_within(c, Duration::from_secs(5))),
    )
    .await;
    let refused: Vec<&String> = outcomes.iter().flatten().collect();
    assert_eq!(
        refused.len(),
        180,
        "200 connections from one address, 20 allowed"
    );
    assert!(
        refused.iter().any(|r| r.starts_with("HTTP/1.1 429")
            && r.contains(r#"{"error":{"name":"RateLimited","message":"#)),
        "a refusal says why: {:?}",
        refused.first()
    );
    // Others are served meanwhile, from another address and from the usual one.
    assert_eq!(
        auth_status(&s, local(0, 0, 42), ADMIN_KEY, ADMIN_PASS, &[]).await,
        200
    );
    s.get("/v5/auth").await.ok();
    // The address's share comes back with its connections.
    drop(held);
    let mut served = false;
    for _ in 0..50 {
        if auth_status(&s, attacker, ADMIN_KEY, ADMIN_PASS, &[]).await == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "closed connections give their slots back");
}

#[tokio::test]
async fn forwarded_addresses_count_only_from_trusted_proxies() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nfailed_logins_per_address = 3\nfailed_logins_per_key = 1000\ntrusted_proxies = [\"127.0.0.9/32\"]\n"
            .into(),
    })
    .await;
    s.add_account("user", "standard", &[]);
    let proxy = local(0, 0, 9);
    let count = |statuses: &[u16], status: u16| statuses.iter().filter(|s| **s == status).count();

    // Behind the proxy, each client has its own budget.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(
            auth_status(
                &s,
                proxy,
                "user",
                "wrong",
                &[("X-Forwarded-For", "198.51.100.7")],
            )
            .await,
        );
    }
    assert_eq!(
        (count(&statuses, 401), count(&statuses, 429)),
        (3, 2),
        "{statuses:?}"
    );
    // A client-written entry left of the proxy's own does not change who the client is.
    assert_eq!(
        auth_status(
            &s,
            proxy,
            "user",
            "password-1",
            &[("X-Forwarded-For", "203.0.113.1, 198.51.100.7")]
        )
        .await,
        429
    );
    assert_eq!(
        auth_status(
            &s,
            proxy,
            "user",
            "wrong",
            &[("X-Forwarded-For", "198.51.100.7, 198.51.100.8")]
        )
        .await,
        401
    );
    assert_eq!(
        auth_status(
            &s,
            proxy,
            "user",
            "password-1",
            &[("Forwarded", "for=\"198.51.100.9:4711\";proto=https")]
        )
        .await,
        200
    );

    // From any other peer the headers are the client's own words and are ignored.
    let mut statuses = Vec::new();
    for i in 0..5 {
        let claimed = format!("192.0.2.{i}");
        statuses.push(
            auth_status(
                &s,
                local(0, 0, 10),
                "user",
                "wrong",
                &[("X-Forwarded-For", claimed.as_str())],
            )
            .await,
        );
    }
    assert_eq!(
        (count(&statuses, 401), count(&statuses, 429)),
        (3, 2),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn concurrent_wrong_passwords_are_counted_before_they_are_checked() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nfailed_logins_per_address = 5\nfailed_logins_per_key = 1000\n"
            .into(),
    })
    .await;
    s.add_account("target", "standard", &[]);
    let from = local(0, 3, 1);
    let tries = (0..40).map(|i| {
        let pass = format!("wrong-{i}");
        let s = &s;
        async move { auth_status(s, from, "target", &pass, &[]).await }
    });
    let statuses = futures::future::join_all(tries).await;
    let checked = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(checked + limited, 40, "{statuses:?}");
    // 5 a minute; a sixth may have been refilled while the storm ran.
    assert!(
        (5..=6).contains(&checked),
        "{checked} passwords checked: {statuses:?}"
    );
}

#[tokio::test]
async fn a_locked_key_still_admits_its_owner_from_a_quiet_address() {
    let s = Server::start_with(Options {
        config: "[http_limits]\nfailed_logins_per_address = 5\nfailed_logins_per_key = 4\n".into(),
    })
    .await;
    s.add_account("victim", "standard", &[]);
    // The storm spends the key's budget from two addresses.
    let mut statuses = Vec::new();
    for from in [
        local(0, 2, 1),
        local(0, 2, 1),
        local(0, 2, 2),
        local(0, 2, 2),
    ] {
        statuses.push(auth_status(&s, from, "victim", "wrong", &[]).await);
    }
    assert_eq!(statuses, [401; 4]);
    // Addresses that failed are held off the key, even within their own budget...
    assert_eq!(
        auth_status(&s, local(0, 2, 1), "victim", "wrong", &[]).await,
        429
    );
    assert_eq!(
        auth_status(&s, local(0, 2, 2), "victim", "password-1", &[]).await,
        429
    );
    // ...the owner, from an address with no failures, is not: by API and by web sign-in.
    assert_eq!(
        auth_status(&s, local(0, 2, 3), "victim", "password-1", &[]).await,
        200
    );
    let (status, cookie, _) =
        web_sign_in(&s, Some(local(0, 2, 4)), "victim", "password-1", "/tests").await;
    assert_eq!(status, 303, "web sign-in while the key is locked");
    assert!(cookie.is_some());
    // A fresh address of the storm gets one try, not more.
    let fresh = local(0, 2, 5);
    assert_eq!(auth_status(&s, fresh, "victim", "wrong", &[]).await, 401);
    assert_eq!(auth_status(&s, fresh, "victim", "wrong", &[]).await, 429);
}

/// A loopback HTTP server that counts the connections made to it.
async fn counting_origin() -> (String, Arc<AtomicUsize>) {
    const PAGE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 40\r\nConnection: close\r\n\r\n<html><body><p>fetched</p></body></html>";
    let (addr, hits) = testkit::http::counting_listener(
        std::net::Ipv4Addr::LOCALHOST.into(),
        testkit::http::OnAccept::Reply(PAGE),
    )
    .await;
    (format!("http://{addr}/email.html"), hits)
}

#[tokio::test]
async fn the_sandbox_fetches_nothing_and_has_its_own_budget() {
    let s = Server::start_with(Options {
        config:
            "[http_limits]\nsandbox_requests_per_minute = 8\n[fetch]\nallow = [\"127.0.0.1/32\"]\n"
                .into(),
    })
    .await;
    let (url, hits) = counting_origin().await;
    let sandbox = client_from(local(0, 4, 1));
    let post = |path: &'static str, body: serde_json::Value| {
        let sandbox = sandbox.clone();
        let url = s.url(path);
        async move {
            let r = sandbox
                .post(url)
                .header("Authorization", basic("sandbox", "sandbox"))
                .json(&body)
                .send()
                .await
                .expect("send");
            Reply::from(r).await
        }
    };
    post("/v5/email/tests", json!({"subject": "s", "url": url}))
        .await
        .ok();
    post(
        "/v5/spam/tests",
        json!({"subject": "s", "url": url, "test_method": "seed"}),
    )
    .await;
    post(
        "/v5/email/tests",
        json!({"subject": "s", "url": "not a url"}),
    )
    .await
    .expect_error("InvalidURL", 400);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "sandbox requests must fetch nothing"
    );
    // The same request from an account does fetch: the counter can tell.
    s.post(
        "/v5/email/tests",
        &json!({"subject": "s", "url": url, "clients": ["gmail_chr26_win"]}),
    )
    .await;
    assert!(
        hits.load(Ordering::SeqCst) >= 1,
        "an account's url source is fetched"
    );

    // 8 a minute from one address (3 used above), whatever the accounts do.
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(auth_status(&s, local(0, 4, 1), "sandbox", "sandbox", &[]).await);
    }
    let served = statuses.iter().filter(|s| **s == 200).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(served + limited, 8, "{statuses:?}");
    // One more may have been refilled meanwhile (8 a minute).
    assert!((5..=6).contains(&served), "{statuses:?}");
    assert_eq!(
        auth_status(&s, local(0, 4, 2), "sandbox", "sandbox", &[]).await,
        200
    );
    s.get("/v5/auth").await.ok();

    // Large bodies are an account's to send, not a stranger's.
    let big = json!({"subject": "s", "html": format!("<p>{}</p>", "x".repeat(2 * 1024 * 1024))});
    let r = client_from(local(0, 4, 3))
        .post(s.url("/v5/email/tests"))
        .header("Authorization", basic("sandbox", "sandbox"))
        .json(&big)
        .send()
        .await
        .expect("send");
    let r = Reply::from(r).await;
    r.expect_error("BadRequest", 400);
    let msg = r.body["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("sandbox"), "{msg}");
    let r = s.post("/v5/email/tests", &big).await;
    assert!(
        !r.body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("could not read the request body"),
        "an account's 2 MB body is read: {}",
        r.body
    );
}

#[tokio::test]
async fn sandbox_sign_ins_store_no_session() {
    let s = Server::start().await;
    let store = match database_url(s.dir.path()) {
        Some(url) => store::Store::connect(&url).await,
        None => store::Store::open(&s.data_dir()).await,
    }
    .expect("the server's store");
    let now = chrono::Utc::now().timestamp();
    let mut stored = 0;
    let mut cookies = Vec::new();
    for i in 0..20 {
        let (status, cookie, _) =
            web_sign_in(&s, Some(local(0, 5, 1 + i)), "sandbox", "sandbox", "/tests").await;
        assert_eq!(status, 303);
        let cookie = cookie.expect("a session cookie");
        let id = cookie.split_once('=').expect("name=value").1.to_string();
        let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(id.as_bytes()));
        if store.session(&hash, now).await.expect("read").is_some() {
            stored += 1;
        }
        cookies.push(cookie);
    }
    assert_eq!(stored, 0, "sandbox sign-ins must not store sessions");
    // The cookies work without a row; a forged one does not.
    let http = client_from(local(0, 5, 50));
    let page = |cookie: String| {
        let http = http.clone();
        let url = s.url("/tests");
        async move {
            http.get(url)
                .header("cookie", cookie)
                .send()
                .await
                .expect("page")
                .status()
                .as_u16()
        }
    };
    assert_eq!(page(cookies[0].clone()).await, 200);
    let forged = cookies[0].replacen("mp_session=sandbox.", "mp_session=sandbox.9", 1);
    assert_eq!(page(forged).await, 303);
    // An account's sign-in is still a stored session.
    let (_, cookie, _) =
        web_sign_in(&s, Some(local(0, 5, 60)), ADMIN_KEY, ADMIN_PASS, "/tests").await;
    let id = cookie
        .expect("cookie")
        .split_once('=')
        .expect("name=value")
        .1
        .to_string();
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(id.as_bytes()));
    assert!(store.session(&hash, now).await.expect("read").is_some());
}

#[tokio::test]
async fn sign_in_redirects_only_to_paths_of_this_site() {
    let s = Server::start().await;
    let from = local(0, 6, 1);
    for (next, expected) in [
        ("/tests?page=2", "/tests?page=2"),
        ("/\t/evil.example/", "/tests"),
        ("//evil.example/", "/tests"),
        ("/\\evil.example/", "/tests"),
        ("https://evil.example/", "/tests"),
        ("/tests\r\nSet-Cookie: x=1", "/tests"),
        ("/tests\u{e9}", "/tests"),
    ] {
        let (status, cookie, location) =
            web_sign_in(&s, Some(from), ADMIN_KEY, ADMIN_PASS, next).await;
        assert_eq!(status, 303, "next {next:?}");
        assert!(cookie.is_some(), "next {next:?}");
        assert_eq!(location, expected, "next {next:?}");
    }
    // The form carries only a safe `next` too.
    let form = client_from(from)
        .get(s.url("/signin?next=/%09/evil.example/"))
        .send()
        .await
        .expect("form")
        .text()
        .await
        .expect("text");
    assert!(!form.contains("evil.example"), "{form}");
}

#[tokio::test]
async fn metrics_series_stay_bounded_and_need_a_token_on_a_public_port() {
    let s = Server::start().await;
    for i in 0..30 {
        let method = reqwest::Method::from_bytes(format!("PROBE{i}").as_bytes()).expect("method");
        let _ = s
            .http
            .request(method, s.url("/v5/auth"))
            .send()
            .await
            .expect("send");
    }
    let text = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let methods: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("mailproof_http_requests_total{"))
        .filter_map(|l| l.split("method=\"").nth(1)?.split('"').next())
        .collect();
    assert!(methods.contains("OTHER"), "{methods:?}");
    assert!(
        methods.iter().all(|m| [
            "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "OTHER"
        ]
        .contains(m)),
        "{methods:?}"
    );

    let public = Server::start_listening_on("0.0.0.0:0", Options::default()).await;
    public
        .get("/metrics")
        .await
        .expect_error("AccessDenied", 401);
    let with_token = Server::start_listening_on(
        "0.0.0.0:0",
        Options {
            config: "[metrics]\ntoken = \"scrape-token-1\"\n".into(),
        },
    )
    .await;
    let r = with_token
        .http
        .get(with_token.url("/metrics"))
        .header("Authorization", "Bearer scrape-token-1")
        .send()
        .await
        .expect("metrics");
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn every_answer_carries_a_content_security_policy_and_nosniff() {
    let s = Server::start().await;
    let http = client_from(local(0, 7, 1));
    let mut pages = Vec::new();
    for path in [
        "/v5/auth",
        "/v5/nothing",
        "/signin",
        "/healthz",
        "/openapi.json",
        "/static/app.js",
        "/tests",
    ] {
        let r = http.get(s.url(path)).send().await.expect("send");
        let get = |name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        let csp = get("content-security-policy");
        assert!(csp.contains("script-src 'self';"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        if path == "/signin" {
            pages.push(r.text().await.expect("page"));
        }
    }
    // The policy allows no inline script, and the pages have none.
    for page in pages {
        for script in page.split("<script").skip(1) {
            let tag = script.split('>').next().unwrap_or("");
            assert!(
                tag.contains("src="),
                "inline script in a page: <script{tag}>"
            );
        }
    }
    // hyper's own answers, rewritten as §7 errors, carry them too.
    let mut c = connect_from(local(0, 7, 1), server_addr(&s)).await;
    let mut req = b"GET /v5/auth HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..150 {
        req.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    c.write_all(&req).await.expect("write");
    let answer = closed_within(&mut c, WAIT)
        .await
        .expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(
        answer.contains("x-content-type-options: nosniff"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_first_segment_that_is_no_served_version_is_wrong_version() {
    let s = Server::start().await;
    for path in ["/V5/auth", "/v%C2%B2/auth", "/hello/auth", "/v4", "/v5.0.2"] {
        s.get(path).await.expect_error("WrongVersion", 400);
    }
    s.get("/elsewhere").await.expect_error("NotFound", 404);
    s.get("/v5/auth").await.ok();
}

#[tokio::test]
async fn the_first_account_follows_the_password_rule() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("mailproof.toml");
    std::fs::write(&config, "[render]\nengines = []\n[spam]\ndaemons = false\n").expect("config");
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::from(
            testkit::service::Launch::serve(std::path::Path::new(BIN), "short password")
                .args(["--smtp", "127.0.0.1:0", "--data-dir"])
                .arg(dir.path().join("data"))
                .arg("--config")
                .arg(&config)
                .env("MAILPROOF_API_KEY", "first-key")
                .env("MAILPROOF_PASSWORD", "six-ch")
                .command(),
        )
        .env_remove("MAILPROOF_DATABASE_URL")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output(),
    )
    .await
    .expect("serve must stop at once on a short first password")
    .expect("run serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 8 characters"), "{err}");
}
