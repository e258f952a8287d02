//! A test's inbox rows (a mailproof addition): the first request queues them (a worker beside the
//! engines cuts and draws them, see `content::inbox` and `jobs::inbox_rows`); the report is
//! answered when the worker is done, with a presigned URL per picture.

use content::inbox::InboxReport;
use domain::{ColorScheme, Picture, INBOX_ROWS_CLIENT};
use store::TestRow;

use crate::error::{Error, Result};
use crate::state::AppState;

/// Where a test's inbox rows stand.
#[derive(Clone, Debug)]
pub enum RowsState {
    /// The worker has not finished; why it is retrying, if it is.
    Pending { retrying_after: Option<String> },
    Complete {
        completed_at: Option<i64>,
        report: InboxReport,
    },
}

/// Starts `test`'s inbox rows if they were never requested (the caller already owns `test`) and
/// answers what is known; the API's `GET` and the test pages both call this.
pub async fn rows_state(state: &AppState, test: &TestRow) -> Result<RowsState> {
    // Read first: the test page's status poll asks every few seconds, and only the first ask
    // needs a write.
    let mut row = state.store.report_row(&store::INBOX_ROWS, &test.id).await?;
    if row.is_none() {
        let now = chrono::Utc::now().timestamp();
        if state
            .store
            .request_report(&store::INBOX_ROWS, &test.id, now)
            .await?
        {
            state.inbox_ready.notify_one();
        }
        row = state.store.report_row(&store::INBOX_ROWS, &test.id).await?;
    }
    match row {
        Some(r) if r.state == domain::QueueState::Done => {
            let report: InboxReport = serde_json::from_str(r.result.as_deref().unwrap_or_default())
                .map_err(|e| Error::internal("stored inbox rows are unreadable", e))?;
            Ok(RowsState::Complete {
                completed_at: r.completed_at,
                report,
            })
        }
        r => Ok(RowsState::Pending {
            retrying_after: r.and_then(|r| r.last_error),
        }),
    }
}

/// The picture of inbox row `row` in `scheme`.
pub fn picture(row: &str, scheme: ColorScheme) -> Picture {
    Picture::InboxRow {
        row: row.to_string(),
        scheme,
    }
}

/// A presigned URL of a row's picture, as the screenshots' (spec §2.5).
pub fn picture_url(
    state: &AppState,
    test: &str,
    row: &str,
    scheme: ColorScheme,
    now: i64,
) -> String {
    crate::screenshots::url(
        &state.settings,
        test,
        INBOX_ROWS_CLIENT,
        &picture(row, scheme),
        now,
    )
}
