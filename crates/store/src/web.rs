//! The web interface's durable state: sign-in sessions, read-only share links, and the per-test
//! summary its test list shows. Callers pass hashes of the secrets; the secrets are never stored.

use std::collections::HashMap;

use sqlx::Row;

use crate::sql::Query;
use crate::{Result, Store};

/// A live sign-in session. `account_id` is `None` for the sandbox credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    pub account_id: Option<i64>,
    pub expires_at: i64,
}

/// A share link as its owner sees it (the token itself is only ever shown once, at creation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareRow {
    pub token_hash: String,
    pub test_id: String,
    pub account_id: i64,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

/// What the test list shows of a test beyond the listing itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestSummary {
    pub subject: String,
    pub clients: i64,
    /// Clients whose screenshot is Complete or Bounced.
    pub finished: i64,
    pub spam_filters: i64,
    pub spam_answered: i64,
    /// What the reviewers' decisions give.
    pub approval: domain::ApprovalState,
}

impl Store {
    /// Stores a session; expired ones are removed on the way, so the table stays as small as the
    /// number of people signed in.
    pub async fn create_session(
        &self,
        id_hash: &str,
        account_id: Option<i64>,
        now: i64,
        expires_at: i64,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO web_sessions (id_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(id_hash)
        .bind(account_id)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The session if it exists and has not expired.
    pub async fn session(&self, id_hash: &str, now: i64) -> Result<Option<SessionRow>> {
        let row = sqlx::query(
            "SELECT account_id, expires_at FROM web_sessions WHERE id_hash = $1 AND expires_at >= $2",
        )
        .bind(id_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(SessionRow {
                account_id: r.try_get("account_id")?,
                expires_at: r.try_get("expires_at")?,
            })
        })
        .transpose()
    }

    pub async fn delete_session(&self, id_hash: &str) -> Result<()> {
        sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn create_share(
        &self,
        token_hash: &str,
        test_id: &str,
        account_id: i64,
        now: i64,
        expires_at: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO share_links (token_hash, test_id, account_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token_hash)
        .bind(test_id)
        .bind(account_id)
        .bind(now)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The share link if it is neither expired nor revoked.
    pub async fn live_share(&self, token_hash: &str, now: i64) -> Result<Option<ShareRow>> {
        let row = sqlx::query(
            "SELECT * FROM share_links WHERE token_hash = $1 AND expires_at >= $2 AND revoked_at IS NULL",
        )
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(share_from_row).transpose()
    }

    /// Every share link of a test, newest first, for its owner.
    pub async fn shares_of_test(&self, account_id: i64, test_id: &str) -> Result<Vec<ShareRow>> {
        let rows = sqlx::query(
            "SELECT * FROM share_links WHERE account_id = $1 AND test_id = $2 ORDER BY created_at DESC",
        )
        .bind(account_id)
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(share_from_row).collect()
    }

    /// Revokes one of the account's share links; false if it has no such link.
    pub async fn revoke_share(&self, account_id: i64, token_hash: &str, now: i64) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE share_links SET revoked_at = $1 WHERE token_hash = $2 AND account_id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(token_hash)
        .bind(account_id)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Subject and progress of the given tests of one account, in one query.
    pub async fn test_summaries(
        &self,
        account_id: i64,
        ids: &[String],
    ) -> Result<HashMap<String, TestSummary>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut q = Query::new(
            "SELECT t.id, t.subject,
                (SELECT COUNT(*) FROM test_clients c WHERE c.test_id = t.id) AS clients,
                (SELECT COUNT(*) FROM test_clients c WHERE c.test_id = t.id
                    AND c.status IN ('Complete', 'Bounced')) AS finished,
                (SELECT COUNT(*) FROM spam_results s WHERE s.test_id = t.id) AS spam_filters,
                (SELECT COUNT(*) FROM spam_results s WHERE s.test_id = t.id
                    AND s.spam IS NOT NULL) AS spam_answered,
                (SELECT COUNT(*) FROM approvals a WHERE a.test_id = t.id
                    AND a.decision = 'approved') AS approved,
                (SELECT COUNT(*) FROM approvals a WHERE a.test_id = t.id
                    AND a.decision = 'changes_requested') AS changes_requested
             FROM tests t WHERE t.account_id = ",
        );
        q.bind(account_id)
            .push(" AND t.id IN (")
            .bind_list(ids)
            .push(")");
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    TestSummary {
                        subject: r.try_get("subject")?,
                        clients: r.try_get("clients")?,
                        finished: r.try_get("finished")?,
                        spam_filters: r.try_get("spam_filters")?,
                        spam_answered: r.try_get("spam_answered")?,
                        approval: {
                            use domain::Decision::{Approved, ChangesRequested};
                            let approved: i64 = r.try_get("approved")?;
                            let changes: i64 = r.try_get("changes_requested")?;
                            domain::ApprovalState::of(
                                (approved > 0)
                                    .then_some(Approved)
                                    .into_iter()
                                    .chain((changes > 0).then_some(ChangesRequested)),
                            )
                        },
                    },
                ))
            })
            .collect()
    }
}

fn share_from_row(r: &sqlx::any::AnyRow) -> Result<ShareRow> {
    Ok(ShareRow {
        token_hash: r.try_get("token_hash")?,
        test_id: r.try_get("test_id")?,
        account_id: r.try_get("account_id")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
    })
}
