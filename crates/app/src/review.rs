//! Versions and approvals of an email test (issue 32): the versions of the email a test belongs
//! to, moving a test into another's versions, and each reviewer's decision — the owner's, or that
//! of someone who opened a live share link of this test and gave a name. The API and both web
//! pages (the owner's and the shared proof) call these.

use domain::{ApprovalState, Decision};
use store::{ApprovalRow, Reviewer, TestRow, VersionRow};

use crate::error::{Error, ErrorName, Result};
use crate::state::AppState;

/// Longest note with a decision, in characters.
pub const MAX_NOTE_CHARS: usize = 2000;
/// Longest reviewer name, in characters.
pub const MAX_NAME_CHARS: usize = 80;
/// Reviewers one test may have (the owner counts as one).
pub const MAX_REVIEWERS: usize = 200;

/// Who decides, as the caller proved it.
#[derive(Clone, Debug)]
pub enum Who<'a> {
    /// The signed-in or authenticated owner.
    Owner,
    /// A reviewer who came through the live share link whose token hashes to `token_hash`.
    Shared { token_hash: &'a str, name: &'a str },
}

/// The versions of the email `test` (owned by the caller) belongs to, oldest first.
pub async fn versions(state: &AppState, test: &TestRow) -> Result<Vec<VersionRow>> {
    Ok(state.store.versions_of(test.account_id, &test.id).await?)
}

/// The version of `test`'s email just before it, if any: what a visual diff compares with first.
pub async fn previous_version(state: &AppState, test: &TestRow) -> Result<Option<VersionRow>> {
    let versions = versions(state, test).await?;
    let at = versions.iter().position(|v| v.test_id == test.id);
    Ok(at
        .filter(|i| *i > 0)
        .and_then(|i| versions.get(i - 1).cloned()))
}

/// Moves `test` into the versions of the account's email test `other`.
pub async fn join_versions_of(
    state: &AppState,
    test: &TestRow,
    other: &str,
) -> Result<Vec<VersionRow>> {
    if other == test.id {
        return Err(Error::new(
            ErrorName::InvalidParameter,
            "`version_of` names this test itself: give the id of another email test of yours",
        ));
    }
    if !state
        .store
        .move_to_versions_of(test.account_id, &test.id, other)
        .await?
    {
        return Err(Error::new(
            ErrorName::InvalidTestId,
            format!("`version_of` {other:?} is not one of your email tests: list them with GET /v5/tests"),
        ));
    }
    versions(state, test).await
}

/// A name as given: trimmed, 1 to [`MAX_NAME_CHARS`] characters, no control characters.
pub fn reviewer_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(Error::new(
            ErrorName::InvalidParameter,
            format!("give your name (1 to {MAX_NAME_CHARS} characters, no line breaks) so the owner knows who decided"),
        ));
    }
    Ok(name.to_string())
}

/// Records `who`'s decision on `test`, with an optional note (at most [`MAX_NOTE_CHARS`]).
pub async fn decide(
    state: &AppState,
    test: &TestRow,
    who: &Who<'_>,
    decision: Decision,
    note: Option<&str>,
) -> Result<()> {
    if test.kind != domain::TestKind::Email {
        return Err(Error::new(
            ErrorName::InvalidTestId,
            "only email tests are approved; this is a spam test",
        ));
    }
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    if note.is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS) {
        return Err(Error::new(
            ErrorName::InvalidParameter,
            format!("the note is longer than {MAX_NOTE_CHARS} characters: shorten it"),
        ));
    }
    let name = match who {
        Who::Owner => "Owner".to_string(),
        Who::Shared { name, .. } => reviewer_name(name)?,
    };
    let reviewer = match who {
        Who::Owner => Reviewer::Owner,
        Who::Shared { token_hash, .. } => Reviewer::Share {
            token_hash,
            name: &name,
        },
    };
    let decided = state.store.approvals(&test.id).await?;
    let key = reviewer.key();
    if decided.len() >= MAX_REVIEWERS && !decided.iter().any(|d| d.reviewer == key) {
        return Err(Error::new(
            ErrorName::InvalidParameter,
            format!("this test already has {MAX_REVIEWERS} reviewers' decisions; no more are kept"),
        ));
    }
    let now = chrono::Utc::now().timestamp();
    state
        .store
        .decide(&test.id, &reviewer, &name, decision, note, now)
        .await?;
    Ok(())
}

/// Every reviewer's latest decision on `test` and the state they give.
pub async fn approvals(
    state: &AppState,
    test: &TestRow,
) -> Result<(ApprovalState, Vec<ApprovalRow>)> {
    let rows = state.store.approvals(&test.id).await?;
    Ok((ApprovalState::of(rows.iter().map(|r| r.decision)), rows))
}
