//! The inbox strip at the top of a test's page (owner's and shared proof alike): each client
//! family's inbox row for this email, as `GET /v5/email/tests/<id>/inbox` answers it through the
//! same operation (`app::inbox::rows_state`), with the warnings a sender can act on. Shown while
//! the worker draws the rows as a note; the status poll carries the section once it is ready.

use app::inbox::{rows_state, RowsState};
use content::inbox::{InboxReport, InboxRow};
use domain::{ColorScheme, Picture, INBOX_ROWS_CLIENT};
use maud::{html, Markup};
use store::TestRow;

use crate::WebState;

/// The strip, and whether its rows are still being drawn.
pub struct Section {
    pub markup: Markup,
    pub pending: bool,
}

/// Where the page loads a row's picture from: the owner gets the presigned URL the API gives, a
/// shared proof loads it through its share link (checked on every fetch).
fn picture_src(
    state: &WebState,
    test: &TestRow,
    base: &str,
    owner: bool,
    row: &str,
    scheme: ColorScheme,
    now: i64,
) -> String {
    if owner {
        app::inbox::picture_url(&state.app, &test.id, row, scheme, now)
    } else {
        let picture = Picture::InboxRow {
            row: row.to_string(),
            scheme,
        };
        format!("{base}/shots/{INBOX_ROWS_CLIENT}/{picture}.png")
    }
}

/// The strip of `test` (an email test), requesting its rows if nobody had.
pub async fn section(
    state: &WebState,
    test: &TestRow,
    base: &str,
    owner: bool,
) -> Result<Section, app::Error> {
    let now = chrono::Utc::now().timestamp();
    Ok(match rows_state(&state.app, test).await? {
        RowsState::Pending { retrying_after } => Section {
            pending: true,
            markup: html! {
                section #inbox aria-labelledby="inbox-h" data-state="pending" {
                    h2 #inbox-h { "Inbox rows" }
                    p.note role="status" {
                        "Drawing the row each client's inbox list shows for this email…"
                        @if let Some(e) = retrying_after { " The last attempt failed (" (e) "); it is retried." }
                    }
                }
            },
        },
        RowsState::Complete { report, .. } => Section {
            pending: false,
            markup: strip(state, test, base, owner, &report, now),
        },
    })
}

fn scheme_word(s: ColorScheme) -> &'static str {
    match s {
        ColorScheme::Light => "light",
        ColorScheme::Dark => "dark",
    }
}

fn strip(
    state: &WebState,
    test: &TestRow,
    base: &str,
    owner: bool,
    report: &InboxReport,
    now: i64,
) -> Markup {
    html! {
        section #inbox aria-labelledby="inbox-h" data-state="done" {
            h2 #inbox-h { "Inbox rows" }
            p.help {
                "What each client's inbox list shows before the email is opened: sender, subject and preview, cut where that client cuts them. "
                @match &report.preview.preheader {
                    Some(p) => { "Preheader (" (p.chars().count()) " characters" @if report.preview.padded { ", padded" } "): “" (p) "”." }
                    None => { "No preheader: the preview is the email's first text." }
                }
            }
            @if let Some(why) = &report.not_drawn {
                p.note { "No row was drawn: " (why) }
            }
            @let (cuts, others): (Vec<_>, Vec<_>) = report.warnings.iter().partition(|w| w.id == "subject-cut");
            @if !report.warnings.is_empty() {
                ul.inbox-warnings {
                    @for w in &others {
                        li data-warning=(w.id) data-row=[w.row.as_deref()] { (w.message) }
                    }
                    // Usually most rows cut a long subject: one line, each row's cut folded.
                    @if !cuts.is_empty() {
                        li data-warning="subject-cut" {
                            details {
                                summary { "The subject is cut in " (cuts.len()) " of " (report.rows.len()) " rows" }
                                ul {
                                    @for w in &cuts {
                                        li data-row=[w.row.as_deref()] { (w.message) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !report.rows.is_empty() {
                ul.inbox-strip tabindex="0" aria-label="Inbox rows, side by side (scroll sideways for more)" {
                    @for r in &report.rows {
                        (row_item(state, test, base, owner, r, now))
                    }
                }
            }
        }
    }
}

fn row_item(
    state: &WebState,
    test: &TestRow,
    base: &str,
    owner: bool,
    r: &InboxRow,
    now: i64,
) -> Markup {
    let first = r.schemes.first().copied().unwrap_or(ColorScheme::Light);
    let alt = format!(
        "{}: {} — {} — {}",
        r.name, r.sender.text, r.subject.text, r.preview.text
    );
    html! {
        li.inbox-row data-row=(r.id) style={ "width:" (r.css_width) "px" } {
            figure {
                img src=(picture_src(state, test, base, owner, &r.id, first, now)) alt=(alt) width=(r.css_width) loading="lazy";
                figcaption {
                    strong.inbox-name { (r.name) }
                    " "
                    span.help { "(" (r.clients.len()) @if r.clients.len() == 1 { " client" } @else { " clients" } ")" }
                    dl.inbox-text {
                        dt { "Subject" } dd data-field="subject" { (r.subject.text) }
                        dt { "Preview" }
                        dd data-field="preview" {
                            @if r.preview.text.is_empty() { span.help { "none: the subject fills the row" } } @else { (r.preview.text) }
                        }
                    }
                    @for s in r.schemes.iter().skip(1) {
                        a href=(picture_src(state, test, base, owner, &r.id, *s, now)) { "See it in " (scheme_word(*s)) " mode" }
                    }
                    @if !r.calibrated {
                        p.help.uncalibrated { "No published measurement: the cut is an estimate." }
                    }
                }
            }
        }
    }
}
