//! Completion webhooks: the per-account default URL and signing secret, and the durable queue of
//! callbacks. A callback row is written in the same transaction as the outcome that completes its
//! test (see [`enqueue_if_complete`]), at most once per test, and is claimed by the delivery worker
//! under a lease like a render job: a delivery in flight when the process dies is retried once the
//! lease expires (at-least-once; every attempt carries the same delivery id).

use domain::QueueState;
use sqlx::{AnyConnection, Row};

use crate::sql::Arg;
use crate::{Backend, Claim, Key, Outcome, Result, Store, CALLBACKS};

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
    /// `Queued`, `Leased`, `Delivered` or `Failed`; spelled as stored in the status endpoint.
    pub state: QueueState,
    pub completed_at: i64,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub last_status: Option<i64>,
    pub finished_at: Option<i64>,
}

/// Takes the row of `test_id` on PostgreSQL, as the first statement of a transaction that records
/// an outcome of the test (render job, spam verdict) and may then queue its callback: every such
/// transaction locks the test row before any other row, so they cannot deadlock (taking it only
/// in [`enqueue_if_complete`], after the outcome's own rows, let two finishing workers deadlock,
/// as `scale_bench` showed). SQLite needs no lock, and a read first would break its write-first
/// rule (a read-to-write upgrade fails as "database is locked" under concurrency).
pub(crate) async fn lock_test_first(
    conn: &mut AnyConnection,
    backend: Backend,
    test_id: &str,
) -> Result<()> {
    if backend == Backend::Postgres {
        lock_test(conn, backend, test_id).await?;
    }
    Ok(())
}

async fn lock_test(conn: &mut AnyConnection, backend: Backend, test_id: &str) -> Result<()> {
    sqlx::query(&format!(
        "SELECT id FROM tests WHERE id = $1 {}",
        backend.lock_row()
    ))
    .bind(test_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(())
}

/// Queues the callback of `test_id` if the test is now complete (every client Complete or Bounced,
/// every spam filter answered), has a callback URL (its own, else its account's default) and has
/// no callback yet. Runs inside the caller's transaction, so the outcome that completes a test and
/// its callback are committed together. Returns whether a callback was queued.
pub(crate) async fn enqueue_if_complete(
    conn: &mut AnyConnection,
    backend: Backend,
    test_id: &str,
    now: i64,
) -> Result<bool> {
    // Two transactions that each complete a different client (or filter) of one test must not
    // both judge the test incomplete: on PostgreSQL each would miss the other's uncommitted
    // change and neither would queue the callback. Locking the test row first serialises them, and
    // the second's next statement then sees the first's commit. (SQLite has one writer at a time.)
    // Callers that took it with [`lock_test_first`] already hold it: taking it again is free.
    lock_test(conn, backend, test_id).await?;
    // Made here rather than in SQL, which has no random function both backends share.
    let delivery_id = hex::encode(rand::random::<[u8; 16]>());
    let res = sqlx::query(
        "INSERT INTO callbacks (test_id, delivery_id, url, state, completed_at, not_before)
         SELECT t.id, $1, COALESCE(t.callback_url, a.webhook_url), 'queued', $2, $2
         FROM tests t JOIN accounts a ON a.id = t.account_id
         WHERE t.id = $3 AND t.purged_at IS NULL
           AND COALESCE(t.callback_url, a.webhook_url) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM test_clients c
                           WHERE c.test_id = t.id AND c.status NOT IN ('Complete', 'Bounced'))
           AND NOT EXISTS (SELECT 1 FROM spam_results s WHERE s.test_id = t.id AND s.spam IS NULL)
           AND (EXISTS (SELECT 1 FROM test_clients c WHERE c.test_id = t.id)
                OR EXISTS (SELECT 1 FROM spam_results s WHERE s.test_id = t.id))
         ON CONFLICT (test_id) DO NOTHING",
    )
    .bind(delivery_id)
    .bind(now)
    .bind(test_id)
    .execute(&mut *conn)
    .await?;
    Ok(res.rows_affected() > 0)
}

impl Store {
    /// Claims the next due callback in fair order (see [`crate::fair`]) for `worker` until
    /// `now + lease_secs`: a queued one whose backoff has passed, or a leased one whose worker
    /// stopped answering (lease expired).
    pub async fn claim_callback(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<ClaimedCallback>> {
        let mut tx = self.pool.begin().await?;
        let claimed = CALLBACKS
            .claim_in(
                self,
                &mut tx,
                &Claim::new(worker, now, lease_secs),
                "delivery_id, url, completed_at,
                 (SELECT account_id FROM tests WHERE id = callbacks.test_id) AS account_id",
            )
            .await?;
        tx.commit().await?;
        let Some((claimed, r)) = claimed else {
            return Ok(None);
        };
        Ok(Some(ClaimedCallback {
            test_id: r.try_get("test_id")?,
            account_id: r.try_get("account_id")?,
            delivery_id: r.try_get("delivery_id")?,
            url: r.try_get("url")?,
            completed_at: r.try_get("completed_at")?,
            attempts: claimed.attempts,
        }))
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
        let (generic, status, finished) = match outcome {
            CallbackOutcome::Delivered { status } => (Outcome::Done, Some(*status), Some(now)),
            CallbackOutcome::Retry {
                error,
                status,
                retry_at,
            } => (
                Outcome::Retry {
                    error: Some(error.clone()),
                    not_before: *retry_at,
                    counted: true,
                },
                *status,
                None,
            ),
            CallbackOutcome::Failed { error, status } => (
                Outcome::GiveUp {
                    error: Some(error.clone()),
                },
                *status,
                Some(now),
            ),
        };
        let mut conn = self.pool.acquire().await?;
        CALLBACKS
            .finish_in(
                &mut conn,
                &Key::Text(claimed.test_id.clone()),
                worker,
                &generic,
                &[
                    ("last_status", Arg::opt_int(status.map(i64::from))),
                    ("finished_at", Arg::opt_int(finished)),
                ],
            )
            .await
    }

    /// The callback URL a test will be (or was) called back at: its own, else its account's
    /// default; and its callback once queued.
    pub async fn test_callback(
        &self,
        test_id: &str,
    ) -> Result<(Option<String>, Option<CallbackRow>)> {
        let url: Option<String> = sqlx::query_scalar(
            "SELECT COALESCE(t.callback_url, a.webhook_url)
             FROM tests t JOIN accounts a ON a.id = t.account_id WHERE t.id = $1",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?
        .flatten();
        let row = sqlx::query(
            "SELECT delivery_id, url, state, completed_at, attempts, last_error, last_status,
                finished_at
             FROM callbacks WHERE test_id = $1",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?;
        let row = row
            .map(|r| {
                Ok::<_, crate::StoreError>(CallbackRow {
                    delivery_id: r.try_get("delivery_id")?,
                    url: r.try_get("url")?,
                    state: CALLBACKS.parse_state(&r.try_get::<String, _>("state")?)?,
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
            sqlx::query_scalar("SELECT webhook_url FROM accounts WHERE id = $1")
                .bind(account_id)
                .fetch_optional(&self.pool)
                .await?
                .flatten(),
        )
    }

    /// Sets (or with `None` clears) the account's default callback URL.
    pub async fn set_webhook_url(&self, account_id: i64, url: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE accounts SET webhook_url = $1 WHERE id = $2")
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
            "UPDATE accounts SET webhook_secret = COALESCE(webhook_secret, $1) WHERE id = $2
             RETURNING webhook_secret",
        )
        .bind(candidate)
        .bind(account_id)
        .fetch_optional(&self.pool)
        .await?)
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::time::Duration;

    use domain::{QueueState, TestKind, Variant};

    use crate::{Backend, NewTest, NewTestClient};

    /// Two transactions each complete one of a test's two clients at the same time. Under
    /// PostgreSQL's READ COMMITTED each sees the other's client still pending unless the test row
    /// is locked first; then the callback would never be queued. (Only PostgreSQL: SQLite would
    /// make the second transaction's first write wait for the first's commit.)
    #[tokio::test]
    async fn two_outcomes_completing_a_test_at_once_queue_its_callback_on_postgres() {
        let (_db, store) = crate::testing::store(Backend::Postgres).await;
        let account = crate::testing::add_account(&store, "k").await;
        let client = |c: &str| NewTestClient {
            client_id: c.into(),
            variants: vec![Variant::Default],
        };
        let test = NewTest {
            clients: vec![client("c1"), client("c2")],
            callback_url: Some("https://hooks.example/done".into()),
            ..crate::testing::new_test(account.id, TestKind::Email)
        };
        store.create_test(&test).await.expect("test");
        let id = test.id;
        let complete =
            "UPDATE test_clients SET status = 'Complete' WHERE test_id = $1 AND client_id = $2";
        let mut first = store.pool.begin().await.expect("begin");
        sqlx::query(complete)
            .bind(&id)
            .bind("c1")
            .execute(&mut *first)
            .await
            .expect("complete c1");
        let mut second = store.pool.begin().await.expect("begin");
        sqlx::query(complete)
            .bind(&id)
            .bind("c2")
            .execute(&mut *second)
            .await
            .expect("complete c2");
        assert!(
            !super::enqueue_if_complete(&mut first, Backend::Postgres, &id, 2_000)
                .await
                .expect("enqueue"),
            "c2 is not complete as far as the first transaction sees"
        );
        let (second_id, now) = (id.clone(), 2_000);
        let other = tokio::spawn(async move {
            let queued =
                super::enqueue_if_complete(&mut second, Backend::Postgres, &second_id, now)
                    .await
                    .expect("enqueue");
            second.commit().await.expect("commit");
            queued
        });
        // Lets the second transaction reach the test row before the first commits.
        tokio::time::sleep(Duration::from_millis(300)).await;
        first.commit().await.expect("commit");
        assert!(other.await.expect("task"), "the second outcome queues it");
        let (_, row) = store.test_callback(&id).await.expect("read");
        let row = row.expect("the callback is queued");
        assert_eq!(row.state, QueueState::Queued);
        assert_eq!(row.delivery_id.len(), 32, "{}", row.delivery_id);
    }
}
