//! The state of every durable queue, read at once for `GET /metrics`: how much waits, how much is
//! under a live lease, and how long the oldest due job has waited.

use sqlx::Row;

use crate::{Result, Store};

/// One queue's figures at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStat {
    pub queue: &'static str,
    /// Claimable or waiting for its backoff, including jobs whose lease expired.
    pub waiting: i64,
    /// Under a lease that has not expired.
    pub leased: i64,
    /// Seconds since the oldest waiting job became due; 0 when none is due.
    pub oldest_age_secs: i64,
}

/// Per queue: its name and one statement answering (waiting, leased, oldest due time), with `$1`
/// bound to now. Portable SQL (CASE, not boolean sums; sums cast, as PostgreSQL's `SUM` of a
/// `BIGINT` is `NUMERIC`), so both backends run it.
const QUEUES: &[(&str, &str)] = &[
    (
        "render",
        "SELECT CAST(COALESCE(SUM(CASE WHEN state = 'queued' OR lease_expires < $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                CAST(COALESCE(SUM(CASE WHEN state = 'leased' AND lease_expires >= $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                MIN(CASE WHEN (state = 'queued' OR lease_expires < $1) AND not_before <= $1
                         THEN not_before END)
         FROM render_jobs WHERE state IN ('queued', 'leased')",
    ),
    (
        "inbound",
        "SELECT CAST(COALESCE(SUM(CASE WHEN state = 'new' OR lease_expires < $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                CAST(COALESCE(SUM(CASE WHEN state = 'leased' AND lease_expires >= $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                MIN(CASE WHEN (state = 'new' OR lease_expires < $1) AND not_before <= $1
                         THEN CASE WHEN not_before > received_at THEN not_before ELSE received_at END END)
         FROM inbound_messages WHERE state IN ('new', 'leased')",
    ),
    (
        "link_checks",
        "SELECT CAST(COALESCE(SUM(CASE WHEN state = 'queued' OR lease_expires < $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                CAST(COALESCE(SUM(CASE WHEN state = 'leased' AND lease_expires >= $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                MIN(CASE WHEN state = 'queued' OR lease_expires < $1 THEN requested_at END)
         FROM link_checks WHERE state IN ('queued', 'leased')",
    ),
    (
        "callbacks",
        "SELECT CAST(COALESCE(SUM(CASE WHEN state = 'queued' OR lease_expires < $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                CAST(COALESCE(SUM(CASE WHEN state = 'leased' AND lease_expires >= $1 THEN 1 ELSE 0 END), 0) AS BIGINT),
                MIN(CASE WHEN (state = 'queued' OR lease_expires < $1) AND not_before <= $1
                         THEN not_before END)
         FROM callbacks WHERE state IN ('queued', 'leased')",
    ),
];

impl Store {
    /// Figures for every queue at `now` (unix seconds).
    pub async fn queue_stats(&self, now: i64) -> Result<Vec<QueueStat>> {
        let mut stats = Vec::with_capacity(QUEUES.len());
        for (queue, sql) in QUEUES {
            let row = sqlx::query(sql).bind(now).fetch_one(&self.pool).await?;
            let oldest: Option<i64> = row.try_get(2)?;
            stats.push(QueueStat {
                queue,
                waiting: row.try_get(0)?,
                leased: row.try_get(1)?,
                oldest_age_secs: oldest.map_or(0, |t| (now - t).max(0)),
            });
        }
        Ok(stats)
    }
}
