//! Spam results per filter profile, and seed-list keys.

use sqlx::Row;

use crate::{Result, Store};

#[derive(Clone, Debug, PartialEq)]
pub struct SpamRow {
    pub client: String,
    pub kind: String,
    /// `None` until the filter has returned (spec §2.8's empty value).
    pub spam: Option<i64>,
    pub details: String,
}

#[derive(Clone, Debug)]
pub struct SpamUpdate {
    pub client: String,
    pub spam: i64,
    pub details: String,
}

impl Store {
    pub async fn spam_results(&self, test_id: &str) -> Result<Vec<SpamRow>> {
        let rows = sqlx::query(
            "SELECT client, kind, spam, details FROM spam_results WHERE test_id = ? ORDER BY position",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SpamRow {
                    client: r.try_get("client")?,
                    kind: r.try_get("kind")?,
                    spam: r.try_get("spam")?,
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
        let res = sqlx::query(
            "UPDATE spam_results SET spam = ?, details = ?, updated_at = ? WHERE test_id = ? AND client = ?",
        )
        .bind(u.spam)
        .bind(&u.details)
        .bind(now)
        .bind(test_id)
        .bind(&u.client)
        .execute(&mut *tx)
        .await?;
        let changed = res.rows_affected() > 0;
        if changed {
            // With the verdict: the last one of a test queues its callback in the same commit.
            crate::callbacks::enqueue_if_complete(&mut tx, test_id, now).await?;
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
            "UPDATE spam_results SET details = ?, updated_at = ? WHERE test_id = ? AND client = ? AND spam IS NULL",
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
        sqlx::query("INSERT INTO seed_keys (key, account_id, created_at) VALUES (?, ?, ?)")
            .bind(key)
            .bind(account_id)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The owner of a seed key and the test bound to it, if any.
    pub async fn seed_key(&self, key: &str) -> Result<Option<(i64, Option<String>)>> {
        let row = sqlx::query("SELECT account_id, test_id FROM seed_keys WHERE key = ?")
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
    pub attempts: i64,
}

impl Store {
    /// `svc` tests not yet sent and not given up, oldest first.
    pub async fn pending_svc_sends(
        &self,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<PendingSend>> {
        let rows = sqlx::query(
            "SELECT t.id, t.account_id, t.subject, c.html, t.seed_key, t.spam_from_address, t.spam_send_attempts
             FROM tests t JOIN test_content c ON c.test_id = t.id
             WHERE t.spam_method = 'svc' AND t.spam_sent_at IS NULL AND t.seed_key IS NOT NULL
               AND t.spam_send_attempts < ? AND t.purged_at IS NULL
             ORDER BY t.created_at LIMIT ?",
        )
        .bind(max_attempts)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingSend {
                    test_id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    subject: r.try_get("subject")?,
                    html: r.try_get("html")?,
                    seed_key: r.try_get("seed_key")?,
                    from_address: r.try_get("spam_from_address")?,
                    attempts: r.try_get("spam_send_attempts")?,
                })
            })
            .collect()
    }

    /// Records a send: `error: None` marks it sent; `Some` counts a failed attempt.
    pub async fn record_spam_send(
        &self,
        test_id: &str,
        now: i64,
        error: Option<&str>,
    ) -> Result<()> {
        match error {
            None => {
                sqlx::query(
                    "UPDATE tests SET spam_sent_at = ?, spam_send_error = NULL WHERE id = ?",
                )
                .bind(now)
                .bind(test_id)
                .execute(&self.pool)
                .await?;
            }
            Some(e) => {
                sqlx::query(
                    "UPDATE tests SET spam_send_attempts = spam_send_attempts + 1, spam_send_error = ? WHERE id = ?",
                )
                .bind(e)
                .bind(test_id)
                .execute(&self.pool)
                .await?;
            }
        }
        Ok(())
    }

    /// Spam rows of a test still waiting for their filter, by profile name.
    pub async fn unanswered_spam_clients(&self, test_id: &str) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT client FROM spam_results WHERE test_id = ? AND spam IS NULL ORDER BY position",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?)
    }
}
