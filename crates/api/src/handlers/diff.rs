//! The visual diff endpoint: the application layer compares, this answers the figures as JSON.

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde_json::{json, Map, Value};

pub use app::diff::{
    compare, ClientComparison, ClientOutcome, Comparison, VariantOutcome, Variants,
};
use app::owned_test;

use crate::auth::Authed;
use crate::error::ApiResult;
use crate::state::AppState;

pub async fn visual_diff(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id, other)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let base = owned_test(&state, &caller, &id, TestKind::Email).await?;
    let new = owned_test(&state, &caller, &other, TestKind::Email).await?;
    let c = compare(&state, &base, &new, Variants::All).await?;
    let mut clients = Map::new();
    for cc in c.clients {
        let entry = match cc.outcome {
            ClientOutcome::Compared(variants) => {
                let variants: Map<String, Value> = variants
                    .into_iter()
                    .map(|(v, out)| (v.as_str().to_string(), variant_json(out)))
                    .collect();
                json!({"status": "Compared", "variants": variants})
            }
            ClientOutcome::NotCompared {
                test_status,
                other_status,
            } => json!({
                "status": "NotCompared",
                "message": "only screenshots that are Complete in both tests are compared",
                "test_status": test_status.as_str(),
                "other_status": other_status.as_str(),
            }),
        };
        clients.insert(cc.client, entry);
    }
    Ok(Json(json!({
        "test_id": base.id,
        "other_test_id": new.id,
        "clients": clients,
        "only_in_test": c.only_in_test,
        "only_in_other": c.only_in_other,
    })))
}

fn variant_json(out: VariantOutcome) -> Value {
    match out {
        VariantOutcome::Failed(e) => json!({ "error": e }),
        VariantOutcome::Diffed {
            diff: d,
            diff_image,
        } => {
            let size = |(width, height): (u32, u32)| json!({"width": width, "height": height});
            json!({
                "changed_share": d.changed_share(),
                "changed_pixels": d.changed_pixels,
                "compared_pixels": d.compared_pixels,
                "boxes": d.boxes.iter().map(|r| json!({"x": r.x, "y": r.y, "width": r.width, "height": r.height})).collect::<Vec<_>>(),
                "extra_height": d.extra_height,
                "extra_width": d.extra_width,
                "test_size": size(d.old_size),
                "other_size": size(d.new_size),
                "diff_image": diff_image,
            })
        }
    }
}
