//! Outbound sending against the test kit's SMTP stub with AUTH, and into our own inbound server.

use std::net::Ipv4Addr;
use std::time::Duration;

use content::netpolicy::{NetPolicy, ResolveError};
use smtp::{Secure, SendError, SmtpInfo};
use testkit::http::{counting_listener, OnAccept};
use testkit::smtp::{Received, Reply, SmtpStub};

use crate::support::{test_config, TestServer};

const USER: &str = "test";
const PASSWORD: &str = "secret";
const TIMEOUT: Duration = Duration::from_secs(20);

/// A caller's server: AUTH required, recipients whose local part is "reject" refused with 550.
struct AuthServer {
    stub: SmtpStub,
    port: u16,
}

impl AuthServer {
    async fn start() -> Self {
        let stub = SmtpStub::builder()
            .hostname("auth-test.local")
            .auth(USER, PASSWORD)
            .answer_rcpt(|rcpt| {
                rcpt.starts_with("reject@")
                    .then(|| Reply::new(550, "5.1.1 Mailbox refused by the test server"))
            })
            .start()
            .await;
        let port = stub.addr.port();
        Self { stub, port }
    }

    fn info(&self, password: &str) -> SmtpInfo {
        SmtpInfo {
            username: Some(USER.to_owned()),
            password: Some(password.to_owned()),
            ..plain_info("127.0.0.1", self.port)
        }
    }

    fn received(&self) -> Vec<Received> {
        self.stub.received()
    }
}

fn plain_info(host: &str, port: u16) -> SmtpInfo {
    SmtpInfo {
        host: host.to_owned(),
        port,
        secure: Secure::None,
        username: None,
        password: None,
    }
}

/// The test servers listen on 127.0.0.1, which only an allow-list admits.
fn loopback_allowed() -> NetPolicy {
    NetPolicy {
        allow: vec!["127.0.0.1/32".parse().expect("network")],
        ..NetPolicy::default()
    }
}

fn test_message() -> Vec<u8> {
    smtp::build_message(
        "Outbound test",
        "<html><body><p>Hello from mailproof</p></body></html>",
        "news@acme.example",
        &["jane@example.org".to_owned()],
        "mailproof.test",
    )
    .expect("build a message")
}

/// Sends the test message from bounce@acme.example to `rcpt` through `info`.
async fn send_to(info: &SmtpInfo, rcpt: &str) -> Result<Vec<u8>, SendError> {
    let message = test_message();
    smtp::send_via(
        info,
        &loopback_allowed(),
        "bounce@acme.example",
        &[rcpt.to_owned()],
        &message,
        TIMEOUT,
    )
    .await?;
    Ok(message)
}

#[tokio::test]
async fn correct_credentials_deliver_the_message_unchanged() {
    let server = AuthServer::start().await;
    let message = send_to(&server.info(PASSWORD), "jane@example.org")
        .await
        .expect("delivery with the right password");
    let received = server.received();
    assert_eq!(received.len(), 1, "one message arrived");
    assert_eq!(received[0].data, message, "the bytes arrive as sent");
    assert_eq!(
        (
            received[0].mail_from.as_str(),
            received[0].rcpt_to.as_slice()
        ),
        (
            "bounce@acme.example",
            ["jane@example.org".to_owned()].as_slice()
        ),
        "our envelope, not the headers"
    );
}

#[tokio::test]
async fn wrong_password_is_an_auth_error() {
    let server = AuthServer::start().await;
    let err = send_to(&server.info("WRONG"), "jane@example.org")
        .await
        .expect_err("a wrong password fails");
    assert!(matches!(err, SendError::Auth { .. }), "{err:?}");
    assert!(err.to_string().contains("535"), "{err}");
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn missing_credentials_on_a_server_that_demands_them_is_an_auth_error() {
    let server = AuthServer::start().await;
    let err = send_to(&plain_info("127.0.0.1", server.port), "jane@example.org")
        .await
        .expect_err("the server requires AUTH");
    assert!(matches!(err, SendError::Auth { .. }), "{err:?}");
}

#[tokio::test]
async fn refused_recipient_is_a_rejection_with_the_servers_code() {
    let server = AuthServer::start().await;
    let err = send_to(&server.info(PASSWORD), "reject@example.org")
        .await
        .expect_err("the recipient is refused");
    match err {
        SendError::Rejected { code, message } => {
            assert_eq!(code, 550);
            assert!(message.contains("refused by the test server"), "{message}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

#[tokio::test]
async fn unresolvable_host_is_a_host_error() {
    let err = send_to(&plain_info("no-such-host.invalid", 25), "jane@example.org")
        .await
        .expect_err("the host does not exist");
    assert!(
        matches!(err, SendError::Host(ResolveError::Unresolved { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
}

#[tokio::test]
async fn tls_settings_the_server_cannot_meet_open_no_session() {
    let server = AuthServer::start().await;
    for secure in [Secure::Ssl, Secure::Tls] {
        let info = SmtpInfo {
            secure,
            ..server.info(PASSWORD)
        };
        let err = send_to(&info, "jane@example.org")
            .await
            .expect_err("the server speaks no TLS");
        assert!(
            matches!(err, SendError::NoSession { .. }),
            "{secure:?}: {err:?}"
        );
    }
}

/// What a test listener does with each connection it accepts.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers like a web server and hangs up.
    Garbage,
    /// Says nothing and keeps the connection open.
    Silent,
}

async fn send_plain(port: u16, timeout: Duration) -> SendError {
    smtp::send_via(
        &plain_info("127.0.0.1", port),
        &loopback_allowed(),
        "b@acme.example",
        &["j@example.org".to_owned()],
        b"x",
        timeout,
    )
    .await
    .expect_err("nothing there speaks SMTP")
}

#[tokio::test]
async fn closed_silent_and_non_smtp_ports_give_the_same_error() {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (mode_tx, mode_rx) = tokio::sync::watch::channel(Behaviour::Garbage);
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut conn, _)) = listener.accept().await {
            let behaviour = *mode_rx.borrow();
            match behaviour {
                Behaviour::Garbage => {
                    let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
                }
                Behaviour::Silent => held.push(conn),
            }
        }
    });
    let short = Duration::from_millis(500);
    let garbage = send_plain(port, short).await;
    mode_tx.send(Behaviour::Silent).expect("listener runs");
    let silent = send_plain(port, short).await;
    server.abort();
    let _ = server.await;
    let closed = send_plain(port, short).await;
    for err in [&garbage, &silent, &closed] {
        assert!(matches!(err, SendError::NoSession { .. }), "{err:?}");
    }
    assert_eq!(garbage.to_string(), closed.to_string());
    assert_eq!(silent.to_string(), closed.to_string());
}

#[tokio::test]
async fn internal_hosts_are_refused_before_any_connection() {
    let (addr, accepted) = counting_listener(Ipv4Addr::LOCALHOST.into(), OnAccept::Close).await;
    let port = addr.port();
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "[::ffff:127.0.0.1]",
        "[::1]",
        "localhost",
        "10.0.0.1",
    ] {
        let err = smtp::send_via(
            &plain_info(host, port),
            &NetPolicy::default(),
            "b@acme.example",
            &["j@example.org".to_owned()],
            b"x",
            TIMEOUT,
        )
        .await
        .expect_err("an internal host is refused");
        assert!(
            matches!(
                err,
                SendError::Host(
                    ResolveError::RefusedAddress { .. } | ResolveError::RefusedHost { .. }
                )
            ),
            "{host}: {err:?}"
        );
    }
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a refused host was connected to"
    );
}

#[tokio::test]
async fn bad_envelope_address_is_refused_before_connecting() {
    let info = plain_info("127.0.0.1", 9);
    let err = smtp::send_via(
        &info,
        &loopback_allowed(),
        "not an address",
        &["j@example.org".to_owned()],
        b"x",
        TIMEOUT,
    )
    .await
    .expect_err("invalid MAIL FROM");
    assert!(
        matches!(
            err,
            SendError::Address {
                field: "mail_from",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn smtp_info_debug_hides_the_password() {
    let info = SmtpInfo {
        username: Some("u".to_owned()),
        password: Some("hunter2".to_owned()),
        ..plain_info("h", 25)
    };
    assert!(!format!("{info:?}").contains("hunter2"));
}

#[tokio::test]
async fn deliver_local_hands_a_message_to_our_own_listener() {
    let server = TestServer::start(test_config()).await;
    let message = test_message();
    let rcpt = ["a@seed.test".to_owned()];
    smtp::deliver_local(server.addr, "svc@mailproof.test", &rcpt, &message)
        .await
        .expect("local delivery");
    let stored = server.sink.stored();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].mail_from, "svc@mailproof.test");
    assert!(
        stored[0].data.ends_with(&message),
        "the message arrives intact"
    );

    let elsewhere = ["x@elsewhere.example".to_owned()];
    let err = smtp::deliver_local(server.addr, "svc@mailproof.test", &elsewhere, &message)
        .await
        .expect_err("our listener refuses unknown recipients");
    assert!(
        matches!(err, SendError::Rejected { code: 550, .. }),
        "{err:?}"
    );
    server.stop().await;
}
