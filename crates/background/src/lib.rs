//! mailproof's one runtime for background work. Every worker (render, link checks, content
//! checks, inbound mail, svc sends, callbacks) runs as [`Loops`] over one of the store's leased
//! queues ([`store::Queue`]), and retention as a [`Runtime::periodic`] job; all of them are
//! spawned on one [`Runtime`] and stopped by its one [`CancellationToken`].
//!
//! Invariants:
//! - The queue lives in the database; a [`Notify`] only wakes loops of this process early. An idle
//!   loop looks again every `poll`, so work queued by another process, retries that came due and
//!   leases that expired are picked up without a wake-up.
//! - A lease owner names the queue, the host, the process, a random part and the loop
//!   ([`lease_owner`]): unique across processes, machines and restarts, so a claim taken over from
//!   a dead process is never mistaken for the claimer's own.
//! - A loop whose handler fails waits a jittered, growing pause (one failure is logged once per
//!   pause, not in a busy loop), and its first success resets the pause.
//! - While a handler works on a row, a [`Heartbeat`] renews its lease; a row whose worker died is
//!   claimed again once its lease expires.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use store::{Backoff, Key, Queue, Store};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The background tasks of one process and the token that stops them.
#[derive(Clone, Default)]
pub struct Runtime {
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Runtime {
    pub fn new() -> Runtime {
        Runtime::default()
    }

    /// Cancelled when the runtime shuts down: for work that must notice the stop itself.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Runs `task` until it ends; [`Runtime::shutdown`] waits for it.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task);
    }

    /// Runs `job` now and then every `every` until shutdown (retention). A failed run is logged
    /// and tried again at the next turn.
    pub fn periodic<F, Fut, E>(&self, name: &'static str, every: Duration, job: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send,
        E: std::fmt::Display,
    {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            loop {
                if let Err(e) = job().await {
                    tracing::error!(job = name, error = %e, "periodic job failed; will retry");
                }
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = cancel.cancelled() => return,
                }
            }
        });
    }

    /// Stops every task (each finishes the row it is on) and waits until they have ended.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// A token cancelled once `stop` turns true or its sender goes away: for parts still stopped by
/// a `watch` (the SMTP side's tasks).
pub fn cancelled_by(mut stop: watch::Receiver<bool>) -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        cancel.cancel();
    });
    token
}

/// The lease owner prefix of this process for `queue`: the queue, the host name (a container's
/// is its id), the process id and a random part (two replicas may have the same pid and start in
/// the same second). Loops append `-{n}`.
pub fn lease_owner(queue: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    format!(
        "{queue}-{host}-{}-{:08x}",
        std::process::id(),
        rand::thread_rng().gen::<u32>()
    )
}

/// One loop of a queue, as its handler sees it: its lease owner and the stop.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The name on this loop's leases.
    pub owner: String,
    pub cancel: CancellationToken,
}

/// One queue's claim loops: how many, how they are woken and how often they look.
pub struct Loops {
    /// The queue's name ([`store::Queue::name`]): names the leases and the log lines.
    pub queue: &'static str,
    /// Loops at once: while one waits on a slow outside host, the others take the next rows (the
    /// store's fair claims decide whose).
    pub workers: usize,
    /// Woken when work is queued in this process; `None`: polling alone.
    pub wake: Option<Arc<Notify>>,
    /// How often an idle loop looks at the queue without a wake-up.
    pub poll: Duration,
}

/// The pause after handler errors in a row: 1 s doubling to 30 s, jittered.
const ERROR_BACKOFF: Backoff = Backoff::doubling(1, 30);

impl Loops {
    /// A queue's loops, woken by `wake`, looking every `poll` when idle.
    pub fn new(
        queue: &'static str,
        workers: usize,
        wake: Option<Arc<Notify>>,
        poll: Duration,
    ) -> Loops {
        Loops {
            queue,
            workers,
            wake,
            poll,
        }
    }

    /// Runs the loops until `cancel`. Each calls `one(slot)` while it returns `Ok(true)` (a row
    /// was handled), then waits for a wake-up, the poll interval or the stop; after an error it
    /// waits the error backoff.
    pub async fn run<F, Fut, E>(self, cancel: CancellationToken, one: F)
    where
        F: Fn(Slot) -> Fut,
        Fut: Future<Output = Result<bool, E>>,
        E: std::fmt::Display,
    {
        let prefix = lease_owner(self.queue);
        let loops = (0..self.workers.max(1)).map(|n| {
            let slot = Slot {
                owner: format!("{prefix}-{n}"),
                cancel: cancel.clone(),
            };
            let (one, wake, poll, queue) = (&one, self.wake.clone(), self.poll, self.queue);
            async move {
                let mut errors_in_a_row = 0_i64;
                while !slot.cancel.is_cancelled() {
                    let pause = match one(slot.clone()).await {
                        Ok(true) => {
                            errors_in_a_row = 0;
                            continue;
                        }
                        Ok(false) => {
                            errors_in_a_row = 0;
                            poll
                        }
                        Err(e) => {
                            errors_in_a_row += 1;
                            let secs = ERROR_BACKOFF.delay_secs(errors_in_a_row, rand::random());
                            tracing::error!(queue, error = %e, retry_in_s = secs, "background job failed; will retry");
                            Duration::from_secs(secs.unsigned_abs())
                        }
                    };
                    let woken = async {
                        match &wake {
                            // An error's pause is not cut short: the wake-up would bring the
                            // failure straight back.
                            Some(wake) if errors_in_a_row == 0 => wake.notified().await,
                            _ => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep(pause) => {}
                        () = slot.cancel.cancelled() => return,
                    }
                }
            }
        });
        futures::future::join_all(loops).await;
    }
}

/// Renews a row's lease every `every` while a handler works on it; stops when dropped (whichever
/// way the handler ends) or when the lease turns out to be someone else's.
pub struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    /// Renews `owner`'s lease of `key` in `queue` to `lease` from now, every `every` (well under
    /// `lease`, so a database blip of a few seconds does not cost a live worker its row).
    pub fn start(
        store: &Store,
        queue: &'static Queue,
        key: Key,
        owner: &str,
        lease: Duration,
        every: Duration,
    ) -> Heartbeat {
        let (store, owner) = (store.clone(), owner.to_string());
        let lease = i64::try_from(lease.as_secs()).unwrap_or(i64::MAX);
        Heartbeat(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate; the claim itself just set the lease.
            tick.tick().await;
            loop {
                tick.tick().await;
                let until = chrono::Utc::now().timestamp().saturating_add(lease);
                match store.renew_lease(queue, &key, &owner, until).await {
                    Ok(true) => telemetry::global().lease_renewal(queue.name),
                    Ok(false) => {
                        tracing::warn!(queue = queue.name, key = ?key,
                            "lease not renewed: it expired and another worker took the row over, or the row was finished or requeued");
                        return;
                    }
                    Err(e) => {
                        telemetry::global().dependency_error("database", queue.name);
                        tracing::warn!(queue = queue.name, key = ?key, error = %e,
                            "database error renewing a lease; trying again at the next heartbeat");
                    }
                }
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often retention looks for tests past the retention period.
pub const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// One retention pass (spec §8): content and results of tests created more than `days` days ago
/// go, in batches, with their screenshot blobs; metadata stays ([`Store::purge_before`]).
pub async fn retention_pass(
    store: Store,
    blobs: store::Blobs,
    days: i64,
) -> Result<(), store::StoreError> {
    let now = chrono::Utc::now().timestamp();
    loop {
        let ids = store
            .purge_before(now.saturating_sub(days.saturating_mul(86_400)), now, 100)
            .await?;
        if ids.is_empty() {
            return Ok(());
        }
        for id in &ids {
            if let Err(e) = blobs.delete_test(id).await {
                tracing::warn!(test_id = %id, error = %e, "retention: could not delete screenshots");
            }
        }
        tracing::info!(
            count = ids.len(),
            "retention: removed content and results of old tests"
        );
    }
}
