//! mailproof's shared vocabulary: the client catalog, plans, test kinds, screenshot states and
//! picture names, spam verdicts and filter types, queue states.
//!
//! Invariant: this crate does no IO. It parses and validates data handed to it as strings; reading
//! files, the clock and the network belong to the crates above it.
//!
//! Invariant: a value that crosses crates (a state, a verdict, a kind, a file name) crosses as one
//! of these types, never as a bare string or integer. Each has one spelling table (strum derives
//! it) and is read back through [`Spelled::parse_known`], which refuses an unknown spelling.

pub mod catalog;
pub mod client;
pub mod dkim;
pub mod ids;
pub mod plan;
pub mod queue;
pub mod requirements;
pub mod resources;
pub mod review;
pub mod seed;
pub mod signing;
pub mod spelling;
pub mod test;
pub mod timespec;

/// Largest email source mailproof takes, in bytes: checked when a test is created and again by
/// the emulation step before rendering.
pub const MAX_HTML_BYTES: usize = 8 * 1024 * 1024;

pub use catalog::{Catalog, CatalogError, Category, Client, ColorScheme, Engine};
pub use client::address_group;
pub use dkim::DkimTxtRecord;
pub use ids::TestId;
pub use plan::Plan;
pub use queue::QueueState;
pub use resources::{FailedResource, FetchFailure, ResourceKind};
pub use review::{content_digest, ApprovalState, Decision};
pub use spelling::{Spelled, UnknownValue};
pub use test::{
    FilterType, Picture, ScreenshotStatus, SpamMethod, SpamVerdict, TestKind, Variant,
    INBOX_ROWS_CLIENT,
};
