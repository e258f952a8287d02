//! Spam results per filter profile, and seed-list keys.

use domain::requirements::Report;
use domain::{FilterType, SpamVerdict, Spelled};
use sqlx::Row;

use crate::sql::Arg;
use crate::{Claim, Key, Outcome, Result, Store, SVC_SENDS};

#[derive(Clone, Debug, PartialEq)]
pub struct SpamRow {
    pub client: String,
    pub kind: FilterType,
    /// `None` until the filter has returned (spec §2.8's empty value).
    pub spam: Option<SpamVerdict>,
    pub details: String,
}

#[derive(Clone, Debug)]
pub struct SpamUpdate {
    pub client: String,
    pub spam: SpamVerdict,
    pub details: String,
}

impl Store {
    pub async fn spam_results(&self, test_id: &str) -> Result<Vec<SpamRow>> {
        let rows = sqlx::query(
            "SELECT client, kind, spam, details FROM spam_results WHERE test_id = $1 ORDER BY position",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SpamRow {
                    client: r.try_get("client")?,
                    kind: FilterType::parse_known(&r.try_get::<String, _>("kind")?)?,
                    spam: r
                        .try_get::<Option<i64>, _>("spam")?
                        .map(SpamVerdict::from_wire)
                        .transpose()?,
                    details: r.try_get("details")?,
                })
            })
            .collect()
    }

    pub async fn record_spam_result(
        &self,
        test_id: &str,
        u: &SpamUpdate,
        now: i64,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        crate::callbacks::lock_test_first(&mut tx, self.backend, test_id).await?;
        let res = sqlx::query(
            "UPDATE spam_results SET spam = $1, details = $2, updated_at = $3 WHERE test_id = $4 AND client = $5",
        )
        .bind(u.spam.wire())
        .bind(&u.details)
        .bind(now)
        .bind(test_id)
        .bind(&u.client)
        .execute(&mut *tx)
        .await?;
        let changed = res.rows_affected() > 0;
        if changed {
            // With the verdict: the last one of a test queues its callback in the same commit.
            crate::callbacks::enqueue_if_complete(&mut tx, self.backend, test_id, now).await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Says in `details` why a filter has no verdict yet, leaving `spam` empty; a filter that
    /// already answered is left alone. Returns whether a row changed.
    pub async fn note_spam_pending(
        &self,
        test_id: &str,
        client: &str,
        details: &str,
        now: i64,
    ) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE spam_results SET details = $1, updated_at = $2 WHERE test_id = $3 AND client = $4 AND spam IS NULL",
        )
        .bind(details)
        .bind(now)
        .bind(test_id)
        .bind(client)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Reserves a seed-list key for an account (spec §4.4 `GET /spam/seedlist`).
    pub async fn reserve_seed_key(&self, account_id: i64, key: &str, now: i64) -> Result<()> {
        sqlx::query("INSERT INTO seed_keys (key, account_id, created_at) VALUES ($1, $2, $3)")
            .bind(key)
            .bind(account_id)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The owner of a seed key and the test bound to it, if any.
    pub async fn seed_key(&self, key: &str) -> Result<Option<(i64, Option<String>)>> {
        let row = sqlx::query("SELECT account_id, test_id FROM seed_keys WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("account_id")?, r.try_get("test_id")?)))
            .transpose()
    }
}

/// A spam test whose message the service still has to send (the `svc` method).
#[derive(Clone, Debug)]
pub struct PendingSend {
    pub test_id: String,
    pub account_id: i64,
    pub subject: String,
    pub html: String,
    pub seed_key: String,
    /// The caller's `from_address`, if one was given.
    pub from_address: Option<String>,
    /// Claims so far, this one included.
    pub attempts: i64,
    /// The filter profiles (spam clients) whose seed address has not had its message yet, in the
    /// test's order: each is sent its own, and an earlier claim may have delivered some already.
    pub unsent: Vec<String>,
}

impl Store {
    /// Claims the oldest `svc` test whose message is due to be sent (not sent, not given up, not
    /// leased or its lease expired) for `worker` until `now + lease_secs`. Returns `None` when
    /// nothing is due.
    pub async fn claim_svc_send(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<PendingSend>> {
        let mut tx = self.pool.begin().await?;
        let claimed = SVC_SENDS
            .claim_in(
                self,
                &mut tx,
                &Claim::new(worker, now, lease_secs),
                "account_id, subject, seed_key, spam_from_address",
            )
            .await?;
        let Some((claimed, r)) = claimed else {
            tx.commit().await?;
            return Ok(None);
        };
        let test_id: String = r.try_get("id")?;
        let html: String = sqlx::query_scalar("SELECT html FROM test_content WHERE test_id = $1")
            .bind(&test_id)
            .fetch_one(&mut *tx)
            .await?;
        let unsent: Vec<String> = sqlx::query_scalar(
            "SELECT client FROM spam_results WHERE test_id = $1 AND svc_sent_at IS NULL ORDER BY position",
        )
        .bind(&test_id)
        .fetch_all(&mut *tx)
        .await?;
        let send = PendingSend {
            unsent,
            account_id: r.try_get("account_id")?,
            subject: r.try_get("subject")?,
            html,
            seed_key: r.try_get("seed_key")?,
            from_address: r.try_get("spam_from_address")?,
            attempts: claimed.attempts,
            test_id,
        };
        tx.commit().await?;
        Ok(Some(send))
    }

    /// Records that `worker` delivered svc test `test_id`'s message to `client`'s seed address, so
    /// that no later claim sends it there again, and keeps the lease until `lease_until` (a send
    /// that makes progress is alive). False, and nothing written, when the lease is no longer
    /// `worker`'s: another sender has the test, so this one stops.
    pub async fn record_svc_recipient_sent(
        &self,
        test_id: &str,
        client: &str,
        worker: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        if !SVC_SENDS
            .renew_in(&mut tx, &Key::Text(test_id.into()), worker, lease_until)
            .await?
        {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query("UPDATE spam_results SET svc_sent_at = $1 WHERE test_id = $2 AND client = $3")
            .bind(now)
            .bind(test_id)
            .bind(client)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records how `worker`'s claimed send ended: `Done` marks it sent; a retry keeps the error
    /// on the test and makes the send due again; giving up keeps the error for good. Ignored
    /// (false) when the lease was lost meanwhile.
    pub async fn finish_svc_send(
        &self,
        test_id: &str,
        worker: &str,
        now: i64,
        outcome: &Outcome,
    ) -> Result<bool> {
        let sent_at = matches!(outcome, Outcome::Done).then_some(now);
        let mut conn = self.pool.acquire().await?;
        SVC_SENDS
            .finish_in(
                &mut conn,
                &Key::Text(test_id.into()),
                worker,
                outcome,
                &[("spam_sent_at", Arg::opt_int(sent_at))],
            )
            .await
    }

    /// Spam rows of a test still waiting for their filter, by profile name.
    pub async fn unanswered_spam_clients(&self, test_id: &str) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT client FROM spam_results WHERE test_id = $1 AND spam IS NULL ORDER BY position",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?)
    }
}

impl Store {
    /// Keeps the sender-requirements report of `test_id` unless it has one: the first message
    /// processed for a test decides it. `false` when one was there already.
    pub async fn record_sender_requirements(
        &self,
        test_id: &str,
        report: &Report,
        now: i64,
    ) -> Result<bool> {
        let report = serde_json::to_string(report)?;
        let done = sqlx::query(
            "INSERT INTO sender_requirements (test_id, report, checked_at) VALUES ($1, $2, $3)
             ON CONFLICT (test_id) DO NOTHING",
        )
        .bind(test_id)
        .bind(report)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether `test_id` has its sender-requirements report (without reading it).
    pub async fn has_sender_requirements(&self, test_id: &str) -> Result<bool> {
        let found: Option<i64> =
            sqlx::query_scalar("SELECT checked_at FROM sender_requirements WHERE test_id = $1")
                .bind(test_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    /// The sender-requirements report of `test_id` and when it was made, once there is one; a
    /// stored report that does not read back is [`crate::StoreError::Corrupt`].
    pub async fn sender_requirements(&self, test_id: &str) -> Result<Option<(Report, i64)>> {
        let row =
            sqlx::query("SELECT report, checked_at FROM sender_requirements WHERE test_id = $1")
                .bind(test_id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| {
            let json: String = r.try_get("report")?;
            Ok((serde_json::from_str(&json)?, r.try_get("checked_at")?))
        })
        .transpose()
    }
}
