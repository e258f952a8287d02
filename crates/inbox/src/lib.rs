//! Inbound mail for mailproof: which recipients the SMTP listener accepts, what happens to a stored
//! message afterwards, and the `svc` method's own send.
//!
//! Flow: the SMTP listener asks [`InboxSink`] about every RCPT and hands it accepted messages, which
//! it commits with `Store::insert_inbound` before the 250. [`InboundProcessor`] then scans mail for
//! seed addresses with the named filter profile and records the verdict, and turns mail for an
//! auto-inbox address into an email test (spec §4.6). [`SvcSender`] builds, DKIM-signs and sends
//! `svc` spam tests to our own listener, so they take the path outside mail takes.
//!
//! Invariants: a stored message is marked done only when every recipient got its outcome; a filter
//! that is down or a seed key not yet bound to a test leaves the message for a later pass. Messages
//! and svc sends are claimed under leases, so several processes can run both loops on one database
//! without scanning or sending anything twice, and a dead process's claim is taken over when its
//! lease expires.

mod address;
mod auto_inbox;
mod error;
mod processor;
mod service;
mod sink;
mod svc;

pub use address::Recipient;
pub use error::InboxError;
pub use processor::InboundProcessor;
pub use service::{
    filter_profiles, MailConfig, MailService, PartState, StatusBoard, DKIM_SELECTOR,
};
pub use sink::InboxSink;
pub use svc::{bare_address, SvcSender};

/// The lease owner of a processor or sender: its queue's loop 0 in the runtime's one format.
fn lease_owner(queue: &store::Queue) -> String {
    format!("{}-0", background::lease_owner(queue.name))
}

/// What the inbound side needs to know about the deployment.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Domain of seed addresses (`<key>.<profile slug>@<seed_domain>`).
    pub seed_domain: String,
    /// Domain of auto-inbox addresses (`<local>[+<customer_id>]@<inbox_domain>`).
    pub inbox_domain: String,
    /// Reprocesses granted to each email test made from auto-inbox mail (as the API grants).
    pub reprocess_quota: i64,
    /// Whether the SMTP listeners offer STARTTLS: only then does mail that came without TLS say
    /// something about its sender.
    pub starttls: bool,
}
