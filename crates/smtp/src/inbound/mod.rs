//! The inbound SMTP listener: accepts connections, applies connection limits and runs one session per
//! client until shutdown.

mod data;
mod limits;
mod session;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use admission::{Admission, Listener, Refusal};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::error::{SinkError, SmtpError};
use limits::Limiter;

/// What the service decides about one recipient at RCPT time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RcptDecision {
    Accept,
    /// `code` is the SMTP reply code (e.g. 550); `message` follows it on the reply line and should
    /// start with an enhanced status code (e.g. "5.1.1 No such mailbox").
    Reject {
        code: u16,
        message: String,
    },
}

impl RcptDecision {
    /// The usual answer for an address we do not serve: 550 5.1.1.
    pub fn unknown_mailbox() -> Self {
        Self::Reject {
            code: 550,
            message: "5.1.1 No such mailbox here".to_owned(),
        }
    }
}

/// Where accepted mail goes. The service implements this on top of its store.
#[async_trait::async_trait]
pub trait MailSink: Send + Sync + 'static {
    /// Decide at RCPT time; unknown recipients are refused here (never a relay).
    async fn check_recipient(&self, rcpt: &str) -> RcptDecision;
    /// Durably store the message before the server answers 250; Err => 451 so the sender retries.
    async fn store(&self, msg: InboundMessage) -> Result<(), SinkError>;
}

/// One accepted message as the sink receives it.
#[derive(Debug, Clone)]
pub struct InboundMessage {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The message as received, with our `Received:` header prepended.
    pub data: Vec<u8>,
    pub peer: SocketAddr,
    pub helo: String,
    pub received_at: chrono::DateTime<chrono::Utc>,
}

/// Whether the hop into this service used TLS, from the `Received:` header this listener puts
/// on top of every message it stores (`with ESMTPS`, RFC 3848, when STARTTLS was used). `None`
/// when the message does not start with such a header (it did not come through this listener).
pub fn received_with_tls(message: &[u8]) -> Option<bool> {
    let head = message.get(..message.len().min(2048))?;
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let first = lines.next()?;
    if !first.get(..9)?.eq_ignore_ascii_case("received:") {
        return None;
    }
    let folded = lines.take_while(|l| l.starts_with([' ', '\t']));
    let header: String = std::iter::once(first)
        .chain(folded)
        .collect::<Vec<_>>()
        .join(" ");
    let mut words = header.split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case("with"))?;
    let protocol = words.next()?.to_ascii_uppercase();
    Some(protocol.starts_with("ESMTPS") || protocol.starts_with("UTF8SMTPS"))
}

/// PEM files for STARTTLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Limits and identity of the inbound server.
#[derive(Debug, Clone)]
pub struct SmtpConfig {
    /// Our name in the greeting, EHLO reply and `Received:` header.
    pub hostname: String,
    pub max_message_bytes: usize,
    pub max_recipients: usize,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub messages_per_minute_per_ip: u32,
    /// A client silent for this long gets 421 and is disconnected.
    pub idle_timeout: Duration,
    /// The idle timeout while fewer than a quarter of `max_connections` are free: silent clients
    /// from a few addresses cannot hold the server full for `idle_timeout`.
    pub busy_idle_timeout: Duration,
    /// Longest a session may last in all, commands and messages alike: a client that stays
    /// busy (a `NOOP` every few seconds, a trickled message) is not cut by the idle timeout.
    /// At the end it gets 421 and is disconnected.
    pub session_timeout: Duration,
    /// The session budget while fewer than a quarter of `max_connections` are free: busy
    /// clients from a few addresses cannot hold the server full for `session_timeout`.
    pub busy_session_timeout: Duration,
    pub tls: Option<TlsFiles>,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        Self {
            hostname: "localhost".to_owned(),
            max_message_bytes: 25 * 1024 * 1024,
            max_recipients: 100,
            max_connections: 256,
            max_connections_per_ip: 8,
            messages_per_minute_per_ip: 120,
            idle_timeout: Duration::from_secs(300),
            busy_idle_timeout: Duration::from_secs(20),
            session_timeout: Duration::from_secs(600),
            busy_session_timeout: Duration::from_secs(60),
            tls: None,
        }
    }
}

/// Connections refused with a 421 at the same time, at most.
const MAX_PENDING_REFUSALS: usize = 64;
/// How long a session pushed out of a full server in the middle of a command may take to
/// finish it before it is cut.
const PUSHED_OUT_GRACE: Duration = Duration::from_secs(2);

/// State every session shares.
pub(crate) struct Shared {
    pub(crate) cfg: SmtpConfig,
    pub(crate) sink: Arc<dyn MailSink>,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) limiter: Arc<Limiter>,
    /// The connections' places, to tell how busy the server is.
    pub(crate) admission: Admission,
}

impl Shared {
    /// How long a client may be silent now: [`SmtpConfig::busy_idle_timeout`] while fewer
    /// than a quarter of the connection slots are free, else [`SmtpConfig::idle_timeout`].
    pub(crate) fn idle_timeout(&self) -> Duration {
        self.by_load(self.cfg.idle_timeout, self.cfg.busy_idle_timeout)
    }

    /// How long a session may last in all now: [`SmtpConfig::busy_session_timeout`] while fewer
    /// than a quarter of the connection slots are free, else [`SmtpConfig::session_timeout`].
    pub(crate) fn session_timeout(&self) -> Duration {
        self.by_load(self.cfg.session_timeout, self.cfg.busy_session_timeout)
    }

    fn by_load(&self, calm: Duration, busy: Duration) -> Duration {
        let free = self.admission.max().saturating_sub(self.admission.open());
        if free.saturating_mul(4) < self.admission.max() {
            calm.min(busy)
        } else {
            calm
        }
    }
}

/// Runs the inbound server on `listener` until `shutdown` resolves, then stops accepting, tells idle
/// clients 421 and waits (at most `idle_timeout`) for sessions in the middle of a message.
pub async fn serve(
    listener: TcpListener,
    cfg: SmtpConfig,
    sink: Arc<dyn MailSink>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), SmtpError> {
    let tls = cfg.tls.as_ref().map(load_tls).transpose()?;
    let grace = cfg.idle_timeout;
    let admission = Admission::new(
        Listener::Smtp,
        cfg.max_connections,
        cfg.max_connections_per_ip,
    );
    // Refusing politely costs a task and a socket for a moment; under a flood we stop being polite.
    let refusals = Arc::new(Semaphore::new(MAX_PENDING_REFUSALS));
    let shared = Arc::new(Shared {
        limiter: Arc::new(Limiter::new(cfg.messages_per_minute_per_ip)),
        cfg,
        sink,
        tls,
        admission: admission.clone(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut sessions = JoinSet::new();
    tokio::pin!(shutdown);
    tracing::info!(addr = ?listener.local_addr().ok(), "SMTP listener started");

    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            // Reap finished sessions so the set does not grow with every connection ever made.
            Some(finished) = sessions.join_next(), if !sessions.is_empty() => {
                if let Err(err) = finished {
                    if err.is_panic() {
                        tracing::error!("an SMTP session panicked; the server goes on");
                    }
                }
                continue;
            }
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                // Usually out of file descriptors: back off instead of spinning.
                tracing::warn!(error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // A full server takes a newcomer whose address holds fewer than the largest holder by
        // pushing out one of that holder's sessions (idle ones first; `admission`).
        let place = match admission.admit(peer.ip(), false) {
            Ok(place) => place,
            Err(refusal) => {
                let text = match refusal {
                    Refusal::Full => "4.3.2 Too many connections, try again later",
                    Refusal::ClientFull => {
                        "4.7.0 Too many connections from your address, try again later"
                    }
                };
                refuse(&mut sessions, &refusals, stream, peer, text);
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        let stop = stop_rx.clone();
        sessions.spawn(async move {
            let mut pushed = place.pushed_signal();
            let session = session::run(shared, stream, peer, stop, place);
            tokio::pin!(session);
            tokio::select! {
                () = &mut session => {}
                // A session pushed out between commands says so and ends at once; one in the
                // middle of a command or message (its whole address was busy) gets a moment to
                // finish it.
                () = session::raised(&mut pushed) => {
                    if tokio::time::timeout(PUSHED_OUT_GRACE, session).await.is_err() {
                        tracing::info!(%peer, "pushed-out session cut in the middle of a command");
                    }
                }
            }
        });
    }

    tracing::info!(open = sessions.len(), "SMTP listener stopping");
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(grace, async {
        while sessions.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = sessions.len(),
            "sessions still open after the grace period were cut"
        );
        sessions.abort_all();
    }
    Ok(())
}

/// Tells a client we cannot take it now, politely, then closes; when too many refusals are already
/// under way the connection is simply dropped.
fn refuse(
    sessions: &mut JoinSet<()>,
    refusals: &Arc<Semaphore>,
    mut stream: TcpStream,
    peer: SocketAddr,
    text: &'static str,
) {
    tracing::info!(%peer, reason = text, "connection refused");
    let Ok(permit) = Arc::clone(refusals).try_acquire_owned() else {
        return;
    };
    sessions.spawn(async move {
        let line = format!("421 {text}\r\n");
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = stream.write_all(line.as_bytes()).await;
            let _ = stream.shutdown().await;
        })
        .await;
        drop(permit);
    });
}

fn load_tls(files: &TlsFiles) -> Result<TlsAcceptor, SmtpError> {
    let cert_pem = read_pem_file("certificate", &files.cert)?;
    let key_pem = read_pem_file("key", &files.key)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(SmtpError::TlsPem {
            what: "certificate",
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| SmtpError::TlsPem {
        what: "key",
        path: files.key.clone(),
    })?;
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_pem_file(what: &'static str, path: &Path) -> Result<Vec<u8>, SmtpError> {
    std::fs::read(path).map_err(|source| SmtpError::TlsFile {
        what,
        path: path.to_owned(),
        source,
    })
}
