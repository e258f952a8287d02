//! Retention (spec §8): 90 days after processing a test's results, screenshots and content go;
//! its metadata stays. Mail received over SMTP (seed and auto-inbox messages, whole with their
//! content) goes after the same time, and so do an analytics campaign's hits, counted from the
//! campaign's end.
//!
//! What goes is listed once: per test [`CONTENT_TABLES`]; the tables kept per test are in
//! [`KEPT_PER_TEST`]; a store test fails if the schema has a table with a `test_id` in neither.
//! Content kept per something else (inbound mail per message, analytics hits per campaign) is
//! purged by its own statement in [`Store::purge_before`]: a new kind of content adds its
//! statement (or its retention function, called from there) beside those.

use crate::{Result, Store};

/// Every table holding a caller's content or results per test, emptied for a test past retention.
/// A store test lists the schema's tables with a `test_id` and fails if one is neither here nor in
/// [`KEPT_PER_TEST`]. (Analytics hits are per campaign: see the statement below.)
pub const CONTENT_TABLES: &[&str] = &[
    "test_content",
    "test_headers",
    "test_clients",
    "render_jobs",
    "spam_results",
    "link_checks",
    "content_checks",
    "inbox_rows",
    // Reviewers' names and notes.
    "approvals",
    "sender_requirements",
];

/// Tables with a `test_id` that retention leaves: metadata (spec §8 keeps it) and what holds no
/// content of the caller's.
pub const KEPT_PER_TEST: &[&str] = &[
    // The callback's delivery record: URL, status and times, no content.
    "callbacks",
    // The seed key's binding to its test.
    "seed_keys",
    // Share links of a test: a token and an expiry.
    "share_links",
];

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
            for table in CONTENT_TABLES {
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
