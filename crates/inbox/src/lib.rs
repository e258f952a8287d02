//! Inbound mail for mailproof: which recipients the SMTP listener accepts, what happens to a stored
//! message afterwards, and the `svc` method's own send.
//!
//! Flow: the SMTP listener asks [`InboxSink`] about every RCPT and hands it accepted messages, which
//! it commits with `Store::insert_inbound` before the 250. [`InboundProcessor`] then scans mail for
//! seed addresses with the named filter profile and records the verdict, and turns mail for an
//! auto-inbox address into an email test (spec §4.6). [`SvcSender`] builds, DKIM-signs and sends
//! `svc` spam tests to our own listener, so they take the path outside mail takes.
//!
//! Invariant: a stored message is marked done only when every recipient got its outcome; a filter
//! that is down or a seed key not yet bound to a test leaves the message for a later pass.

mod address;
mod auto_inbox;
mod error;
mod processor;
mod sink;
mod svc;

pub use address::Recipient;
pub use error::InboxError;
pub use processor::InboundProcessor;
pub use sink::InboxSink;
pub use svc::{bare_address, SvcSender};

/// What the inbound side needs to know about the deployment.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Domain of seed addresses (`<key>.<profile slug>@<seed_domain>`).
    pub seed_domain: String,
    /// Domain of auto-inbox addresses (`<local>[+<customer_id>]@<inbox_domain>`).
    pub inbox_domain: String,
    /// Reprocesses granted to each email test made from auto-inbox mail (as the API grants).
    pub reprocess_quota: i64,
}
