//! The write path of tracking hits (issue 22): a group commit. Each hit handler hands its
//! [`NewHit`] to the writer tasks through a bounded queue and waits; a writer takes what has
//! queued up (up to `batch_max`, waiting at most `batch_wait` for more), writes it in one
//! transaction ([`Store::record_hits`]) and only then lets each handler answer. So a hit is
//! answered only once it is durable, and under load one commit carries many hits.
//!
//! Bounds: every hit has one wait (`database_wait`, from its arrival) for the database to read
//! its campaign and take its batch. The queue holds `queue_capacity` hits; when it is full a
//! handler waits for room (backpressure). While the database cannot take a batch the writers
//! keep trying it, so a short outage costs nothing; a hit whose wait ends first is answered
//! anyway (the image, or its link for a click) and counted unrecorded. Every hit answered is
//! either committed or counted in `/metrics` (`hits_unrecorded`, by [`HitUnrecorded`] reason):
//! over a rate limit, over a campaign's or an account's storage budget (refused by
//! [`Store::record_hits`]), no room in the queue within its wait (`queue_full`), or the database
//! not answering within it (`database`). Only the writer decides a queued hit's fate, so a hit
//! is never counted unrecorded while its batch may still commit — except when the connection
//! dies (or the wait ends) while the batch's commit is on the wire: the commit may have reached
//! the database's log, so those hits may be stored though counted unrecorded, and a retry that
//! succeeds may store them twice (hits carry no id yet that would make it a no-op).
//! A crash loses only hits whose answer had not left: the queued ones (at most
//! `queue_capacity`), the batches being written (at most `batch_max` each) and requests still
//! waiting for room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use store::{Backend, CampaignRow, HitBudgets, NewHit, Store};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant as Deadline;

pub use telemetry::HitUnrecorded;

use app::RateLimiter;

/// The `[hits]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HitSettings {
    /// Hits waiting for the writer at most; more handlers wait for room.
    pub queue_capacity: usize,
    /// Hits written in one transaction at most.
    pub batch_max: usize,
    /// Batches written at once; 0: by backend (1 on SQLite, which writes one transaction at a
    /// time anyway; 4 on PostgreSQL, whose commits wait on the disk and overlap).
    pub writers: usize,
    /// How long the writer waits for more hits before writing a batch that is not full.
    pub batch_wait: Duration,
    /// Hits recorded per minute from one client address (an IPv6 /64 counts as one); 0: no limit.
    pub per_address_per_minute: u32,
    /// Hits recorded per minute for one campaign; 0: no limit.
    pub per_campaign_per_minute: u32,
    /// Hits one campaign may hold in storage, test and real; 0: no limit.
    pub max_stored_per_campaign: i64,
    /// Hits all campaigns of one account may hold in storage; 0: no limit.
    pub max_stored_per_account: i64,
    /// How long a hit waits, from its arrival, for the database to read its campaign and commit
    /// its batch (queueing included) before it is answered unrecorded.
    pub database_wait: Duration,
}

impl Default for HitSettings {
    fn default() -> Self {
        HitSettings {
            queue_capacity: 10_000,
            batch_max: 500,
            writers: 0,
            batch_wait: Duration::from_millis(2),
            // Image proxies (Gmail, Yahoo, Apple's relays) fetch for many readers from few
            // addresses, so the per-address budget is generous; it stops one client from
            // flooding a known guid, while the per-campaign one bounds the rows any guid gets.
            per_address_per_minute: 6_000,
            per_campaign_per_minute: 120_000,
            // About 220 bytes a hit: 450 MB for a campaign, 2.2 GB for an account. A real
            // campaign of a million recipients stays well inside; a flood stops there.
            max_stored_per_campaign: 2_000_000,
            max_stored_per_account: 10_000_000,
            // An outage answers every hit within 2 s (with the image, or a click's link), so
            // readers' clients and proxies do not pile up connections; a blip shorter than this
            // (a failover, a restart) records everything.
            database_wait: Duration::from_millis(1500),
        }
    }
}

struct Pending {
    hit: NewHit,
    /// The end of the hit's wait: past it the writer answers it unrecorded.
    deadline: Deadline,
    done: oneshot::Sender<bool>,
}

/// What the hit path knows of a campaign.
pub enum Lookup {
    Found(Arc<CampaignRow>),
    /// No campaign has this guid.
    Unknown,
    /// The database did not answer within the hit's wait: the row last read, however old, if
    /// this process ever read it (enough to send a click to its link).
    Unavailable(Option<Arc<CampaignRow>>),
}

/// How long a campaign read for the hit path is reused. What may change meanwhile changes
/// little for a hit: whether it is test data and whether the campaign still exists are decided
/// again by the writer under its transaction, and only the end date (set in days) may be a
/// second stale.
const CAMPAIGN_TTL: Duration = Duration::from_secs(1);
/// Campaigns (and unknown guids) remembered at most; beyond it the stale ones are forgotten.
const MAX_CACHED_CAMPAIGNS: usize = 10_000;

type CachedCampaign = (Instant, Option<Arc<CampaignRow>>);

/// How often a database outage seen by hits is logged: each hit meets it, and a campaign with
/// thousands of readers would otherwise write thousands of the same line a second.
const OUTAGE_LOG_EVERY: Duration = Duration::from_secs(10);

/// Lets one warning through per [`OUTAGE_LOG_EVERY`] and counts the ones held back.
#[derive(Default)]
struct OutageLog {
    last: Mutex<Option<Instant>>,
    held: std::sync::atomic::AtomicU64,
}

impl OutageLog {
    /// `Some(held back since the last one)` when this warning may be written.
    fn pass(&self) -> Option<u64> {
        use std::sync::atomic::Ordering;
        let mut last = self.last.lock().ok()?;
        if last.is_some_and(|at| at.elapsed() < OUTAGE_LOG_EVERY) {
            self.held.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(Instant::now());
        Some(self.held.swap(0, Ordering::Relaxed))
    }
}

/// The hit path's shared parts: the writer's queue (started on the first hit, inside the
/// runtime), the rate limits and the campaigns recently read.
pub struct Hits {
    settings: HitSettings,
    writer: OnceLock<mpsc::Sender<Pending>>,
    per_address: RateLimiter<IpAddr>,
    per_campaign: RateLimiter<String>,
    campaigns: Mutex<HashMap<String, CachedCampaign>>,
    outage_log: OutageLog,
}

impl Hits {
    pub fn new(settings: HitSettings) -> Hits {
        Hits {
            settings,
            writer: OnceLock::new(),
            per_address: RateLimiter::default(),
            per_campaign: RateLimiter::default(),
            campaigns: Mutex::default(),
            outage_log: OutageLog::default(),
        }
    }

    /// The end of the wait of a hit arriving now.
    pub fn deadline(&self) -> Deadline {
        Deadline::now() + self.settings.database_wait
    }

    /// The campaign `guid` (any account's: a hit carries no credentials), read at most once a
    /// second per guid so that a hit costs the database one write share and no read; the read
    /// waits for the database until `deadline` at most.
    pub async fn campaign(&self, store: &Store, guid: &str, deadline: Deadline) -> Lookup {
        let mut stale = None;
        if let Ok(map) = self.campaigns.lock() {
            if let Some((at, row)) = map.get(guid) {
                if at.elapsed() < CAMPAIGN_TTL {
                    return row.clone().map_or(Lookup::Unknown, Lookup::Found);
                }
                stale = row.clone();
            }
        }
        let row = match tokio::time::timeout_at(deadline, store.campaign_for_hit(guid)).await {
            Ok(Ok(row)) => row.map(Arc::new),
            Ok(Err(e)) => {
                if let Some(held) = self.outage_log.pass() {
                    tracing::warn!(error = %e, same_since_last = held, "reading a campaign for a tracking hit");
                }
                return Lookup::Unavailable(stale);
            }
            Err(_) => {
                if let Some(held) = self.outage_log.pass() {
                    tracing::warn!(same_since_last = held, "reading a campaign for a tracking hit: no answer from the database within the hit's wait");
                }
                return Lookup::Unavailable(stale);
            }
        };
        if let Ok(mut map) = self.campaigns.lock() {
            if map.len() >= MAX_CACHED_CAMPAIGNS {
                map.retain(|_, (at, _)| at.elapsed() < CAMPAIGN_TTL);
                if map.len() >= MAX_CACHED_CAMPAIGNS {
                    map.clear();
                }
            }
            map.insert(guid.to_string(), (Instant::now(), row.clone()));
        }
        row.map_or(Lookup::Unknown, Lookup::Found)
    }

    /// Drops what this process remembers of campaign `guid` (after a change its hits must see
    /// at once: deletion, a new end). Other api processes see the change within a second.
    pub fn forget(&self, guid: &str) {
        if let Ok(mut map) = self.campaigns.lock() {
            map.remove(guid);
        }
    }

    /// Charges a hit from `address` to its budget; `Err` when over it (and counted).
    pub fn admit_address(&self, address: Option<IpAddr>) -> Result<(), HitUnrecorded> {
        let limit = self.settings.per_address_per_minute;
        match address {
            Some(a)
                if limit > 0
                    && self
                        .per_address
                        .check(domain::address_group(a), limit)
                        .is_err() =>
            {
                Err(unrecorded(HitUnrecorded::RateAddress))
            }
            _ => Ok(()),
        }
    }

    /// Records `hit` unless its campaign is over its budget; returns once the hit is
    /// committed, or with the reason it was not recorded (already counted) at about `deadline`
    /// at the latest.
    pub async fn record(
        &self,
        store: &Store,
        hit: NewHit,
        deadline: Deadline,
    ) -> Result<(), HitUnrecorded> {
        let limit = self.settings.per_campaign_per_minute;
        if limit > 0 && self.per_campaign.check(hit.guid.clone(), limit).is_err() {
            return Err(unrecorded(HitUnrecorded::RateCampaign));
        }
        let writer = self.writer.get_or_init(|| self.start(store.clone()));
        let (done, committed) = oneshot::channel();
        let pending = Pending {
            hit,
            deadline,
            done,
        };
        // A full queue makes this wait (backpressure) until the hit's wait is over; a send cut
        // short sent nothing, so the hit is surely not recorded.
        match tokio::time::timeout_at(deadline, writer.send(pending)).await {
            Err(_) => return Err(unrecorded(HitUnrecorded::QueueFull)),
            Ok(Err(_)) => return Err(unrecorded(HitUnrecorded::Database)),
            Ok(Ok(())) => {}
        }
        // The writer answers every hit it took by the end of its wait (counting those it gave
        // up); only a writer gone mid-batch leaves one to count here.
        match committed.await {
            Ok(true) => Ok(()),
            Ok(false) => Err(HitUnrecorded::Database),
            Err(_) => Err(unrecorded(HitUnrecorded::Database)),
        }
    }

    fn start(&self, store: Store) -> mpsc::Sender<Pending> {
        let (tx, rx) = mpsc::channel(self.settings.queue_capacity.max(1));
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let writers = match (self.settings.writers, store.backend()) {
            (0, Backend::Sqlite) => 1,
            (0, Backend::Postgres) => 4,
            (n, _) => n,
        };
        let budgets = HitBudgets {
            per_campaign: self.settings.max_stored_per_campaign,
            per_account: self.settings.max_stored_per_account,
        };
        for _ in 0..writers {
            tokio::spawn(write_batches(
                store.clone(),
                rx.clone(),
                self.settings.batch_max.max(1),
                self.settings.batch_wait,
                budgets,
            ));
        }
        tx
    }
}

/// Counts one hit answered without being recorded, for `reason`.
pub fn unrecorded(reason: HitUnrecorded) -> HitUnrecorded {
    telemetry::global().hits_unrecorded(reason, 1);
    reason
}

/// Pause before the first retry of a batch the database refused (a lock timeout, a deadlock
/// between two api processes, a connection lost); doubled at each retry up to
/// [`RETRY_MAX`], and never past the batch's first deadline.
const RETRY_AFTER: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(400);

/// One writer: takes a batch from the shared queue (one writer gathers at a time, so another
/// can commit meanwhile), writes it, then releases its handlers.
async fn write_batches(
    store: Store,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Pending>>>,
    batch_max: usize,
    batch_wait: Duration,
    budgets: HitBudgets,
) {
    let mut batch: Vec<Pending> = Vec::with_capacity(batch_max);
    loop {
        {
            let mut rx = rx.lock().await;
            if rx.recv_many(&mut batch, batch_max).await == 0 {
                return;
            }
            if batch.len() < batch_max && !batch_wait.is_zero() {
                let deadline = tokio::time::Instant::now() + batch_wait;
                while batch.len() < batch_max {
                    let room = batch_max - batch.len();
                    match tokio::time::timeout_at(deadline, rx.recv_many(&mut batch, room)).await {
                        Ok(n) if n > 0 => {}
                        _ => break,
                    }
                }
            }
        }
        write_until_deadlines(&store, &mut batch, budgets).await;
    }
}

/// Writes `batch`, retrying while the database refuses it, until it is committed or the wait of
/// each of its hits is over; answers every hit and leaves `batch` empty.
async fn write_until_deadlines(store: &Store, batch: &mut Vec<Pending>, budgets: HitBudgets) {
    let mut pause = RETRY_AFTER;
    let mut failures = 0u32;
    loop {
        let now = Deadline::now();
        let (late, waiting): (Vec<Pending>, Vec<Pending>) =
            batch.drain(..).partition(|p| p.deadline <= now);
        *batch = waiting;
        if !late.is_empty() {
            tracing::error!(
                hits = late.len(),
                failures,
                "tracking hits answered unrecorded: the database did not take them within their wait"
            );
            telemetry::global().hits_unrecorded(HitUnrecorded::Database, late.len());
            for p in late {
                // A handler that went away (its client hung up) needs no answer.
                let _ = p.done.send(false);
            }
        }
        let Some(first_deadline) = batch.iter().map(|p| p.deadline).min() else {
            return;
        };
        let hits: Vec<NewHit> = batch.iter().map(|p| p.hit.clone()).collect();
        match tokio::time::timeout_at(first_deadline, store.record_hits(&hits, budgets)).await {
            Ok(Ok(w)) => {
                telemetry::global().hit_batch(w.recorded);
                for (reason, n) in [
                    (HitUnrecorded::BudgetCampaign, w.over_campaign_budget),
                    (HitUnrecorded::BudgetAccount, w.over_account_budget),
                ] {
                    if n > 0 {
                        telemetry::global().hits_unrecorded(reason, n);
                    }
                }
                for p in batch.drain(..) {
                    let _ = p.done.send(true);
                }
                return;
            }
            Ok(Err(e)) => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(error = %e, hits = hits.len(), "writing a batch of hits; retrying until their wait is over");
                }
                tokio::time::sleep_until(first_deadline.min(Deadline::now() + pause)).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
            // The first hit's wait is over: the loop answers it and tries the others again.
            Err(_) => failures += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_logged_once_per_interval_with_the_count_held_back() {
        let log = OutageLog::default();
        assert_eq!(log.pass(), Some(0), "the first is written");
        assert_eq!(log.pass(), None);
        assert_eq!(log.pass(), None);
        // Once the interval has passed, the next says how many were held back.
        if let Ok(mut last) = log.last.lock() {
            *last = Instant::now().checked_sub(OUTAGE_LOG_EVERY);
        }
        assert_eq!(log.pass(), Some(2));
        assert_eq!(log.pass(), None);
    }

    /// A database that refuses every batch (its pool closed): the writer keeps trying until the
    /// hit's wait is over, then answers it unrecorded, and does not hang.
    #[tokio::test]
    async fn a_batch_the_database_cannot_take_is_answered_unrecorded_when_its_wait_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(dir.path()).await.expect("store");
        store.close().await;
        let (done, answer) = oneshot::channel();
        let mut batch = vec![Pending {
            hit: NewHit {
                guid: "g".into(),
                at: 0,
                kind: ::analytics::HitKind::Open,
                number: 0,
                merge_value: None,
                source: ::analytics::Source::Direct,
                client: ::analytics::Client::Unknown,
                device: ::analytics::Device::Unknown,
                mpp_by_agent_only: false,
            },
            deadline: Deadline::now() + Duration::from_millis(200),
            done,
        }];
        let budgets = HitBudgets {
            per_campaign: 0,
            per_account: 0,
        };
        write_until_deadlines(&store, &mut batch, budgets).await;
        assert!(batch.is_empty(), "every hit is answered");
        assert_eq!(answer.await, Ok(false), "answered as not recorded");
    }

    #[test]
    fn a_flood_from_one_address_is_cut_at_its_budget() {
        let hits = Hits::new(HitSettings {
            per_address_per_minute: 5,
            ..HitSettings::default()
        });
        let from = Some("192.0.2.7".parse().expect("addr"));
        let admitted = (0..20).filter(|_| hits.admit_address(from).is_ok()).count();
        assert_eq!(admitted, 5);
        // The twenty addresses of one IPv6 /64 are one client.
        let in_one_64 = |n: u16| Some(IpAddr::from([0x2001, 0xdb8, 1, 2, n, 0, 0, 1]));
        let admitted = (1..=20)
            .filter(|n| hits.admit_address(in_one_64(*n)).is_ok())
            .count();
        assert_eq!(admitted, 5);
        assert!(hits
            .admit_address(Some("192.0.2.8".parse().expect("addr")))
            .is_ok());
        assert!(hits.admit_address(None).is_ok(), "no address, no budget");
    }
}
