//! The analytics pages (issue 22): the campaigns list, the new-campaign form, a campaign's page
//! (its tracking code with a copy button, what each client profile lets it measure, the report)
//! and the per-client matrix on its own.
//!
//! Campaigns are read through `app::owned_campaign` (another account's guid is "not found"); the
//! form goes through `app::campaigns::create_campaign`, the code the API's `createcampaign` runs,
//! so its refusals read as the API's. The matrix is the one loaded and
//! checked at start-up (`WebOptions::analytics_matrix`).

use analytics::matrix::{proxy_fact, DarkSignal, OpenSignal};
use app::campaign_changes as changes;
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

/// One problem of the form: the field it is about (its input's id) and what to do.
type FieldError = (&'static str, String);

/// The input a refusal about `field` belongs beside.
fn input_of(field: ops::CampaignField) -> &'static str {
    match field {
        ops::CampaignField::ClickTracking => "click_html",
        f => f.into(),
    }
}

/// A refusal in the form's words: the API names fields as the interface spells them and quotes
/// them in backticks; the form shows its labels.
fn plain(message: &str) -> String {
    let m = message
        .replace('`', "")
        .replace("total_subscribers", "subscribers")
        .replace("click_tracking.html", "email HTML")
        .replace("delete_threshold", "glance threshold")
        .replace("_threshold", " threshold");
    let mut chars = m.chars();
    let mut out: String = match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => m,
    };
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

fn form_markup(f: &CampaignForm, csrf: &str, errs: &[FieldError]) -> Markup {
    let e = |id: &str| errs.iter().find(|(f, _)| *f == id).map(|(_, m)| m.as_str());
    let field = |id: &str, label: &str, value: &str, help: &str, numeric: bool| {
        let described = match e(id) {
            Some(_) => format!("err-{id} {id}-help"),
            None => format!("{id}-help"),
        };
        html! {
            label for=(id) { (label) }
            input id=(id) name=(id) type="text" value=(value) aria-describedby=(described)
                aria-invalid=[e(id).map(|_| "true")] inputmode=[numeric.then_some("numeric")];
            @if let Some(m) = e(id) { p.error id={ "err-" (id) } { (m) } }
            p.help id={ (id) "-help" } { (help) }
        }
    };
    html! {
        h1 { "New analytics campaign" }
        @if !errs.is_empty() {
            div.error-summary role="alert" {
                p { @if errs.len() == 1 { "One thing to fix:" } @else { (errs.len()) " things to fix:" } }
                ul { @for (f, m) in errs { li { a href={ "#" @if *f == "form" { "err-" } (f) } { (m) } } } }
            }
        }
        @if let Some(m) = e("form") { p.error id="err-form" { (m) } }
        form.stack method="post" action="/campaigns/new" novalidate {
            input type="hidden" name="csrf" value=(csrf);
            (field("name", "Name (required)", &f.name, "What the campaign is, e.g. the email's subject.", false))
            (field("total_subscribers", "Subscribers (required)", &f.total_subscribers, "How many recipients the email goes to, e.g. 2,500: every percentage is of this number.", true))
            (field("merge_tag", "Merge tag", &f.merge_tag, "Your mail service's placeholder for a recipient id, e.g. *|EMAIL|*; it goes into every tracking URL so each recipient counts once.", false))
            (field("delete_threshold", "Glance threshold (seconds)", &f.delete_threshold, "Default 2: open this long or less is a glance.", true))
            (field("skim_threshold", "Skim threshold (seconds)", &f.skim_threshold, "Default 7: open longer than the glance threshold and up to this long is a skim; longer is a read.", true))
            (field("read_threshold", "Read threshold (seconds)", &f.read_threshold, "Default 15; at least the skim threshold. Kept with the campaign and sent back by the API for tools that use it: the interface's buckets end at the skim threshold, so it moves no reader from one bucket to another.", true))
            label for="click_html" { "Email HTML for click tracking" }
            textarea id="click_html" name="click_html" rows="6" aria-describedby={ @if e("click_html").is_some() { "err-click_html " } "click-help" }
                aria-invalid=[e("click_html").map(|_| "true")] { (f.click_html) }
            @if let Some(m) = e("click_html") { p.error id="err-click_html" { (m) } }
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
    let main = form_markup(&CampaignForm::default(), &viewer.csrf, &[]);
    page(
        StatusCode::OK,
        layout("New campaign", chrome(&viewer), None, main),
    )
}

/// The request this form makes, and the numbers it could not read (each beside its field).
fn request_of(f: &CampaignForm) -> (ops::CampaignRequest, Vec<FieldError>) {
    let text = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    let mut errs = Vec::new();
    let mut number =
        |id: &'static str, typed: &str, what: &str| match ops::whole_from_text(id, typed) {
            Ok(n) => n,
            Err(_) => {
                errs.push((id, format!("{what} (you typed “{}”).", typed.trim())));
                None
            }
        };
    let seconds = "Seconds are a whole number from 0 to 3600";
    let total_subscribers = number(
        "total_subscribers",
        &f.total_subscribers,
        "Subscribers is a whole number of recipients, at least 1, e.g. 2,500",
    );
    let read_threshold = number("read_threshold", &f.read_threshold, seconds);
    let skim_threshold = number("skim_threshold", &f.skim_threshold, seconds);
    let delete_threshold = number("delete_threshold", &f.delete_threshold, seconds);
    let has_click = !f.click_html.trim().is_empty();
    let req = ops::CampaignRequest {
        name: text(&f.name),
        total_subscribers,
        merge_tag: text(&f.merge_tag),
        read_threshold,
        skim_threshold,
        delete_threshold,
        click_html: has_click.then(|| f.click_html.clone()),
        google_analytics: has_click && f.google_analytics.is_some(),
        ..ops::CampaignRequest::default()
    };
    (req, errs)
}

/// Everything wrong with the form, all at once, in the order of the API's checks: the numbers it
/// could not read, then the application's refusals of the fields it could.
fn form_errors(viewer: &Viewer, f: &CampaignForm) -> (ops::CampaignRequest, Vec<FieldError>) {
    let (req, mut errs) = request_of(f);
    let enterprise = viewer
        .caller
        .account()
        .is_none_or(|a| a.plan.is_enterprise());
    for p in ops::problems(&req, enterprise) {
        let id = input_of(p.field);
        if errs.iter().any(|(f, _)| *f == id) {
            continue;
        }
        let message = match p.field {
            ops::CampaignField::Name if req.name.is_none() => {
                "Give the campaign a name.".to_string()
            }
            ops::CampaignField::TotalSubscribers if req.total_subscribers.is_none() => {
                "Say how many recipients the email goes to, e.g. 2,500.".to_string()
            }
            _ => plain(&p.error.message),
        };
        errs.push((id, message));
    }
    let order = [
        "name",
        "total_subscribers",
        "merge_tag",
        "delete_threshold",
        "skim_threshold",
        "read_threshold",
        "click_html",
    ];
    errs.sort_by_key(|(f, _)| order.iter().position(|o| o == f).unwrap_or(order.len()));
    (req, errs)
}

pub async fn create(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(f): Form<CampaignForm>,
) -> Response {
    if let Err(refused) = viewer.check_csrf(&f.csrf) {
        return refused;
    }
    let (req, errs) = form_errors(&viewer, &f);
    let refused = |status: StatusCode, errs: &[FieldError]| {
        let main = form_markup(&f, &viewer.csrf, errs);
        page(status, layout("New campaign", chrome(&viewer), None, main))
    };
    if !errs.is_empty() {
        return refused(StatusCode::BAD_REQUEST, &errs);
    }
    match ops::create_campaign(&state.app, &viewer.caller, req).await {
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
        // Past the checks above, only the email HTML can still be refused as data.
        Err(e) if e.name == app::ErrorName::InvalidData => refused(
            crate::status_of(e.name),
            &[("click_html", plain(&e.message))],
        ),
        Err(e) => refused(crate::status_of(e.name), &[("form", plain(&e.message))]),
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

/// What the campaign page says at its top after a change, or beside the end date it refused.
enum Notice {
    None,
    Done(&'static str),
    EndRefused { typed: String, message: String },
    Refused(String),
}

/// `?done=…` after a change redirected here.
fn done_notice(raw: Option<&str>) -> Notice {
    let done = url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "done")
        .map(|(_, v)| v.into_owned());
    match done.as_deref() {
        Some("activated") => Notice::Done("Activated: the campaign counts real hits from now on, for 90 days unless you set another end."),
        Some("cleared") => Notice::Done("Test data cleared: the report starts from nothing."),
        Some("end") => Notice::Done("End date saved."),
        _ => Notice::None,
    }
}

pub async fn campaign_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(guid): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    render_campaign(
        &state,
        &viewer,
        &guid,
        done_notice(raw.as_deref()),
        StatusCode::OK,
    )
    .await
}

async fn render_campaign(
    state: &WebState,
    viewer: &Viewer,
    guid: &str,
    notice: Notice,
    status_code: StatusCode,
) -> Response {
    let (row, report) = match ops::campaign_report(&state.app, &viewer.caller, guid).await {
        Ok(r) => r,
        Err(e) => return not_found_or_failed(e),
    };
    let c = &row.campaign;
    let now = chrono::Utc::now().timestamp();
    let status = ops::status(&row, now);
    let code = ops::tracking_code(&state.app.settings, c);
    let tracked = match ops::tracked_html(&state.app.settings, c) {
        Ok(t) => t,
        Err(e) => return crate::app_error(&e),
    };
    let clicks: std::collections::BTreeMap<u32, i64> = report
        .clicks
        .iter()
        .map(|l| (l.number, l.clicks.hits))
        .collect();
    let clickmap = match crate::clickmap::section(state, viewer, &row, &clicks).await {
        Ok(m) => m,
        Err(resp) => return resp,
    };
    let main = html! {
        h1 { (c.name) }
        @match &notice {
            Notice::Done(m) => p.note #notice role="status" { (m) },
            Notice::Refused(m) => p.error #notice role="alert" { (m) },
            _ => {}
        }
        dl.meta {
            dt { "Status" } dd #status data-status=(status) { (status_label(status)) }
            dt { "Created" } dd { (date(c.created_at)) }
            @if let Some(t) = row.activated_at { dt { "Activated" } dd #activated { (date(t)) } }
            @if let Some(t) = row.expires_at { dt { "Ends" } dd #ends { (date(t)) } }
            dt { "Subscribers" } dd { (c.total_subscribers) }
            dt { "Merge tag" } dd { (c.merge_tag.as_deref().unwrap_or("none: each open of the same URL counts once behind a proxy")) }
            dt { "Engagement" } dd { "glance ≤ " (c.delete_threshold) " s < skim ≤ " (c.skim_threshold) " s < read (read threshold " (c.read_threshold) " s, kept for the API)" }
        }
        (manage_section(viewer, &row, status, &notice))
        (code_section(&code))
        @if let Some(html) = &tracked { (tracked_section(html, c.click_links.len())) }
        (crate::report::section(&report))
        (clickmap)
        section aria-labelledby="matrix-h" {
            h2 #matrix-h { "What each client lets this code measure" }
            (matrix_table(state))
        }
    };
    page(status_code, layout(&c.name, chrome(viewer), None, main))
}

/// The campaign's changes, as its state allows them: activate, clear test data, set the end,
/// delete. Each lossy one goes through a page that says what is lost.
fn manage_section(viewer: &Viewer, row: &CampaignRow, status: &str, notice: &Notice) -> Markup {
    let guid = &row.campaign.guid;
    let bounds = row.activated_at.and_then(changes::expiration_bounds);
    let (typed, refused) = match notice {
        Notice::EndRefused { typed, message } => (Some(typed.as_str()), Some(message.as_str())),
        _ => (None, None),
    };
    let current_end = row
        .expires_at
        .and_then(|t| chrono::DateTime::<chrono::Utc>::from_timestamp(t, 0))
        .map(|d| d.format("%Y-%m-%d").to_string());
    html! {
        section aria-labelledby="manage-h" {
            h2 #manage-h { "Run the campaign" }
            @if status == "testing" {
                p { "While in test mode, every hit is test data: send the email to yourself and watch the report. Activate the campaign when you send it for real." }
                div.actions {
                    a.button #activate href={ "/campaigns/" (guid) "/activate" } { "Activate campaign…" }
                    a.button.secondary #clear href={ "/campaigns/" (guid) "/clear" } { "Clear test data…" }
                }
            }
            @if let Some((earliest, latest)) = bounds {
                form.stack.end-date method="post" action={ "/campaigns/" (guid) "/end" } novalidate {
                    input type="hidden" name="csrf" value=(viewer.csrf);
                    label for="end-date" { "Last day (UTC)" }
                    input #end-date name="date" type="date" min=(earliest) max=(latest)
                        value=(typed.map(str::to_string).or(current_end).unwrap_or_default())
                        aria-invalid=[refused.map(|_| "true")]
                        aria-describedby={ @if refused.is_some() { "err-end-date " } "end-help" };
                    @if let Some(m) = refused { p.error #err-end-date { (m) } }
                    p.help #end-help { "From " (earliest) " to " (latest) ". Hits after the end of this day are not recorded; you can change it while the campaign runs." }
                    button type="submit" { "Set last day" }
                }
            }
            div.actions {
                a.button.danger #delete href={ "/campaigns/" (guid) "/delete" } { "Delete campaign…" }
            }
        }
    }
}

/// The click-tracked HTML, as `gettrackingcode` sends it, with a copy button.
fn tracked_section(html: &str, links: usize) -> Markup {
    html! {
        section aria-labelledby="tracked-h" {
            h2 #tracked-h { "Email HTML with tracked links" }
            p { "Send this version of the email: its " (links) " web " @if links == 1 { "link goes" } @else { "links go" } " through this service, which counts the click and sends the reader on." }
            label for="tracked-html" { "Email HTML with tracked links" }
            textarea #tracked-html readonly rows="8" style="width:100%" { (html) }
            div.share-link {
                button type="button" data-copy="tracked-html" { "Copy email HTML" }
                span role="status" {}
            }
        }
    }
}

/// A change the campaign page links to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Activate,
    Clear,
    Delete,
}

impl Change {
    fn path(self) -> &'static str {
        match self {
            Change::Activate => "activate",
            Change::Clear => "clear",
            Change::Delete => "delete",
        }
    }
}

/// The page that says what a change does and loses, with the button that makes it.
async fn confirm(state: &WebState, viewer: &Viewer, guid: &str, change: Change) -> Response {
    let (row, hits) = match changes::with_hit_count(&state.app, &viewer.caller, guid).await {
        Ok(r) => r,
        Err(e) => return not_found_or_failed(e),
    };
    let c = &row.campaign;
    let hits_text = match hits {
        0 => "no hits".to_string(),
        1 => "1 hit".to_string(),
        n => format!("{n} hits"),
    };
    let testing = row.activated_at.is_none();
    let (title, lost, button): (String, Markup, &str) = match change {
        Change::Activate => (
            format!("Activate “{}”?", c.name),
            html! {
                p { "From now on every hit is a real reader's, counted in the report, for 90 days (you can set another last day afterwards)." }
                p #lost { "The " (hits_text) " recorded in test mode " @if hits == 1 { "is" } @else { "are" } " removed. A campaign cannot go back to test mode." }
            },
            "Activate campaign",
        ),
        Change::Clear => (
            format!("Clear the test data of “{}”?", c.name),
            html! { p #lost { "The " (hits_text) " recorded so far " @if hits == 1 { "is" } @else { "are" } " removed for good; the campaign stays in test mode." } },
            "Clear test data",
        ),
        Change::Delete => (
            format!("Delete “{}”?", c.name),
            html! { p #lost { "The campaign and its " (hits_text) " are removed for good. Emails already sent with its tracking code stop counting: their images and links keep working, and their clicks still reach the links." } },
            "Delete campaign",
        ),
    };
    if change != Change::Delete && !testing {
        return Redirect::to(&format!("/campaigns/{guid}")).into_response();
    }
    let main = html! {
        h1 { (title) }
        (lost)
        form method="post" action={ "/campaigns/" (guid) "/" (change.path()) } {
            input type="hidden" name="csrf" value=(viewer.csrf);
            div.actions {
                button.danger[change != Change::Activate] type="submit" { (button) }
                a href={ "/campaigns/" (guid) } { "Cancel" }
            }
        }
    };
    page(StatusCode::OK, layout(&title, chrome(viewer), None, main))
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn change(
    state: &WebState,
    viewer: &Viewer,
    guid: &str,
    change: Change,
    f: &CsrfForm,
) -> Response {
    if let Err(refused) = viewer.check_csrf(&f.csrf) {
        return refused;
    }
    let back = |done: &str| Redirect::to(&format!("/campaigns/{guid}?done={done}")).into_response();
    let refused = |e: app::Error| async move {
        match e.name {
            app::ErrorName::NoCampaigns | app::ErrorName::InvalidData => campaign_not_found(),
            name => {
                render_campaign(
                    state,
                    viewer,
                    guid,
                    Notice::Refused(plain(&e.message)),
                    crate::status_of(name),
                )
                .await
            }
        }
    };
    match change {
        Change::Activate => match changes::activate(&state.app, &viewer.caller, guid).await {
            Ok(_) => back("activated"),
            Err(e) => refused(e).await,
        },
        Change::Clear => match changes::clear_data(&state.app, &viewer.caller, guid).await {
            Ok(_) => back("cleared"),
            Err(e) => refused(e).await,
        },
        Change::Delete => match changes::delete(&state.app, &viewer.caller, guid).await {
            Ok(deleted) => {
                let name = deleted.campaign.name;
                let main = html! {
                    h1 { "Campaign deleted" }
                    p.note #notice role="status" { "“" (name) "” and its hits are deleted." }
                    p { a href="/campaigns" { "Back to your campaigns" } }
                };
                page(
                    StatusCode::OK,
                    layout("Campaign deleted", chrome(viewer), None, main),
                )
            }
            Err(e) => refused(e).await,
        },
    }
}

macro_rules! change_routes {
    ($($get:ident, $post:ident => $change:expr;)*) => {$(
        pub async fn $get(State(state): State<WebState>, viewer: Viewer, Path(guid): Path<String>) -> Response {
            confirm(&state, &viewer, &guid, $change).await
        }
        pub async fn $post(
            State(state): State<WebState>,
            viewer: Viewer,
            Path(guid): Path<String>,
            Form(f): Form<CsrfForm>,
        ) -> Response {
            change(&state, &viewer, &guid, $change, &f).await
        }
    )*};
}

change_routes! {
    activate_form, activate => Change::Activate;
    clear_form, clear => Change::Clear;
    delete_form, delete => Change::Delete;
}

#[derive(Deserialize)]
pub struct EndForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    date: String,
}

/// `POST /campaigns/{guid}/end`: the last day, refused beside its field in the API's rules.
pub async fn set_end(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(guid): Path<String>,
    Form(f): Form<EndForm>,
) -> Response {
    if let Err(refused) = viewer.check_csrf(&f.csrf) {
        return refused;
    }
    match changes::set_expiration(&state.app, &viewer.caller, &guid, &f.date).await {
        Ok(_) => Redirect::to(&format!("/campaigns/{guid}?done=end")).into_response(),
        Err(e) if e.name == app::ErrorName::NoCampaigns => campaign_not_found(),
        Err(e) => {
            let message = if f.date.trim().is_empty() {
                "Choose the campaign's last day.".to_string()
            } else {
                plain(&e.message)
            };
            let notice = Notice::EndRefused {
                typed: f.date.clone(),
                message,
            };
            render_campaign(&state, &viewer, &guid, notice, crate::status_of(e.name)).await
        }
    }
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
                                td data-dark=(row.dark.as_str()) {
                                    @match row.dark {
                                        DarkSignal::Always => span.pass { "Yes" },
                                        DarkSignal::WhenOptedIn => span { "If the email declares " code { "color-scheme" } },
                                        DarkSignal::Never => span.fail { "No" },
                                    }
                                }
                                td {
                                    @if let Some(p) = proxy {
                                        a href={ "#" (proxy_anchor(p.name)) } { (p.name) }
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
                    dt id=(proxy_anchor(p.name)) { (p.name) }
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

/// The catalog's families that have a proxy fact, one per proxy (Yahoo's serves AOL too), in
/// catalog order.
fn proxy_families(state: &WebState) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut proxies: Vec<&str> = Vec::new();
    for c in state.app.catalog.clients() {
        if let Some(p) = proxy_fact(&c.family) {
            if !proxies.contains(&p.name) {
                proxies.push(p.name);
                out.push(c.family.clone());
            }
        }
    }
    out
}

/// The id of a proxy's entry in the list below the matrix.
fn proxy_anchor(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("proxy-{slug}")
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
