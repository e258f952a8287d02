//! Shared test helpers: a recording sink, a server started on a free loopback port, and a small raw
//! SMTP client that shows every reply.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smtp::{InboundMessage, MailSink, RcptDecision, SinkError, SmtpConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const SEED_DOMAIN: &str = "seed.test";

/// Accepts recipients at [`SEED_DOMAIN`], stores messages in memory after a short delay (so a reply
/// sent before storing finished would be caught), and can be told to fail.
#[derive(Default)]
pub struct RecordingSink {
    pub messages: Mutex<Vec<InboundMessage>>,
    pub fail_store: AtomicBool,
}

impl RecordingSink {
    pub fn stored(&self) -> Vec<InboundMessage> {
        self.messages.lock().expect("sink lock").clone()
    }

    pub fn set_failing(&self, failing: bool) {
        self.fail_store.store(failing, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl MailSink for RecordingSink {
    async fn check_recipient(&self, rcpt: &str) -> RcptDecision {
        if rcpt
            .to_ascii_lowercase()
            .ends_with(&format!("@{SEED_DOMAIN}"))
        {
            RcptDecision::Accept
        } else {
            RcptDecision::unknown_mailbox()
        }
    }

    async fn store(&self, msg: InboundMessage) -> Result<(), SinkError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if self.fail_store.load(Ordering::SeqCst) {
            return Err(SinkError::new("disk full (test)"));
        }
        self.messages.lock().expect("sink lock").push(msg);
        Ok(())
    }
}

pub fn test_config() -> SmtpConfig {
    SmtpConfig {
        hostname: "mx.mailproof.test".to_owned(),
        max_message_bytes: 1024 * 1024,
        max_recipients: 5,
        max_connections: 50,
        max_connections_per_ip: 20,
        messages_per_minute_per_ip: 1000,
        idle_timeout: Duration::from_secs(10),
        busy_idle_timeout: Duration::from_secs(10),
        session_timeout: Duration::from_secs(60),
        busy_session_timeout: Duration::from_secs(60),
        tls: None,
    }
}

/// A running server; dropping it does not stop it, call [`TestServer::stop`].
pub struct TestServer {
    pub addr: SocketAddr,
    pub sink: Arc<RecordingSink>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), smtp::SmtpError>>,
}

impl TestServer {
    pub async fn start(cfg: SmtpConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("local addr");
        let sink = Arc::new(RecordingSink::default());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(smtp::serve(listener, cfg, sink.clone(), async move {
            let _ = stop_rx.await;
        }));
        Self {
            addr,
            sink,
            stop: Some(stop_tx),
            task,
        }
    }

    pub async fn connect(&self) -> Client<TcpStream> {
        let stream = TcpStream::connect(self.addr)
            .await
            .expect("connect to the server");
        Client::new(stream)
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("server stops in time")
            .expect("server task did not panic");
        result.expect("server ends cleanly");
    }
}

/// A connection to `to` from `from`, a loopback address other than 127.0.0.1: another client.
pub async fn connect_from(from: std::net::IpAddr, to: SocketAddr) -> Client<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from, 0)).expect("bind");
    Client::new(socket.connect(to).await.expect("connect"))
}

/// One reply: its code and all its lines' text.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub text: String,
}

/// A raw SMTP client that reads replies line by line, so tests see exactly what the server says.
pub struct Client<S> {
    stream: S,
    buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn into_inner(self) -> S {
        assert!(
            self.buf.is_empty(),
            "unread bytes left: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        self.stream
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .await
            .expect("write to the server");
    }

    pub async fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\r\n").as_bytes()).await;
    }

    async fn read_line(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                return Some(String::from_utf8_lossy(&line).trim_end().to_owned());
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut chunk))
                .await
                .expect("the server answers within 20 s")
                .ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next reply, or `None` when the server closed the connection.
    pub async fn reply(&mut self) -> Option<Reply> {
        let mut text = String::new();
        loop {
            let line = self.read_line().await?;
            let code = line
                .get(..3)
                .and_then(|c| c.parse().ok())
                .expect("a reply starts with a code");
            text.push_str(line.get(4..).unwrap_or(""));
            if line.as_bytes().get(3) != Some(&b'-') {
                return Some(Reply { code, text });
            }
            text.push('\n');
        }
    }

    /// Reads the next reply and checks its code.
    pub async fn expect(&mut self, code: u16) -> Reply {
        let reply = self
            .reply()
            .await
            .expect("the server closed the connection instead of replying");
        assert_eq!(reply.code, code, "unexpected reply: {reply:?}");
        reply
    }

    pub async fn cmd(&mut self, line: &str, code: u16) -> Reply {
        self.send(line).await;
        self.expect(code).await
    }

    /// True when the server has closed the connection (after any replies already sent).
    pub async fn closed(&mut self) -> bool {
        self.reply().await.is_none()
    }

    /// Greeting, EHLO, MAIL, RCPT, DATA, the body, and the final reply.
    pub async fn send_message(&mut self, from: &str, to: &[&str], body: &[u8]) -> Reply {
        self.cmd(&format!("MAIL FROM:<{from}>"), 250).await;
        for rcpt in to {
            self.cmd(&format!("RCPT TO:<{rcpt}>"), 250).await;
        }
        self.cmd("DATA", 354).await;
        self.send_raw(body).await;
        self.send_raw(b".\r\n").await;
        self.reply().await.expect("a reply to the message")
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    /// A small message from s@example.org to a@seed.test; returns the final reply.
    pub async fn deliver(&mut self, subject: &str) -> Reply {
        self.send_message("s@example.org", &["a@seed.test"], &simple_message(subject))
            .await
    }
}

pub async fn greeted(server: &TestServer) -> Client<TcpStream> {
    let mut client = server.connect().await;
    client.expect(220).await;
    client.cmd("EHLO client.example", 250).await;
    client
}

pub fn simple_message(subject: &str) -> Vec<u8> {
    format!(
        "From: sender@example.org\r\nTo: a@{SEED_DOMAIN}\r\nSubject: {subject}\r\n\r\nHello.\r\n"
    )
    .into_bytes()
}
