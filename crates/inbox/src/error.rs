//! The inbox crate's one error type.

/// What can stop a message or a send from being processed now (retried later), or the mail side
/// from starting (a missing key, unreadable filter profiles).
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    #[error("database error while processing inbound mail or an svc send: {0}; it is retried on the next pass")]
    Store(#[from] store::StoreError),
    #[error("cannot build the svc test message for test {test_id}: {reason}; check its subject and from_address")]
    Build { test_id: String, reason: String },
    #[error(
        "sending the svc test message for test {test_id} to our SMTP listener failed: {reason}"
    )]
    Send { test_id: String, reason: String },
    #[error("{0}")]
    Profiles(#[from] spam::SpamError),
    #[error("cannot read the SMTP listener's address: {0}")]
    Listener(String),
    #[error("[keys] dkim_key_file {} is not a file: create the key once (`openssl genrsa -traditional -out {} 2048`) and give every mail process the same file", path.display(), path.display())]
    DkimKeyMissing { path: std::path::PathBuf },
    #[error("cannot use [keys] dkim_key_file {}: {reason}", path.display())]
    DkimKey {
        path: std::path::PathBuf,
        reason: String,
    },
}
