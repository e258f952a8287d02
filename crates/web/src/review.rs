//! The review part of a test's page (issue 32): which version of its email this test is, with
//! the other versions and their state, each reviewer's decision, and the forms to decide — the
//! owner's on the test page, a named reviewer's on the shared proof (only while the share link
//! is live: a revoked link stops a reviewer at the next request). Through the operations the API
//! calls too (`app::review`).

use app::review::{self, Who, MAX_NAME_CHARS, MAX_NOTE_CHARS};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use domain::{ApprovalState, Decision, Spelled, TestKind};
use maud::{html, Markup};
use serde::Deserialize;
use store::TestRow;

use crate::pages::{owned, shared};
use crate::session::{self, Viewer};
use crate::{date, WebState};

/// Who looks at the page: the owner (with the CSRF token its forms carry) or a share link's
/// visitor.
pub enum Looker<'a> {
    Owner(&'a Viewer),
    Shared,
}

fn state_attr(s: ApprovalState) -> &'static str {
    s.as_str()
}

/// The section for email test `test` at `base` (`/tests/<id>` or `/share/<token>`).
pub async fn section(
    state: &WebState,
    test: &TestRow,
    base: &str,
    looker: Looker<'_>,
) -> Result<Markup, app::Error> {
    let (approval, decisions) = review::approvals(&state.app, test).await?;
    // Other versions are the owner's to browse; a shared proof shows this test alone.
    let versions = match looker {
        Looker::Owner(_) => review::versions(&state.app, test).await?,
        Looker::Shared => Vec::new(),
    };
    let this = versions.iter().find(|v| v.test_id == test.id);
    Ok(html! {
        section #review aria-labelledby="review-h" data-approval=(state_attr(approval)) {
            h2 #review-h { "Review" }
            p.review-state {
                strong data-field="approval" { (approval.label()) }
                @if let Some(v) = this {
                    " · version " span data-field="version" { (v.version) } " of " (versions.len())
                }
            }
            @if versions.len() > 1 {
                ol.versions aria-label="Versions of this email" {
                    @for v in &versions {
                        li data-test=(v.test_id) data-approval=(state_attr(v.approval)) {
                            @if v.test_id == test.id {
                                strong { "Version " (v.version) " (this one)" }
                            } @else {
                                a href={ "/tests/" (v.test_id) } { "Version " (v.version) }
                            }
                            ", " (date(v.created_at)) ": " (v.approval.label())
                        }
                    }
                }
            }
            @if decisions.is_empty() {
                p.help { "No reviewer has decided yet." }
            } @else {
                table.list.decisions {
                    thead { tr { th scope="col" { "Reviewer" } th scope="col" { "Decision" } th scope="col" { "Note" } th scope="col" { "When" } } }
                    tbody {
                        @for d in &decisions {
                            tr data-decision=(d.decision.as_str()) {
                                td { (d.name) @if d.share_token_hash.is_some() { span.help { " (share link)" } } }
                                td { (d.decision.label()) }
                                td { @if let Some(n) = &d.note { (n) } }
                                td { (date(d.decided_at)) }
                            }
                        }
                    }
                }
            }
            form.review-form method="post" action={ (base) "/review" } {
                @match looker {
                    Looker::Owner(v) => { input type="hidden" name="csrf" value=(v.csrf); }
                    Looker::Shared => {
                        label for="reviewer-name" { "Your name" }
                        input id="reviewer-name" name="name" type="text" required maxlength=(MAX_NAME_CHARS) autocomplete="name";
                    }
                }
                label for="review-note" { "Note (optional)" }
                textarea id="review-note" name="note" rows="2" maxlength=(MAX_NOTE_CHARS) {}
                div.review-buttons {
                    button type="submit" name="decision" value="approved" { "Approve" }
                    button.secondary type="submit" name="decision" value="changes_requested" { "Request changes" }
                }
            }
        }
    })
}

#[derive(Deserialize)]
pub struct ReviewForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    decision: String,
}

fn decision_of(f: &ReviewForm) -> Result<Decision, Response> {
    Decision::parse_known(&f.decision).map_err(|_| {
        crate::page_error(
            axum::http::StatusCode::BAD_REQUEST,
            "Decision not recorded",
            "Press Approve or Request changes.",
        )
    })
}

async fn record(
    state: &WebState,
    test: &TestRow,
    who: Who<'_>,
    f: &ReviewForm,
    back: &str,
) -> Response {
    if test.kind != TestKind::Email {
        return crate::not_found();
    }
    let decision = match decision_of(f) {
        Ok(d) => d,
        Err(r) => return r,
    };
    match review::decide(&state.app, test, &who, decision, Some(&f.note)).await {
        Ok(()) => Redirect::to(&format!("{back}#review")).into_response(),
        Err(e) => crate::app_error(&e),
    }
}

/// `POST /tests/<id>/review`: the owner's decision.
pub async fn owner_decides(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(f): Form<ReviewForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    record(
        &state,
        &test,
        Who::Owner,
        &f,
        &format!("/tests/{}", test.id),
    )
    .await
}

/// `POST /share/<token>/review`: a named reviewer's decision through a live share link. The token
/// in the address is what gives the right to decide (as to look), so no session is needed.
pub async fn reviewer_decides(
    State(state): State<WebState>,
    Path(token): Path<String>,
    Form(f): Form<ReviewForm>,
) -> Response {
    let test = match shared(&state, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let hash = session::secret_hash(&token);
    let who = Who::Shared {
        token_hash: &hash,
        name: &f.name,
    };
    record(&state, &test, who, &f, &format!("/share/{token}")).await
}
