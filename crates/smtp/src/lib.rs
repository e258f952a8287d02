//! mailproof's SMTP: an inbound listener that takes mail for seed addresses and the auto-inbox and hands
//! it to a [`MailSink`] before answering 250, and an outbound client (with DKIM signing) for the `smtp`
//! and `svc` spam-test methods.
//!
//! This crate knows nothing about the database: the service implements [`MailSink`] to decide who may
//! receive mail and to store it durably.

mod dkim;
mod error;
mod inbound;
mod message;
mod outbound;

pub use dkim::DkimSigner;
pub use error::{SendError, SinkError, SmtpError};
pub use inbound::{
    received_with_tls, serve, InboundMessage, MailSink, RcptDecision, SmtpConfig, TlsFiles,
};
pub use message::build_message;
pub use outbound::{deliver_local, send_via, Secure, SmtpInfo};
