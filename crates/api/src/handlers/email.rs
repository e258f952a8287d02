//! Reading and acting on existing email tests (spec §4.2): info, results, reprocess, delete and
//! content views.

use axum::extract::{Path, State};
use axum::Json;
use domain::{Picture, ScreenshotStatus, TestKind};
use serde_json::{json, Map, Value};
use store::{ClientRow, ReprocessOutcome, TestRow};

pub use app::owned_test;
pub use app::results::{stored_content, test_client};

use super::shots;
use crate::auth::{Authed, Caller};
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::AppState;
use crate::version::ApiVersion;

/// Screenshots still Processing after this long are requeued on Get Test Info (spec §3).
const STALE_PROCESSING_SECS: i64 = 180;

pub async fn test_info(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let now = chrono::Utc::now().timestamp();
    let requeued = state
        .store
        .requeue_stale(&test.id, now - STALE_PROCESSING_SECS, now)
        .await?;
    if requeued > 0 {
        tracing::warn!(test_id = %test.id, requeued, "requeued screenshots stuck in Processing");
        state.work_ready.notify_waiters();
    }
    let clients = state.store.test_clients(&test.id).await?;
    let pick = |f: &dyn Fn(ScreenshotStatus) -> bool| -> Vec<&str> {
        clients
            .iter()
            .filter(|c| f(c.status))
            .map(|c| c.client_id.as_str())
            .collect()
    };
    let completed = pick(&|s| s == ScreenshotStatus::Complete);
    let processing =
        pick(&|s| matches!(s, ScreenshotStatus::Pending | ScreenshotStatus::Processing));
    let bounced = pick(&|s| s == ScreenshotStatus::Bounced);
    let mut out = Map::new();
    out.insert("subject".into(), json!(test.subject));
    out.insert("date".into(), json!(test.created_at));
    // Spec §2.4: one to three of the lists are present; an empty list is left out, but never all.
    for (name, list) in [
        ("completed", &completed),
        ("processing", &processing),
        ("bounced", &bounced),
    ] {
        if !list.is_empty() {
            out.insert(name.into(), json!(list));
        }
    }
    if completed.is_empty() && processing.is_empty() && bounced.is_empty() {
        out.insert("completed".into(), json!([]));
    }
    Ok(Json(Value::Object(out)))
}

pub fn client_result(
    state: &AppState,
    test: &TestRow,
    row: &ClientRow,
    version: ApiVersion,
    now: i64,
) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(row.client_id));
    let profile = state.catalog.get(&row.client_id);
    if let Some(c) = profile {
        out.insert("display_name".into(), json!(c.display_name));
        out.insert("client".into(), json!(c.client));
        out.insert("os".into(), json!(c.os));
        out.insert("category".into(), json!(c.category.as_str()));
        if let Some(b) = &c.browser {
            out.insert("browser".into(), json!(b));
        }
        // Answered under the id the caller sent; this says which profile drew it.
        if let Some(profile) = &c.alias_of {
            out.insert("alias_of".into(), json!(profile));
        }
    }
    let mut screenshots = Map::new();
    for v in &row.variants {
        screenshots.insert(
            v.as_str().into(),
            json!(shots::url(
                &state.settings,
                &test.id,
                &row.client_id,
                &Picture::Shot(*v),
                now
            )),
        );
    }
    out.insert("screenshots".into(), Value::Object(screenshots));
    out.insert(
        "thumbnail".into(),
        json!(shots::url(
            &state.settings,
            &test.id,
            &row.client_id,
            &Picture::Thumbnail,
            now
        )),
    );
    if version.has_full_thumbnail() {
        out.insert(
            "full_thumbnail".into(),
            json!(shots::url(
                &state.settings,
                &test.id,
                &row.client_id,
                &Picture::FullThumbnail,
                now
            )),
        );
    }
    out.insert("status".into(), json!(row.status.as_str()));
    let mut details = Map::new();
    details.insert("submitted".into(), json!(row.submitted_at));
    match row.status {
        ScreenshotStatus::Pending => {}
        ScreenshotStatus::Processing => {
            details.insert("attempts".into(), json!(row.attempts));
        }
        ScreenshotStatus::Complete => {
            details.insert("completed".into(), json!(row.completed_at));
            details.insert("attempts".into(), json!(row.attempts));
        }
        ScreenshotStatus::Bounced => {
            details.insert(
                "bounce_code".into(),
                json!(row.bounce_code.clone().unwrap_or_default()),
            );
            details.insert(
                "bounce_message".into(),
                json!(row.bounce_message.clone().unwrap_or_default()),
            );
        }
    }
    out.insert("status_details".into(), Value::Object(details));
    // Which engine and which rule set made (or will make) the picture: honest provenance.
    let engine = row
        .engine
        .clone()
        .or_else(|| profile.map(|c| c.engine.as_str().to_string()));
    let rules = row
        .rule_set
        .clone()
        .or_else(|| profile.map(|c| c.rules.clone()));
    out.insert("engine".into(), json!(engine));
    out.insert("rule_set".into(), json!(rules));
    // Mailproof additions, once the client is complete: per screenshot, what its page could not
    // load and why (a broken email and an unreachable host look alike in the picture), and the
    // email's width where it was wider than the client's window (the picture is cut there).
    if row.status == ScreenshotStatus::Complete {
        let failed: Map<String, Value> = row
            .shots
            .iter()
            .map(|(variant, shot)| (variant.as_str().to_string(), json!(shot.failed)))
            .collect();
        out.insert("failed_resources".into(), Value::Object(failed));
        let wider: Map<String, Value> = row
            .shots
            .iter()
            .filter_map(|(variant, shot)| {
                Some((variant.as_str().to_string(), json!(shot.overflow_width?)))
            })
            .collect();
        out.insert("overflow_width".into(), Value::Object(wider));
    }
    Value::Object(out)
}

pub async fn results(
    State(state): State<AppState>,
    caller: Authed,
    version: ApiVersion,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let now = chrono::Utc::now().timestamp();
    let rows = state.store.test_clients(&test.id).await?;
    let out: Map<String, Value> = rows
        .iter()
        .map(|r| {
            (
                r.client_id.clone(),
                client_result(&state, &test, r, version, now),
            )
        })
        .collect();
    Ok(Json(Value::Object(out)))
}

pub async fn results_for_client(
    State(state): State<AppState>,
    caller: Authed,
    version: ApiVersion,
    Path((_, id, client)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let now = chrono::Utc::now().timestamp();
    let row = test_client(&state, &test, &client).await?;
    let mut out = Map::new();
    out.insert(
        row.client_id.clone(),
        client_result(&state, &test, &row, version, now),
    );
    Ok(Json(Value::Object(out)))
}

/// `/results/` with no client id: the URL parameter is missing.
pub async fn results_without_client(_caller: Authed) -> ApiError {
    ApiError::new(
        ErrorName::NoClient,
        "the client id is missing from the URL: use /v5/email/tests/<test_id>/results/<client_id>",
    )
}

pub async fn reprocess(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let clients = params::id_list(&m, "clients")?
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                ErrorName::NoClients,
                "send `clients`: the ids of the clients of this test to reprocess",
            )
        })?;
    let rows = state.store.test_clients(&test.id).await?;
    if !clients
        .iter()
        .any(|c| rows.iter().any(|r| &r.client_id == c))
    {
        return Err(ApiError::new(
            ErrorName::InvalidTestClient,
            format!(
                "none of {} is in this test; its clients are: {}",
                clients.join(", "),
                rows.iter()
                    .map(|r| r.client_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let now = chrono::Utc::now().timestamp();
    let outcomes = state.store.reprocess(&test.id, &clients, now).await?;
    state.work_ready.notify_waiters();
    let out: Map<String, Value> = outcomes
        .into_iter()
        .map(|(client, o)| {
            let v = match o {
                ReprocessOutcome::Queued { remaining } => {
                    json!({"success": true, "remaining_reprocesses": remaining, "regional": false})
                }
                ReprocessOutcome::Refused { remaining, reason } => json!({
                    "success": false, "remaining_reprocesses": remaining, "regional": false, "reason": reason
                }),
            };
            (client, v)
        })
        .collect();
    Ok(Json(Value::Object(out)))
}

pub async fn delete_test(
    state: &AppState,
    caller: &Caller,
    id: &str,
    kind: TestKind,
) -> ApiResult<Json<Value>> {
    let test = owned_test(state, caller, id, kind).await?;
    state.store.delete_test(test.account_id, &test.id).await?;
    if let Err(e) = state.blobs.delete_test(&test.id).await {
        // The rows are gone, so nothing links to these files any more; log for the operator.
        tracing::warn!(test_id = %test.id, error = %e, "could not delete screenshots of a deleted test");
    }
    tracing::info!(test_id = %test.id, "test deleted");
    Ok(Json(json!({"success": true})))
}

pub async fn delete_email_test(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    delete_test(&state, &caller, &id, TestKind::Email).await
}

pub async fn content(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    Ok(Json(
        json!({"content": stored_content(&state, &test).await?}),
    ))
}

pub async fn content_inlinecss(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let html = stored_content(&state, &test).await?;
    let inlined = tokio::task::spawn_blocking(move || content::inline::inline_css(&html))
        .await
        .map_err(|e| ApiError::internal("CSS inlining failed", e))?
        .map_err(|e| {
            ApiError::new(
                ErrorName::ProcessingError,
                format!("could not inline this email's CSS: {e}"),
            )
        })?;
    Ok(Json(json!({"content": inlined})))
}

pub async fn content_textonly(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let html = stored_content(&state, &test).await?;
    let text = tokio::task::spawn_blocking(move || content::text::text_only(&html))
        .await
        .map_err(|e| ApiError::internal("text conversion failed", e))?;
    Ok(Json(json!({"content": text})))
}
