//! Link checks of an email test: requesting one (a worker in the service runs it under the
//! network policy, see `content::links`) and reading where it stands.

use store::TestRow;

use crate::error::{Error, Result};
use crate::state::AppState;

/// Where a test's link check stands.
#[derive(Clone, Debug)]
pub enum LinkState {
    /// Never requested.
    NotStarted,
    /// Queued or running.
    Pending,
    Complete {
        completed_at: Option<i64>,
        check: content::links::LinkCheck,
    },
}

/// Queues a link check of `test` (already owned by the caller) and wakes the worker; the API's
/// `PUT` and the web's "Check links" button both call this. A check already queued or running
/// is not queued again.
pub async fn request_check(state: &AppState, test: &TestRow) -> Result<()> {
    state
        .store
        .request_link_check(&test.id, chrono::Utc::now().timestamp())
        .await?;
    state.links_ready.notify_one();
    Ok(())
}

/// The state of `test`'s link check (the caller already owns `test`).
pub async fn link_state(state: &AppState, test: &TestRow) -> Result<LinkState> {
    let Some(row) = state.store.link_check(&test.id).await? else {
        return Ok(LinkState::NotStarted);
    };
    let Some(result) = row.result.filter(|_| row.state == domain::QueueState::Done) else {
        return Ok(LinkState::Pending);
    };
    let check: content::links::LinkCheck = serde_json::from_str(&result)
        .map_err(|e| Error::internal("stored link report is unreadable", e))?;
    Ok(LinkState::Complete {
        completed_at: row.completed_at,
        check,
    })
}
