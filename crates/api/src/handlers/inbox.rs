//! A test's inbox rows (a mailproof addition): `GET` starts them the first time they are asked
//! for (a worker beside the engines cuts each client family's row in Chromium and draws it in the
//! family's engine) and answers the report when it is done, each row's pictures as presigned
//! URLs like the screenshots'.

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Value};

use app::inbox::{picture_url, rows_state, RowsState};
use app::owned_test;

use crate::auth::Authed;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `GET /v5/email/tests/{id}/inbox`.
pub async fn rows(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let now = chrono::Utc::now().timestamp();
    Ok(Json(match rows_state(&state, &test).await? {
        RowsState::Pending { retrying_after } => {
            let mut body = json!({"status": "pending"});
            if let Some(error) = retrying_after {
                body["retrying_after"] = json!(error);
            }
            body
        }
        RowsState::Complete {
            completed_at,
            report,
        } => {
            let mut body = serde_json::to_value(&report).map_err(|e| {
                ApiError::from(app::error::Error::internal("encoding inbox rows failed", e))
            })?;
            body["status"] = json!("complete");
            body["completed_at"] = json!(completed_at);
            if let Some(rows) = body["rows"].as_array_mut() {
                for (row, r) in rows.iter_mut().zip(&report.rows) {
                    row["pictures"] = r
                        .schemes
                        .iter()
                        .map(|s| json!({"scheme": s, "url": picture_url(&state, &test.id, &r.id, *s, now)}))
                        .collect();
                }
            }
            body
        }
    }))
}
