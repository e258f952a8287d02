//! The completion-webhook worker: claims queued callbacks under a lease, POSTs each test's signed
//! summary through the network policy (`content::fetch::post`, the fetcher's one client) and
//! records the answer: 2xx is delivered; any other answer or a network error is retried with
//! exponential backoff and jitter up to `[webhooks] max_attempts`, then marked failed; a target
//! the policy refuses fails at once. A delivery in flight when the process dies is claimed again
//! when its lease expires, so a callback may arrive twice but is never lost; the delivery id lets
//! receivers dedupe.

use std::time::Duration;

use background::{Held, Loops, Slot};
use content::fetch::FetchError;
use content::NetPolicy;
use rand::Rng;
use serde::Deserialize;
use store::{CallbackOutcome, ClaimedCallback, Key, Store};
use tokio_util::sync::CancellationToken;

use crate::summary::{self as webhook, Summary};

/// How completion callbacks are retried (the `[webhooks]` section of the settings file).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retries {
    /// Attempts before a callback is marked failed.
    pub max_attempts: i64,
    /// Seconds before the first retry; each later retry waits twice as long (with jitter).
    pub base_delay: u64,
    /// Longest wait between two attempts, in seconds.
    pub max_delay: u64,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            max_attempts: 8,
            base_delay: 30,
            max_delay: 3600,
        }
    }
}

/// What stops one delivery from being recorded (the claim loop logs it and backs off; the
/// callback's lease hands it on).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot encode the callback summary: {0}")]
    Encode(#[from] serde_json::Error),
}

/// How often the queue is looked at: callbacks are queued by other tasks' transactions (the
/// render worker, the inbox processor), and retries fall due as time passes.
const POLL: Duration = Duration::from_secs(1);

/// The callback queue with the configured backoff (doubling from `base_delay` up to `max_delay`,
/// up to half taken off at random so that receivers coming back up are not hit by every retry at
/// once) and attempts.
fn queue(settings: &Retries) -> store::Queue {
    let secs = |s: u64| i64::try_from(s).unwrap_or(i64::MAX);
    store::CALLBACKS.with_backoff(
        store::Backoff::doubling(secs(settings.base_delay), secs(settings.max_delay)),
        settings.max_attempts,
    )
}

pub struct DeliveryWorker {
    pub store: Store,
    pub policy: NetPolicy,
    pub retries: Retries,
}

impl DeliveryWorker {
    fn loops(&self, workers: usize) -> Loops {
        Loops::new(&self.store, &store::CALLBACKS, workers, None, POLL)
    }

    /// Runs `workers` delivery loops at once, so that while one account's receiver is slow
    /// another account's callback finds a free worker (the store's per-account cap keeps one
    /// account from taking them all).
    pub async fn run(self, cancel: CancellationToken, workers: usize) {
        let this = &self;
        this.loops(workers)
            .run(
                cancel,
                |slot| async move { this.claim(&slot).await },
                |slot, held, callback| async move { this.deliver(&slot, &held, callback).await },
            )
            .await;
    }

    /// Delivers one due callback as `worker` (under the heartbeat, as the loops do); false when
    /// none is due.
    pub async fn run_one(&self, worker: &str) -> Result<bool, DeliveryError> {
        self.loops(1)
            .turn_as(
                worker,
                |slot| async move { self.claim(&slot).await },
                |slot, held, callback| async move { self.deliver(&slot, &held, callback).await },
            )
            .await
    }

    async fn claim(&self, slot: &Slot) -> Result<Option<(Key, ClaimedCallback)>, DeliveryError> {
        let now = chrono::Utc::now().timestamp();
        let claimed = self
            .store
            .claim_callback(&slot.owner, now, slot.lease_secs())
            .await?;
        Ok(claimed.map(|c| (Key::Text(c.test_id.clone()), c)))
    }

    async fn deliver(
        &self,
        slot: &Slot,
        held: &Held,
        callback: ClaimedCallback,
    ) -> Result<(), DeliveryError> {
        let store = &self.store;
        // A test (or account) deleted meanwhile takes its callback row with it.
        let Some(test) = store.test_any_account(&callback.test_id).await? else {
            return Ok(());
        };
        let Some(secret) = store
            .webhook_secret(callback.account_id, &webhook::new_secret())
            .await?
        else {
            return Ok(());
        };
        let clients = store.test_clients(&test.id).await?;
        let spam = store.spam_results(&test.id).await?;
        let requirements = match store.sender_requirements(&test.id).await {
            Ok(found) => found.map(|(report, _)| report),
            Err(e @ store::StoreError::Corrupt(_)) => {
                tracing::error!(test_id = %test.id, error = %e, "a stored sender-requirements report does not read back; the callback goes without it");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let body =
            Summary::build(&callback, &test, &clients, &spam, requirements.as_ref()).to_body()?;
        // A POST cannot be taken back: one taken over while this worker's renewals failed is
        // sent by its holder, not also from here.
        if !held.confirm().await? {
            held.refused();
            tracing::warn!(test_id = %callback.test_id, delivery_id = %callback.delivery_id,
                "callback lease taken over before sending; not sent from here (its holder sends it)");
            return Ok(());
        }
        let sent_at = chrono::Utc::now().timestamp();
        let headers = [
            (
                webhook::SIGNATURE_HEADER,
                webhook::signature(&secret, sent_at, &body),
            ),
            (webhook::DELIVERY_HEADER, callback.delivery_id.clone()),
            (webhook::EVENT_HEADER, webhook::EVENT_COMPLETED.to_owned()),
        ];
        let answer = content::fetch::post(
            &callback.url,
            "application/json",
            &headers,
            body,
            &self.policy,
        )
        .await;
        let outcome = outcome(&callback, answer, &self.retries, rand::thread_rng().gen());
        log(&callback, &outcome);
        let recorded = store
            .finish_callback(
                &callback,
                &slot.owner,
                chrono::Utc::now().timestamp(),
                &outcome,
            )
            .await?;
        if !recorded {
            held.refused();
            tracing::warn!(test_id = %callback.test_id, delivery_id = %callback.delivery_id,
                "callback outcome not recorded (a callback is finished once): its lease was taken over");
        }
        Ok(())
    }
}

/// What an attempt's answer means for the callback.
fn outcome(
    callback: &ClaimedCallback,
    answer: Result<u16, FetchError>,
    settings: &Retries,
    jitter: f64,
) -> CallbackOutcome {
    let (error, status) = match answer {
        Ok(status) if (200..300).contains(&status) => return CallbackOutcome::Delivered { status },
        Ok(status) => (
            format!("the receiver answered HTTP {status}; a 2xx answer is needed"),
            Some(status),
        ),
        // Retrying cannot change the policy's verdict on an address; a name whose addresses
        // change is judged again only if the account fixes the URL and a new test completes.
        Err(
            e @ (FetchError::RefusedAddress { .. }
            | FetchError::RefusedHost { .. }
            | FetchError::InvalidUrl { .. }
            | FetchError::UnsupportedScheme { .. }),
        ) => {
            return CallbackOutcome::Failed {
                error: format!("refused by the network policy: {e}"),
                status: None,
            }
        }
        Err(e) => (e.to_string(), None),
    };
    let queue = queue(settings);
    if queue.gives_up(callback.attempts) {
        return CallbackOutcome::Failed {
            error: format!(
                "gave up after {} attempts; the last: {error}",
                callback.attempts
            ),
            status,
        };
    }
    let wait = queue.backoff.delay_secs(callback.attempts, jitter);
    CallbackOutcome::Retry {
        error,
        status,
        retry_at: chrono::Utc::now().timestamp().saturating_add(wait),
    }
}

fn log(callback: &ClaimedCallback, outcome: &CallbackOutcome) {
    let host = url::Url::parse(&callback.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let (test_id, delivery_id, attempt) =
        (&callback.test_id, &callback.delivery_id, callback.attempts);
    match outcome {
        CallbackOutcome::Delivered { status } => {
            tracing::info!(%test_id, %delivery_id, %host, attempt, status, "callback delivered")
        }
        CallbackOutcome::Retry {
            error, retry_at, ..
        } => {
            tracing::warn!(%test_id, %delivery_id, %host, attempt, %error, retry_at, "callback not delivered; will retry")
        }
        CallbackOutcome::Failed { error, .. } => {
            tracing::warn!(%test_id, %delivery_id, %host, attempt, %error, "callback failed for good")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Retries {
        Retries {
            max_attempts: 4,
            base_delay: 10,
            max_delay: 60,
        }
    }

    fn claimed(attempts: i64) -> ClaimedCallback {
        ClaimedCallback {
            test_id: "t".into(),
            account_id: 1,
            delivery_id: "d".into(),
            url: "https://hooks.example/".into(),
            completed_at: 0,
            attempts,
        }
    }

    #[test]
    fn answers_map_to_delivered_retry_and_failed() {
        let s = settings();
        assert_eq!(
            outcome(&claimed(1), Ok(204), &s, 0.0),
            CallbackOutcome::Delivered { status: 204 }
        );
        match outcome(&claimed(1), Ok(500), &s, 0.0) {
            CallbackOutcome::Retry {
                status, retry_at, ..
            } => {
                assert_eq!(status, Some(500));
                let now = chrono::Utc::now().timestamp();
                assert!((now + 9..=now + 11).contains(&retry_at), "{retry_at}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            outcome(&claimed(4), Ok(302), &s, 0.0),
            CallbackOutcome::Failed { status: Some(302), ref error } if error.contains("gave up after 4")
        ));
        let refused = outcome(
            &claimed(1),
            Err(FetchError::RefusedHost {
                host: "localhost".into(),
            }),
            &s,
            0.0,
        );
        assert!(matches!(
            refused,
            CallbackOutcome::Failed { status: None, ref error } if error.starts_with("refused by the network policy")
        ));
    }
}
