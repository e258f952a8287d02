//! Link validation requests and their results, claimed by a worker under a lease like render jobs.

use domain::QueueState;
use sqlx::Row;

use crate::{Claim, Claimed, Key, Outcome, Queue, Result, Store, LINK_CHECKS};

/// A link check as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkCheckRow {
    /// `Queued`, `Leased` or `Done`.
    pub state: QueueState,
    pub requested_at: i64,
    /// The JSON report once `done`.
    pub result: Option<String>,
    pub completed_at: Option<i64>,
}

impl Store {
    /// Queues a link check of `test_id`, replacing an earlier result (the email's links may answer
    /// differently now). A check already running keeps its lease; its result is then discarded.
    pub async fn request_link_check(&self, test_id: &str, now: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO link_checks (test_id, state, requested_at) VALUES ($1, 'queued', $2)
             ON CONFLICT(test_id) DO UPDATE SET state = 'queued', requested_at = excluded.requested_at,
                lease_owner = NULL, lease_expires = NULL, attempts = 0, result = NULL,
                completed_at = NULL",
        )
        .bind(test_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Claims the next due check in fair order (a queued one, or one whose lease expired) for
    /// `worker` until `now + lease_secs`. Returns the test id and the attempt number (this one
    /// included).
    pub async fn claim_link_check(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<(String, i64)>> {
        self.claim_by_test(&LINK_CHECKS, &Claim::new(worker, now, lease_secs))
            .await
    }

    /// [`Store::claim`] on a queue keyed by test: the test id and the attempt number.
    pub(crate) async fn claim_by_test(
        &self,
        queue: &Queue,
        claim: &Claim<'_>,
    ) -> Result<Option<(String, i64)>> {
        match self.claim(queue, claim).await? {
            None => Ok(None),
            Some(Claimed {
                key: Key::Text(test_id),
                attempts,
            }) => Ok(Some((test_id, attempts))),
            Some(other) => Err(crate::StoreError::Corrupt(format!(
                "{} keyed by {:?}, not a test id",
                queue.name, other.key
            ))),
        }
    }

    /// Stores the result of a claimed check. Ignored (false) when the lease was lost meanwhile or
    /// the check was requested again.
    pub async fn finish_link_check(
        &self,
        test_id: &str,
        worker: &str,
        result: &str,
        now: i64,
    ) -> Result<bool> {
        self.finish_with_report(&LINK_CHECKS, test_id, worker, result, now)
            .await
    }

    /// Ends a claimed check of a queue keyed by test as done, with its JSON report.
    pub(crate) async fn finish_with_report(
        &self,
        queue: &Queue,
        test_id: &str,
        worker: &str,
        result: &str,
        now: i64,
    ) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        queue
            .finish_in(
                &mut conn,
                &Key::Text(test_id.into()),
                worker,
                &Outcome::Done,
                &[("result", result.into()), ("completed_at", now.into())],
            )
            .await
    }

    pub async fn link_check(&self, test_id: &str) -> Result<Option<LinkCheckRow>> {
        let row = sqlx::query(
            "SELECT state, requested_at, result, completed_at FROM link_checks WHERE test_id = $1",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(LinkCheckRow {
                state: LINK_CHECKS.parse_state(&r.try_get::<String, _>("state")?)?,
                requested_at: r.try_get("requested_at")?,
                result: r.try_get("result")?,
                completed_at: r.try_get("completed_at")?,
            })
        })
        .transpose()
    }
}
