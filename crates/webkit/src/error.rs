//! The one error type of the crate, with the retryable / not-retryable split callers act on.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum WebkitError {
    #[error("the capture request is invalid: {0}")]
    InvalidRequest(String),

    #[error("Xvfb is not installed or not on PATH ({source}): install it with scripts/setup.sh")]
    XvfbMissing { source: std::io::Error },

    #[error("Xvfb did not start: {0}")]
    XvfbStart(String),

    #[error(
        "the WebKit helper binary was not found (looked at: {searched:?}); build it with \
         `cargo build -p webkit` or set WebkitConfig::helper_path / MAILPROOF_WEBKIT_HELPER"
    )]
    HelperMissing { searched: Vec<PathBuf> },

    #[error(
        "the WebKit helper did not start: {0}; if a WebKitGTK or GTK library is missing, \
         install it with scripts/setup.sh"
    )]
    HelperStart(String),

    #[error("the WebKit helper or its web process died: {0}")]
    HelperDied(String),

    #[error("the WebKit capture did not finish within {0:?}; the helper was killed")]
    Timeout(Duration),

    #[error("WebKit could not render the page: {0}")]
    Render(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl WebkitError {
    /// True when the same request may well succeed on a fresh engine: a process died, hung or
    /// ran out of time. Bad requests, missing programs and render errors will fail again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, WebkitError::HelperDied(_) | WebkitError::Timeout(_))
    }

    /// True when the capture ran out of time (its helper was killed): the email's own weight as
    /// likely as the engine's fault.
    pub fn is_timeout(&self) -> bool {
        matches!(self, WebkitError::Timeout(_))
    }

    /// True when a program the engine needs is not installed or built: starting again will not
    /// help.
    pub fn is_missing_program(&self) -> bool {
        matches!(
            self,
            WebkitError::XvfbMissing { .. } | WebkitError::HelperMissing { .. }
        )
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> WebkitError {
        WebkitError::Io {
            context: context.into(),
            source,
        }
    }
}
