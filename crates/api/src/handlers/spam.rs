//! Spam clients, spam results, seed lists (spec §4.4 and the spam calls of §4.2).

use axum::extract::{Path, State};
use axum::Json;
use domain::{SpamMethod, TestKind};
use serde_json::{json, Value};
use store::TestRow;

use super::email::{delete_test, owned_test};
use crate::auth::Authed;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::state::AppState;

pub async fn spam_clients(State(state): State<AppState>, _caller: Authed) -> Json<Value> {
    Json(Value::Array(
        state
            .spam_clients
            .iter()
            .map(|c| json!({"client": c.client, "type": c.kind, "description": c.description}))
            .collect(),
    ))
}

async fn results_of(state: &AppState, test: &TestRow) -> ApiResult<Json<Value>> {
    let rows = state.store.spam_results(&test.id).await?;
    Ok(Json(Value::Array(
        rows.iter()
            .map(|r| {
                json!({"client": r.client, "type": r.kind, "spam": r.spam, "details": r.details})
            })
            .collect(),
    )))
}

/// The providers' sender requirements on the mail the test received (a mailproof addition): one
/// card per provider, written when the first message reaches a seed address.
async fn requirements_of(state: &AppState, test: &TestRow) -> ApiResult<Json<Value>> {
    let Some((report, checked_at)) = state.store.sender_requirements(&test.id).await? else {
        return Ok(Json(json!({
            "status": "pending",
            "message": "checked when the test's message reaches the first seed address",
        })));
    };
    let mut body = serde_json::to_value(&report)
        .map_err(|e| ApiError::internal("writing a sender-requirements report", e))?;
    body["status"] = json!("complete");
    body["checked_at"] = json!(checked_at);
    Ok(Json(body))
}

fn seed_addresses(state: &AppState, test: &TestRow) -> ApiResult<Json<Value>> {
    let key = match (test.spam_method, &test.seed_key) {
        (Some(SpamMethod::Seed), Some(k)) => k,
        _ => {
            return Err(ApiError::new(
                ErrorName::NoSeedList,
                "this test did not use the seed method, so it has no seed list",
            ))
        }
    };
    Ok(Json(Value::Array(
        state
            .spam_clients
            .iter()
            .map(|c| {
                json!(domain::seed::seed_address(
                    key,
                    &c.client,
                    &state.settings.seed_domain
                ))
            })
            .collect(),
    )))
}

pub async fn spam_test_results(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Spam).await?;
    results_of(&state, &test).await
}

pub async fn spam_test_requirements(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Spam).await?;
    requirements_of(&state, &test).await
}

pub async fn delete_spam_test(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    delete_test(&state, &caller, &id, TestKind::Spam).await
}

pub async fn spam_test_seedlist(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Spam).await?;
    seed_addresses(&state, &test)
}

fn no_spam() -> ApiError {
    ApiError::new(
        ErrorName::NoSpamResults,
        "this email test ran without spam processing; create it with a `spam` object to get spam results",
    )
}

/// The caller's email test `id`, when it ran with spam processing.
async fn email_test_with_spam(state: &AppState, caller: &Authed, id: &str) -> ApiResult<TestRow> {
    let test = owned_test(state, caller, id, TestKind::Email).await?;
    if test.spam_method.is_none() {
        return Err(no_spam());
    }
    Ok(test)
}

pub async fn email_spam_results(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = email_test_with_spam(&state, &caller, &id).await?;
    results_of(&state, &test).await
}

pub async fn email_spam_requirements(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = email_test_with_spam(&state, &caller, &id).await?;
    requirements_of(&state, &test).await
}

pub async fn email_spam_seedlist(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    if test.spam_method.is_none() {
        return Err(ApiError::new(
            ErrorName::NoSeedList,
            "this email test ran without spam processing, so it has no seed list",
        ));
    }
    seed_addresses(&state, &test)
}

/// Reserves a seed key and list ahead of test creation (spec §4.4).
pub async fn reserve_seedlist(
    State(state): State<AppState>,
    caller: Authed,
) -> ApiResult<Json<Value>> {
    let key = domain::seed::generate_key();
    if let Some(a) = caller.account() {
        state
            .store
            .reserve_seed_key(a.id, &key, chrono::Utc::now().timestamp())
            .await?;
    }
    let list: Vec<String> = state
        .spam_clients
        .iter()
        .map(|c| domain::seed::seed_address(&key, &c.client, &state.settings.seed_domain))
        .collect();
    Ok(Json(json!({"key": key, "address_list": list})))
}
