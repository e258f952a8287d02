//! A test's accessibility and content checks in the web interface, through the operation the API
//! calls too (`app::checks::check_state`), so the page shows exactly what
//! `GET /v5/email/tests/<id>/checks` answers: the static findings at once, contrast and image
//! weights when the worker beside the engines is done.

use app::checks::{self, CheckState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use content::checks::{Finding, Severity, Summary};
use domain::TestKind;
use maud::{html, Markup};

use crate::pages::{chrome, owned};
use crate::session::Viewer;
use crate::{date, layout, not_found, page, WebState};

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
    let st = match checks::check_state(&state.app, &test).await {
        Ok(s) => s,
        Err(e) => return crate::app_error(&e),
    };
    let source = format!("/tests/{}/content?view=source", test.id);
    let main = html! {
        p { a href={ "/tests/" (test.id) } { "← Back to “" (test.subject) "”" } }
        h1 { "Accessibility and content checks" }
        p.help { "Language, image alternatives, link text, heading order, layout tables, title, preheader, plain-text part, weight and Gmail clipping, judged in the HTML; colour contrast (WCAG AA) judged on the page as Chromium draws it." }
        @match &st {
            CheckState::Pending { findings, summary, retrying_after } => {
                p.note role="status" data-reload-after="2000" {
                    "Contrast and image weights are being measured. The full report appears here when they are done."
                    @if let Some(e) = retrying_after { " The last attempt failed (" (e) "); it is retried." }
                }
                (findings_table(findings, &source))
                (summary_markup(summary))
            }
            CheckState::Complete { completed_at, report } => {
                p.meta { "Checked " @if let Some(t) = completed_at { (date(*t)) } "." }
                (findings_table(&report.findings, &source))
                (summary_markup(&report.summary))
            }
        }
    };
    page(
        StatusCode::OK,
        layout("Checks", chrome(&viewer), None, main),
    )
}

fn severity(s: Severity) -> (&'static str, &'static str) {
    match s {
        Severity::Error => ("error", "Error"),
        Severity::Warning => ("warning", "Warning"),
        Severity::Info => ("info", "Info"),
    }
}

fn findings_table(findings: &[Finding], source: &str) -> Markup {
    html! {
        @if findings.is_empty() {
            p.pass { "No finding." }
        } @else {
            table.list.checks {
                caption { "Errors first, then warnings and notes" }
                thead { tr {
                    th scope="col" { "Severity" } th scope="col" { "Line" } th scope="col" { "Finding" }
                } }
                tbody {
                    @for s in [Severity::Error, Severity::Warning, Severity::Info] {
                        @for f in findings.iter().filter(|f| f.severity == s) {
                            @let (state, label) = severity(f.severity);
                            tr data-state=(state) {
                                td { (label) }
                                td {
                                    @match f.line {
                                        Some(l) => { a href={ (source) "#L" (l) } { span.vh { "line " } (l) } }
                                        None => { "—" }
                                    }
                                }
                                td {
                                    (f.message)
                                    @if let Some(c) = &f.contrast {
                                        br;
                                        span.help {
                                            span.swatch style={ "background:" (c.background) ";color:" (c.foreground) } { "Aa" }
                                            " " (c.foreground) " on " (c.background) ": "
                                            (format!("{:.2}", c.ratio)) ":1, needs " (format!("{:.1}", c.required)) ":1"
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KB", bytes as f64 / 1024.0)
}

fn summary_markup(s: &Summary) -> Markup {
    html! {
        h2 { "Weight" }
        dl.summary {
            dt { "HTML" }
            dd {
                (kib(s.html_bytes))
                @if s.gmail_clipped { " — " span.fail { "over Gmail's clipping threshold of " (kib(s.gmail_clip_bytes)) } }
                @else { " (Gmail clips above " (kib(s.gmail_clip_bytes)) ")" }
            }
            dt { "Images" }
            dd {
                @match &s.images {
                    None => { "not measured yet" }
                    Some(images) => {
                        (kib(s.image_bytes)) " in " (images.len()) " image(s)"
                        @if s.images_not_measured > 0 { ", " (s.images_not_measured) " not measured" }
                    }
                }
            }
            dt { "Total" }
            dd { (kib(s.total_bytes)) }
        }
        @if let Some(images) = &s.images {
            @if !images.is_empty() {
                table.list {
                    caption { "Each image" }
                    thead { tr { th scope="col" { "Line" } th scope="col" { "Address" } th scope="col" { "Size" } } }
                    tbody {
                        @for i in images {
                            tr {
                                td { (i.line) }
                                td.url { code { (i.url) } }
                                td {
                                    @match (i.bytes, &i.error) {
                                        (Some(b), _) => { (kib(b)) }
                                        (None, Some(e)) => { span.warn { (e) } }
                                        (None, None) => { "—" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
