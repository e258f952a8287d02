//! mailproof's workers: the loop that claims queued screenshots from the store, turns the email into
//! what the client would draw (`emulate`), has a real engine draw it (`render`), stores the images
//! and records the outcome.
//!
//! Invariants:
//! - The queue lives in the database; channels only wake workers. A periodic rescan picks up work
//!   whose lease expired (a crashed worker or service), so a crash delays a screenshot, never
//!   loses it.
//! - `render` and `emulate` never see the database; this crate is where they meet it.

mod engine;
mod render_worker;

pub use engine::RenderEngine;

pub use render_worker::{prepared_request, render_request, RenderWorker, RenderWorkerConfig};
