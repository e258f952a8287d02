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
    pub attempts: i64,
}

impl Store {
    pub async fn insert_inbound(&self, m: &NewInbound) -> Result<i64> {
        let id = sqlx::query_scalar(
            "INSERT INTO inbound_messages (received_at, mail_from, rcpt_to, peer, helo, data)
             VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
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

    /// Messages not yet processed, oldest first.
    pub async fn unprocessed_inbound(&self, limit: i64) -> Result<Vec<InboundRow>> {
        let rows =
            sqlx::query("SELECT * FROM inbound_messages WHERE state = 'new' ORDER BY id LIMIT ?")
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                let rcpt: String = r.try_get("rcpt_to")?;
                Ok(InboundRow {
                    id: r.try_get("id")?,
                    received_at: r.try_get("received_at")?,
                    mail_from: r.try_get("mail_from")?,
                    rcpt_to: parse_json_vec(&rcpt)?,
                    peer: r.try_get("peer")?,
                    helo: r.try_get("helo")?,
                    data: r.try_get("data")?,
                    attempts: r.try_get("attempts")?,
                })
            })
            .collect()
    }

    /// `error: None` marks the message done; `Some` counts a failed attempt, and after
    /// `max_attempts` the message is set aside as failed (kept, for an operator to inspect).
    pub async fn finish_inbound(
        &self,
        id: i64,
        error: Option<&str>,
        max_attempts: i64,
    ) -> Result<()> {
        match error {
            None => {
                sqlx::query(
                    "UPDATE inbound_messages SET state = 'done', last_error = NULL WHERE id = ?",
                )
                .bind(id)
                .execute(&self.pool)
                .await?;
            }
            Some(e) => {
                sqlx::query(
                    "UPDATE inbound_messages SET attempts = attempts + 1, last_error = ?,
                        state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE 'new' END
                     WHERE id = ?",
                )
                .bind(e)
                .bind(max_attempts)
                .bind(id)
                .execute(&self.pool)
                .await?;
            }
        }
        Ok(())
    }
}
