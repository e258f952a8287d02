//! The link-check worker: claims requested checks under a lease, runs `content::links` on the
//! test's email under the network policy, and stores the report. A check whose worker died is
//! claimed again when its lease (the queue's, renewed by the loops' heartbeat) expires.

use std::sync::Arc;

use background::{Held, Slot};
use content::uribl::UriblLookup;
use content::NetPolicy;
use store::Store;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::JobError;

pub struct LinkCheckWorker {
    pub store: Store,
    pub policy: NetPolicy,
    /// The URI blocklists asked about every link and image domain.
    pub uribl: UriblLookup,
}

impl LinkCheckWorker {
    /// Runs `workers` claim loops at once.
    pub async fn run(self, ready: Arc<Notify>, cancel: CancellationToken, workers: usize) {
        crate::check_loops(&self, &self.store, workers, ready, cancel).await;
    }

    /// Runs one due check as `worker` (under the heartbeat, as the loops do); false when none is
    /// due.
    pub async fn run_one(&self, worker: &str, ready: &Notify) -> Result<bool, JobError> {
        crate::check_one(self, &self.store, worker, ready).await
    }
}

impl crate::CheckWorker for LinkCheckWorker {
    const QUEUE: &'static store::Queue = &store::LINK_CHECKS;

    async fn claim(&self, slot: &Slot) -> Result<Option<(String, i64)>, JobError> {
        let now = chrono::Utc::now().timestamp();
        Ok(self
            .store
            .claim_link_check(&slot.owner, now, slot.lease_secs())
            .await?)
    }

    async fn check(
        &self,
        slot: &Slot,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> Result<(), JobError> {
        let (store, policy) = (&self.store, &self.policy);
        tracing::info!(%test_id, attempt, "checking links");
        let html = store.test_content(&test_id).await?.unwrap_or_default();
        let mut check = match content::links::check_email(&html, policy).await {
            Ok(check) => check,
            // Unreadable HTML has no links to follow; the report says so rather than failing
            // forever.
            Err(reason) => {
                tracing::warn!(%test_id, %reason, "links could not be extracted");
                content::links::LinkCheck::default()
            }
        };
        // The blocklists are asked about every link and image domain, as the built-in spam
        // filter asks about the links of a scanned message.
        let hosts: Vec<String> = check
            .links
            .iter()
            .filter_map(|l| url::Url::parse(&l.url).ok()?.host_str().map(str::to_owned))
            .collect();
        check.uribl = Some(self.uribl.check(hosts).await);
        let result = serde_json::to_string(&check)?;
        let stored = store
            .finish_link_check(
                &test_id,
                &slot.owner,
                &result,
                chrono::Utc::now().timestamp(),
            )
            .await?;
        if !stored {
            held.refused();
            tracing::warn!(%test_id, "link check result not stored (a check is finished once): requested again, or its lease was taken over");
        }
        Ok(())
    }
}
