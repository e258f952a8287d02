//! Accessibility and content check requests and their results, claimed by a worker under a lease
//! like render jobs, retried after a failed attempt.

use domain::QueueState;
use sqlx::Row;

use crate::{Claim, Key, Outcome, Result, Store, CONTENT_CHECKS};

/// A content check as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentCheckRow {
    /// `Queued`, `Leased`, `Done` or `Failed` (the engine's part given up).
    pub state: QueueState,
    pub requested_at: i64,
    pub attempts: i64,
    /// Why the last attempt failed, while the check is retried.
    pub last_error: Option<String>,
    /// The JSON report once `done`.
    pub result: Option<String>,
    pub completed_at: Option<i64>,
}

impl Store {
    /// Queues a content check of `test_id` unless one exists already (queued, running or done),
    /// so that repeated requests start it once. True when this call queued it.
    pub async fn request_content_check(&self, test_id: &str, now: i64) -> Result<bool> {
        let res = sqlx::query(
            "INSERT INTO content_checks (test_id, state, requested_at, not_before)
             VALUES ($1, 'queued', $2, $2) ON CONFLICT(test_id) DO NOTHING",
        )
        .bind(test_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Claims the next due check in fair order (queued and past its `not_before`, or leased with
    /// an expired lease) for `worker` until `now + lease_secs`. Returns the test id and the
    /// attempt number (this one included).
    pub async fn claim_content_check(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<(String, i64)>> {
        self.claim_by_test(&CONTENT_CHECKS, &Claim::new(worker, now, lease_secs))
            .await
    }

    /// Stores the result of a claimed check. Ignored (false) when the lease was lost meanwhile.
    pub async fn finish_content_check(
        &self,
        test_id: &str,
        worker: &str,
        result: &str,
        now: i64,
    ) -> Result<bool> {
        self.finish_with_report(&CONTENT_CHECKS, test_id, worker, result, now)
            .await
    }

    /// Gives a claimed check back after a failed attempt, to be claimed again from `not_before`.
    pub async fn retry_content_check(
        &self,
        test_id: &str,
        worker: &str,
        error: &str,
        not_before: i64,
    ) -> Result<bool> {
        let outcome = Outcome::Retry {
            error: Some(error.into()),
            not_before,
            counted: true,
        };
        self.finish(
            &CONTENT_CHECKS,
            &Key::Text(test_id.into()),
            worker,
            &outcome,
        )
        .await
    }

    pub async fn content_check(&self, test_id: &str) -> Result<Option<ContentCheckRow>> {
        let row = sqlx::query(
            "SELECT state, requested_at, attempts, last_error, result, completed_at
             FROM content_checks WHERE test_id = $1",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(ContentCheckRow {
                state: CONTENT_CHECKS.parse_state(&r.try_get::<String, _>("state")?)?,
                requested_at: r.try_get("requested_at")?,
                attempts: r.try_get("attempts")?,
                last_error: r.try_get("last_error")?,
                result: r.try_get("result")?,
                completed_at: r.try_get("completed_at")?,
            })
        })
        .transpose()
    }
}
