//! Completion webhooks: the per-account default URL and signing secret, and the durable queue of
//! callbacks. A callback row is written in the same transaction as the outcome that completes its
//! test (see [`enqueue_if_complete`]), at most once per test, and is claimed by the delivery worker
//! under a lease like a render job: a delivery in flight when the process dies is retried once the
//! lease expires (at-least-once; every attempt carries the same delivery id).

use sqlx::{Row, SqliteConnection};

use crate::{Result, Store};

/// A callback claimed for delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedCallback {
    pub test_id: String,
    pub account_id: i64,
    pub delivery_id: String,
    pub url: String,
    pub completed_at: i64,
    /// Including this one.
    pub attempts: i64,
}

/// How one delivery attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum CallbackOutcome {
    /// The receiver answered 2xx.
    Delivered { status: u16 },
    /// Try again after `retry_at`.
    Retry {
        error: String,
        status: Option<u16>,
        retry_at: i64,
    },
    /// Give up: the last attempt failed, or the target may never be reached.
    Failed { error: String, status: Option<u16> },
}

/// A test's callback as stored, for the status endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbackRow {
    pub delivery_id: String,
    pub url: String,
    /// `queued`, `leased`, `delivered` or `failed`.
    pub state: String,
    pub completed_at: i64,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub last_status: Option<i64>,
    pub finished_at: Option<i64>,
}

/// Queues the callback of `test_id` if the test is now complete (every client Complete or Bounced,
/// every spam filter answered), has a callback URL (its own, else its account's default) and has
/// no callback yet. Runs inside the caller's transaction, so the outcome that completes a test and
/// its callback are committed together. Returns whether a callback was queued.
pub(crate) async fn enqueue_if_complete(
    conn: &mut SqliteConnection,
    test_id: &str,
    now: i64,
) -> Result<bool> {
    let res = sqlx::query(
        "INSERT INTO callbacks (test_id, delivery_id, url, state, completed_at, not_before)
         SELECT t.id, lower(hex(randomblob(16))), COALESCE(t.callback_url, a.webhook_url), 'queued',
                ?, ?
         FROM tests t JOIN accounts a ON a.id = t.account_id
         WHERE t.id = ? AND t.purged_at IS NULL
           AND COALESCE(t.callback_url, a.webhook_url) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM test_clients c
                           WHERE c.test_id = t.id AND c.status NOT IN ('Complete', 'Bounced'))
           AND NOT EXISTS (SELECT 1 FROM spam_results s WHERE s.test_id = t.id AND s.spam IS NULL)
           AND (EXISTS (SELECT 1 FROM test_clients c WHERE c.test_id = t.id)
                OR EXISTS (SELECT 1 FROM spam_results s WHERE s.test_id = t.id))
         ON CONFLICT (test_id) DO NOTHING",
    )
    .bind(now)
    .bind(now)
    .bind(test_id)
    .execute(&mut *conn)
    .await?;
    Ok(res.rows_affected() > 0)
}

impl Store {
    /// Claims the next due callback for `worker` until `now + lease_secs`: a queued one whose
    /// backoff has passed, or a leased one whose worker stopped answering (lease expired).
    pub async fn claim_callback(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<ClaimedCallback>> {
        // One statement picks and leases the row, so two workers never claim the same callback.
        let row = sqlx::query(
            "UPDATE callbacks
             SET state = 'leased', lease_owner = ?, lease_expires = ?, attempts = attempts + 1
             WHERE test_id = (
                SELECT test_id FROM callbacks
                WHERE (state = 'queued' AND not_before <= ?) OR (state = 'leased' AND lease_expires < ?)
                ORDER BY not_before, test_id LIMIT 1)
             RETURNING test_id, delivery_id, url, completed_at, attempts,
                (SELECT account_id FROM tests WHERE id = callbacks.test_id) AS account_id",
        )
        .bind(worker)
        .bind(now + lease_secs)
        .bind(now)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(ClaimedCallback {
                test_id: r.try_get("test_id")?,
                account_id: r.try_get("account_id")?,
                delivery_id: r.try_get("delivery_id")?,
                url: r.try_get("url")?,
                completed_at: r.try_get("completed_at")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .transpose()
    }

    /// Records how an attempt ended. Ignored (false) when the lease was lost meanwhile: another
    /// worker owns the callback now and its attempt decides.
    pub async fn finish_callback(
        &self,
        claimed: &ClaimedCallback,
        worker: &str,
        now: i64,
        outcome: &CallbackOutcome,
    ) -> Result<bool> {
        let (state, not_before, error, status, finished) = match outcome {
            CallbackOutcome::Delivered { status } => {
                ("delivered", now, None, Some(*status), Some(now))
            }
            CallbackOutcome::Retry {
                error,
                status,
                retry_at,
            } => ("queued", *retry_at, Some(error.as_str()), *status, None),
            CallbackOutcome::Failed { error, status } => {
                ("failed", now, Some(error.as_str()), *status, Some(now))
            }
        };
        let res = sqlx::query(
            "UPDATE callbacks SET state = ?, not_before = ?, last_error = ?, last_status = ?,
                finished_at = ?, lease_owner = NULL, lease_expires = NULL
             WHERE test_id = ? AND state = 'leased' AND lease_owner = ?",
        )
        .bind(state)
        .bind(not_before)
        .bind(error)
        .bind(status.map(i64::from))
        .bind(finished)
        .bind(&claimed.test_id)
        .bind(worker)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// The callback URL a test will be (or was) called back at: its own, else its account's
    /// default; and its callback once queued.
    pub async fn test_callback(
        &self,
        test_id: &str,
    ) -> Result<(Option<String>, Option<CallbackRow>)> {
        let url: Option<String> = sqlx::query_scalar(
            "SELECT COALESCE(t.callback_url, a.webhook_url)
             FROM tests t JOIN accounts a ON a.id = t.account_id WHERE t.id = ?",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?
        .flatten();
        let row = sqlx::query(
            "SELECT delivery_id, url, state, completed_at, attempts, last_error, last_status,
                finished_at
             FROM callbacks WHERE test_id = ?",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?;
        let row = row
            .map(|r| {
                Ok::<_, crate::StoreError>(CallbackRow {
                    delivery_id: r.try_get("delivery_id")?,
                    url: r.try_get("url")?,
                    state: r.try_get("state")?,
                    completed_at: r.try_get("completed_at")?,
                    attempts: r.try_get("attempts")?,
                    last_error: r.try_get("last_error")?,
                    last_status: r.try_get("last_status")?,
                    finished_at: r.try_get("finished_at")?,
                })
            })
            .transpose()?;
        Ok((row.as_ref().map(|r| r.url.clone()).or(url), row))
    }

    /// The account's default callback URL.
    pub async fn webhook_url(&self, account_id: i64) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT webhook_url FROM accounts WHERE id = ?")
                .bind(account_id)
                .fetch_optional(&self.pool)
                .await?
                .flatten(),
        )
    }

    /// Sets (or with `None` clears) the account's default callback URL.
    pub async fn set_webhook_url(&self, account_id: i64, url: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE accounts SET webhook_url = ? WHERE id = ?")
            .bind(url)
            .bind(account_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The account's webhook signing secret, made from `candidate` the first time it is asked
    /// for (the API and the delivery worker may ask first; whichever does, both see one secret).
    /// `None` when the account does not exist.
    pub async fn webhook_secret(&self, account_id: i64, candidate: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "UPDATE accounts SET webhook_secret = COALESCE(webhook_secret, ?) WHERE id = ?
             RETURNING webhook_secret",
        )
        .bind(candidate)
        .bind(account_id)
        .fetch_optional(&self.pool)
        .await?)
    }
}
