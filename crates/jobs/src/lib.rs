//! mailproof's workers: the loop that claims queued screenshots from the store, turns the email into
//! what the client would draw (`emulate`), has a real engine draw it (`render`), stores the images
//! and records the outcome; the content-check worker (static checks, image weights, contrast
//! judged in Chromium), the inbox-row worker (each client family's inbox row, cut in Chromium and
//! drawn in its engine) and the link-check worker (links followed under the network policy).
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
pub mod corpus;
mod engine;
mod error;
pub mod inbox_rows;
mod link_checks;
mod render_worker;

pub use content_checks::{contrast_request, ContentCheckWorker};
pub use engine::RenderEngine;
pub use error::JobError;
pub use inbox_rows::InboxRowWorker;
pub use link_checks::LinkCheckWorker;
pub use render_worker::{
    prepared_request, render_request, Prepared, RenderWorker, RenderWorkerConfig,
};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use background::{Held, Loops, Slot};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often an idle check loop looks at its queue without a wake-up: picks up expired leases,
/// retries that came due, and checks requested through another process sharing the database.
const CHECK_POLL: Duration = Duration::from_secs(2);

/// A check worker, as its loops see it: a due row of `QUEUE` claimed, then worked on under the
/// loops' heartbeat.
trait CheckWorker: Sync {
    const QUEUE: &'static store::Queue;
    /// Claims the next due check for `slot` (under `slot.lease_secs()`): its test and attempt.
    fn claim(
        &self,
        slot: &Slot,
    ) -> impl Future<Output = Result<Option<(String, i64)>, JobError>> + Send;
    /// Checks the claimed test and stores the report, refused when `held` was taken over.
    fn check(
        &self,
        slot: &Slot,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> impl Future<Output = Result<(), JobError>> + Send;
}

/// A check worker's claim, woken `ready` passed on (a request wakes one loop; this one is busy
/// now, so another looks for more work), keyed for the heartbeat.
async fn claim_check<W: CheckWorker>(
    worker: &W,
    slot: &Slot,
    ready: &Notify,
) -> Result<Option<(store::Key, (String, i64))>, JobError> {
    let claimed = worker.claim(slot).await?;
    if claimed.is_some() {
        ready.notify_one();
    }
    Ok(claimed.map(|(test_id, attempt)| (store::Key::Text(test_id.clone()), (test_id, attempt))))
}

/// The loops of a check worker's queue on `store`, woken by `ready`.
fn check_loop_set<W: CheckWorker>(
    store: &store::Store,
    workers: usize,
    ready: Arc<Notify>,
) -> Loops {
    Loops::new(store, W::QUEUE, workers, Some(ready), CHECK_POLL)
}

/// One due check of `worker`'s queue as `owner`, under the heartbeat as the loops run it; false
/// when none is due.
async fn check_one<W: CheckWorker>(
    worker: &W,
    store: &store::Store,
    owner: &str,
    ready: &Notify,
) -> Result<bool, JobError> {
    check_loop_set::<W>(store, 1, Arc::new(Notify::new()))
        .turn_as(
            owner,
            |slot| async move { claim_check(worker, &slot, ready).await },
            |slot, held, (test_id, attempt)| async move {
                worker.check(&slot, &held, test_id, attempt).await
            },
        )
        .await
}

/// Runs `workers` loops of `worker`'s queue on `background::Loops`, woken by `ready`. Several at
/// once, so that one account's slow check (hosts that never answer) leaves a loop for another
/// account's.
async fn check_loops<W: CheckWorker>(
    worker: &W,
    store: &store::Store,
    workers: usize,
    ready: Arc<Notify>,
    cancel: CancellationToken,
) {
    let wake = ready.clone();
    let wake = &*wake;
    check_loop_set::<W>(store, workers, ready)
        .run(
            cancel,
            |slot| async move { claim_check(worker, &slot, wake).await },
            |slot, held, (test_id, attempt)| async move {
                worker.check(&slot, &held, test_id, attempt).await
            },
        )
        .await;
}
