//! Per-client code analysis of a test's email and client tips, from the rule sets the renderer
//! applies (`emulate::analyze`, `emulate::tips`).

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Value};

use app::owned_test;
pub use app::results::{client_analysis, client_tips};

use crate::auth::Authed;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::state::AppState;

/// `GET /v5/email/tests/{id}/codeanalysis/{client}`.
pub async fn code_analysis(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id, client)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let analysis = client_analysis(&state, &test, &client).await?;
    let groups: Vec<Value> = [
        emulate::Severity::Error,
        emulate::Severity::Warning,
        emulate::Severity::Info,
    ]
    .into_iter()
    .map(|severity| {
        let discrepancies: Vec<Value> = analysis
            .of(severity)
            .map(|f| json!({"property": f.property, "message": f.message, "lines": f.lines}))
            .collect();
        json!({"severity": {
            "name": severity.name(),
            "discrepancy_count": discrepancies.len(),
            "discrepancies": discrepancies,
        }})
    })
    .collect();
    Ok(Json(json!({ "code_analysis": groups })))
}

/// `GET /v5/email/tips/{client}`.
/// `NoClient` (spec §7.1): the analysis is per client, and the URL names none.
pub async fn code_analysis_without_client(_caller: Authed) -> ApiError {
    ApiError::new(
        ErrorName::NoClient,
        "the client id is missing from the URL: use /v5/email/tests/<test_id>/codeanalysis/<client_id>",
    )
}

pub async fn tips_without_client(_caller: Authed) -> ApiError {
    ApiError::new(
        ErrorName::NoClient,
        "the client id is missing from the URL: use /v5/email/tips/<client_id>",
    )
}

pub async fn tips(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, client)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let (id, tips) = client_tips(&state, &caller, &client)?;
    let tips: Vec<Value> = tips
        .iter()
        .map(|t| json!({"name": t.name, "tip": t.tip}))
        .collect();
    Ok(Json(json!({"client": id, "tips": tips})))
}
