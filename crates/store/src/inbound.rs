//! Mail accepted over SMTP: written here before the `250` reply, processed afterwards, so an
//! accepted message survives a crash between the two.

use sqlx::Row;

use crate::{json_vec, parse_json_vec, Result, Store};

#[derive(Clone, Debug)]
pub struct NewInbound {
    pub received_at: i64,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub peer: String,
    pub helo: String,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct InboundRow {
    pub id: i64,
    pub received_at: i64,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub peer: String,
    pub helo: String,
    pub data: Vec<u8>,
    /// Claims so far, this one included, less the passes that only waited.
    pub attempts: i64,
    /// Recipients that already had their outcome in an earlier pass.
    pub done_rcpts: Vec<String>,
}

/// How a claimed inbound message's pass ended.
#[derive(Clone, Debug)]
pub enum InboundOutcome {
    /// Every recipient is handled.
    Done,
    /// Something failed (`error`); look at the message again from `retry_at`, or set it aside as
    /// failed once it has had `max_attempts` claims.
    Retry {
        error: String,
        retry_at: i64,
        max_attempts: i64,
        done_rcpts: Vec<String>,
    },
    /// Nothing failed but the message must wait (for the test that binds its seed key); the pass
    /// is not counted as an attempt.
    Wait {
        retry_at: i64,
        done_rcpts: Vec<String>,
    },
}

fn inbound_from_row(r: &sqlx::any::AnyRow) -> Result<InboundRow> {
    let rcpt: String = r.try_get("rcpt_to")?;
    let done: String = r.try_get("done_rcpts")?;
    Ok(InboundRow {
        id: r.try_get("id")?,
        received_at: r.try_get("received_at")?,
        mail_from: r.try_get("mail_from")?,
        rcpt_to: parse_json_vec(&rcpt)?,
        peer: r.try_get("peer")?,
        helo: r.try_get("helo")?,
        data: r.try_get("data")?,
        attempts: r.try_get("attempts")?,
        done_rcpts: parse_json_vec(&done)?,
    })
}

impl Store {
    pub async fn insert_inbound(&self, m: &NewInbound) -> Result<i64> {
        let id = sqlx::query_scalar(
            "INSERT INTO inbound_messages (received_at, mail_from, rcpt_to, peer, helo, data)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(m.received_at)
        .bind(&m.mail_from)
        .bind(json_vec(&m.rcpt_to))
        .bind(&m.peer)
        .bind(&m.helo)
        .bind(&m.data)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    /// Claims the oldest due message (new and due, or leased with an expired lease) for `worker`
    /// until `now + lease_secs`. Returns `None` when nothing is due.
    pub async fn claim_inbound(
        &self,
        worker: &str,
        now: i64,
        lease_secs: i64,
    ) -> Result<Option<InboundRow>> {
        let sql = format!(
            "UPDATE inbound_messages
             SET state = 'leased', lease_owner = $1, lease_expires = $2, attempts = attempts + 1
             WHERE id = (
                SELECT id FROM inbound_messages
                WHERE (state = 'new' AND not_before <= $3) OR (state = 'leased' AND lease_expires < $3)
                ORDER BY id LIMIT 1 {})
             RETURNING *",
            self.backend.skip_locked()
        );
        let row = sqlx::query(&sql)
            .bind(worker)
            .bind(now + lease_secs)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(inbound_from_row).transpose()
    }

    /// Records how `worker`'s pass over a claimed message ended. Ignored (false) when the lease was
    /// lost meanwhile: another process has taken the message over.
    pub async fn finish_inbound(
        &self,
        id: i64,
        worker: &str,
        outcome: &InboundOutcome,
    ) -> Result<bool> {
        let res =
            match outcome {
                InboundOutcome::Done => {
                    sqlx::query(
                        "UPDATE inbound_messages SET state = 'done', last_error = NULL,
                        lease_owner = NULL, lease_expires = NULL
                     WHERE id = $1 AND state = 'leased' AND lease_owner = $2",
                    )
                    .bind(id)
                    .bind(worker)
                    .execute(&self.pool)
                    .await?
                }
                InboundOutcome::Retry {
                    error,
                    retry_at,
                    max_attempts,
                    done_rcpts,
                } => sqlx::query(
                    "UPDATE inbound_messages SET last_error = $3, not_before = $4, done_rcpts = $5,
                        state = CASE WHEN attempts >= $6 THEN 'failed' ELSE 'new' END,
                        lease_owner = NULL, lease_expires = NULL
                     WHERE id = $1 AND state = 'leased' AND lease_owner = $2",
                )
                .bind(id)
                .bind(worker)
                .bind(error)
                .bind(retry_at)
                .bind(json_vec(done_rcpts))
                .bind(max_attempts)
                .execute(&self.pool)
                .await?,
                InboundOutcome::Wait {
                    retry_at,
                    done_rcpts,
                } => {
                    sqlx::query(
                        "UPDATE inbound_messages SET state = 'new', attempts = attempts - 1,
                        not_before = $3, done_rcpts = $4, lease_owner = NULL, lease_expires = NULL
                     WHERE id = $1 AND state = 'leased' AND lease_owner = $2",
                    )
                    .bind(id)
                    .bind(worker)
                    .bind(retry_at)
                    .bind(json_vec(done_rcpts))
                    .execute(&self.pool)
                    .await?
                }
            };
        Ok(res.rows_affected() > 0)
    }

    /// Messages not yet done or set aside: for progress logs and tests.
    pub async fn pending_inbound(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM inbound_messages WHERE state IN ('new', 'leased')",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// A stored message by id, whatever its state (for tests and operators).
    pub async fn inbound(&self, id: i64) -> Result<Option<(InboundRow, String)>> {
        let row = sqlx::query("SELECT * FROM inbound_messages WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((inbound_from_row(&r)?, r.try_get("state")?)))
            .transpose()
    }
}
