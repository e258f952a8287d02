//! The write path of tracking hits (issue 22): a group commit. Each hit handler hands its
//! [`NewHit`] to the writer tasks through a bounded queue and waits; a writer takes what has
//! queued up (up to `batch_max`, waiting at most `batch_wait` for more), writes it in one
//! transaction ([`Store::record_hits`]) and only then lets each handler answer. So a hit is
//! answered only once it is durable, and under load one commit carries many hits.
//!
//! Bounds: the queue holds `queue_capacity` hits; when it is full a handler waits for room
//! (backpressure) rather than answering unrecorded, so the only hits answered without being
//! recorded are the ones over a rate limit, those over a campaign's or an account's storage
//! budget (refused by [`Store::record_hits`]) and those of a batch the database refused twice,
//! each counted in `/metrics` (`hits_unrecorded`, by [`Unrecorded`] reason). A crash loses only hits whose answer had not
//! left: the queued ones (at most `queue_capacity`), the batches being written (at most
//! `batch_max` each) and requests still waiting for room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use store::{Backend, CampaignRow, HitBudgets, NewHit, Store};
use tokio::sync::{mpsc, oneshot};

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
        }
    }
}

/// Why a hit was answered without being recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrecorded {
    RateAddress,
    RateCampaign,
    /// The campaign holds its storage budget.
    BudgetCampaign,
    /// The campaign's account holds its storage budget.
    BudgetAccount,
    Database,
}

impl Unrecorded {
    fn as_str(self) -> &'static str {
        match self {
            Unrecorded::RateAddress => "rate_address",
            Unrecorded::RateCampaign => "rate_campaign",
            Unrecorded::BudgetCampaign => "budget_campaign",
            Unrecorded::BudgetAccount => "budget_account",
            Unrecorded::Database => "database",
        }
    }
}

struct Pending {
    hit: NewHit,
    done: oneshot::Sender<bool>,
}

/// How long a campaign read for the hit path is reused. What may change meanwhile changes
/// little for a hit: whether it is test data and whether the campaign still exists are decided
/// again by the writer under its transaction, and only the end date (set in days) may be a
/// second stale.
const CAMPAIGN_TTL: Duration = Duration::from_secs(1);
/// Campaigns (and unknown guids) remembered at most; beyond it the stale ones are forgotten.
const MAX_CACHED_CAMPAIGNS: usize = 10_000;

type CachedCampaign = (Instant, Option<Arc<CampaignRow>>);

/// The hit path's shared parts: the writer's queue (started on the first hit, inside the
/// runtime), the rate limits and the campaigns recently read.
pub struct Hits {
    settings: HitSettings,
    writer: OnceLock<mpsc::Sender<Pending>>,
    per_address: RateLimiter<IpAddr>,
    per_campaign: RateLimiter<String>,
    campaigns: Mutex<HashMap<String, CachedCampaign>>,
}

impl Hits {
    pub fn new(settings: HitSettings) -> Hits {
        Hits {
            settings,
            writer: OnceLock::new(),
            per_address: RateLimiter::default(),
            per_campaign: RateLimiter::default(),
            campaigns: Mutex::default(),
        }
    }

    /// The campaign `guid` (any account's: a hit carries no credentials), read at most once a
    /// second per guid so that a hit costs the database one write share and no read.
    pub async fn campaign(
        &self,
        store: &Store,
        guid: &str,
    ) -> store::Result<Option<Arc<CampaignRow>>> {
        if let Ok(map) = self.campaigns.lock() {
            if let Some((at, row)) = map.get(guid) {
                if at.elapsed() < CAMPAIGN_TTL {
                    return Ok(row.clone());
                }
            }
        }
        let row = store.campaign_for_hit(guid).await?.map(Arc::new);
        if let Ok(mut map) = self.campaigns.lock() {
            if map.len() >= MAX_CACHED_CAMPAIGNS {
                map.retain(|_, (at, _)| at.elapsed() < CAMPAIGN_TTL);
                if map.len() >= MAX_CACHED_CAMPAIGNS {
                    map.clear();
                }
            }
            map.insert(guid.to_string(), (Instant::now(), row.clone()));
        }
        Ok(row)
    }

    /// Drops what this process remembers of campaign `guid` (after a change its hits must see
    /// at once: deletion, a new end). Other api processes see the change within a second.
    pub fn forget(&self, guid: &str) {
        if let Ok(mut map) = self.campaigns.lock() {
            map.remove(guid);
        }
    }

    /// Charges a hit from `address` to its budget; `Err` when over it (and counted).
    pub fn admit_address(&self, address: Option<IpAddr>) -> Result<(), Unrecorded> {
        let limit = self.settings.per_address_per_minute;
        match address {
            Some(a)
                if limit > 0
                    && self
                        .per_address
                        .check(domain::address_group(a), limit)
                        .is_err() =>
            {
                Err(unrecorded(Unrecorded::RateAddress))
            }
            _ => Ok(()),
        }
    }

    /// Records `hit` unless its campaign is over its budget; returns once the hit is
    /// committed, or with the reason it was not recorded (already counted).
    pub async fn record(&self, store: &Store, hit: NewHit) -> Result<(), Unrecorded> {
        let limit = self.settings.per_campaign_per_minute;
        if limit > 0 && self.per_campaign.check(hit.guid.clone(), limit).is_err() {
            return Err(unrecorded(Unrecorded::RateCampaign));
        }
        let writer = self.writer.get_or_init(|| self.start(store.clone()));
        let (done, committed) = oneshot::channel();
        // A full queue makes this wait: backpressure, never an answer before the write.
        if writer.send(Pending { hit, done }).await.is_err() {
            return Err(unrecorded(Unrecorded::Database));
        }
        match committed.await {
            Ok(true) => Ok(()),
            _ => Err(Unrecorded::Database),
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

fn unrecorded(reason: Unrecorded) -> Unrecorded {
    telemetry::global().hits_unrecorded(reason.as_str(), 1);
    reason
}

/// Pause before the one retry of a batch the database refused (a lock timeout, a deadlock
/// between two api processes).
const RETRY_AFTER: Duration = Duration::from_millis(50);

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
        let hits: Vec<NewHit> = batch.iter().map(|p| p.hit.clone()).collect();
        let mut written = store.record_hits(&hits, budgets).await;
        if let Err(e) = &written {
            tracing::warn!(error = %e, hits = hits.len(), "writing a batch of hits; retrying once");
            tokio::time::sleep(RETRY_AFTER).await;
            written = store.record_hits(&hits, budgets).await;
        }
        let ok = match written {
            Ok(w) => {
                telemetry::global().hit_batch(w.recorded);
                for (reason, n) in [
                    (Unrecorded::BudgetCampaign, w.over_campaign_budget),
                    (Unrecorded::BudgetAccount, w.over_account_budget),
                ] {
                    if n > 0 {
                        telemetry::global().hits_unrecorded(reason.as_str(), n);
                    }
                }
                true
            }
            Err(e) => {
                // The readers still get their image; the failure is the operator's to see.
                tracing::error!(error = %e, hits = hits.len(), "recording a batch of hits");
                telemetry::global().hits_unrecorded(Unrecorded::Database.as_str(), hits.len());
                false
            }
        };
        for p in batch.drain(..) {
            // A handler that went away (its client hung up) needs no answer.
            let _ = p.done.send(ok);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
