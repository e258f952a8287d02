//! The analytics pages (issue 22): the campaigns list, the new-campaign form, a campaign's page
//! (its tracking code with a copy button, what each client profile lets it measure, the report)
//! and the per-client matrix on its own.
//!
//! Campaigns are read through `app::owned_campaign` (another account's guid is "not found"); the
//! form goes through `app::campaigns::create_campaign`, the code the API's `createcampaign` runs,
//! so its refusals read as the API's. The matrix is the one loaded and
//! checked at start-up (`WebOptions::analytics_matrix`).

use analytics::matrix::{proxy_fact, OpenSignal};
use app::campaigns as ops;
use axum::extract::{Form, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;
use store::CampaignRow;

use crate::pages::{chrome, list_query, page_link};
use crate::session::Viewer;
use crate::{date, internal, layout, page, page_error, WebState};

const PAGE_SIZE: i64 = 25;

fn campaign_not_found() -> Response {
    page_error(
        StatusCode::NOT_FOUND,
        "Campaign not found",
        "There is no such campaign on this account.",
    )
}

fn status_label(status: &str) -> &'static str {
    match status {
        "testing" => "Testing: hits are test data until you activate it",
        "expired" => "Expired",
        _ => "Current",
    }
}

pub async fn list(
    State(state): State<WebState>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    let (form, filter, page_no) =
        list_query(raw.as_deref(), &["subject", "page"], &viewer, PAGE_SIZE);
    let (error, rows) = match (&filter, viewer.caller.account()) {
        (Err(e), _) => (Some(e.message.clone()), Vec::new()),
        (Ok(_), None) => (None, Vec::new()),
        (Ok(f), Some(a)) => match state.app.store.list_campaigns(a.id, f).await {
            Ok(r) => (None, r),
            Err(e) => return internal("listing campaigns failed", e),
        },
    };
    let subject = form.get("subject").cloned().unwrap_or_default();
    let link_for = |p: i64| page_link("/campaigns", &form, p);
    let now = chrono::Utc::now().timestamp();
    let main = html! {
        h1 { "Analytics campaigns" }
        p { a href="/campaigns/new" { "New campaign" } " · " a href="/analytics/clients" { "What each client lets you measure" } }
        form.filters method="get" action="/campaigns" role="search" aria-label="Search campaigns" {
            div { label for="q-subject" { "Name contains" } input id="q-subject" name="subject" type="search" value=(subject); }
            button type="submit" { "Search" }
        }
        @if let Some(e) = &error { p.error role="alert" { (e) } }
        @if rows.is_empty() && error.is_none() {
            p { "No campaigns yet. " a href="/campaigns/new" { "Create one" } "." }
        } @else if !rows.is_empty() {
            table.list #campaigns {
                caption { "Newest first" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Created" } th scope="col" { "Status" } th scope="col" { "Subscribers" } } }
                tbody {
                    @for r in &rows {
                        @let c = &r.campaign;
                        tr data-guid=(c.guid) {
                            td { a href={ "/campaigns/" (c.guid) } { (c.name) } }
                            td { (date(c.created_at)) }
                            td.status { (ops::status(r, now)) }
                            td { (c.total_subscribers) }
                        }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if page_no > 1 { a href=(link_for(page_no - 1)) rel="prev" { "← Newer" } }
            @if rows.len() as i64 == PAGE_SIZE { a href=(link_for(page_no + 1)) rel="next" { "Older →" } }
        }
    };
    page(
        StatusCode::OK,
        layout("Campaigns", chrome(&viewer), None, main),
    )
}

/// The form's fields, as typed.
#[derive(Default, Deserialize)]
pub struct CampaignForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    total_subscribers: String,
    #[serde(default)]
    merge_tag: String,
    #[serde(default)]
    read_threshold: String,
    #[serde(default)]
    skim_threshold: String,
    #[serde(default)]
    delete_threshold: String,
    #[serde(default)]
    click_html: String,
    #[serde(default)]
    google_analytics: Option<String>,
}

fn form_markup(f: &CampaignForm, csrf: &str, error: Option<&app::Error>) -> Markup {
    let field = |id: &str, label: &str, value: &str, kind: &str, help: &str| {
        html! {
            label for=(id) { (label) }
            input id=(id) name=(id) type=(kind) value=(value) aria-describedby={ (id) "-help" } inputmode=[(kind == "text" && id.ends_with("threshold")).then_some("numeric")];
            p.help id={ (id) "-help" } { (help) }
        }
    };
    html! {
        h1 { "New analytics campaign" }
        @if let Some(e) = error {
            div.error-summary role="alert" {
                p { (e.name.as_str()) ": " (e.message.replace('`', "")) }
            }
        }
        form.stack method="post" action="/campaigns/new" {
            input type="hidden" name="csrf" value=(csrf);
            (field("name", "Name (required)", &f.name, "text", "What the campaign is, e.g. the email's subject."))
            (field("total_subscribers", "Subscribers (required)", &f.total_subscribers, "text", "How many recipients the email goes to: every percentage is of this number."))
            (field("merge_tag", "Merge tag", &f.merge_tag, "text", "Your mail service's placeholder for a recipient id, e.g. *|EMAIL|*; it goes into every tracking URL so each recipient counts once."))
            (field("read_threshold", "Read threshold (seconds)", &f.read_threshold, "text", "Default 15."))
            (field("skim_threshold", "Skim threshold (seconds)", &f.skim_threshold, "text", "Default 7: open longer than this is a read."))
            (field("delete_threshold", "Delete threshold (seconds)", &f.delete_threshold, "text", "Default 2: open this long or less is a glance."))
            label for="click_html" { "Email HTML for click tracking" }
            textarea id="click_html" name="click_html" rows="6" aria-describedby="click-help" { (f.click_html) }
            p.help id="click-help" { "Optional: every web link comes back rewritten to go through this service." }
            div.check {
                input id="google_analytics" name="google_analytics" type="checkbox" value="true" checked[f.google_analytics.is_some()];
                label for="google_analytics" { "Add Google Analytics campaign parameters to tracked links" }
            }
            button type="submit" { "Create campaign" }
        }
    }
}

pub async fn new_form(viewer: Viewer) -> Response {
    let main = form_markup(&CampaignForm::default(), &viewer.csrf, None);
    page(
        StatusCode::OK,
        layout("New campaign", chrome(&viewer), None, main),
    )
}

/// The request this form makes; a threshold that is not a number is refused as the API would.
fn request_of(f: &CampaignForm) -> Result<ops::CampaignRequest, app::Error> {
    let text = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    let has_click = !f.click_html.trim().is_empty();
    Ok(ops::CampaignRequest {
        name: text(&f.name),
        total_subscribers: ops::whole_from_text("total_subscribers", &f.total_subscribers)?,
        merge_tag: text(&f.merge_tag),
        read_threshold: ops::whole_from_text("read_threshold", &f.read_threshold)?,
        skim_threshold: ops::whole_from_text("skim_threshold", &f.skim_threshold)?,
        delete_threshold: ops::whole_from_text("delete_threshold", &f.delete_threshold)?,
        click_html: has_click.then(|| f.click_html.clone()),
        google_analytics: has_click && f.google_analytics.is_some(),
        ..ops::CampaignRequest::default()
    })
}

pub async fn create(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(f): Form<CampaignForm>,
) -> Response {
    if let Err(refused) = viewer.check_csrf(&f.csrf) {
        return refused;
    }
    let created = match request_of(&f) {
        Ok(req) => ops::create_campaign(&state.app, &viewer.caller, req).await,
        Err(e) => Err(e),
    };
    match created {
        Ok(out) => match out.guid.as_str() {
            guid if out.stored => Redirect::to(&format!("/campaigns/{guid}")).into_response(),
            // The sandbox stores nothing: show the code it answered.
            _ => {
                let main = html! {
                    h1 { "Sandbox campaign" }
                    p.note role="note" { "Sandbox: the campaign was checked but not stored." }
                    (code_section(&out.tracking_code))
                };
                page(
                    StatusCode::OK,
                    layout("Sandbox campaign", chrome(&viewer), None, main),
                )
            }
        },
        Err(e) => {
            let status = crate::status_of(e.name);
            let main = form_markup(&f, &viewer.csrf, Some(&e));
            page(status, layout("New campaign", chrome(&viewer), None, main))
        }
    }
}

fn code_section(code: &str) -> Markup {
    html! {
        section aria-labelledby="code-h" {
            h2 #code-h { "Tracking code" }
            p { "Paste it just before " code { "</body>" } " of the email you send. It runs no script." }
            label for="tracking-code" { "Tracking code" }
            textarea #tracking-code readonly rows="8" style="width:100%" { (code) }
            div.share-link {
                button type="button" data-copy="tracking-code" { "Copy tracking code" }
                span id="copy-done" role="status" {}
            }
        }
    }
}

pub(crate) async fn owned(
    state: &WebState,
    viewer: &Viewer,
    guid: &str,
) -> Result<CampaignRow, Response> {
    app::owned_campaign(&state.app, &viewer.caller, guid)
        .await
        .map_err(not_found_or_failed)
}

/// Another account's guid, or a malformed one, is a campaign that does not exist.
fn not_found_or_failed(e: app::Error) -> Response {
    match e.name {
        app::ErrorName::NoCampaigns | app::ErrorName::InvalidData => campaign_not_found(),
        _ => crate::app_error(&e),
    }
}

pub async fn campaign_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(guid): Path<String>,
) -> Response {
    let (row, report) = match ops::campaign_report(&state.app, &viewer.caller, &guid).await {
        Ok(r) => r,
        Err(e) => return not_found_or_failed(e),
    };
    let c = &row.campaign;
    let now = chrono::Utc::now().timestamp();
    let status = ops::status(&row, now);
    let code = ops::tracking_code(&state.app.settings, c);
    let clicks: std::collections::BTreeMap<u32, i64> = report
        .clicks
        .iter()
        .map(|l| (l.number, l.clicks.hits))
        .collect();
    let clickmap = match crate::clickmap::section(&state, &viewer, &row, &clicks).await {
        Ok(m) => m,
        Err(resp) => return resp,
    };
    let main = html! {
        h1 { (c.name) }
        dl.meta {
            dt { "Status" } dd #status data-status=(status) { (status_label(status)) }
            dt { "Created" } dd { (date(c.created_at)) }
            @if let Some(t) = row.activated_at { dt { "Activated" } dd { (date(t)) } }
            @if let Some(t) = row.expires_at { dt { "Ends" } dd { (date(t)) } }
            dt { "Subscribers" } dd { (c.total_subscribers) }
            dt { "Merge tag" } dd { (c.merge_tag.as_deref().unwrap_or("none: each open of the same URL counts once behind a proxy")) }
            dt { "Engagement" } dd { "glance ≤ " (c.delete_threshold) " s < skim ≤ " (c.skim_threshold) " s < read" }
        }
        (code_section(&code))
        (crate::report::section(&report))
        (clickmap)
        section aria-labelledby="matrix-h" {
            h2 #matrix-h { "What each client lets this code measure" }
            (matrix_table(&state))
        }
    };
    page(StatusCode::OK, layout(&c.name, chrome(&viewer), None, main))
}

fn yes_no(v: bool) -> Markup {
    if v {
        html! { span.pass { "Yes" } }
    } else {
        html! { span.fail { "No" } }
    }
}

/// The per-client matrix, in catalog order: measured signals, then the proxy facts no engine
/// shows, with their sources.
fn matrix_table(state: &WebState) -> Markup {
    let matrix = &state.options.analytics_matrix;
    html! {
        p.help { "Measured in each profile's own emulation and engine (" a href="/analytics/clients#method" { "how" } "). Opens says whether the open image loads as the client shows the email by default; every other column assumes the reader showed images." }
        div style="overflow-x:auto" {
            table.list #analytics-matrix {
                caption { "Signals the tracking code gets from each client" }
                thead { tr {
                    th scope="col" { "Client" } th scope="col" { "Opens" } th scope="col" { "Reading time" }
                    th scope="col" { "Print" } th scope="col" { "Forward" } th scope="col" { "Dark mode" } th scope="col" { "Image proxy" }
                } }
                tbody {
                    @for client in state.app.catalog.clients() {
                        @if let Some(row) = matrix.get(&client.id) {
                            @let proxy = proxy_fact(&client.family);
                            tr data-client=(client.id) {
                                th scope="row" { (client.display_name) }
                                td data-open=(match row.open { OpenSignal::Counted => "counted", OpenSignal::BlockedByDefault => "blocked", OpenSignal::Never => "never" }) {
                                    @match row.open {
                                        OpenSignal::Counted => span.pass { "Counted" },
                                        OpenSignal::BlockedByDefault => span { "Once images are shown" },
                                        OpenSignal::Never => span.fail { "Never" },
                                    }
                                }
                                td data-read=(row.read && !proxy.is_some_and(|p| p.hides_timing)) {
                                    @if proxy.is_some_and(|p| p.hides_timing) { span.fail { "Not measurable (proxy)" } }
                                    @else { (yes_no(row.read)) }
                                }
                                td data-print=(row.print) { (yes_no(row.print)) }
                                td data-forward=(row.forward) { (yes_no(row.forward)) }
                                td data-dark=(row.dark) { (yes_no(row.dark)) }
                                td {
                                    @if let Some(p) = proxy {
                                        a href={ "#proxy-" (client.family) } { (p.name) }
                                    } @else { "None known" }
                                }
                            }
                        }
                    }
                }
            }
        }
        h3 { "Image proxies" }
        dl.details #proxies {
            @for family in proxy_families(state) {
                @if let Some(p) = proxy_fact(&family) {
                    dt id={ "proxy-" (family) } { (p.name) }
                    dd {
                        (p.summary) " ("
                        @for (i, s) in p.sources.iter().enumerate() {
                            @if i > 0 { "; " }
                            @if s.starts_with("https://") { a href=(s) { "source " (i + 1) } } @else { (s) }
                        }
                        ")."
                    }
                }
            }
        }
    }
}

/// The catalog's families that have a proxy fact, once each, in catalog order.
fn proxy_families(state: &WebState) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in state.app.catalog.clients() {
        if proxy_fact(&c.family).is_some() && !out.contains(&c.family) {
            out.push(c.family.clone());
        }
    }
    out
}

pub async fn matrix_page(State(state): State<WebState>, viewer: Viewer) -> Response {
    let main = html! {
        h1 { "What each client lets the tracking code measure" }
        (matrix_table(&state))
        h2 #method { "How it was measured" }
        p { (state.options.analytics_matrix.method) }
    };
    page(
        StatusCode::OK,
        layout("Analytics by client", chrome(&viewer), None, main),
    )
}
