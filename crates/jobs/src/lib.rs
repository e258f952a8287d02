//! mailproof's workers: the loop that claims queued screenshots from the store, turns the email into
//! what the client would draw (`emulate`), has a real engine draw it (`render`), stores the images
//! and records the outcome; the content-check worker (static checks, image weights, contrast
//! judged in Chromium) and the link-check worker (links followed under the network policy).
//!
//! Invariants:
//! - The queue lives in the database; channels only wake workers. A periodic rescan picks up work
//!   whose lease expired (a crashed worker or service), so a crash delays a screenshot, never
//!   loses it.
//! - `render` and `emulate` never see the database; this crate is where they meet it, and the
//!   only place a `RenderRequest` is built for the service (`render_request`, `prepared_request`,
//!   `contrast_request`).
//! - `content` never sees the database either: its checks meet the store here.

mod content_checks;
mod engine;
mod error;
mod link_checks;
mod render_worker;

pub use content_checks::{contrast_request, ContentCheckWorker};
pub use engine::RenderEngine;
pub use error::JobError;
pub use link_checks::LinkCheckWorker;
pub use render_worker::{prepared_request, render_request, RenderWorker, RenderWorkerConfig};
