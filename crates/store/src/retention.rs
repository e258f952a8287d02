//! Retention (spec §8): 90 days after processing a test's results, screenshots and content go;
//! its metadata stays. Mail received over SMTP (seed and auto-inbox messages, whole with their
//! content) goes after the same time, and so do an analytics campaign's hits, counted from the
//! campaign's end.

use crate::{Result, Store};

impl Store {
    /// Removes content and results of tests created before `cutoff` that still have them, and
    /// returns their ids so the caller can remove their screenshot blobs too. Inbound messages
    /// received before `cutoff`, and the hits of campaigns that ended before it, are removed with
    /// the first batch.
    pub async fn purge_before(&self, cutoff: i64, now: i64, batch: i64) -> Result<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE tests SET purged_at = $1
             WHERE id IN (SELECT id FROM tests WHERE purged_at IS NULL AND created_at < $2 LIMIT $3)
             RETURNING id",
        )
        .bind(now)
        .bind(cutoff)
        .bind(batch)
        .fetch_all(&mut *tx)
        .await?;
        for id in &ids {
            for table in [
                "test_content",
                "test_clients",
                "render_jobs",
                "spam_results",
                "content_checks",
            ] {
                sqlx::query(&format!("DELETE FROM {table} WHERE test_id = $1"))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        sqlx::query("DELETE FROM inbound_messages WHERE received_at < $1")
            .bind(cutoff)
            .execute(&mut *tx)
            .await?;
        crate::analytics::purge_ended_campaign_hits(&mut tx, cutoff).await?;
        tx.commit().await?;
        Ok(ids)
    }
}
