//! Versions and approvals of an email test (mailproof additions, issue 32): the versions of the
//! email a test belongs to, moving a test into another's versions, the reviewers' decisions and
//! the owner's own. Reviewers who come through a share link decide on the shared proof (`web`).

use axum::extract::{Path, State};
use axum::Json;
use domain::{Decision, Spelled, TestKind};
use serde_json::{json, Value};

use app::owned_test;
use app::review::{self, Who};
use store::{ApprovalRow, VersionRow};

use crate::auth::Authed;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::AppState;

fn version_json(v: &VersionRow) -> Value {
    json!({
        "id": v.test_id,
        "version": v.version,
        "subject": v.subject,
        "created_at": v.created_at,
        "approval": v.approval.as_str(),
        "content_sha256": v.content_sha256,
    })
}

fn versions_json(id: &str, versions: &[VersionRow]) -> Value {
    json!({
        "version": versions.iter().find(|v| v.test_id == id).map(|v| v.version),
        "versions": versions.iter().map(version_json).collect::<Vec<_>>(),
    })
}

/// `GET /v5/email/tests/{id}/versions`: the versions of this test's email, oldest first.
pub async fn versions(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let versions = review::versions(&state, &test).await?;
    Ok(Json(versions_json(&test.id, &versions)))
}

/// `PUT /v5/email/tests/{id}/versions` with `{"version_of": "<test id>"}`: this test becomes a
/// version of that test's email.
pub async fn join(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let Some(other) = params::string(&m, "version_of")? else {
        return Err(ApiError::new(
            ErrorName::InvalidParameter,
            "send {\"version_of\": \"<test id>\"}: the email test this one is a version of",
        ));
    };
    let versions = review::join_versions_of(&state, &test, &other).await?;
    Ok(Json(versions_json(&test.id, &versions)))
}

fn approval_json(a: &ApprovalRow) -> Value {
    json!({
        "name": a.name,
        "via": if a.share_token_hash.is_some() { "share_link" } else { "owner" },
        "decision": a.decision.as_str(),
        "note": a.note,
        "decided_at": a.decided_at,
    })
}

async fn approvals_body(state: &AppState, test: &store::TestRow) -> ApiResult<Json<Value>> {
    let (approval, rows) = review::approvals(state, test).await?;
    Ok(Json(json!({
        "approval": approval.as_str(),
        "decisions": rows.iter().map(approval_json).collect::<Vec<_>>(),
    })))
}

/// `GET /v5/email/tests/{id}/approvals`: each reviewer's latest decision and the state they give.
pub async fn approvals(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    approvals_body(&state, &test).await
}

/// `PUT /v5/email/tests/{id}/approval` with `{"decision": "approved" | "changes_requested",
/// "note": ".."}`: the owner's decision.
pub async fn decide(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let raw = params::string(&m, "decision")?.unwrap_or_default();
    let decision = Decision::parse_known(raw.trim()).map_err(|_| {
        ApiError::new(
            ErrorName::InvalidParameter,
            format!("`decision` {raw:?} must be \"approved\" or \"changes_requested\""),
        )
    })?;
    let note = params::string(&m, "note")?;
    review::decide(&state, &test, &Who::Owner, decision, note.as_deref()).await?;
    approvals_body(&state, &test).await
}
