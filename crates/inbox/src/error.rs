//! The inbox crate's one error type.

/// What can stop a message or a send from being processed now; all of them are retried later.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    #[error("database error while processing inbound mail: {0}; it is retried on the next pass")]
    Store(#[from] store::StoreError),
    #[error("cannot build the svc test message for test {test_id}: {reason}; check its subject and from_address")]
    Build { test_id: String, reason: String },
    #[error(
        "sending the svc test message for test {test_id} to our SMTP listener failed: {reason}"
    )]
    Send { test_id: String, reason: String },
}
