//! Spam verdicts from filters that really run: SpamAssassin (spamd), Rspamd and mailproof's own checks.
//!
//! Shape: `FilterProfiles` (data in `data/spam-filters.toml`) name the spam "clients" users see;
//! each profile points at an engine and maps that engine's score to `spam` 1 / 0 / -1.
//! `FilterDaemons` starts spamd and rspamd on loopback ports (or names already-running ones),
//! and `SpamFilters` scans a message once per engine and applies every profile to the result.
//!
//! Invariant: this crate knows nothing about tests, the database or SMTP sessions; it gets a
//! message, an `Envelope`, and returns verdicts or a per-filter error.

mod builtin;
mod daemons;
mod error;
mod filters;
mod profiles;
mod report;
pub mod requirements;
mod rspamd;
mod spamd;

pub use builtin::{BuiltinAnalyzer, DnsMode};
pub use daemons::{
    DaemonConfig, DaemonSource, DaemonState, FilterAddresses, FilterDaemons, FilterStatus,
    FilterSupervisor,
};
pub use error::SpamError;
pub use filters::{Envelope, SpamFilters, Verdict, MAX_MESSAGE_BYTES, SPAMD_MAX_BYTES};
pub use profiles::{EngineKind, FilterProfile, FilterProfiles, FilterType};
pub use report::{EngineReport, Rule};
