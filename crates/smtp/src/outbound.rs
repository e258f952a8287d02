//! Outbound sending: through a caller's SMTP server (the `smtp` method) and into our own inbound
//! listener (the `svc` method), with failures sorted the way the API reports them.

use std::error::Error as _;
use std::net::SocketAddr;
use std::time::Duration;

use content::netpolicy::{resolve_permitted, NetPolicy, ResolveError};
use lettre::address::{Address, Envelope};
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::Error as LettreError;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use tokio::time::{timeout_at, Instant};

use crate::error::SendError;

/// How to secure the connection to the caller's server (`smtp_info.secure` in the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Secure {
    /// Plain SMTP (the API's empty string).
    #[default]
    None,
    /// Implicit TLS from the first byte (`ssl`, usually port 465).
    Ssl,
    /// STARTTLS, required (`tls`, usually port 587).
    Tls,
}

impl std::str::FromStr for Secure {
    type Err = String;

    /// The API's spelling: `""` (plain), `"ssl"` or `"tls"`, in any case.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" => Ok(Self::None),
            "ssl" => Ok(Self::Ssl),
            "tls" => Ok(Self::Tls),
            other => Err(format!(
                "secure must be \"ssl\", \"tls\" or empty, not {other:?}"
            )),
        }
    }
}

/// A caller's SMTP server and credentials (`smtp_info` in the API).
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpInfo {
    pub host: String,
    /// 25 unless the caller said otherwise.
    pub port: u16,
    pub secure: Secure,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpInfo {
    // The password must never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpInfo")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("secure", &self.secure)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

/// Reply codes that mean the server did not accept who we said we are.
const AUTH_FAILURE_CODES: [u16; 4] = [530, 534, 535, 538];

/// Sends `message` as is (no header is added) through the caller's server, with our envelope.
///
/// The host is resolved once, under `policy`, and only the permitted addresses are connected to
/// (the host name is kept for TLS verification), so a caller cannot make the service talk SMTP
/// to its own network: a refused host is [`SendError::Host`], and nothing is connected to.
///
/// Every failure before an SMTP session exists (refused or reset connection, timeout, a service
/// that does not speak SMTP, a failed TLS handshake or STARTTLS) is the same
/// [`SendError::NoSession`], so the answer does not tell a closed port from an open one; the cause
/// is logged for the operator. After that, refused credentials (or a server that demands them) are
/// [`SendError::Auth`] and any other refusal is [`SendError::Rejected`]. The whole exchange,
/// resolution included, is bounded by `timeout`.
pub async fn send_via(
    info: &SmtpInfo,
    policy: &NetPolicy,
    mail_from: &str,
    rcpt_to: &[String],
    message: &[u8],
    timeout: Duration,
) -> Result<(), SendError> {
    let envelope = envelope(mail_from, rcpt_to)?;
    let tls_parameters = match info.secure {
        Secure::None => None,
        Secure::Ssl | Secure::Tls => Some(tls_parameters(info)?),
    };
    let deadline = Instant::now() + timeout;
    let addrs = match timeout_at(deadline, resolve_permitted(&info.host, info.port, policy)).await {
        Ok(Ok(addrs)) => addrs,
        Ok(Err(refused)) => return Err(SendError::Host(refused)),
        Err(_) => {
            return Err(SendError::Host(ResolveError::Unresolved {
                host: info.host.clone(),
                reason: format!("the lookup took longer than {} s", timeout.as_secs()),
            }))
        }
    };
    tracing::info!(host = %info.host, ?addrs, secure = ?info.secure, rcpts = rcpt_to.len(), "sending through a caller's SMTP server");
    let no_session = |cause: &dyn std::fmt::Display| {
        tracing::info!(host = %info.host, port = info.port, %cause, "no SMTP session with a caller's server");
        SendError::NoSession {
            host: info.host.clone(),
            port: info.port,
        }
    };
    let mut conn = match timeout_at(
        deadline,
        open_session(&addrs, info.secure, tls_parameters, timeout),
    )
    .await
    {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return Err(no_session(&error_chain(&err))),
        Err(_) => return Err(no_session(&format!("no session within {timeout:?}"))),
    };
    let sent = timeout_at(deadline, async {
        if let Some(username) = &info.username {
            let password = info.password.clone().unwrap_or_default();
            conn.auth(
                DEFAULT_MECHANISMS,
                &Credentials::new(username.clone(), password),
            )
            .await?;
        }
        conn.send(&envelope, strip_final_crlf(message)).await
    })
    .await;
    // QUIT politely, but a server that stops answering must not hold the caller.
    let _ = tokio::time::timeout(QUIT_GRACE, conn.abort()).await;
    outcome(sent, &info.host, info.port, timeout)
}

/// How long the closing QUIT may take.
const QUIT_GRACE: Duration = Duration::from_secs(5);

/// Connects to the first of `addrs` that accepts, reads the greeting and says EHLO, with TLS from
/// the first byte (`Ssl`) or after STARTTLS (`Tls`): everything up to a usable SMTP session.
async fn open_session(
    addrs: &[SocketAddr],
    secure: Secure,
    tls_parameters: Option<TlsParameters>,
    timeout: Duration,
) -> Result<AsyncSmtpConnection, LettreError> {
    let hello = ClientId::default();
    let wrapper = match secure {
        Secure::Ssl => tls_parameters.clone(),
        Secure::None | Secure::Tls => None,
    };
    let mut conn =
        AsyncSmtpConnection::connect_tokio1(addrs, Some(timeout), &hello, wrapper, None).await?;
    if let (Secure::Tls, Some(parameters)) = (secure, tls_parameters) {
        conn.starttls(parameters, &hello).await?;
    }
    Ok(conn)
}

/// lettre always ends the data with CRLF "." CRLF; a message that already ends in CRLF would gain
/// an empty line, so it is handed over without its last line break.
fn strip_final_crlf(message: &[u8]) -> &[u8] {
    message.strip_suffix(b"\r\n").unwrap_or(message)
}

/// Hands a message to our own inbound listener at `addr` over plain SMTP (the `svc` method), so it
/// takes exactly the path a message from the outside takes.
pub async fn deliver_local(
    addr: SocketAddr,
    mail_from: &str,
    rcpt_to: &[String],
    message: &[u8],
) -> Result<(), SendError> {
    const LOCAL_TIMEOUT: Duration = Duration::from_secs(60);
    let envelope = envelope(mail_from, rcpt_to)?;
    let host = addr.ip().to_string();
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
        .port(addr.port())
        .tls(Tls::None)
        .timeout(Some(LOCAL_TIMEOUT))
        .build();
    send(
        &transport,
        &envelope,
        message,
        LOCAL_TIMEOUT,
        &host,
        addr.port(),
    )
    .await
}

async fn send(
    transport: &AsyncSmtpTransport<Tokio1Executor>,
    envelope: &Envelope,
    message: &[u8],
    timeout: Duration,
    host: &str,
    port: u16,
) -> Result<(), SendError> {
    let message = strip_final_crlf(message);
    let sent = tokio::time::timeout(timeout, transport.send_raw(envelope, message)).await;
    outcome(sent, host, port, timeout)
}

/// A send bounded by `timeout`, as the caller hears of it (and the log records it).
fn outcome(
    sent: Result<
        Result<lettre::transport::smtp::response::Response, LettreError>,
        tokio::time::error::Elapsed,
    >,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<(), SendError> {
    match sent {
        Ok(Ok(response)) => {
            tracing::info!(host, port, code = %response.code(), "message accepted");
            Ok(())
        }
        Ok(Err(err)) => {
            let mapped = classify(&err, host, port, timeout);
            tracing::info!(host, port, error = %mapped, "sending failed");
            Err(mapped)
        }
        Err(_) => Err(SendError::Timeout {
            host: host.to_owned(),
            port,
            seconds: timeout.as_secs(),
        }),
    }
}

fn classify(err: &LettreError, host: &str, port: u16, timeout: Duration) -> SendError {
    let reason = error_chain(err);
    if err.is_timeout() {
        return SendError::Timeout {
            host: host.to_owned(),
            port,
            seconds: timeout.as_secs(),
        };
    }
    if let Some(code) = err.status() {
        let code = u16::from(code);
        let message = err
            .source()
            .map(ToString::to_string)
            .unwrap_or_else(|| reason.clone());
        if AUTH_FAILURE_CODES.contains(&code) {
            return SendError::Auth {
                host: host.to_owned(),
                port,
                reason: format!("{code} {message}"),
            };
        }
        return SendError::Rejected { code, message };
    }
    // Credentials given to a server that offers no mechanism we can use: they cannot be checked.
    if err.is_client() && reason.contains("authentication mechanism") {
        return SendError::Auth {
            host: host.to_owned(),
            port,
            reason,
        };
    }
    SendError::Connect {
        host: host.to_owned(),
        port,
        reason,
    }
}

/// The error and its causes on one line: lettre's own text alone ("Connection error") says too little.
fn error_chain(err: &LettreError) -> String {
    let mut text = err.to_string();
    let mut source = err.source().and_then(|s| s.source());
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn tls_parameters(info: &SmtpInfo) -> Result<TlsParameters, SendError> {
    TlsParameters::new(info.host.clone()).map_err(|err| SendError::Connect {
        host: info.host.clone(),
        port: info.port,
        reason: error_chain(&err),
    })
}

fn envelope(mail_from: &str, rcpt_to: &[String]) -> Result<Envelope, SendError> {
    let from = if mail_from.is_empty() {
        None
    } else {
        Some(parse_address("mail_from", mail_from)?)
    };
    let to = rcpt_to
        .iter()
        .map(|rcpt| parse_address("rcpt_to", rcpt))
        .collect::<Result<Vec<_>, _>>()?;
    Envelope::new(from, to).map_err(|err| SendError::Address {
        field: "rcpt_to",
        value: rcpt_to.join(","),
        reason: err.to_string(),
    })
}

fn parse_address(field: &'static str, value: &str) -> Result<Address, SendError> {
    value
        .parse()
        .map_err(|err: lettre::address::AddressError| SendError::Address {
            field,
            value: value.to_owned(),
            reason: err.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::Secure;

    #[test]
    fn secure_is_read_as_the_api_spells_it() {
        assert_eq!("".parse::<Secure>(), Ok(Secure::None));
        assert_eq!("SSL".parse::<Secure>(), Ok(Secure::Ssl));
        assert_eq!(" tls ".parse::<Secure>(), Ok(Secure::Tls));
        let err = "starttls".parse::<Secure>().expect_err("not an API value");
        assert!(err.contains("\"ssl\", \"tls\" or empty"), "{err}");
    }
}
