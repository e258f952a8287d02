//! Completion webhooks (extension): the account's default callback URL and signing secret
//! (`GET`/`PUT /v5/account/webhook`) and the state of one test's callback
//! (`GET /v5/{email,spam}/tests/{id}/callback`).

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Value};
use store::Account;

use super::email::owned_test;
use crate::auth::{Authed, Caller};
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::AppState;

fn account(caller: &Caller) -> ApiResult<&Account> {
    caller.account().ok_or_else(|| {
        ApiError::new(
            ErrorName::PermissionError,
            "the sandbox has no webhook settings; use an account's API key",
        )
    })
}

/// The account's settings as answered by both methods. Reading them makes the secret if the
/// account has none yet.
async fn settings(state: &AppState, account: &Account) -> ApiResult<Value> {
    let secret = state
        .store
        .webhook_secret(account.id, &::webhooks::new_secret())
        .await?
        .ok_or_else(|| {
            ApiError::new(
                ErrorName::AccessDenied,
                "the account was removed; sign in with another API key",
            )
        })?;
    Ok(json!({
        "callback_url": state.store.webhook_url(account.id).await?,
        "secret": secret,
        "signature_header": ::webhooks::SIGNATURE_HEADER,
    }))
}

/// `GET /v5/account/webhook`.
pub async fn get_account_webhook(
    State(state): State<AppState>,
    caller: Authed,
) -> ApiResult<Json<Value>> {
    Ok(Json(settings(&state, account(&caller)?).await?))
}

/// `PUT /v5/account/webhook`: `{"callback_url": "https://…"}` sets the default for tests that
/// carry none; `null` or `""` clears it.
pub async fn put_account_webhook(
    State(state): State<AppState>,
    caller: Authed,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let account = account(&caller)?;
    if !m.contains_key("callback_url") {
        return Err(ApiError::new(
            ErrorName::InvalidParameter,
            "send `callback_url`: the URL completed tests are POSTed to (null or \"\" clears it)",
        ));
    }
    let url = params::string(&m, "callback_url")?
        .filter(|u| !u.trim().is_empty())
        .map(|u| super::create::callback_url(&state, &u))
        .transpose()?;
    state
        .store
        .set_webhook_url(account.id, url.as_deref())
        .await?;
    Ok(Json(settings(&state, account).await?))
}

async fn callback_state(state: &AppState, test_id: &str) -> ApiResult<Value> {
    let (url, row) = state.store.test_callback(test_id).await?;
    Ok(match row {
        None => json!({
            "callback_url": url,
            "state": if url.is_some() { "waiting" } else { "none" },
        }),
        Some(r) => json!({
            "callback_url": r.url,
            "state": r.state,
            "delivery_id": r.delivery_id,
            "completed_at": r.completed_at,
            "attempts": r.attempts,
            "last_status": r.last_status,
            "last_error": r.last_error,
            "finished_at": r.finished_at,
        }),
    })
}

/// `GET /v5/email/tests/{id}/callback`.
pub async fn email_test_callback(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    Ok(Json(callback_state(&state, &test.id).await?))
}

/// `GET /v5/spam/tests/{id}/callback`.
pub async fn spam_test_callback(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Spam).await?;
    Ok(Json(callback_state(&state, &test.id).await?))
}
