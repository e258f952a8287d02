//! Error types: what can go wrong in the crate, and how an outbound failure maps to the API's errors.

use std::path::PathBuf;

/// Failures of the inbound server, of building messages and of DKIM keys.
#[derive(Debug, thiserror::Error)]
pub enum SmtpError {
    #[error("cannot read the TLS {what} file {path}: {source}; check SmtpConfig.tls paths and permissions")]
    TlsFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the TLS {what} file {path} holds no usable PEM {what}; it must be PEM-encoded")]
    TlsPem { what: &'static str, path: PathBuf },
    #[error("the TLS certificate and key do not make a valid server configuration: {0}")]
    TlsConfig(#[from] tokio_rustls::rustls::Error),
    #[error("the listener failed: {0}")]
    Listener(#[source] std::io::Error),
    #[error("invalid {field} address {value:?}: {reason}")]
    Address {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("cannot build the message: {0}")]
    Build(String),
    #[error("DKIM key file {path}: {source}; check the directory exists and is writable")]
    DkimKeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("DKIM key {path} is not a PKCS#1 RSA private key in PEM: {reason}; delete it to generate a new one")]
    DkimKey { path: PathBuf, reason: String },
    #[error("cannot generate a DKIM key: {0}")]
    DkimGenerate(String),
    #[error("DKIM signing failed: {0}; the message must have a From header")]
    DkimSign(String),
}

/// Why an outbound send failed. `Host`, `NoSession` and `Connect` map to the API's `SMTPError`,
/// `Auth` to `SMTPAuthenticationError`.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("cannot reach the SMTP server {host}:{port}: {reason}; check the host, port and secure setting")]
    Connect {
        host: String,
        port: u16,
        reason: String,
    },
    /// The host may not be connected to (not public and not allow-listed) or did not resolve.
    #[error(transparent)]
    Host(content::netpolicy::ResolveError),
    /// Nothing at the address gave a usable SMTP session. Deliberately one message for every
    /// cause, so that a closed port and an open port of another service look alike.
    #[error(
        "no SMTP session could be opened with {host}:{port}: nothing there completed an SMTP \
         greeting (and the TLS handshake, if `secure` asks for one); check the host, port and \
         secure setting"
    )]
    NoSession { host: String, port: u16 },
    #[error("the SMTP server {host}:{port} refused the credentials: {reason}; check username and password")]
    Auth {
        host: String,
        port: u16,
        reason: String,
    },
    #[error("the SMTP server rejected the message with {code}: {message}")]
    Rejected { code: u16, message: String },
    #[error("the SMTP server {host}:{port} did not answer within {seconds} s")]
    Timeout {
        host: String,
        port: u16,
        seconds: u64,
    },
    #[error("invalid {field} address {value:?}: {reason}")]
    Address {
        field: &'static str,
        value: String,
        reason: String,
    },
}

/// A [`crate::MailSink`] could not store a message; the server answers 451 so the sender retries.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    pub message: String,
}

impl SinkError {
    pub fn new(message: impl std::fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }
}
