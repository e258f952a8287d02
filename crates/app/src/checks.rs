//! Accessibility and content checks of an email test: the first request queues the check (a
//! worker beside the engines measures the images and has Chromium judge the contrast, see
//! `content::checks`); the static findings are answered at once, the whole report when the worker
//! is done.

use content::checks::{CheckReport, Finding, Severity, Summary};
use store::TestRow;

use crate::error::{Error, Result};
use crate::results::stored_content;
use crate::state::AppState;

/// Where a test's content check stands.
#[derive(Clone, Debug)]
pub enum CheckState {
    /// The worker has not finished: the static findings (computed now) and why it is retrying,
    /// if it is.
    Pending {
        findings: Vec<Finding>,
        summary: Summary,
        retrying_after: Option<String>,
    },
    Complete {
        completed_at: Option<i64>,
        report: CheckReport,
    },
}

/// Starts `test`'s content check if it never ran (the caller already owns `test`) and answers
/// what is known; the API's `GET` and the web's Checks page both call this.
pub async fn check_state(state: &AppState, test: &TestRow) -> Result<CheckState> {
    let html = stored_content(state, test).await?;
    let now = chrono::Utc::now().timestamp();
    if state.store.request_content_check(&test.id, now).await? {
        state.checks_ready.notify_one();
    }
    let row = state.store.content_check(&test.id).await?;
    if let Some(row) = row.as_ref().filter(|r| r.state == domain::QueueState::Done) {
        let result = row.result.as_deref().unwrap_or_default();
        let report: CheckReport = serde_json::from_str(result)
            .map_err(|e| Error::internal("stored content check is unreadable", e))?;
        return Ok(CheckState::Complete {
            completed_at: row.completed_at,
            report,
        });
    }
    // The static checks take microseconds: answer them now, the rest when the worker is done.
    let text_part = state.store.test_text_part(&test.id).await?;
    let (findings, summary) = tokio::task::spawn_blocking(move || {
        let findings = content::checks::static_findings(&html, text_part);
        let (summary, _) = content::checks::weigh(&html, None);
        (findings, summary)
    })
    .await
    .map_err(|e| Error::internal("static content checks failed", e))?;
    let findings = findings.unwrap_or_else(|reason| {
        vec![Finding {
            id: "html".into(),
            severity: Severity::Error,
            message: format!("{reason}; the static checks could not run"),
            line: None,
            contrast: None,
        }]
    });
    Ok(CheckState::Pending {
        findings,
        summary,
        retrying_after: row.and_then(|r| r.last_error),
    })
}
