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
//! - Every claim is short ([`store::Lease`], 10 s unless a queue says otherwise) and, while its
//!   handler works on the row, renewed by a [`Heartbeat`] that [`Loops::turn`] starts between the
//!   claim and the work: no handler starts (or can forget) its own. A row whose worker died is
//!   claimed again once its lease expires, within about the lease.
//! - A finish is refused once the lease is someone else's (the store's finishes check the
//!   owner), so a row taken over is finished once; a result that no finish can take back (a
//!   picture, a test made from mail) is written only after [`Held::confirm`] says the row is
//!   still the worker's.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use store::{Backoff, Key, Lease, Queue, Store};
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

/// One loop of a queue, as its handler sees it: its lease owner, the lease its claims take, and
/// the stop.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The name on this loop's leases.
    pub owner: String,
    /// What a claim of this loop holds ([`Slot::lease_secs`]); the loop's heartbeat renews it.
    pub lease: Lease,
    pub cancel: CancellationToken,
}

impl Slot {
    /// The seconds a claim of this loop takes its row for.
    pub fn lease_secs(&self) -> i64 {
        self.lease.hold_secs()
    }
}

/// One queue's claim loops: how many, how they are woken, how often they look, and the lease
/// their claims take and their heartbeats renew.
pub struct Loops {
    /// The queue: names the leases and the log lines, and is where the heartbeat renews.
    pub queue: &'static Queue,
    pub store: Store,
    /// The queue's own ([`Queue::lease`]) unless [`Loops::with_lease`] says otherwise.
    pub lease: Lease,
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
    /// `queue`'s loops on `store`, woken by `wake`, looking every `poll` when idle, under the
    /// queue's lease.
    pub fn new(
        store: &Store,
        queue: &'static Queue,
        workers: usize,
        wake: Option<Arc<Notify>>,
        poll: Duration,
    ) -> Loops {
        Loops {
            queue,
            store: store.clone(),
            lease: queue.lease,
            workers,
            wake,
            poll,
        }
    }

    /// These loops under another lease than the queue's (tests that wait for a takeover).
    pub fn with_lease(mut self, lease: Lease) -> Loops {
        self.lease = lease;
        self
    }

    /// A slot of these loops named `owner` and stopped by `cancel`: for a handler's one turn
    /// called outside the loops ([`Loops::turn`], tests draining a queue).
    pub fn slot(&self, owner: &str, cancel: CancellationToken) -> Slot {
        Slot {
            owner: owner.to_string(),
            lease: self.lease,
            cancel,
        }
    }

    /// One turn of a loop: `claim` takes a due row for `slot` (with `slot.lease_secs()`) and
    /// returns its key and what the work needs; then `work` runs on it while a [`Heartbeat`]
    /// renews the lease, and the heartbeat stops when the work ends, whichever way. False when
    /// nothing was due. The one place a claim meets its heartbeat, so that no queue's handler can
    /// hold a row without renewing it.
    pub async fn turn<C, CF, W, WF, T, E>(&self, slot: &Slot, claim: C, work: W) -> Result<bool, E>
    where
        C: FnOnce(Slot) -> CF,
        CF: Future<Output = Result<Option<(Key, T)>, E>>,
        W: FnOnce(Slot, Held, T) -> WF,
        WF: Future<Output = Result<(), E>>,
    {
        let Some((key, row)) = claim(slot.clone()).await? else {
            return Ok(false);
        };
        let heartbeat = Heartbeat::start(&self.store, self.queue, key, &slot.owner, slot.lease);
        let done = work(slot.clone(), heartbeat.held(), row).await;
        drop(heartbeat);
        done.map(|()| true)
    }

    /// One [`Loops::turn`] as `owner`, outside the loops: what a worker's `run_one` (tests draining
    /// a queue) does, under the same heartbeat as the loops.
    pub async fn turn_as<C, CF, W, WF, T, E>(
        &self,
        owner: &str,
        claim: C,
        work: W,
    ) -> Result<bool, E>
    where
        C: FnOnce(Slot) -> CF,
        CF: Future<Output = Result<Option<(Key, T)>, E>>,
        W: FnOnce(Slot, Held, T) -> WF,
        WF: Future<Output = Result<(), E>>,
    {
        self.turn(&self.slot(owner, CancellationToken::new()), claim, work)
            .await
    }

    /// Runs the loops until `cancel`. Each takes [`Loops::turn`]s while rows are due, then waits
    /// for a wake-up, the poll interval or the stop; after an error it waits the error backoff.
    pub async fn run<C, CF, W, WF, T, E>(self, cancel: CancellationToken, claim: C, work: W)
    where
        C: Fn(Slot) -> CF,
        CF: Future<Output = Result<Option<(Key, T)>, E>>,
        W: Fn(Slot, Held, T) -> WF,
        WF: Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let prefix = lease_owner(self.queue.name);
        let this = &self;
        let loops = (0..self.workers.max(1)).map(|n| {
            let slot = this.slot(&format!("{prefix}-{n}"), cancel.clone());
            let (claim, work, queue) = (&claim, &work, this.queue.name);
            async move {
                let mut errors_in_a_row = 0_i64;
                while !slot.cancel.is_cancelled() {
                    let pause = match this.turn(&slot, claim, work).await {
                        Ok(true) => {
                            errors_in_a_row = 0;
                            continue;
                        }
                        Ok(false) => {
                            errors_in_a_row = 0;
                            this.poll
                        }
                        Err(e) => {
                            errors_in_a_row += 1;
                            let secs = ERROR_BACKOFF.delay_secs(errors_in_a_row, rand::random());
                            tracing::error!(queue, error = %e, retry_in_s = secs, "background job failed; will retry");
                            Duration::from_secs(secs.unsigned_abs())
                        }
                    };
                    let woken = async {
                        match &this.wake {
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

/// A row as its worker holds it: the worker asks it whether the row is still its own before
/// writing a result no finish can take back (a picture in the object store, a test created from
/// mail), and counts a finish refused for a lost lease through it.
#[derive(Clone, Debug)]
pub struct Held {
    store: Store,
    queue: &'static Queue,
    key: Key,
    owner: String,
    lease: Lease,
    /// Set once a renewal found the row someone else's.
    lost: Arc<AtomicBool>,
}

impl Held {
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// Renews the lease now: true while the row is this worker's; false once another worker took
    /// it over (or it was finished), and then whatever this worker did is not to be written.
    pub async fn confirm(&self) -> Result<bool, store::StoreError> {
        if self.lost.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let until = chrono::Utc::now()
            .timestamp()
            .saturating_add(self.lease.hold_secs());
        let ours = self
            .store
            .renew_lease(self.queue, &self.key, &self.owner, until)
            .await?;
        if !ours {
            self.lost.store(true, Ordering::Relaxed);
        }
        Ok(ours)
    }

    /// Counts a finish the store refused because the lease was lost (the worker logs why).
    pub fn refused(&self) {
        self.lost.store(true, Ordering::Relaxed);
        telemetry::global().lease_lost(self.queue.name);
    }
}

/// Renews a row's lease every `renew_every` while a handler works on it; stops when dropped
/// (whichever way the handler ends) or when the lease turns out to be someone else's.
/// [`Loops::turn`] starts one for every claimed row.
pub struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
    held: Held,
}

impl Heartbeat {
    /// Renews `owner`'s lease of `key` in `queue` to `lease.hold` from now, every
    /// `lease.renew_every` (well under `hold`, so a database blip of a few seconds does not cost a
    /// live worker its row).
    pub fn start(
        store: &Store,
        queue: &'static Queue,
        key: Key,
        owner: &str,
        lease: Lease,
    ) -> Heartbeat {
        let held = Held {
            store: store.clone(),
            queue,
            key,
            owner: owner.to_string(),
            lease,
            lost: Arc::new(AtomicBool::new(false)),
        };
        let h = held.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(lease.renew_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate; the claim itself just set the lease.
            tick.tick().await;
            loop {
                tick.tick().await;
                match h.confirm().await {
                    Ok(true) => telemetry::global().lease_renewal(queue.name),
                    Ok(false) => {
                        tracing::warn!(queue = queue.name, key = ?h.key,
                            "lease not renewed: it expired and another worker took the row over, or the row was finished or requeued");
                        return;
                    }
                    Err(e) => {
                        telemetry::global().dependency_error("database", queue.name);
                        tracing::warn!(queue = queue.name, key = ?h.key, error = %e,
                            "database error renewing a lease; trying again at the next heartbeat");
                    }
                }
            }
        });
        Heartbeat { task, held }
    }

    /// The row this heartbeat keeps, for its worker.
    pub fn held(&self) -> Held {
        self.held.clone()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
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
