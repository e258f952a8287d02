//! mailproof's one test kit (dev-only: a dev-dependency of the suites and of the examples).
//!
//! - [`service`] (feature `service`): starts `mailproof serve` — one process or several by role,
//!   sharing one database (SQLite in a data directory or a throw-away PostgreSQL database), one
//!   blob store (local or an `s3s-fs` server) and one set of key files — on loopback ports, and
//!   runs the accounts CLI against it.
//! - [`http`]: one stub for the outside HTTP servers a test needs (image hosts, link targets,
//!   webhook receivers, a forward proxy), recording what it was asked.
//! - [`on_both!`]: a store-backed test run on SQLite and on PostgreSQL; [`wait::until`]: waiting
//!   for background work.
//! - [`smtp`]: one stub for the outside SMTP servers a test needs (a caller's provider with AUTH,
//!   relaying to the service; a mail host that refuses), recording the envelopes and messages.
//! - [`fixtures`] (feature `service`): accounts and tests written straight into a store
//!   (`store::testing`).

mod backends;
pub mod http;
#[cfg(feature = "service")]
pub mod service;
pub mod smtp;
pub mod wait;

#[cfg(feature = "service")]
pub use store::testing as fixtures;

/// What the kit's fallible steps return: tests `expect` it, benchmarks pass it on.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
