//! Reports worked out beside the engines, one per test, claimed by a worker under a lease like
//! render jobs and retried after a failed attempt: the accessibility and content checks
//! ([`CONTENT_CHECKS`]) and the inbox rows ([`crate::INBOX_ROWS`]). Both queues have the same
//! table shape, so the same methods serve both (`*_report`, given the queue); the content check's
//! own names stay for its callers.

use domain::QueueState;
use sqlx::Row;

use crate::{Claim, Key, Outcome, Queue, Result, Store, CONTENT_CHECKS};

/// A report as stored (a content check or a test's inbox rows).
#[derive(Clone, Debug, PartialEq)]
pub struct ReportRow {
    /// `Queued`, `Leased`, `Done` or `Failed` (the engine's part given up).
    pub state: QueueState,
    pub requested_at: i64,
    pub attempts: i64,
    /// Why the last attempt failed, while the report is retried.
    pub last_error: Option<String>,
    /// The JSON report once `done`.
    pub result: Option<String>,
    pub completed_at: Option<i64>,
}

impl Store {
    /// Queues a content check of `test_id` unless one exists already (queued, running or done),
    /// so that repeated requests start it once. True when this call queued it.
    pub async fn request_content_check(&self, test_id: &str, now: i64) -> Result<bool> {
        self.request_report(&CONTENT_CHECKS, test_id, now).await
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
        self.retry_report(&CONTENT_CHECKS, test_id, worker, error, not_before, true)
            .await
    }

    pub async fn content_check(&self, test_id: &str) -> Result<Option<ReportRow>> {
        self.report_row(&CONTENT_CHECKS, test_id).await
    }

    /// Queues `queue`'s report of `test_id` unless one exists already (queued, running or done),
    /// so that repeated requests start it once. True when this call queued it.
    pub async fn request_report(&self, queue: &Queue, test_id: &str, now: i64) -> Result<bool> {
        let res = sqlx::query(&format!(
            "INSERT INTO {} (test_id, state, requested_at, not_before)
             VALUES ($1, 'queued', $2, $2) ON CONFLICT(test_id) DO NOTHING",
            queue.table
        ))
        .bind(test_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Claims the next due report of `queue` in fair order for `worker` until `now + lease_secs`:
    /// the test id and the attempt number (this one included).
    pub async fn claim_report(
        &self,
        queue: &Queue,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<(String, i64)>> {
        self.claim_by_test(queue, &Claim::new(worker, now, lease_secs))
            .await
    }

    /// Stores a claimed report as done; false (nothing written) when the lease was lost.
    pub async fn finish_report(
        &self,
        queue: &Queue,
        test_id: &str,
        worker: &str,
        result: &str,
        now: i64,
    ) -> Result<bool> {
        self.finish_with_report(queue, test_id, worker, result, now)
            .await
    }

    /// Gives a claimed report back, to be claimed again from `not_before`: after a failed
    /// attempt (`counted`), or when what failed was not the work (storage: the attempt is given
    /// back).
    pub async fn retry_report(
        &self,
        queue: &Queue,
        test_id: &str,
        worker: &str,
        error: &str,
        not_before: i64,
        counted: bool,
    ) -> Result<bool> {
        let outcome = Outcome::Retry {
            error: Some(error.into()),
            not_before,
            counted,
        };
        self.finish(queue, &Key::Text(test_id.into()), worker, &outcome)
            .await
    }

    /// `queue`'s report of `test_id`, in whatever state.
    pub async fn report_row(&self, queue: &Queue, test_id: &str) -> Result<Option<ReportRow>> {
        let row = sqlx::query(&format!(
            "SELECT state, requested_at, attempts, last_error, result, completed_at
             FROM {} WHERE test_id = $1",
            queue.table
        ))
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(ReportRow {
                state: queue.parse_state(&r.try_get::<String, _>("state")?)?,
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
