//! Visual diff between two email tests (extension, `GET /v5/email/tests/{id}/diff/{other}`): per
//! client and variant screenshot present and Complete in both, the share of changed pixels, the
//! changed regions and a highlight image drawn over the other (newer) test's screenshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use domain::{Picture, ScreenshotStatus, Variant};
use store::{ClientRow, TestRow};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};
use crate::screenshots as shots;
use crate::state::AppState;

/// Diffs running at once across all requests: each holds two decoded screenshots (tens of MB for
/// a long email at 2×) and a core, and the blocking pool is shared with the rest of the service.
const CONCURRENT_DIFFS: usize = 2;
/// Diffs one account runs at once. Its further diffs wait behind each other in front of the
/// global slots, so another account's diff waits for at most one of them.
const DIFFS_PER_ACCOUNT: usize = 1;

static DIFF_SLOTS: LazyLock<DiffSlots> =
    LazyLock::new(|| DiffSlots::new(CONCURRENT_DIFFS, DIFFS_PER_ACCOUNT));

/// The global diff slots with a per-account limit in front of them.
struct DiffSlots {
    global: Arc<Semaphore>,
    per_account: usize,
    /// The accounts with a diff running or waiting; an entry goes with its last permit.
    accounts: Arc<Mutex<HashMap<i64, Arc<Semaphore>>>>,
}

/// Both permits of one diff, released on drop.
struct DiffPermit {
    global: Option<OwnedSemaphorePermit>,
    account: Option<OwnedSemaphorePermit>,
    account_id: i64,
    /// The account's semaphore, held (also while waiting) so that the entry outlives this diff.
    semaphore: Arc<Semaphore>,
    accounts: Arc<Mutex<HashMap<i64, Arc<Semaphore>>>>,
}

impl Drop for DiffPermit {
    fn drop(&mut self) {
        self.global.take();
        self.account.take();
        let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
        // Only the map and this permit hold it: no diff of the account runs or waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            accounts.remove(&self.account_id);
        }
    }
}

impl DiffSlots {
    fn new(global: usize, per_account: usize) -> DiffSlots {
        DiffSlots {
            global: Arc::new(Semaphore::new(global)),
            per_account: per_account.max(1),
            accounts: Arc::default(),
        }
    }

    /// Waits for one of the account's places, then for a global slot.
    async fn acquire(&self, account_id: i64) -> Result<DiffPermit, AcquireError> {
        let semaphore = {
            let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(
                accounts
                    .entry(account_id)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_account))),
            )
        };
        // Made before the first await, so the account's entry goes even if this request is
        // dropped while it waits.
        let mut permit = DiffPermit {
            global: None,
            account: None,
            account_id,
            semaphore: Arc::clone(&semaphore),
            accounts: Arc::clone(&self.accounts),
        };
        permit.account = Some(semaphore.acquire_owned().await?);
        permit.global = Some(Arc::clone(&self.global).acquire_owned().await?);
        Ok(permit)
    }

    #[cfg(test)]
    fn accounts_tracked(&self) -> usize {
        self.accounts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One comparison of two tests: per client present in both (in the first test's order), then the
/// clients only one of them has.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub clients: Vec<ClientComparison>,
    pub only_in_test: Vec<String>,
    pub only_in_other: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct ClientComparison {
    pub client: String,
    pub outcome: ClientOutcome,
}

#[derive(Clone, Debug)]
pub enum ClientOutcome {
    /// Complete in both: each variant present in both, in the first test's order.
    Compared(Vec<(Variant, VariantOutcome)>),
    /// Not Complete in one of them, with both statuses.
    NotCompared {
        test_status: ScreenshotStatus,
        other_status: ScreenshotStatus,
    },
}

#[derive(Clone, Debug)]
pub enum VariantOutcome {
    /// The figures; `highlight_png` is emptied once stored, the image is at `diff_image`.
    Diffed {
        diff: Box<shotdiff::Diff>,
        diff_image: String,
    },
    /// A screenshot is missing from storage, or the two could not be compared: why.
    Failed(String),
}

/// Which variants a comparison covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variants {
    /// Every variant present in both tests.
    All,
    /// Only this one (when present in both).
    Only(Variant),
}

/// Compares `base`'s screenshots with `new`'s (highlights drawn over `new`'s), both already owned
/// by the caller; the API's diff endpoint and the web's diff page both call this.
pub async fn compare(
    state: &AppState,
    base: &TestRow,
    new: &TestRow,
    which: Variants,
) -> Result<Comparison> {
    compare_clients(state, base, new, which, None).await
}

/// [`compare`] for one client only when `only` names one (the web's diff page computes each
/// client's diff when the reader gets to it); the other clients are left out of `clients`.
pub async fn compare_clients(
    state: &AppState,
    base: &TestRow,
    new: &TestRow,
    which: Variants,
    only: Option<&str>,
) -> Result<Comparison> {
    let base_rows = state.store.test_clients(&base.id).await?;
    let new_rows = state.store.test_clients(&new.id).await?;
    let new_by_id: BTreeMap<&str, &ClientRow> =
        new_rows.iter().map(|r| (r.client_id.as_str(), r)).collect();
    let now = chrono::Utc::now().timestamp();
    let mut clients = Vec::new();
    for b in base_rows
        .iter()
        .filter(|b| only.is_none_or(|c| c == b.client_id))
    {
        let Some(n) = new_by_id.get(b.client_id.as_str()) else {
            continue;
        };
        let outcome = if b.status == ScreenshotStatus::Complete
            && n.status == ScreenshotStatus::Complete
        {
            let mut variants = Vec::new();
            for v in b.variants.iter().filter(|v| {
                n.variants.contains(v) && (which == Variants::All || which == Variants::Only(**v))
            }) {
                let out = diff_variant(
                    state,
                    base.account_id,
                    &base.id,
                    &new.id,
                    &b.client_id,
                    *v,
                    now,
                )
                .await?;
                variants.push((*v, out));
            }
            ClientOutcome::Compared(variants)
        } else {
            ClientOutcome::NotCompared {
                test_status: b.status,
                other_status: n.status,
            }
        };
        clients.push(ClientComparison {
            client: b.client_id.clone(),
            outcome,
        });
    }
    let only = |rows: &[ClientRow], other: &[ClientRow]| -> Vec<String> {
        rows.iter()
            .filter(|r| !other.iter().any(|o| o.client_id == r.client_id))
            .map(|r| r.client_id.clone())
            .collect()
    };
    Ok(Comparison {
        clients,
        only_in_test: only(&base_rows, &new_rows),
        only_in_other: only(&new_rows, &base_rows),
    })
}

/// One variant of one client: the figures, and the highlight image stored beside the new test's
/// screenshots. A screenshot missing from the blob store is reported in place, not as a failure
/// of the whole comparison.
async fn diff_variant(
    state: &AppState,
    account: i64,
    base: &str,
    new: &str,
    client: &str,
    variant: Variant,
    now: i64,
) -> Result<VariantOutcome> {
    let read = |test: &str| {
        let key = store::screenshot_key(test, client, &Picture::Shot(variant));
        async move { state.blobs.get(&key).await }
    };
    let (old_png, new_png) = match (read(base).await, read(new).await) {
        (Ok(Some(a)), Ok(Some(b))) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return Err(Error::internal(
                "reading a screenshot for a diff failed",
                e,
            ))
        }
        _ => {
            return Ok(VariantOutcome::Failed(
                "a screenshot of this variant is missing from storage; reprocess the test that lacks it".into(),
            ))
        }
    };
    let permit = DIFF_SLOTS
        .acquire(account)
        .await
        .map_err(|e| Error::internal("the diff limiter is closed", e))?;
    let result = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        shotdiff::diff(&old_png, &new_png, &shotdiff::Options::default())
    })
    .await
    .map_err(|e| Error::internal("a screenshot diff task failed", e))?;
    let mut d = match result {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(base, new, client, %variant, error = %e, "screenshot diff failed");
            return Ok(VariantOutcome::Failed(e.to_string()));
        }
    };
    let highlight = Picture::Diff {
        base: base.to_string(),
        variant,
    };
    state
        .blobs
        .put(
            &store::screenshot_key(new, client, &highlight),
            std::mem::take(&mut d.highlight_png),
        )
        .await
        .map_err(|e| Error::internal("storing a diff image failed", e))?;
    Ok(VariantOutcome::Diffed {
        diff: Box::new(d),
        diff_image: shots::url(&state.settings, new, client, &highlight, now),
    })
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Polls once: whether the permit was granted without waiting.
    fn ready<F: Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
        match f.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        }
    }

    /// Account A asks for four diffs at once, then B for one: with two global slots, B's diff
    /// gets the second slot at once (without the per-account limit, A's second diff would hold
    /// it), and A's diffs run one after another.
    #[test]
    fn another_accounts_diff_waits_for_at_most_one_of_a_busy_accounts() {
        let slots = DiffSlots::new(2, 1);
        let (a, b) = (1, 2);
        let mut a1 = pin!(slots.acquire(a));
        let a1 = ready(a1.as_mut())
            .expect("A's first diff starts")
            .expect("open");
        let mut a2 = pin!(slots.acquire(a));
        let mut a3 = pin!(slots.acquire(a));
        let mut a4 = pin!(slots.acquire(a));
        assert!(
            ready(a2.as_mut()).is_none(),
            "A's second diff waits for its first"
        );
        assert!(ready(a3.as_mut()).is_none());
        assert!(ready(a4.as_mut()).is_none());
        let mut b1 = pin!(slots.acquire(b));
        let b1 = ready(b1.as_mut())
            .expect("B's diff starts at once")
            .expect("open");
        drop(a1);
        let a2 = ready(a2.as_mut())
            .expect("A's second diff follows")
            .expect("open");
        assert!(ready(a3.as_mut()).is_none(), "one of A's at a time");
        drop(a2);
        let a3 = ready(a3.as_mut())
            .expect("A's third diff follows")
            .expect("open");
        drop((a3, b1));
        let a4 = ready(a4.as_mut())
            .expect("A's last diff follows")
            .expect("open");
        assert_eq!(slots.accounts_tracked(), 1, "B's entry went with its diff");
        drop(a4);
        assert_eq!(
            slots.accounts_tracked(),
            0,
            "no entry outlives its account's diffs"
        );
    }

    /// A request dropped while it waits (the client went away) leaves no entry behind.
    #[test]
    fn a_request_dropped_while_waiting_leaves_nothing_behind() {
        let slots = DiffSlots::new(1, 1);
        let mut first = pin!(slots.acquire(1));
        let first = ready(first.as_mut()).expect("starts").expect("open");
        {
            let mut waiting = Box::pin(slots.acquire(7));
            assert!(
                ready(waiting.as_mut()).is_none(),
                "the global slot is taken"
            );
        }
        drop(first);
        assert_eq!(slots.accounts_tracked(), 0);
    }
}
