//! mailproof's shared vocabulary: the client catalog, plans, test kinds and screenshot states.
//!
//! Invariant: this crate does no IO. It parses and validates data handed to it as strings; reading
//! files, the clock and the network belong to the crates above it.

pub mod catalog;
pub mod ids;
pub mod plan;
pub mod seed;
pub mod signing;
pub mod test;
pub mod timespec;

/// Largest email source mailproof takes, in bytes: checked when a test is created and again by
/// the emulation step before rendering.
pub const MAX_HTML_BYTES: usize = 8 * 1024 * 1024;

pub use catalog::{Catalog, CatalogError, Category, Client, ColorScheme, Engine};
pub use ids::TestId;
pub use plan::Plan;
pub use test::{ScreenshotStatus, SpamMethod, SpamVerdict, TestKind, Variant};
