//! Accessibility and content checks of an email test: `GET` starts the check the first time it is
//! asked for (a worker beside the engines measures the images and has Chromium judge the
//! contrast, see `content::checks`) and answers what is known: the static findings at once, the
//! whole report when the worker is done.

use axum::extract::{Path, State};
use axum::Json;
use content::checks::{CheckReport, Finding, ImageWeight, Severity, Summary};
use domain::TestKind;
use serde_json::{json, Value};

use super::email::{owned_test, stored_content};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use store::TestRow;

/// Where a test's content check stands.
#[derive(Clone, Debug)]
pub enum CheckState {
    /// The worker has not finished: the static findings (computed now) and why it is retrying,
    /// if it is.
    Pending {
        findings: Vec<Finding>,
        summary: Summary,
        retrying_after: Option<String>,
    },
    Complete {
        completed_at: Option<i64>,
        report: CheckReport,
    },
}

/// Starts `test`'s content check if it never ran (the caller already owns `test`) and answers
/// what is known; the API's `GET` and the web's Checks page both call this.
pub async fn check_state(state: &AppState, test: &TestRow) -> ApiResult<CheckState> {
    let html = stored_content(state, test).await?;
    let now = chrono::Utc::now().timestamp();
    if state.store.request_content_check(&test.id, now).await? {
        state.checks_ready.notify_one();
    }
    let row = state.store.content_check(&test.id).await?;
    if let Some(row) = row.as_ref().filter(|r| r.state == domain::QueueState::Done) {
        let result = row.result.as_deref().unwrap_or_default();
        let report: CheckReport = serde_json::from_str(result)
            .map_err(|e| ApiError::internal("stored content check is unreadable", e))?;
        return Ok(CheckState::Complete {
            completed_at: row.completed_at,
            report,
        });
    }
    // The static checks take microseconds: answer them now, the rest when the worker is done.
    let text_part = state.store.test_text_part(&test.id).await?;
    let (findings, summary) = tokio::task::spawn_blocking(move || {
        let findings = content::checks::static_findings(&html, text_part);
        let (summary, _) = content::checks::weigh(&html, None);
        (findings, summary)
    })
    .await
    .map_err(|e| ApiError::internal("static content checks failed", e))?;
    let findings = findings.unwrap_or_else(|reason| {
        vec![Finding {
            id: "html".into(),
            severity: Severity::Error,
            message: format!("{reason}; the static checks could not run"),
            line: None,
            contrast: None,
        }]
    });
    Ok(CheckState::Pending {
        findings,
        summary,
        retrying_after: row.and_then(|r| r.last_error),
    })
}

/// `GET /v5/email/tests/{id}/checks`.
pub async fn report(
    State(state): State<AppState>,
    caller: Caller,
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
