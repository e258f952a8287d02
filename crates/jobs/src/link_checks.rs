//! The link-check worker: claims requested checks under a lease, runs `content::links` on the
//! test's email under the network policy, and stores the report. A check whose worker died is
//! claimed again when its lease expires.

use std::sync::Arc;

use content::uribl::UriblLookup;
use content::NetPolicy;
use store::Store;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::JobError;

/// The lease on one check: every link at its timeout, a few at a time, with room to spare.
fn lease_secs(policy: &NetPolicy) -> i64 {
    let links = content::links::MAX_LINKS as u64;
    let per_link = policy.timeout.as_secs().max(1);
    i64::try_from(links * per_link / 4 + 60).unwrap_or(i64::MAX)
}

pub struct LinkCheckWorker {
    pub store: Store,
    pub policy: NetPolicy,
    /// The URI blocklists asked about every link and image domain.
    pub uribl: UriblLookup,
}

impl LinkCheckWorker {
    /// Runs `workers` claim loops at once.
    pub async fn run(self, ready: Arc<Notify>, cancel: CancellationToken, workers: usize) {
        crate::check_loops(&self, workers, ready, cancel).await;
    }

    /// Runs one due check; false when none is due.
    pub async fn run_one(&self, worker: &str, ready: &Notify) -> Result<bool, JobError> {
        let (store, policy) = (&self.store, &self.policy);
        let now = chrono::Utc::now().timestamp();
        let Some((test_id, attempt)) = store
            .claim_link_check(worker, now, lease_secs(policy))
            .await?
        else {
            return Ok(false);
        };
        // A request wakes one worker; this one is busy now, so another looks for more work.
        ready.notify_one();
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
            .finish_link_check(&test_id, worker, &result, chrono::Utc::now().timestamp())
            .await?;
        if !stored {
            tracing::info!(%test_id, "link check result dropped: requested again or lease lost");
        }
        Ok(true)
    }
}

impl crate::CheckWorker for LinkCheckWorker {
    const QUEUE: &'static str = store::LINK_CHECKS.name;

    async fn handle_one(&self, owner: &str, ready: &Notify) -> Result<bool, JobError> {
        self.run_one(owner, ready).await
    }
}
