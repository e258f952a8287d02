//! The durable render queue. Jobs are claimed under a lease; an expired lease makes a job
//! claimable again, so a worker that dies mid-render delays that screenshot but never loses it, and
//! several worker processes (on several machines, once the database is shared) can drain one queue.

use domain::{QueueState, Spelled, Variant};
use sqlx::Row;

use crate::{Claim, Key, Outcome, Result, Store, StoreError, RENDER};

#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedJob {
    pub id: i64,
    pub test_id: String,
    pub client_id: String,
    pub variant: Variant,
    /// Including this one. A job released for a fault of storage or the database gives its
    /// attempt back: attempts count what the email did to the engine.
    pub attempts: i64,
    /// The worker whose lease had expired when this claim took the job over, if any.
    pub taken_over_from: Option<String>,
}

#[derive(Clone, Debug)]
pub enum JobOutcome {
    /// The screenshot is stored. `engine` says what drew it; `shot` by which rule set, what its
    /// page could not load and whether it overflowed the window.
    Done {
        engine: String,
        shot: crate::ShotFacts,
    },
    /// Try again after `retry_at`.
    Retry { error: String, retry_at: i64 },
    /// Give up: the client's screenshots are Bounced with this code and message.
    Bounce { code: String, message: String },
    /// Not the email's fault (storage or the database failed): try again after `retry_at`
    /// without counting this attempt, however often it happens.
    Release { error: String, retry_at: i64 },
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
        self.claim_job_for(worker, now, lease_secs, None).await
    }

    /// [`Store::claim_job`], limited to jobs of `clients` when given: a process whose engines
    /// draw only some clients never takes (and bounces) the others' jobs. An empty list claims
    /// nothing.
    pub async fn claim_job_for(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
        clients: Option<&[String]>,
    ) -> Result<Option<ClaimedJob>> {
        let mut tx = self.pool.begin().await?;
        let mut claim = Claim::new(worker, now, lease_secs);
        claim.only = clients.map(|c| ("client_id", c));
        let claimed = RENDER
            .claim_in(
                self,
                &mut tx,
                &claim,
                "test_id, client_id, variant, taken_over_from",
            )
            .await?;
        let Some((claimed, row)) = claimed else {
            tx.commit().await?;
            return Ok(None);
        };
        let Key::Int(id) = claimed.key else {
            return Err(StoreError::Corrupt(
                "a render job's id is not a number".into(),
            ));
        };
        let variant: String = row.try_get("variant")?;
        let job = ClaimedJob {
            id,
            test_id: row.try_get("test_id")?,
            client_id: row.try_get("client_id")?,
            variant: Variant::parse_known(&variant)?,
            attempts: claimed.attempts,
            taken_over_from: row.try_get("taken_over_from")?,
        };
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

    /// Extends `worker`'s lease of `job` to `until` (the heartbeat of a worker still on it).
    /// False when the lease is no longer `worker`'s: it expired and another worker took the job
    /// over, or the job was requeued as stalled.
    pub async fn renew_job_lease(
        &self,
        job: &ClaimedJob,
        worker: &str,
        until: i64,
    ) -> Result<bool> {
        self.renew_lease(&RENDER, &Key::Int(job.id), worker, until)
            .await
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
        let generic = match outcome {
            JobOutcome::Done { .. } => Outcome::Done,
            JobOutcome::Retry { error, retry_at } => Outcome::Retry {
                error: Some(error.clone()),
                not_before: *retry_at,
                counted: true,
            },
            JobOutcome::Bounce { message, .. } => Outcome::GiveUp {
                error: Some(message.clone()),
            },
            JobOutcome::Release { error, retry_at } => Outcome::Retry {
                error: Some(error.clone()),
                not_before: *retry_at,
                counted: false,
            },
        };
        let finished = RENDER
            .finish_in(&mut tx, &Key::Int(job.id), worker, &generic, &[])
            .await?;
        if !finished {
            tx.commit().await?;
            return Ok(false);
        }
        match outcome {
            JobOutcome::Done { engine, shot } => {
                let rule_set = shot.rule_set.as_deref();
                sqlx::query(
                    "UPDATE render_jobs SET failed_resources = $1, overflow_width = $2, rule_set = $3
                     WHERE id = $4",
                )
                .bind(serde_json::to_string(&shot.failed)?)
                .bind(shot.overflow_width.map(i64::from))
                .bind(rule_set)
                .bind(job.id)
                .execute(&mut *tx)
                .await?;
                // The client's rule set is its default screenshot's, whichever variant finishes
                // last (a landscape one may name a zoom-out the default does not have).
                let default = job.variant == domain::Variant::Default;
                sqlx::query(
                    "UPDATE test_clients SET engine = $1,
                        rule_set = CASE WHEN $2 = 1 OR rule_set IS NULL THEN $3 ELSE rule_set END
                     WHERE test_id = $4 AND client_id = $5",
                )
                .bind(engine)
                .bind(i64::from(default))
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
            JobOutcome::Retry { .. } | JobOutcome::Release { .. } => {}
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
        if matches!(outcome, JobOutcome::Done { .. } | JobOutcome::Bounce { .. }) {
            // In this transaction: the outcome that completes a test and its callback commit
            // together, so a crash between the two cannot lose the callback.
            crate::callbacks::enqueue_if_complete(&mut tx, self.backend, &job.test_id, now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// A render job's state and lease owner (`None` when it is gone): for saying why a worker's
    /// finish or renewal was refused.
    pub async fn job_holder(&self, id: i64) -> Result<Option<(QueueState, Option<String>)>> {
        let row = sqlx::query("SELECT state, lease_owner FROM render_jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let state = RENDER.parse_state(&r.try_get::<String, _>("state")?)?;
            Ok((state, r.try_get("lease_owner")?))
        })
        .transpose()
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
