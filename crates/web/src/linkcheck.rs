//! A test's link check in the web interface: a button that queues it and a page that shows the
//! report, both through the operations the API calls too (`app::links::{request_check,
//! link_state}`), so the worker, the network policy and the report are those of
//! `PUT`/`GET /v5/email/tests/<id>/links`.

use app::links::{self, LinkState};
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use content::links::{LinkCheck, LinkKind};
use domain::TestKind;
use maud::{html, Markup};
use serde::Deserialize;

use crate::pages::{chrome, owned};
use crate::session::Viewer;
use crate::{date, layout, not_found, page, WebState};

#[derive(Deserialize)]
pub struct StartForm {
    #[serde(default)]
    csrf: String,
}

pub async fn start(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(f): Form<StartForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) if t.kind == TestKind::Email => t,
        Ok(_) => return not_found(),
        Err(r) => return r,
    };
    match links::request_check(&state.app, &test).await {
        Ok(()) => Redirect::to(&format!("/tests/{}/links", test.id)).into_response(),
        Err(e) => crate::app_error(&e),
    }
}

pub async fn report(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) if t.kind == TestKind::Email => t,
        Ok(_) => return not_found(),
        Err(r) => return r,
    };
    let st = match links::link_state(&state.app, &test).await {
        Ok(s) => s,
        Err(e) => return crate::app_error(&e),
    };
    let button = |label: &str| {
        html! {
            form.inline method="post" action={ "/tests/" (test.id) "/links" } {
                input type="hidden" name="csrf" value=(viewer.csrf);
                button type="submit" { (label) }
            }
        }
    };
    let main = html! {
        p { a href={ "/tests/" (test.id) } { "← Back to “" (test.subject) "”" } }
        h1 { "Links" }
        p.help { "Every link and image of the email, followed through its redirects under the service's network policy (addresses inside private networks are not contacted)." }
        @match &st {
            LinkState::NotStarted => {
                p { "The links of this test have not been checked yet." }
                (button("Check links"))
            }
            LinkState::Pending => {
                p.note role="status" data-reload-after="2000" { "The check is running. The report appears here when it is done." }
            }
            LinkState::Complete { completed_at, check } => {
                p.meta { "Checked " @if let Some(t) = completed_at { (date(*t)) } "." }
                (button("Check again"))
                (table(check, &test.id))
            }
        }
    };
    page(StatusCode::OK, layout("Links", chrome(&viewer), None, main))
}

fn table(check: &LinkCheck, test_id: &str) -> Markup {
    let source = format!("/tests/{test_id}/content?view=source");
    html! {
        @if check.links.is_empty() {
            p { "The email has no links or images." }
        } @else {
            table.list.links {
                caption { "In the order they appear in the email" }
                thead { tr {
                    th scope="col" { "Line" } th scope="col" { "Kind" } th scope="col" { "Address" }
                    th scope="col" { "Status" } th scope="col" { "Findings" }
                } }
                tbody {
                    @for l in &check.links {
                        tr data-state=(if l.error.is_some() { "error" } else if l.warning.is_some() { "warning" } else { "ok" }) {
                            td { a href={ (source) "#L" (l.line) } { span.vh { "line " } (l.line) } }
                            td { (match l.kind { LinkKind::Link => "Link", LinkKind::Image => "Image" }) }
                            td.url {
                                code { (l.url) }
                                @if !l.redirects.is_empty() {
                                    br; span.help { "Redirects to " @for (i, r) in l.redirects.iter().enumerate() { @if i > 0 { " → " } code { (r) } } }
                                }
                            }
                            td {
                                @match l.status { Some(s) => { (s) } None => { "—" } }
                                @if let Some(m) = &l.mime { br; span.help { (m) } }
                            }
                            td {
                                @if let Some(e) = &l.error { span.fail { (e) } }
                                @for w in &l.warnings { p.warn { (w) } }
                                @if l.error.is_none() && l.warnings.is_empty() { span.pass { "OK" } }
                            }
                        }
                    }
                }
            }
            @if check.skipped > 0 {
                p.help { (check.skipped) " more links and images were not checked (the limit per email)." }
            }
            h2 { "URI blocklists" }
            @match &check.uribl {
                None => { p.help { "Not checked: this report predates blocklist lookups; check again." } }
                Some(u) => {
                    p.help { (u.status) }
                    @if !u.hits.is_empty() {
                        ul {
                            @for h in &u.hits {
                                li { span.fail { code { (h.domain) } " is listed on " (h.list) } " (" (h.zone) " answered " (h.answer) ")" }
                            }
                        }
                    }
                }
            }
        }
    }
}
