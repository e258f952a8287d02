//! Link validation of an email test: `PUT` queues the check (a worker in the service runs it under
//! the network policy, see `content::links`), `GET` answers its current state and report.

use axum::extract::{Path, State};
use axum::Json;
use domain::TestKind;
use serde::Serialize;
use serde_json::{json, Value};

pub use app::links::{link_state, request_check, LinkState};
use app::owned_test;

use crate::auth::Authed;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::state::AppState;

/// `uribl_status` while the check runs.
const URIBL_PENDING: &str = "pending: link domains are looked up when the check runs";
/// `uribl_status` of a report stored before link checks consulted the blocklists.
const URIBL_NOT_ASKED: &str =
    "not checked: this report predates URI blocklist lookups; PUT the check again";

/// `PUT /v5/email/tests/{id}/links`.
pub async fn start(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    request_check(&state, &test).await?;
    // The report's own shape, so that clients which read the answer of the `PUT` as a report
    // (the PHP SDK does) find every field; `GET` the same URL for the finished report.
    Ok(Json(pending_report()))
}

fn pending_report() -> Value {
    json!({"status": "pending", "links": [], "skipped": 0, "uribl": [], "uribl_status": URIBL_PENDING, "uribl_consulted": []})
}

/// One link as the existing v5 SDKs read it: `status` an integer (0 without a response), `mime` a
/// string ("" without one), `warning` and `alt` booleans, `error` a string or `false`. The texts
/// behind the booleans are in `warnings`, `warning_text` and `alt_text`.
#[derive(Serialize)]
struct WireLink<'a> {
    url: &'a str,
    #[serde(rename = "type")]
    kind: content::links::LinkKind,
    line: usize,
    redirects: &'a [String],
    status: u16,
    mime: &'a str,
    /// The element has a non-empty `alt` text (always false for links).
    alt: bool,
    /// The `alt` attribute as written; `null` when there is none.
    alt_text: Option<&'a str>,
    warning: bool,
    warnings: &'a [String],
    warning_text: &'a str,
    error: ErrorField<'a>,
}

/// `error`: the reason as a string, or `false` when the link works.
#[derive(Serialize)]
#[serde(untagged)]
enum ErrorField<'a> {
    Reason(&'a str),
    None(bool),
}

fn wire_link(l: &content::links::LinkReport) -> WireLink<'_> {
    WireLink {
        url: &l.url,
        kind: l.kind,
        line: l.line,
        redirects: &l.redirects,
        status: l.status.unwrap_or(0),
        mime: l.mime.as_deref().unwrap_or(""),
        alt: l.alt.as_deref().is_some_and(|a| !a.trim().is_empty()),
        alt_text: l.alt.as_deref(),
        warning: l.warning.is_some() || !l.warnings.is_empty(),
        warnings: &l.warnings,
        warning_text: l.warning.as_deref().unwrap_or(""),
        error: l
            .error
            .as_deref()
            .map_or(ErrorField::None(false), ErrorField::Reason),
    }
}

/// `GET /v5/email/tests/{id}/links`.
pub async fn report(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let test = owned_test(&state, &caller, &id, TestKind::Email).await?;
    match link_state(&state, &test).await? {
        LinkState::NotStarted => Err(ApiError::new(
            ErrorName::BadRequest,
            format!(
                "links of test {id:?} have not been checked: start the check with PUT \
                 /v5/email/tests/{id}/links, then GET this URL again"
            ),
        )),
        LinkState::Pending => Ok(Json(pending_report())),
        LinkState::Complete {
            completed_at,
            check,
        } => {
            // `uribl` lists only what a list answered; `uribl_status` says which lists were
            // consulted, so an empty list from lists that were offline never reads as "clean".
            let (uribl, uribl_status) = match &check.uribl {
                Some(report) => (json!(report.hits), json!(report.status)),
                None => (json!([]), json!(URIBL_NOT_ASKED)),
            };
            Ok(Json(json!({
                "status": "complete",
                "completed_at": completed_at,
                "links": check.links.iter().map(wire_link).collect::<Vec<_>>(),
                "skipped": check.skipped,
                "uribl": uribl,
                "uribl_status": uribl_status,
                "uribl_consulted": check.uribl.as_ref().map(|r| r.consulted.clone()).unwrap_or_default(),
            })))
        }
    }
}
