//! Visual diff between two email tests (extension, `GET /v5/email/tests/{id}/diff/{other}`): per
//! client and variant screenshot present and Complete in both, the share of changed pixels, the
//! changed regions and a highlight image drawn over the other (newer) test's screenshot.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use axum::extract::{Path, State};
use axum::Json;
use domain::{ScreenshotStatus, TestKind};
use serde_json::{json, Map, Value};
use store::ClientRow;
use tokio::sync::Semaphore;

use super::email::owned_test;
use super::shots;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Diffs running at once across all requests: each holds two decoded screenshots (tens of MB for
/// a long email at 2×) and a core, and the blocking pool is shared with the rest of the service.
const CONCURRENT_DIFFS: usize = 2;

static DIFF_SLOTS: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(CONCURRENT_DIFFS)));

pub async fn visual_diff(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, id, other)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let base = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let new = owned_test(&state, &caller, &other, TestKind::Email).await?;
    let base_rows = state.store.test_clients(&base.id).await?;
    let new_rows = state.store.test_clients(&new.id).await?;
    let new_by_id: BTreeMap<&str, &ClientRow> =
        new_rows.iter().map(|r| (r.client_id.as_str(), r)).collect();
    let now = chrono::Utc::now().timestamp();
    let mut clients = Map::new();
    for b in &base_rows {
        let Some(n) = new_by_id.get(b.client_id.as_str()) else {
            continue;
        };
        let entry = if b.status == ScreenshotStatus::Complete
            && n.status == ScreenshotStatus::Complete
        {
            let mut variants = Map::new();
            for v in b.variants.iter().filter(|v| n.variants.contains(v)) {
                let out =
                    diff_variant(&state, &base.id, &new.id, &b.client_id, v.as_str(), now).await?;
                variants.insert(v.as_str().into(), out);
            }
            json!({"status": "Compared", "variants": variants})
        } else {
            json!({
                "status": "NotCompared",
                "message": "only screenshots that are Complete in both tests are compared",
                "test_status": b.status.as_str(),
                "other_status": n.status.as_str(),
            })
        };
        clients.insert(b.client_id.clone(), entry);
    }
    let only = |rows: &[ClientRow], other: &[ClientRow]| -> Vec<String> {
        rows.iter()
            .filter(|r| !other.iter().any(|o| o.client_id == r.client_id))
            .map(|r| r.client_id.clone())
            .collect()
    };
    Ok(Json(json!({
        "test_id": base.id,
        "other_test_id": new.id,
        "clients": clients,
        "only_in_test": only(&base_rows, &new_rows),
        "only_in_other": only(&new_rows, &base_rows),
    })))
}

/// One variant of one client: the figures, and the highlight image stored beside the new test's
/// screenshots. A screenshot missing from the blob store is reported in place, not as a failure
/// of the whole comparison.
async fn diff_variant(
    state: &AppState,
    base: &str,
    new: &str,
    client: &str,
    variant: &str,
    now: i64,
) -> ApiResult<Value> {
    let read = |test: &str| {
        let key = store::screenshot_key(test, client, variant);
        async move { state.blobs.get(&key).await }
    };
    let (old_png, new_png) = match (read(base).await, read(new).await) {
        (Ok(Some(a)), Ok(Some(b))) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return Err(ApiError::internal(
                "reading a screenshot for a diff failed",
                e,
            ))
        }
        _ => {
            return Ok(json!({
                "error": "a screenshot of this variant is missing from storage; reprocess the test that lacks it"
            }))
        }
    };
    let permit = Arc::clone(&DIFF_SLOTS)
        .acquire_owned()
        .await
        .map_err(|e| ApiError::internal("the diff limiter is closed", e))?;
    let result = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        shotdiff::diff(&old_png, &new_png, &shotdiff::Options::default())
    })
    .await
    .map_err(|e| ApiError::internal("a screenshot diff task failed", e))?;
    let mut d = match result {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(base, new, client, variant, error = %e, "screenshot diff failed");
            return Ok(json!({ "error": e.to_string() }));
        }
    };
    state
        .blobs
        .put(
            &store::diff_key(new, base, client, variant),
            std::mem::take(&mut d.highlight_png),
        )
        .await
        .map_err(|e| ApiError::internal("storing a diff image failed", e))?;
    let size = |(width, height): (u32, u32)| json!({"width": width, "height": height});
    Ok(json!({
        "changed_share": d.changed_share(),
        "changed_pixels": d.changed_pixels,
        "compared_pixels": d.compared_pixels,
        "boxes": d.boxes.iter().map(|r| json!({"x": r.x, "y": r.y, "width": r.width, "height": r.height})).collect::<Vec<_>>(),
        "extra_height": d.extra_height,
        "extra_width": d.extra_width,
        "test_size": size(d.old_size),
        "other_size": size(d.new_size),
        "diff_image": shots::url(&state.settings, new, client, &store::diff_name(base, variant), now),
    }))
}
