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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often an idle check loop looks at its queue without a wake-up: picks up expired leases,
/// retries that came due, and checks requested through another process sharing the database.
const CHECK_POLL: Duration = Duration::from_secs(2);

/// A check worker, as its loops see it: one due row of `QUEUE` handled per call.
trait CheckWorker: Sync {
    const QUEUE: &'static str;
    /// Handles one due row under the lease owner `owner`; false when none is due.
    fn handle_one(
        &self,
        owner: &str,
        ready: &Notify,
    ) -> impl Future<Output = Result<bool, JobError>> + Send;
}

/// Runs `workers` loops of `worker`'s queue on `background::Loops`, woken by `ready`. Several at
/// once, so that one account's slow check (hosts that never answer) leaves a loop for another
/// account's.
async fn check_loops<W: CheckWorker>(
    worker: &W,
    workers: usize,
    ready: Arc<Notify>,
    cancel: CancellationToken,
) {
    let loops = background::Loops::new(W::QUEUE, workers, Some(ready.clone()), CHECK_POLL);
    let wake = &*ready;
    loops
        .run(cancel, |slot| async move {
            worker.handle_one(&slot.owner, wake).await
        })
        .await;
}
