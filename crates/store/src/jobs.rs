//! The durable render queue. Jobs are claimed under a lease; an expired lease makes a job
//! claimable again, so a worker that dies mid-render delays that screenshot but never loses it, and
//! several worker processes (on several machines, once the database is shared) can drain one queue.

use domain::Variant;
use sqlx::Row;

use crate::{Result, Store, StoreError};

#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedJob {
    pub id: i64,
    pub test_id: String,
    pub client_id: String,
    pub variant: Variant,
    /// Including this one.
    pub attempts: i64,
}

#[derive(Clone, Debug)]
pub enum JobOutcome {
    /// The screenshot is stored. `engine` and `rule_set` say what made it.
    Done { engine: String, rule_set: String },
    /// Try again after `retry_at`.
    Retry { error: String, retry_at: i64 },
    /// Give up: the client's screenshots are Bounced with this code and message.
    Bounce { code: String, message: String },
}

impl Store {
    /// Claims the next due job for `worker` until `now + lease_secs`, marking its client
    /// Processing. Returns `None` when nothing is due.
    pub async fn claim_job(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<ClaimedJob>> {
        let mut tx = self.pool.begin().await?;
        let fair = self.fair(crate::fair::Queue::Render);
        fair.lock(&mut tx).await?;
        // One statement picks and leases the job, so two workers can never claim the same one.
        let sql = format!(
            "UPDATE render_jobs
             SET state = 'leased', lease_owner = $1, lease_expires = $2, attempts = attempts + 1
             WHERE id = (
                SELECT q.id FROM {}
                WHERE ((q.state = 'queued' AND q.not_before <= $3) OR (q.state = 'leased' AND q.lease_expires < $3))
                  AND {}
                ORDER BY {} q.not_before, q.id LIMIT 1 {})
             RETURNING id, test_id, client_id, variant, attempts",
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
        let Some(row) = row else {
            tx.commit().await?;
            return Ok(None);
        };
        let variant: String = row.try_get("variant")?;
        let job = ClaimedJob {
            id: row.try_get("id")?,
            test_id: row.try_get("test_id")?,
            client_id: row.try_get("client_id")?,
            variant: Variant::parse(&variant)
                .ok_or_else(|| StoreError::Corrupt(format!("variant {variant:?}")))?,
            attempts: row.try_get("attempts")?,
        };
        fair.served(&mut tx, &job.test_id).await?;
        sqlx::query(
            "UPDATE test_clients
             SET status = 'Processing', processing_at = COALESCE(processing_at, $1),
                 attempts = CASE WHEN attempts > $2 THEN attempts ELSE $2 END
             WHERE test_id = $3 AND client_id = $4 AND status IN ('Pending', 'Processing')",
        )
        .bind(now)
        .bind(job.attempts)
        .bind(&job.test_id)
        .bind(&job.client_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(job))
    }

    /// Records how a claimed job ended. Ignored (returns false) when the lease was lost meanwhile,
    /// e.g. the screenshot was requeued as stalled and someone else owns it now.
    pub async fn finish_job(
        &self,
        job: &ClaimedJob,
        worker: &str,
        now: i64,
        outcome: &JobOutcome,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        crate::callbacks::lock_test_first(&mut tx, self.backend, &job.test_id).await?;
        let (state, not_before, error) = match outcome {
            JobOutcome::Done { .. } => ("done", now, None),
            JobOutcome::Retry { error, retry_at } => ("queued", *retry_at, Some(error.clone())),
            JobOutcome::Bounce { message, .. } => ("failed", now, Some(message.clone())),
        };
        let res = sqlx::query(
            "UPDATE render_jobs SET state = $1, not_before = $2, last_error = $3, lease_owner = NULL,
                lease_expires = NULL
             WHERE id = $4 AND state = 'leased' AND lease_owner = $5",
        )
        .bind(state)
        .bind(not_before)
        .bind(error)
        .bind(job.id)
        .bind(worker)
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            tx.commit().await?;
            return Ok(false);
        }
        match outcome {
            JobOutcome::Done { engine, rule_set } => {
                sqlx::query(
                    "UPDATE test_clients SET engine = $1, rule_set = $2 WHERE test_id = $3 AND client_id = $4",
                )
                .bind(engine)
                .bind(rule_set)
                .bind(&job.test_id)
                .bind(&job.client_id)
                .execute(&mut *tx)
                .await?;
                // The client is Complete once every one of its variants is.
                sqlx::query(
                    "UPDATE test_clients SET status = 'Complete', completed_at = $1
                     WHERE test_id = $2 AND client_id = $3 AND status <> 'Bounced'
                       AND NOT EXISTS (SELECT 1 FROM render_jobs
                                       WHERE test_id = $4 AND client_id = $5 AND state <> 'done')",
                )
                .bind(now)
                .bind(&job.test_id)
                .bind(&job.client_id)
                .bind(&job.test_id)
                .bind(&job.client_id)
                .execute(&mut *tx)
                .await?;
            }
            JobOutcome::Retry { .. } => {}
            JobOutcome::Bounce { code, message } => {
                // One variant that cannot be drawn bounces the client: its other variants would
                // show the same failure.
                sqlx::query(
                    "UPDATE render_jobs SET state = 'failed', lease_owner = NULL, lease_expires = NULL
                     WHERE test_id = $1 AND client_id = $2 AND state <> 'done'",
                )
                .bind(&job.test_id)
                .bind(&job.client_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE test_clients SET status = 'Bounced', bounce_code = $1, bounce_message = $2,
                        completed_at = NULL, processing_at = NULL
                     WHERE test_id = $3 AND client_id = $4",
                )
                .bind(code)
                .bind(message)
                .bind(&job.test_id)
                .bind(&job.client_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        if !matches!(outcome, JobOutcome::Retry { .. }) {
            // In this transaction: the outcome that completes a test and its callback commit
            // together, so a crash between the two cannot lose the callback.
            crate::callbacks::enqueue_if_complete(&mut tx, self.backend, &job.test_id, now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Counts jobs not yet done or failed: for progress logs and tests.
    pub async fn pending_jobs(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM render_jobs WHERE state IN ('queued', 'leased')",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
