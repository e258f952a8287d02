//! Mail accepted over SMTP: written here before the `250` reply, processed afterwards, so an
//! accepted message survives a crash between the two.

use sqlx::Row;

use crate::{json_vec, parse_json_vec, Claim, Key, Outcome, Result, Store, INBOUND};

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
        let mut tx = self.pool.begin().await?;
        let claimed = INBOUND
            .claim_in(
                self,
                &mut tx,
                &Claim::new(worker, now, lease_secs),
                "received_at, mail_from, rcpt_to, peer, helo, data, done_rcpts",
            )
            .await?;
        tx.commit().await?;
        claimed.map(|(_, row)| inbound_from_row(&row)).transpose()
    }

    /// Records how `worker`'s pass over a claimed message ended, with the recipients that have
    /// their outcome so far (a pass that only waited for a test gives its attempt back:
    /// `counted: false`). Ignored (false) when the lease was lost meanwhile: another process has
    /// taken the message over.
    pub async fn finish_inbound(
        &self,
        id: i64,
        worker: &str,
        outcome: &Outcome,
        done_rcpts: &[String],
    ) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        INBOUND
            .finish_in(
                &mut conn,
                &Key::Int(id),
                worker,
                outcome,
                &[("done_rcpts", json_vec(done_rcpts).into())],
            )
            .await
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
