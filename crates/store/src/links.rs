//! Link validation requests and their results, claimed by a worker under a lease like render jobs.

use sqlx::Row;

use crate::fair::Queue;
use crate::{Result, Store};

/// A link check as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkCheckRow {
    /// `queued`, `leased` or `done`.
    pub state: String,
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

    /// Claims the oldest queued check, or one whose lease expired, for `worker` until
    /// `now + lease_secs`. Returns the test id and the attempt number (this one included).
    pub async fn claim_link_check(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<(String, i64)>> {
        self.claim_test_queue_row(
            Queue::LinkChecks,
            "state = 'queued'",
            worker,
            now,
            lease_secs,
        )
        .await
    }

    /// Claims, for `worker` until `now + lease_secs`, the next row in fair order (see
    /// [`crate::fair`]) of a queue keyed by test (link checks, content checks) that is due by
    /// `queued_due` (its columns as `q.`, `$3` = now) or whose lease expired. One statement, skipping rows other claimers hold on PostgreSQL. Returns the
    /// test id and the attempt number (this one included).
    pub(crate) async fn claim_test_queue_row(
        &self,
        queue: Queue,
        queued_due: &'static str,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<(String, i64)>> {
        let mut tx = self.pool.begin().await?;
        let fair = self.fair(queue);
        fair.lock(&mut tx).await?;
        let table = queue.table();
        let sql = format!(
            "UPDATE {table}
             SET state = 'leased', lease_owner = $1, lease_expires = $2, attempts = attempts + 1
             WHERE test_id = (
                SELECT q.test_id FROM {}
                WHERE (({queued_due}) OR (q.state = 'leased' AND q.lease_expires < $3)) AND {}
                ORDER BY {} q.requested_at LIMIT 1 {})
             RETURNING test_id, attempts",
            fair.from("$3"),
            fair.filter(),
            fair.order(),
            fair.skip_locked()
        );
        let row = sqlx::query(&sql)
            .bind(worker)
            .bind(now + lease_secs)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        let claimed: Option<(String, i64)> = row
            .map(|r| Ok::<_, crate::StoreError>((r.try_get("test_id")?, r.try_get("attempts")?)))
            .transpose()?;
        if let Some((test_id, _)) = &claimed {
            fair.served(&mut tx, test_id).await?;
        }
        tx.commit().await?;
        Ok(claimed)
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
        let res = sqlx::query(
            "UPDATE link_checks SET state = 'done', result = $1, completed_at = $2, lease_owner = NULL,
                lease_expires = NULL
             WHERE test_id = $3 AND state = 'leased' AND lease_owner = $4",
        )
        .bind(result)
        .bind(now)
        .bind(test_id)
        .bind(worker)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
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
                state: r.try_get("state")?,
                requested_at: r.try_get("requested_at")?,
                result: r.try_get("result")?,
                completed_at: r.try_get("completed_at")?,
            })
        })
        .transpose()
    }
}
