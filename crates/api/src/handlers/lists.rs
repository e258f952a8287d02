//! Test lists and search (spec §4.5): `/v5/email/tests`, `/v5/spam/tests` and `/v5/tests`.

use axum::extract::{RawQuery, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Value};

use crate::auth::{Authed, Caller};
use crate::error::ApiResult;
use crate::state::AppState;

pub use app::lists::{parse_query, MAX_HEADER_FILTERS};

async fn list(
    state: &AppState,
    caller: &Caller,
    raw: Option<String>,
    area: Option<TestKind>,
) -> ApiResult<Json<Value>> {
    let enterprise = caller.account().is_none_or(|a| a.plan.is_enterprise());
    let filter = parse_query(raw.as_deref(), area, enterprise)?;
    let Some(account) = caller.account() else {
        return Ok(Json(json!([])));
    };
    let tests = state.store.list_tests(account.id, &filter).await?;
    Ok(Json(Value::Array(
        tests
            .iter()
            .map(|t| json!({"id": t.id, "date": t.created_at, "type": t.kind.as_str(), "headers": t.headers}))
            .collect(),
    )))
}

pub async fn list_email_tests(
    State(s): State<AppState>,
    caller: Authed,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    list(&s, &caller, q, Some(TestKind::Email)).await
}

pub async fn list_spam_tests(
    State(s): State<AppState>,
    caller: Authed,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    list(&s, &caller, q, Some(TestKind::Spam)).await
}

pub async fn list_all_tests(
    State(s): State<AppState>,
    caller: Authed,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    list(&s, &caller, q, None).await
}
