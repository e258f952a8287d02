//! Issue 9, point 1: a caller's `smtp_info.host` goes through the network policy like a `url`
//! source, so the `smtp` method can neither reach the service's own network nor scan its ports.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use testkit::http::{counting_loopback, OnAccept};
use tokio::net::TcpListener;

use crate::support::*;

fn spam_test(host: &str, port: u16) -> Value {
    json!({"subject": "S", "html": "<p>x</p>", "test_method": "smtp",
           "smtp_info": {"host": host, "port": port, "username": "u", "password": "p"}})
}

fn email_test(host: &str, port: u16) -> Value {
    json!({"subject": "S", "html": "<p>x</p>",
           "spam": {"test_method": "smtp",
                    "smtp_info": {"host": host, "port": port, "username": "u", "password": "p"}}})
}

/// Posts both kinds of test through `host` and checks each is refused as an internal address.
async fn assert_refused(s: &Server, host: &str, port: u16) {
    for (path, body) in [
        ("/v5/spam/tests", spam_test(host, port)),
        ("/v5/email/tests", email_test(host, port)),
    ] {
        let r = s.post(path, &body).await;
        r.expect_error("SMTPError", 502);
        let message = r.body["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("was not contacted: refused: ")
                && message.contains("private, loopback or otherwise internal address"),
            "{path} with host {host}: {message}"
        );
    }
}

#[tokio::test]
async fn loopback_spellings_in_smtp_info_are_refused_without_a_connection() {
    let s = Server::start().await;
    let (port, accepted) = counting_loopback(OnAccept::Close).await;
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "[::1]",
        "::1",
        "[::ffff:127.0.0.1]",
        "localhost",
    ] {
        assert_refused(&s, host, port).await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            0,
            "smtp_info host {host} made the service connect to loopback"
        );
    }
}

#[tokio::test]
async fn private_addresses_in_smtp_info_are_refused_before_any_connection() {
    let s = Server::start().await;
    // The refusal is decided from the address alone, before a socket exists, so nothing leaves
    // the machine (before the fix these waited out a connection timeout instead).
    for host in [
        "10.255.255.1",
        "192.168.0.1",
        "169.254.169.254",
        "[fd00::1]",
    ] {
        assert_refused(&s, host, 25).await;
    }
}

#[tokio::test]
async fn a_closed_port_and_an_open_port_that_is_not_smtp_answer_alike() {
    let s = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.1/32\"]\n".into(),
    })
    .await;
    // An open port of another service: it answers like a web server and hangs up.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("listener address").port();
    let server = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    });
    let open_spam = s
        .post("/v5/spam/tests", &spam_test("127.0.0.1", port))
        .await;
    let open_email = s
        .post("/v5/email/tests", &email_test("127.0.0.1", port))
        .await;
    server.abort();
    // Wait until the port is really closed (the accept loop owned the listener).
    let _ = server.await;
    let closed_spam = s
        .post("/v5/spam/tests", &spam_test("127.0.0.1", port))
        .await;
    let closed_email = s
        .post("/v5/email/tests", &email_test("127.0.0.1", port))
        .await;
    for r in [&open_spam, &open_email, &closed_spam, &closed_email] {
        r.expect_error("SMTPError", 502);
    }
    assert_eq!(
        open_spam.body, closed_spam.body,
        "an open non-SMTP port is told apart from a closed one"
    );
    assert_eq!(open_email.body, closed_email.body);
}
