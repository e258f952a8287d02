//! Versions and approvals of email tests (issue 32): the tests of one `version_group`, numbered by
//! creation, and each reviewer's latest decision on a test.

use domain::{ApprovalState, Decision, Spelled};
use sqlx::Row;

use crate::{Result, Store, StoreError};

/// The most versions one listing shows (the newest are kept).
pub const MAX_VERSIONS_LISTED: i64 = 500;

/// One version of an email: a test of the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRow {
    pub test_id: String,
    /// 1 for the group's first test, in creation order.
    pub version: i64,
    pub subject: String,
    pub created_at: i64,
    pub approval: ApprovalState,
    /// [`domain::content_digest`] of its HTML; `None` for tests made before versions existed.
    pub content_sha256: Option<String>,
}

/// A reviewer's latest decision on a test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRow {
    /// `owner`, or `share:<token hash>:<name>`.
    pub reviewer: String,
    pub name: String,
    /// The share link the reviewer came through; `None` for the owner.
    pub share_token_hash: Option<String>,
    pub decision: Decision,
    pub note: Option<String>,
    pub decided_at: i64,
}

/// Who decides.
#[derive(Clone, Debug)]
pub enum Reviewer<'a> {
    Owner,
    /// Someone who opened share link `token_hash` and gave `name`.
    Share {
        token_hash: &'a str,
        name: &'a str,
    },
}

impl Reviewer<'_> {
    /// The stored key: one decision per reviewer and test.
    pub fn key(&self) -> String {
        match self {
            Reviewer::Owner => "owner".into(),
            Reviewer::Share { token_hash, name } => {
                format!("share:{token_hash}:{}", name.to_lowercase())
            }
        }
    }
}

fn decision(row: &sqlx::any::AnyRow) -> Result<Decision> {
    let d: String = row.try_get("decision")?;
    Decision::parse_known(&d).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl Store {
    /// Puts a new email test into the versions of the account's latest email test with the same
    /// subject, or starts its own group, and records its content's digest. Called in the test's
    /// creation transaction.
    pub(crate) async fn join_versions(
        &self,
        tx: &mut sqlx::AnyConnection,
        account_id: i64,
        test_id: &str,
        subject: &str,
        html: &str,
    ) -> Result<()> {
        // Tests made in one second are told apart by insertion order.
        let order = self.backend.insertion_order();
        sqlx::query(&format!(
            "UPDATE tests SET content_sha256 = $4, version_group = COALESCE((
                SELECT t2.version_group FROM tests t2
                WHERE t2.account_id = $1 AND t2.kind = 'email-test' AND t2.subject = $2
                  AND t2.id <> $3 AND t2.version_group IS NOT NULL
                ORDER BY t2.created_at DESC, t2.{order} DESC LIMIT 1), $3)
             WHERE id = $3"
        ))
        .bind(account_id)
        .bind(subject)
        .bind(test_id)
        .bind(domain::content_digest(html))
        .execute(tx)
        .await?;
        Ok(())
    }

    /// The versions of the email `test_id` of `account_id` belongs to, oldest first (at most the
    /// newest [`MAX_VERSIONS_LISTED`]); empty for another account's test or a spam test.
    pub async fn versions_of(&self, account_id: i64, test_id: &str) -> Result<Vec<VersionRow>> {
        let order = self.backend.insertion_order();
        let rows = sqlx::query(&format!(
            "SELECT t.id, t.subject, t.created_at, t.content_sha256 FROM tests t
             WHERE t.account_id = $1 AND t.version_group = (
                 SELECT g.version_group FROM tests g WHERE g.id = $2 AND g.account_id = $1)
             ORDER BY t.created_at, t.{order}"
        ))
        .bind(account_id)
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        let decisions = sqlx::query(
            "SELECT a.test_id, a.decision FROM approvals a JOIN tests t ON t.id = a.test_id
             WHERE t.account_id = $1 AND t.version_group = (
                 SELECT g.version_group FROM tests g WHERE g.id = $2 AND g.account_id = $1)",
        )
        .bind(account_id)
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        let mut decided: Vec<(String, Decision)> = Vec::with_capacity(decisions.len());
        for r in &decisions {
            decided.push((r.try_get("test_id")?, decision(r)?));
        }
        let skip = rows.len().saturating_sub(MAX_VERSIONS_LISTED as usize);
        rows.iter()
            .enumerate()
            .skip(skip)
            .map(|(i, r)| {
                let id: String = r.try_get("id")?;
                let approval =
                    ApprovalState::of(decided.iter().filter(|(t, _)| *t == id).map(|(_, d)| *d));
                Ok(VersionRow {
                    version: i as i64 + 1,
                    subject: r.try_get("subject")?,
                    created_at: r.try_get("created_at")?,
                    content_sha256: r.try_get("content_sha256")?,
                    test_id: id,
                    approval,
                })
            })
            .collect()
    }

    /// Moves email test `test_id` into the versions of email test `other_id` (both the account's);
    /// false when either is not one of its email tests.
    pub async fn move_to_versions_of(
        &self,
        account_id: i64,
        test_id: &str,
        other_id: &str,
    ) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE tests SET version_group = (
                 SELECT o.version_group FROM tests o
                 WHERE o.id = $3 AND o.account_id = $1 AND o.kind = 'email-test')
             WHERE id = $2 AND account_id = $1 AND kind = 'email-test' AND EXISTS (
                 SELECT 1 FROM tests o
                 WHERE o.id = $3 AND o.account_id = $1 AND o.kind = 'email-test'
                   AND o.version_group IS NOT NULL)",
        )
        .bind(account_id)
        .bind(test_id)
        .bind(other_id)
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Records `reviewer`'s decision on `test_id`, replacing their earlier one.
    pub async fn decide(
        &self,
        test_id: &str,
        reviewer: &Reviewer<'_>,
        name: &str,
        decision: Decision,
        note: Option<&str>,
        now: i64,
    ) -> Result<()> {
        let share = match reviewer {
            Reviewer::Owner => None,
            Reviewer::Share { token_hash, .. } => Some(*token_hash),
        };
        sqlx::query(
            "INSERT INTO approvals (test_id, reviewer, name, share_token_hash, decision, note, decided_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (test_id, reviewer) DO UPDATE SET name = excluded.name,
                decision = excluded.decision, note = excluded.note,
                decided_at = excluded.decided_at",
        )
        .bind(test_id)
        .bind(reviewer.key())
        .bind(name)
        .bind(share)
        .bind(decision.as_str())
        .bind(note)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every reviewer's latest decision on `test_id`, oldest first.
    pub async fn approvals(&self, test_id: &str) -> Result<Vec<ApprovalRow>> {
        let rows = sqlx::query(
            "SELECT reviewer, name, share_token_hash, decision, note, decided_at FROM approvals
             WHERE test_id = $1 ORDER BY decided_at, reviewer",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ApprovalRow {
                    reviewer: r.try_get("reviewer")?,
                    name: r.try_get("name")?,
                    share_token_hash: r.try_get("share_token_hash")?,
                    decision: decision(r)?,
                    note: r.try_get("note")?,
                    decided_at: r.try_get("decided_at")?,
                })
            })
            .collect()
    }
}
