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
        let res = sqlx::query(
            "UPDATE spam_results SET spam = ?, details = ?, updated_at = ? WHERE test_id = ? AND client = ?",
        )
        .bind(u.spam)
        .bind(&u.details)
        .bind(now)
        .bind(test_id)
        .bind(&u.client)
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
