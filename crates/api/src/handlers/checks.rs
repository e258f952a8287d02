//! Accessibility and content checks of an email test: `GET` starts the check the first time it is
//! asked for (a worker beside the engines measures the images and has Chromium judge the
//! contrast, see `content::checks`) and answers what is known: the static findings at once, the
//! whole report when the worker is done.

use axum::extract::{Path, State};
use axum::Json;
use content::checks::{Finding, ImageWeight, Severity, Summary};
use domain::TestKind;
use serde_json::{json, Value};

pub use app::checks::{check_state, CheckState};
use app::owned_test;

use crate::auth::Authed;
use crate::error::ApiResult;
use crate::state::AppState;

/// `GET /v5/email/tests/{id}/checks`.
pub async fn report(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    Ok(Json(match check_state(&state, &test).await? {
        CheckState::Complete {
            completed_at,
            report,
        } => json!({
            "status": "complete",
            "completed_at": completed_at,
            "checks": report.findings.iter().map(finding).collect::<Vec<_>>(),
            "summary": summary(&report.summary),
        }),
        CheckState::Pending {
            findings,
            summary: partial,
            retrying_after,
        } => {
            let mut body = json!({
                "status": "pending",
                "pending": ["contrast", "image weights"],
                "checks": findings.iter().map(finding).collect::<Vec<_>>(),
                "summary": summary(&partial),
            });
            if let Some(error) = retrying_after {
                body["retrying_after"] = json!(error);
            }
            body
        }
    }))
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

fn finding(f: &Finding) -> Value {
    let mut v = json!({
        "id": f.id,
        "severity": severity(f.severity),
        "message": f.message,
        "line": f.line,
    });
    if let Some(c) = &f.contrast {
        v["contrast"] = json!({
            "text": c.text,
            "foreground": c.foreground,
            "background": c.background,
            "ratio": c.ratio,
            "required": c.required,
        });
    }
    v
}

fn image(i: &ImageWeight) -> Value {
    json!({"url": i.url, "line": i.line, "bytes": i.bytes, "error": i.error})
}

fn summary(s: &Summary) -> Value {
    json!({
        "html_bytes": s.html_bytes,
        "gmail_clip_bytes": s.gmail_clip_bytes,
        "gmail_clipped": s.gmail_clipped,
        "images": s.images.as_ref().map(|images| images.iter().map(image).collect::<Vec<_>>()),
        "image_bytes": s.image_bytes,
        "total_bytes": s.total_bytes,
        "images_not_measured": s.images_not_measured,
    })
}
