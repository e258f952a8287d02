//! Per-client code analysis of a test's email and client tips, from the rule sets the renderer
//! applies (`emulate::analyze`, `emulate::tips`).

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Value};
use store::TestRow;

use super::email::{owned_test, stored_content, test_client};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::state::AppState;

/// `GET /v5/email/tests/{id}/codeanalysis/{client}`.
pub async fn code_analysis(
    State(state): State<AppState>,
    caller: Caller,
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

/// The code analysis of `test`'s email for one of its clients, as the endpoint computes it; the
/// web pages show the same findings. The caller must already own `test`.
pub async fn client_analysis(
    state: &AppState,
    test: &TestRow,
    client: &str,
) -> ApiResult<emulate::Analysis> {
    let row = test_client(state, test, client).await?;
    let profile = state.catalog.get(&row.client_id).cloned().ok_or_else(|| {
        ApiError::new(
            ErrorName::ClientNotFound,
            format!(
                "client {:?} of this test is no longer in the client catalog: create a new test",
                row.client_id
            ),
        )
    })?;
    let html = stored_content(state, test).await?;
    let rules = state.rules.clone();
    tokio::task::spawn_blocking(move || emulate::analyze(&html, &profile, &rules))
        .await
        .map_err(|e| ApiError::internal("code analysis failed", e))?
        .map_err(|e| ApiError::internal("code analysis failed", e))
}

/// `GET /v5/email/tips/{client}`.
/// `NoClient` (spec §7.1): the analysis is per client, and the URL names none.
pub async fn code_analysis_without_client(_caller: Caller) -> ApiError {
    ApiError::new(
        ErrorName::NoClient,
        "the client id is missing from the URL: use /v5/email/tests/<test_id>/codeanalysis/<client_id>",
    )
}

pub async fn tips_without_client(_caller: Caller) -> ApiError {
    ApiError::new(
        ErrorName::NoClient,
        "the client id is missing from the URL: use /v5/email/tips/<client_id>",
    )
}

pub async fn tips(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, client)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let (id, tips) = client_tips(&state, &caller, &client)?;
    let tips: Vec<Value> = tips
        .iter()
        .map(|t| json!({"name": t.name, "tip": t.tip}))
        .collect();
    Ok(Json(json!({"client": id, "tips": tips})))
}

/// The tips for `client` (an id or URL segment) as the caller may see them: the normalised id and
/// the ranked tips, or `InvalidClient` for an unknown client or one outside the caller's plan.
pub fn client_tips(
    state: &AppState,
    caller: &Caller,
    client: &str,
) -> ApiResult<(String, Vec<emulate::Tip>)> {
    let id = client.trim().to_ascii_lowercase();
    let profile = state.catalog.get(&id).ok_or_else(|| {
        ApiError::new(
            ErrorName::InvalidClient,
            format!(
                "no client {id:?} in the catalog; list the client ids with GET /v5/email/clients"
            ),
        )
    })?;
    // A client-restricted or free plan hears about the clients it can test, as in the client list.
    if !intake::ClientRules::new(&state.catalog, caller.account()).usable(profile) {
        return Err(ApiError::new(
            ErrorName::InvalidClient,
            format!("client {id:?} is not available on your plan; GET /v5/email/clients lists the ids you can use"),
        ));
    }
    let tips = emulate::tips(profile, &state.rules)
        .map_err(|e| ApiError::internal("client tips failed", e))?;
    Ok((id, tips))
}
