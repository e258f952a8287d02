//! Why a check could not be made (exit code 2), each with what to do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(
        "{names} not set: put the account's credentials in the environment (in CI, from secrets); \
         they are never taken from flags, which the process list shows"
    )]
    MissingCredentials { names: String },
    #[error(
        "the server refused the credentials in MAILPROOF_API_KEY / MAILPROOF_PASSWORD \
         (AccessDenied: {message}); check both secrets"
    )]
    AccessDenied { message: String },
    #[error("{what}: the server answered {status} {name}: {message}")]
    Server {
        what: String,
        status: u16,
        name: String,
        message: String,
    },
    #[error("{what}: no answer from {url} ({cause}); check --server and that the service runs")]
    Unreachable {
        what: String,
        url: String,
        cause: String,
    },
    #[error("{what}: the server's answer is not what the v5 interface describes: {detail}")]
    Protocol { what: String, detail: String },
    #[error("{0}")]
    Timeout(String),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("sending the email to the seed addresses failed: {0}")]
    Seed(String),
}

impl CliError {
    pub fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CliError::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

/// An error with its causes, which reqwest and lettre keep out of their own `Display`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let c_text = c.to_string();
        if !s.contains(&c_text) {
            s.push_str(": ");
            s.push_str(&c_text);
        }
        cur = c.source();
    }
    s
}
