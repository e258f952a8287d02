//! The pages: sign-in, the tests list, a test's page (grid, full view, side by side, spam,
//! content), sharing, and the read-only shared proof.

use std::collections::HashMap;

use app::screenshots as shots;
use app::Caller;
use axum::extract::{Form, Path, Query, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use domain::{Category, Picture, ScreenshotStatus, SpamVerdict, TestKind, Variant};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;
use store::{ClientRow, TestRow};

use crate::session::{self, ClientAddr, Viewer};
use crate::{date, internal, layout, not_found, page, Chrome, WebState};

pub(crate) fn chrome(v: &Viewer) -> Chrome<'_> {
    match &v.caller {
        Caller::Account(a) => Chrome::SignedIn {
            who: &a.api_key,
            sandbox: false,
            csrf: &v.csrf,
        },
        Caller::Sandbox => Chrome::SignedIn {
            who: "sandbox",
            sandbox: true,
            csrf: &v.csrf,
        },
    }
}

pub async fn home(headers: axum::http::HeaderMap) -> Redirect {
    if session::cookie(&headers, session::SESSION_COOKIE).is_some() {
        Redirect::to("/tests")
    } else {
        Redirect::to("/signin")
    }
}

// ---------------------------------------------------------------------------------------------
// Sign in and out

#[derive(Deserialize, Default)]
pub struct NextQuery {
    next: Option<String>,
}

/// Only paths on this site: an absolute URL or `//host` would make sign-in an open redirect, and
/// browsers drop tabs and line breaks from a URL (`/\t/host` is `//host`), so only visible ASCII
/// is taken (a browser sends anything else percent-encoded), which also keeps the `Location`
/// header valid.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && n.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            n.to_string()
        }
        _ => "/tests".to_string(),
    }
}

fn signin_markup(token: &str, next: &str, error: Option<&str>, api_key: &str) -> Markup {
    layout(
        "Sign in",
        Chrome::Bare,
        None,
        html! {
            h1 { "Sign in" }
            p { "Use your account's API key and password. The sandbox credentials (sandbox / sandbox) let you try the pages; nothing is stored for them." }
            @if let Some(e) = error {
                p.error id="signin-error" role="alert" { (e) }
            }
            form.stack method="post" action="/signin" {
                input type="hidden" name="csrf" value=(token);
                input type="hidden" name="next" value=(next);
                label for="api_key" { "API key" }
                input id="api_key" name="api_key" type="text" autocomplete="username" required value=(api_key)
                    aria-describedby=[error.map(|_| "signin-error")];
                label for="password" { "Password" }
                input id="password" name="password" type="password" autocomplete="current-password" required;
                button type="submit" { "Sign in" }
            }
        },
    )
}

pub async fn signin_form(State(state): State<WebState>, Query(q): Query<NextQuery>) -> Response {
    let token = session::new_secret();
    let next = safe_next(q.next.as_deref());
    let mut resp = page(StatusCode::OK, signin_markup(&token, &next, None, ""));
    set_cookie(
        &mut resp,
        &session::set_cookie(
            session::SIGNIN_CSRF_COOKIE,
            &token,
            3600,
            state.options.secure_cookies,
        ),
    );
    resp
}

fn set_cookie(resp: &mut Response, value: &str) {
    if let Ok(v) = header::HeaderValue::from_str(value) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

#[derive(Deserialize)]
pub struct SigninForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    api_key: String,
    #[serde(default)]
    password: String,
}

pub async fn signin(
    State(state): State<WebState>,
    ClientAddr(address): ClientAddr,
    headers: axum::http::HeaderMap,
    Form(f): Form<SigninForm>,
) -> Response {
    let expected = session::cookie(&headers, session::SIGNIN_CSRF_COOKIE).unwrap_or_default();
    if !session::token_matches(&expected, &f.csrf) {
        return session::csrf_refused();
    }
    let next = safe_next(Some(&f.next));
    let caller = match app::check_credentials(
        &state.app,
        f.api_key.trim().to_string(),
        f.password,
        address,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            let status = crate::status_of(e.name);
            let text = if e.name == app::ErrorName::AccessDenied {
                "Unknown API key or wrong password.".to_string()
            } else {
                e.message.clone()
            };
            return page(
                status,
                signin_markup(&expected, &next, Some(&text), f.api_key.trim()),
            );
        }
    };
    let now = chrono::Utc::now().timestamp();
    let id = match caller.account() {
        // The public sandbox credentials store nothing: the cookie is signed instead.
        None => {
            session::sandbox_session(&state.app.settings.signing_key, now + session::SESSION_SECS)
        }
        Some(account) => {
            let id = session::new_secret();
            if let Err(e) = state
                .app
                .store
                .create_session(
                    &session::secret_hash(&id),
                    Some(account.id),
                    now,
                    now + session::SESSION_SECS,
                )
                .await
            {
                return internal("starting the session failed", e);
            }
            id
        }
    };
    let mut resp = Redirect::to(&next).into_response();
    let secure = state.options.secure_cookies;
    set_cookie(
        &mut resp,
        &session::set_cookie(session::SESSION_COOKIE, &id, session::SESSION_SECS, secure),
    );
    set_cookie(
        &mut resp,
        &session::set_cookie(session::SIGNIN_CSRF_COOKIE, "", 0, secure),
    );
    resp
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

pub async fn signout(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(f): Form<CsrfForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    if let Err(e) = state.app.store.delete_session(&viewer.session_hash).await {
        return internal("ending the session failed", e);
    }
    let mut resp = Redirect::to("/signin").into_response();
    set_cookie(
        &mut resp,
        &session::set_cookie(session::SESSION_COOKIE, "", 0, state.options.secure_cookies),
    );
    resp
}

// ---------------------------------------------------------------------------------------------
// Tests list

const PAGE_SIZE: i64 = 20;

/// A list page's query: the non-empty fields among `keys`, the API's own filter of them (the same
/// rules and messages as the API's list calls) for `results` rows, and the page number.
pub(crate) fn list_query(
    raw: Option<&str>,
    keys: &[&str],
    viewer: &Viewer,
    results: i64,
) -> (
    HashMap<String, String>,
    Result<store::ListFilter, app::Error>,
    i64,
) {
    let mut form: HashMap<String, String> = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if keys.contains(&k.as_ref()) && !v.trim().is_empty() {
            form.insert(k.into_owned(), v.into_owned());
        }
    }
    let query = {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &form {
            q.append_pair(k, v);
        }
        q.append_pair("results", &results.to_string());
        q.finish()
    };
    let enterprise = viewer
        .caller
        .account()
        .is_none_or(|a| a.plan.is_enterprise());
    let filter = app::lists::parse_query(Some(&query), None, enterprise);
    let page_no = form.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    (form, filter, page_no)
}

/// `path` with the list's query and page `p`.
pub(crate) fn page_link(path: &str, form: &HashMap<String, String>, p: i64) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in form {
        if k != "page" {
            s.append_pair(k, v);
        }
    }
    s.append_pair("page", &p.to_string());
    format!("{path}?{}", s.finish())
}

pub async fn tests_list(
    State(state): State<WebState>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    let (form, filter, page_no) = list_query(
        raw.as_deref(),
        &["subject", "from", "to", "type", "page"],
        &viewer,
        PAGE_SIZE,
    );
    let (error, rows, summaries) = match (&filter, viewer.caller.account()) {
        (Err(e), _) => (Some(e.message.clone()), Vec::new(), HashMap::new()),
        (Ok(_), None) => (None, Vec::new(), HashMap::new()),
        (Ok(f), Some(a)) => {
            let f = store::ListFilter {
                hide_subject_prefixes: crate::clickmap::helper_prefixes(),
                ..f.clone()
            };
            let rows = match state.app.store.list_tests(a.id, &f).await {
                Ok(r) => r,
                Err(e) => return internal("listing tests failed", e),
            };
            let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
            let summaries = match state.app.store.test_summaries(a.id, &ids).await {
                Ok(s) => s,
                Err(e) => return internal("reading test summaries failed", e),
            };
            (None, rows, summaries)
        }
    };
    let link_for = |p: i64| page_link("/tests", &form, p);
    let val = |k: &str| form.get(k).cloned().unwrap_or_default();
    let kind = val("type");
    let main = html! {
        h1 { "Tests" }
        form.filters method="get" action="/tests" role="search" aria-label="Search tests" {
            div { label for="q-subject" { "Subject contains" } input id="q-subject" name="subject" type="search" value=(val("subject")); }
            div { label for="q-from" { "From" } input id="q-from" name="from" type="text" placeholder="2024-01-31 or yesterday" value=(val("from")) aria-describedby="date-help"; }
            div { label for="q-to" { "To" } input id="q-to" name="to" type="text" placeholder="today" value=(val("to")) aria-describedby="date-help"; }
            div {
                label for="q-type" { "Kind" }
                select id="q-type" name="type" {
                    option value="" selected[kind.is_empty()] { "Email and spam" }
                    option value="email-test" selected[kind == "email-test"] { "Email tests" }
                    option value="spam-test" selected[kind == "spam-test"] { "Spam tests" }
                }
            }
            button type="submit" { "Search" }
            p.help id="date-help" { "Dates as in the API: YYYY-MM-DD, a Unix time, or words such as yesterday." }
        }
        @if let Some(e) = &error { p.error role="alert" { (e) } }
        @if rows.is_empty() && error.is_none() {
            p { "No tests match. " a href="/tests/new" { "Create one" } "." }
        } @else if !rows.is_empty() {
            table.list {
                caption { "Newest first" }
                thead { tr { th scope="col" { "Subject" } th scope="col" { "Date" } th scope="col" { "Kind" } th scope="col" { "Clients" } th scope="col" { "Progress and review" } } }
                tbody {
                    @for r in &rows {
                        @let s = summaries.get(&r.id);
                        tr {
                            td { a href={ "/tests/" (r.id) } { (s.map_or("(removed)", |s| s.subject.as_str())) } }
                            td { (date(r.created_at)) }
                            td { (if r.kind == TestKind::Email { "Email" } else { "Spam" }) }
                            td { (s.map_or(0, |s| s.clients)) }
                            td {
                                @if let Some(s) = s {
                                    @let (done, total) = (s.finished + s.spam_answered, s.clients + s.spam_filters);
                                    progress max=(total.max(1)) value=(done) aria-label={ "Progress of " (s.subject) } {}
                                    " " (done) " / " (total)
                                    // A column of its own would not fit a phone's width.
                                    @if r.kind == TestKind::Email {
                                        br;
                                        span.review-state data-approval=(s.approval.as_str()) { (s.approval.label()) }
                                    }
                                }
                            }
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
    page(StatusCode::OK, layout("Tests", chrome(&viewer), None, main))
}

// ---------------------------------------------------------------------------------------------
// A test's pages, for its owner and through a share link

/// How a test is being looked at.
struct Scope<'a> {
    /// `/tests/<id>` or `/share/<token>`.
    base: String,
    test: TestRow,
    /// The owner, signed in; `None` on a shared proof.
    owner: Option<&'a Viewer>,
}

impl Scope<'_> {
    fn chrome(&self) -> Chrome<'_> {
        self.owner.map_or(Chrome::Bare, chrome)
    }
}

pub(crate) async fn owned(
    state: &WebState,
    viewer: &Viewer,
    id: &str,
) -> Result<TestRow, Response> {
    app::owned_test_of_any_kind(&state.app, &viewer.caller, id)
        .await
        .map_err(|e| match e.name {
            app::ErrorName::InvalidTestId => not_found(),
            _ => crate::app_error(&e),
        })
}

pub(crate) async fn shared(state: &WebState, token: &str) -> Result<TestRow, Response> {
    let now = chrono::Utc::now().timestamp();
    let share = match state
        .app
        .store
        .live_share(&session::secret_hash(token), now)
        .await
    {
        Ok(Some(s)) => s,
        Ok(None) => return Err(not_found()),
        Err(e) => return Err(internal("reading the share link failed", e)),
    };
    match state.app.store.test(share.account_id, &share.test_id).await {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(not_found()),
        Err(e) => Err(internal("reading the test failed", e)),
    }
}

pub(crate) fn display_name(state: &WebState, id: &str) -> String {
    state
        .app
        .catalog
        .get(id)
        .map_or_else(|| id.to_string(), |c| c.display_name.clone())
}

fn category(state: &WebState, id: &str) -> Option<Category> {
    state.app.catalog.get(id).map(|c| c.category)
}

/// The gallery's and the form's order of categories.
pub(crate) const CATEGORIES: [Category; 3] =
    [Category::Application, Category::Mobile, Category::Web];

/// The clients as the gallery shows them, category by category: the order j/k walks.
fn gallery_order<'r>(
    state: &WebState,
    rows: &'r [ClientRow],
) -> Vec<(Category, Vec<&'r ClientRow>)> {
    let mut out = Vec::new();
    for cat in CATEGORIES {
        let in_cat: Vec<&ClientRow> = rows
            .iter()
            .filter(|c| category(state, &c.client_id) == Some(cat))
            .collect();
        if !in_cat.is_empty() {
            out.push((cat, in_cat));
        }
    }
    out
}

/// A card's shape follows its client's screen: a landscape card for desktop and web clients, a
/// portrait one for phones, so a screenshot is never padded into the other shape.
fn shape(state: &WebState, id: &str) -> &'static str {
    match state.app.catalog.get(id) {
        Some(c) if c.viewport.width < c.viewport.height => "portrait",
        _ => "landscape",
    }
}

/// Where a page loads a picture from: the owner gets the API's presigned URL; a shared proof
/// loads it through the share link, which is checked on every fetch, so revoking the share
/// stops its pictures too.
fn picture_url(
    state: &WebState,
    scope: &Scope<'_>,
    client: &str,
    picture: &Picture,
    now: i64,
) -> String {
    match scope.owner {
        Some(_) => shots::url(&state.app.settings, &scope.test.id, client, picture, now),
        None => format!("{}/shots/{client}/{picture}.png", scope.base),
    }
}

/// The card's picture. A phone's: the whole page narrowed (its proportions kept), cut to the card
/// by CSS from the top, so the first screen of the email is what one sees. A desktop or web
/// client's window narrowed so far would leave its text 3 px high: its card is the render's top
/// card, the email's column at 80% of its size (`render::thumbnail_size`); the full picture is
/// one click away.
fn card_picture(state: &WebState, id: &str, variant: Variant) -> Picture {
    match shape(state, id) {
        "portrait" => Picture::full_thumbnail(variant),
        _ => Picture::thumbnail(variant),
    }
}

/// `light` or `dark`: the colour scheme the client's profile draws in (dark profiles are clients
/// of their own in the catalog, not variants).
fn scheme_of(state: &WebState, id: &str) -> &'static str {
    match state.app.catalog.get(id).map(|c| c.color_scheme) {
        Some(domain::ColorScheme::Dark) => "dark",
        _ => "light",
    }
}

/// The gallery's filters and switch, as the URL carries them (`?category=Mobile&status=Bounced&
/// scheme=dark&images=off`), so a reload or a shared address shows the same cards. Unknown
/// values mean "all".
#[derive(Deserialize, Default)]
pub struct GalleryQuery {
    category: Option<String>,
    status: Option<String>,
    scheme: Option<String>,
    images: Option<String>,
}

struct Gallery {
    category: Option<Category>,
    status: Option<ScreenshotStatus>,
    scheme: Option<&'static str>,
    images_off: bool,
}

impl Gallery {
    fn from_query(q: &GalleryQuery) -> Gallery {
        fn pick(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        Gallery {
            category: pick(&q.category)
                .and_then(|c| CATEGORIES.into_iter().find(|k| k.as_str() == c)),
            status: pick(&q.status).and_then(ScreenshotStatus::parse),
            scheme: pick(&q.scheme).and_then(|s| ["light", "dark"].into_iter().find(|k| *k == s)),
            images_off: pick(&q.images) == Some("off"),
        }
    }

    fn shows(&self, category: Option<Category>, status: ScreenshotStatus, scheme: &str) -> bool {
        self.category.is_none_or(|c| category == Some(c))
            && self.status.is_none_or(|s| s == status)
            && self.scheme.is_none_or(|s| s == scheme)
    }
}

fn client_card(
    state: &WebState,
    scope: &Scope<'_>,
    r: &ClientRow,
    gallery: &Gallery,
    now: i64,
) -> Markup {
    let name = display_name(state, &r.client_id);
    let complete = r.status == ScreenshotStatus::Complete;
    let thumb_of = |variant: Variant| {
        complete.then(|| {
            picture_url(
                state,
                scope,
                &r.client_id,
                &card_picture(state, &r.client_id, variant),
                now,
            )
        })
    };
    // The images-off view: the client's own images-off screenshot where it has one.
    let off = r.variants.contains(&Variant::NoImages);
    let (thumb, href_on, href_off) = (
        thumb_of(if off && gallery.images_off {
            Variant::NoImages
        } else {
            Variant::Default
        }),
        format!("{}/clients/{}", scope.base, r.client_id),
        format!("{}/clients/{}?variant=no_images", scope.base, r.client_id),
    );
    let scheme = scheme_of(state, &r.client_id);
    let cb = format!("cmp-{}", r.client_id);
    html! {
        li.card data-client=(r.client_id) data-status=(r.status.as_str())
            data-shape=(shape(state, &r.client_id)) data-scheme=(scheme)
            hidden[!gallery.shows(category(state, &r.client_id), r.status, scheme)]
            data-src-on=[off.then(|| thumb_of(Variant::Default)).flatten()]
            data-src-off=[off.then(|| thumb_of(Variant::NoImages)).flatten()]
            data-href-on=[off.then_some(&href_on)] data-href-off=[off.then_some(&href_off)] {
            a.shot href=(if off && gallery.images_off { &href_off } else { &href_on }) {
                span.frame {
                    @if let Some(t) = &thumb {
                        img src=(t) alt={ "Screenshot of the email in " (name) } loading="lazy";
                    } @else {
                        span.placeholder aria-hidden="true" {}
                    }
                }
                span.name { (name) }
            }
            span.status { (r.status.as_str()) }
            @if r.status == ScreenshotStatus::Bounced {
                span.bounce { (r.bounce_message.clone().unwrap_or_default()) }
            }
            @if let Some(words) = failed_words(r) {
                span.failed { (words) }
            }
            @if r.status == ScreenshotStatus::Complete && r.shot(Variant::Default).is_some_and(|s| s.overflow_width.is_some()) {
                span.cut-mark { "Wider than the window: cut at the right" }
            }
            span.pick {
                input type="checkbox" name="c" value=(r.client_id) id=(cb) form="compare";
                label for=(cb) { "Compare" span.vh { " " (name) } }
            }
        }
    }
}

/// A complete card's mark when its screenshots could not load everything: "2 images did not
/// load" (each address once across the client's variants), "3 files …" when a stylesheet is
/// among them.
fn failed_words(r: &ClientRow) -> Option<String> {
    if r.status != ScreenshotStatus::Complete {
        return None;
    }
    let failed = r.failed_once();
    let n = failed.len();
    if n == 0 {
        return None;
    }
    let images = failed
        .iter()
        .all(|f| f.kind != domain::ResourceKind::Stylesheet);
    let what = match (images, n) {
        (true, 1) => "image",
        (true, _) => "images",
        (false, 1) => "file",
        (false, _) => "files",
    };
    Some(format!("{n} {what} did not load"))
}

/// What the shown screenshot's page could not load, each with why in a person's words: in the
/// picture a wrong address and an unreachable host look the same. Nothing is said for a
/// screenshot drawn before the service recorded this.
fn failed_section(row: &ClientRow, current: Variant) -> Markup {
    let Some(list) = row.shot(current).map(|s| &s.failed) else {
        return html! {};
    };
    let images_off = current.blocks_images();
    html! {
        section.failed-resources aria-labelledby="failed-h" {
            h2 id="failed-h" { "Images and styles that did not load" }
            @if list.is_empty() {
                p.help id="failed-none" {
                    @if images_off { "Images are off in this screenshot; every stylesheet loaded." }
                    @else { "Every image and stylesheet of this screenshot loaded." }
                }
            } @else {
                p.help {
                    (list.len()) @if list.len() == 1 { " file" } @else { " files" }
                    " of this screenshot did not load: the picture shows the email without them."
                    @if images_off { " Images are off in this screenshot, so only stylesheets are listed." }
                }
                table.list.failed {
                    thead { tr { th scope="col" { "Address" } th scope="col" { "What" } th scope="col" { "Why" } } }
                    tbody {
                        @for f in list {
                            tr data-reason=(f.reason.as_str()) {
                                td.url { code { (f.url) } }
                                td { (f.kind.label()) }
                                td { (f.explain()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn spam_section(rows: &[store::SpamRow]) -> Markup {
    html! {
        // While a filter has not answered, the section updates itself, details included.
        section aria-labelledby="spam-h" id="spam"
            data-reload-after=[rows.iter().any(|r| r.spam.is_none()).then_some("3000")] {
            h2 id="spam-h" { "Spam filters" }
            @if rows.is_empty() {
                p { "This test has no spam test." }
            } @else {
                table.list {
                    thead { tr { th scope="col" { "Filter" } th scope="col" { "Audience" } th scope="col" { "Verdict" } th scope="col" { "Details" } } }
                    tbody {
                        @for r in rows {
                            tr data-filter=(r.client) {
                                td { (r.client) }
                                td { (r.kind) }
                                @let v = r.spam;
                                td.verdict data-verdict=(verdict_name(v)) { (verdict_label(v)) }
                                td {
                                    @if r.details.trim().is_empty() { "—" } @else {
                                        details {
                                            summary { "Details" span.vh { " from " (r.client) } }
                                            (readable_details(&r.details))
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

/// The verdict's name for styles and app.js; "pending" while the filter has not answered.
fn verdict_name(v: Option<SpamVerdict>) -> &'static str {
    v.map_or("pending", SpamVerdict::as_str)
}

fn verdict_label(v: Option<SpamVerdict>) -> &'static str {
    v.map_or("Waiting for the filter", SpamVerdict::label)
}

/// Filter details as a list: JSON objects become name/value rows, other text keeps its lines.
fn readable_details(details: &str) -> Markup {
    match serde_json::from_str::<serde_json::Value>(details) {
        Ok(serde_json::Value::Object(m)) => html! {
            dl.details {
                @for (k, v) in &m {
                    dt { (k) }
                    dd { @if let Some(s) = v.as_str() { (s) } @else { (v.to_string()) } }
                }
            }
        },
        _ => html! { pre.details { (details) } },
    }
}

async fn test_markup(
    state: &WebState,
    scope: &Scope<'_>,
    gallery: &Gallery,
) -> Result<Markup, Response> {
    let now = chrono::Utc::now().timestamp();
    let t = &scope.test;
    let clients = match state.app.store.test_clients(&t.id).await {
        Ok(c) => c,
        Err(e) => return Err(internal("reading the test's clients failed", e)),
    };
    let spam = match state.app.store.spam_results(&t.id).await {
        Ok(s) => s,
        Err(e) => return Err(internal("reading spam results failed", e)),
    };
    let arrival = match crate::arrival::section(state, t).await {
        Ok(a) => a,
        Err(e) => return Err(internal("reading the sender requirements failed", e)),
    };
    let finished = clients.iter().filter(|c| c.status.is_final()).count();
    let shares = match scope.owner.and_then(|v| v.caller.account()) {
        Some(a) => match state.app.store.shares_of_test(a.id, &t.id).await {
            Ok(s) => s,
            Err(e) => return Err(internal("reading share links failed", e)),
        },
        None => Vec::new(),
    };
    let inbox = if t.kind == TestKind::Email {
        match crate::inboxrows::section(state, t, &scope.base, scope.owner.is_some()).await {
            Ok(s) => Some(s),
            Err(e) => return Err(crate::app_error(&e)),
        }
    } else {
        None
    };
    let review = if t.kind == TestKind::Email {
        let looker = match scope.owner {
            Some(v) => crate::review::Looker::Owner(v),
            None => crate::review::Looker::Shared,
        };
        match crate::review::section(state, t, &scope.base, looker).await {
            Ok(m) => Some(m),
            Err(e) => return Err(crate::app_error(&e)),
        }
    } else {
        None
    };
    let pick = match scope.owner {
        Some(v) if t.kind == TestKind::Email => {
            Some(crate::visdiff::picker(state, v, t, None).await?)
        }
        _ => None,
    };
    Ok(html! {
        h1 { (t.subject) }
        p.meta {
            (if t.kind == TestKind::Email { "Email test" } else { "Spam test" })
            ", created " (date(t.created_at))
            @if t.image_blocking { ", with image blocking" }
        }
        @if let Some(i) = &inbox { (i.markup) }
        @if t.kind == TestKind::Email {
            div.progress {
                label for="progress" { "Screenshots finished" }
                progress id="progress" max=(clients.len().max(1)) value=(finished) {}
                span id="progress-text" aria-live="polite" { (finished) " of " (clients.len()) }
            }
            @if scope.owner.is_some() {
                nav.tabs aria-label="Content" {
                    a href={ (scope.base) "/content?view=source" } { "Source" }
                    a href={ (scope.base) "/content?view=inlinecss" } { "CSS inlined" }
                    a href={ (scope.base) "/content?view=text" } { "Text version" }
                    a href={ (scope.base) "/links" } { "Links" }
                    a href={ (scope.base) "/checks" } { "Checks" }
                }
            }
            div.toolbar {
                form id="compare" method="get" action={ (scope.base) "/compare" } {
                    button type="submit" { "Compare selected side by side" }
                }
                (gallery_form(state, scope, &clients, gallery))
            }
            @for (cat, in_cat) in gallery_order(state, &clients) {
                section.category data-category=(cat.as_str()) aria-labelledby={ "cat-" (cat.as_str()) }
                    hidden[!in_cat.iter().any(|r| gallery.shows(Some(cat), r.status, scheme_of(state, &r.client_id)))] {
                    h2 id={ "cat-" (cat.as_str()) } { (cat.as_str()) }
                    ul.grid {
                        @for r in in_cat { (client_card(state, scope, r, gallery, now)) }
                    }
                }
            }
            @if let Some(p) = &pick { (p) }
        }
        (spam_section(&spam))
        @if let Some(a) = &arrival { (a.markup) }
        @if let Some(r) = &review { (r) }
        @if let Some(v) = scope.owner {
            section aria-labelledby="share-h" id="share" {
                h2 id="share-h" { "Share a proof" }
                p { "A read-only link to this test's results. It works without signing in and shows nothing else of your account." }
                form.inline method="post" action={ (scope.base) "/shares" } {
                    input type="hidden" name="csrf" value=(v.csrf);
                    label for="share-days" { "Expires after (days)" }
                    input id="share-days" name="days" type="number" min="1" max="365" value=(state.options.share_days);
                    button type="submit" { "Create share link" }
                }
                @if !shares.is_empty() {
                    table.list {
                        thead { tr { th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "State" } th scope="col" { span.vh { "Action" } } } }
                        tbody {
                            @for s in &shares {
                                tr {
                                    td { (date(s.created_at)) }
                                    td { (date(s.expires_at)) }
                                    td { @if s.revoked_at.is_some() { "Revoked" } @else if s.expires_at < now { "Expired" } @else { "Active" } }
                                    td {
                                        @if s.revoked_at.is_none() && s.expires_at >= now {
                                            form method="post" action={ (scope.base) "/shares/revoke" } {
                                                input type="hidden" name="csrf" value=(v.csrf);
                                                input type="hidden" name="share" value=(s.token_hash);
                                                button type="submit" { "Revoke" span.vh { " the link created " (date(s.created_at)) } }
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
    })
}

/// The gallery's filters (category, status with counts, colour scheme) and its images-off
/// switch where some client has an images-off screenshot: a form whose address is the filtered
/// gallery's, applied in place by app.js (which keeps the address up to date).
fn gallery_form(
    state: &WebState,
    scope: &Scope<'_>,
    clients: &[ClientRow],
    gallery: &Gallery,
) -> Markup {
    let count = |status: ScreenshotStatus| clients.iter().filter(|r| r.status == status).count();
    let dark = clients
        .iter()
        .filter(|r| scheme_of(state, &r.client_id) == "dark")
        .count();
    let images_off = clients
        .iter()
        .any(|r| r.variants.contains(&Variant::NoImages));
    let shown = clients
        .iter()
        .filter(|r| {
            gallery.shows(
                category(state, &r.client_id),
                r.status,
                scheme_of(state, &r.client_id),
            )
        })
        .count();
    html! {
        form.gallery-filter method="get" action=(scope.base) {
            span.field {
                label for="show-category" { "Category" }
                select id="show-category" name="category" {
                    option value="" { "All" }
                    @for cat in CATEGORIES {
                        option value=(cat.as_str()) selected[gallery.category == Some(cat)] { (cat.as_str()) }
                    }
                }
            }
            span.field {
                label for="show-status" { "Status" }
                select id="show-status" name="status" {
                    option value="" { "All (" (clients.len()) ")" }
                    @for st in [ScreenshotStatus::Complete, ScreenshotStatus::Pending, ScreenshotStatus::Processing, ScreenshotStatus::Bounced] {
                        option value=(st.as_str()) data-label=(st.as_str()) selected[gallery.status == Some(st)] {
                            (st.as_str()) " (" (count(st)) ")"
                        }
                    }
                }
            }
            @if dark > 0 {
                span.field {
                    label for="show-scheme" { "Mode" }
                    select id="show-scheme" name="scheme" {
                        option value="" { "Light and dark" }
                        option value="light" selected[gallery.scheme == Some("light")] { "Light (" (clients.len() - dark) ")" }
                        option value="dark" selected[gallery.scheme == Some("dark")] { "Dark (" (dark) ")" }
                    }
                }
            }
            @if images_off {
                span.field {
                    label for="show-images" { "Images" }
                    select id="show-images" name="images" {
                        option value="" { "On" }
                        option value="off" selected[gallery.images_off] { "Off, where the client blocks them" }
                    }
                }
            }
            button.show type="submit" { "Show" }
            span id="shown-count" aria-live="polite" { (shown) " shown" }
        }
    }
}

async fn render_test(state: &WebState, scope: Scope<'_>, q: &GalleryQuery) -> Response {
    match test_markup(state, &scope, &Gallery::from_query(q)).await {
        Ok(main) => {
            let poll = format!("{}/status.json", scope.base);
            page(
                StatusCode::OK,
                layout(&scope.test.subject, scope.chrome(), Some(&poll), main),
            )
        }
        Err(r) => r,
    }
}

pub async fn test_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<GalleryQuery>,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/tests/{}", test.id),
        test,
        owner: Some(&viewer),
    };
    render_test(&state, scope, &q).await
}

pub async fn shared_test(
    State(state): State<WebState>,
    Path(token): Path<String>,
    Query(q): Query<GalleryQuery>,
) -> Response {
    let test = match shared(&state, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/share/{token}"),
        test,
        owner: None,
    };
    render_test(&state, scope, &q).await
}

/// What app.js polls: each client's status and, once complete, its thumbnail and what did not
/// load; each spam
/// filter's verdict; and whether anything is still pending (app.js stops polling when not).
async fn status_json(state: &WebState, scope: &Scope<'_>) -> Response {
    let now = chrono::Utc::now().timestamp();
    let test = &scope.test;
    let clients = match state.app.store.test_clients(&test.id).await {
        Ok(c) => c,
        Err(e) => return internal("reading the test's clients failed", e),
    };
    let spam = match state.app.store.spam_results(&test.id).await {
        Ok(s) => s,
        Err(e) => return internal("reading spam results failed", e),
    };
    let finished = clients.iter().filter(|c| c.status.is_final()).count();
    let list: Vec<_> = clients
        .iter()
        .map(|c| {
            json!({
                "id": c.client_id,
                "name": display_name(state, &c.client_id),
                "status": c.status.as_str(),
                "thumbnail": (c.status == ScreenshotStatus::Complete)
                    .then(|| picture_url(state, scope, &c.client_id, &card_picture(state, &c.client_id, Variant::Default), now)),
                "thumbnail_off": (c.status == ScreenshotStatus::Complete && c.variants.contains(&Variant::NoImages))
                    .then(|| picture_url(state, scope, &c.client_id, &card_picture(state, &c.client_id, Variant::NoImages), now)),
                "message": c.bounce_message,
                "failed": failed_words(c),
            })
        })
        .collect();
    let verdicts: Vec<_> = spam
        .iter()
        .map(|r| {
            let v = r.spam;
            json!({"filter": r.client, "verdict": verdict_name(v), "label": verdict_label(v)})
        })
        .collect();
    let spam_pending = spam.iter().any(|r| r.spam.is_none());
    let arrival = match crate::arrival::section(state, test).await {
        Ok(a) => a,
        Err(e) => return internal("reading the sender requirements failed", e),
    };
    let arrival_pending = arrival.as_ref().is_some_and(|a| a.pending);
    let inbox = if test.kind == TestKind::Email {
        match crate::inboxrows::section(state, test, &scope.base, scope.owner.is_some()).await {
            Ok(s) => Some(s),
            Err(e) => return crate::app_error(&e),
        }
    } else {
        None
    };
    let inbox_pending = inbox.as_ref().is_some_and(|i| i.pending);
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(json!({
            "total": clients.len(),
            "finished": finished,
            "clients": list,
            "spam": verdicts,
            // The section whole once the requirements are checked, for app.js to put in place.
            "arrival": arrival.filter(|a| !a.pending).map(|a| a.markup.into_string()),
            // The strip whole once its rows are drawn, put in place the same way.
            "inbox": inbox.filter(|i| !i.pending).map(|i| i.markup.into_string()),
            "pending": finished < clients.len() || spam_pending || arrival_pending || inbox_pending,
        })),
    )
        .into_response()
}

pub async fn test_status(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    match owned(&state, &viewer, &id).await {
        Ok(test) => {
            let scope = Scope {
                base: format!("/tests/{}", test.id),
                test,
                owner: Some(&viewer),
            };
            status_json(&state, &scope).await
        }
        Err(r) => r,
    }
}

pub async fn shared_status(State(state): State<WebState>, Path(token): Path<String>) -> Response {
    match shared(&state, &token).await {
        Ok(test) => {
            let scope = Scope {
                base: format!("/share/{token}"),
                test,
                owner: None,
            };
            status_json(&state, &scope).await
        }
        Err(r) => r,
    }
}

/// A picture of a shared test, fetched through its share link: a revoked or expired link shows
/// nothing, whatever page or URL the picture was first loaded from.
pub async fn shared_picture(
    State(state): State<WebState>,
    Path((token, client, file)): Path<(String, String, String)>,
) -> Response {
    let test = match shared(&state, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    // A share shows the screenshots and the cards' pictures (images on and off), not diffs
    // against other tests.
    let Some(picture) = file
        .strip_suffix(".png")
        .and_then(Picture::parse)
        .filter(|p| {
            if client == domain::INBOX_ROWS_CLIENT {
                // The proof's inbox strip.
                return matches!(p, Picture::InboxRow { .. });
            }
            matches!(p, Picture::Shot(_))
                || *p == card_picture(&state, &client, Variant::Default)
                || *p == card_picture(&state, &client, Variant::NoImages)
        })
    else {
        return not_found();
    };
    let in_test = match state.app.store.test_clients(&test.id).await {
        Ok(rows) => {
            client == domain::INBOX_ROWS_CLIENT || rows.iter().any(|r| r.client_id == client)
        }
        Err(e) => return internal("reading the test's clients failed", e),
    };
    if !in_test {
        return not_found();
    }
    match shots::png(&state.app, &test.id, &client, &picture).await {
        // Not kept by the browser past a revocation.
        Ok(Some(bytes)) => (
            [
                (header::CONTENT_TYPE, "image/png"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            bytes,
        )
            .into_response(),
        Ok(None) => crate::app_error(&app::Error::new(
            app::ErrorName::Forbidden,
            "this screenshot does not exist yet; check the client's status in the results",
        )),
        Err(e) => crate::app_error(&e),
    }
}

#[derive(Deserialize, Default)]
pub struct VariantQuery {
    variant: Option<String>,
}

async fn client_markup(
    state: &WebState,
    scope: &Scope<'_>,
    client: &str,
    variant: Option<&str>,
) -> Result<Markup, Response> {
    let rows = match state.app.store.test_clients(&scope.test.id).await {
        Ok(c) => c,
        Err(e) => return Err(internal("reading the test's clients failed", e)),
    };
    let Some(row) = rows.iter().find(|r| r.client_id == client) else {
        return Err(not_found());
    };
    let order: Vec<&ClientRow> = gallery_order(state, &rows)
        .into_iter()
        .flat_map(|(_, in_cat)| in_cat)
        .collect();
    let at = order.iter().position(|r| r.client_id == client);
    let prev = at
        .filter(|&i| i > 0)
        .and_then(|i| order.get(i - 1))
        .map(|r| r.client_id.clone());
    let next = at
        .and_then(|i| order.get(i + 1))
        .map(|r| r.client_id.clone());
    let current = variant
        .and_then(Variant::parse)
        .filter(|v| row.variants.contains(v))
        .unwrap_or(Variant::Default);
    let name = display_name(state, client);
    let profile = state.app.catalog.get(client);
    let engine = row
        .engine
        .clone()
        .or_else(|| profile.map(|c| c.engine.as_str().to_string()))
        .unwrap_or_default();
    // The shown screenshot's own (a landscape one may name a zoom-out the default has not).
    let rules = row
        .shot(current)
        .and_then(|s| s.rule_set.clone())
        .or_else(|| row.rule_set.clone())
        .or_else(|| profile.map(|c| c.rules.clone()))
        .unwrap_or_default();
    let now = chrono::Utc::now().timestamp();
    let src = picture_url(state, scope, client, &Picture::Shot(current), now);
    let why = match scope.owner {
        Some(v) => Some(crate::why::panel(state, v, &scope.test, client).await),
        None => None,
    };
    let unfinished = matches!(
        row.status,
        ScreenshotStatus::Pending | ScreenshotStatus::Processing
    );
    // j and k keep the variant; a client without it shows its default.
    let keep_variant = match current {
        Variant::Default => String::new(),
        v => format!("?variant={}", v.as_str()),
    };
    Ok(html! {
        p { a href=(scope.base) { "← All clients of “" (scope.test.subject) "”" } }
        h1 { (name) }
        // Until the screenshot is drawn (after a reprocess too), this part updates itself.
        div #client-live data-reload-after=[unfinished.then_some("1500")] {
        dl.meta {
            dt { "Status" } dd id="client-status" { (row.status.as_str()) @if let Some(m) = &row.bounce_message { " — " (m) } }
            dt { "Engine" } dd { (engine) }
            dt { "Rule set" } dd { (rules) }
        }
        nav.variants aria-label="Variants" {
            @for (i, v) in row.variants.iter().enumerate() {
                a href={ (scope.base) "/clients/" (client) "?variant=" (v.as_str()) }
                    data-key=(i + 1)
                    aria-current=[(*v == current).then_some("page")] {
                    (v.label()) " " kbd { (i + 1) }
                }
            }
        }
        nav.clients aria-label="Clients" {
            @if let Some(p) = &prev {
                a id="prev-client" rel="prev" href={ (scope.base) "/clients/" (p) (keep_variant) } { "← " (display_name(state, p)) " " kbd { "k" } }
            }
            @if let Some(n) = &next {
                a id="next-client" rel="next" href={ (scope.base) "/clients/" (n) (keep_variant) } { (display_name(state, n)) " → " kbd { "j" } }
            }
        }
        p.help {
            @if row.variants.len() > 1 { "Keys 1–" (row.variants.len()) " or ← → switch variants; " }
            "j and k move to the next and previous client" @if current != Variant::Default { ", in the same variant where it has one" } "."
        }
        @if let Some(v) = scope.owner {
            form.inline method="post" action={ (scope.base) "/reprocess" } {
                input type="hidden" name="csrf" value=(v.csrf);
                input type="hidden" name="client" value=(client);
                button type="submit" { "Reprocess this client" }
                " " span.help { (scope.test.reprocesses_left) " reprocesses left for this test" }
            }
        }
        div.client-view {
            div.shot-col {
                @if row.status == ScreenshotStatus::Complete {
                    div.zoom role="group" aria-label="Zoom" hidden {
                        button type="button" data-zoom="fit" aria-pressed="false" { "Fit width" }
                        button type="button" data-zoom="css" aria-pressed="false" { "CSS size" }
                        button type="button" data-zoom="device" aria-pressed="false" { "Device pixels" }
                    }
                    @let cut = row.shot(current).and_then(|s| s.overflow_width);
                    @if let Some(w) = cut {
                        p.cut-note id="cut-note" {
                            "This email is " (w) " px wide, wider than this client's "
                            (profile.map_or(0, |c| c.viewport.width)) " px window: the client cuts it at the right edge, and readers scroll sideways to see the rest. The screenshot shows the window."
                        }
                    }
                    figure.full.cut[cut.is_some()] tabindex="0" data-zoom="fit" data-scale=(profile.map_or(1.0, |c| c.scale)) {
                        img id="full-shot" src=(src) alt={ "Screenshot of the email in " (name) ", " (current.label()) };
                        figcaption { (name) " — " (current.label()) @if cut.is_some() { " (cut at the window's right edge)" } }
                    }
                    (failed_section(row, current))
                } @else {
                    p.status { "The screenshot is " (row.status.as_str()) "." }
                }
            }
            @if let Some(w) = &why { (w) }
        }
        }
    })
}

async fn render_client(
    state: &WebState,
    scope: Scope<'_>,
    client: &str,
    q: VariantQuery,
) -> Response {
    match client_markup(state, &scope, client, q.variant.as_deref()).await {
        Ok(main) => page(
            StatusCode::OK,
            layout(&display_name(state, client), scope.chrome(), None, main),
        ),
        Err(r) => r,
    }
}

pub async fn client_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((id, client)): Path<(String, String)>,
    Query(q): Query<VariantQuery>,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/tests/{}", test.id),
        test,
        owner: Some(&viewer),
    };
    render_client(&state, scope, &client, q).await
}

pub async fn shared_client(
    State(state): State<WebState>,
    Path((token, client)): Path<(String, String)>,
    Query(q): Query<VariantQuery>,
) -> Response {
    let test = match shared(&state, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/share/{token}"),
        test,
        owner: None,
    };
    render_client(&state, scope, &client, q).await
}

async fn compare_markup(
    state: &WebState,
    scope: &Scope<'_>,
    raw: Option<&str>,
) -> Result<Markup, Response> {
    let picked: Vec<String> = url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .filter(|(k, _)| k == "c")
        .map(|(_, v)| v.into_owned())
        .collect();
    let rows = match state.app.store.test_clients(&scope.test.id).await {
        Ok(c) => c,
        Err(e) => return Err(internal("reading the test's clients failed", e)),
    };
    let chosen: Vec<&ClientRow> = picked
        .iter()
        .filter_map(|p| rows.iter().find(|r| &r.client_id == p))
        .collect();
    // The variants every chosen client has, to show them all in the same one.
    let common: Vec<Variant> = chosen.first().map_or_else(Vec::new, |first| {
        first
            .variants
            .iter()
            .copied()
            .filter(|v| chosen.iter().all(|r| r.variants.contains(v)))
            .collect()
    });
    let variant = url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "variant")
        .and_then(|(_, v)| Variant::parse(&v))
        .filter(|v| common.contains(v))
        .unwrap_or(Variant::Default);
    // One scale for all: each picture as wide as its client's window in CSS px, all narrowed by
    // the same factor to fit the row (down to 30%, then the row scrolls sideways).
    let css_width = |id: &str| {
        state
            .app
            .catalog
            .get(id)
            .map_or(600, |c| c.viewport.width.max(1))
    };
    let total: u32 = chosen
        .iter()
        .map(|r| css_width(&r.client_id))
        .sum::<u32>()
        .max(1);
    let gaps = chosen.len().saturating_sub(1);
    let width_style = |id: &str| {
        let w = css_width(id);
        format!(
            "width:max(calc((100% - {gaps}rem) * {:.5}), {:.0}px)",
            f64::from(w) / f64::from(total),
            f64::from(w) * 0.3
        )
    };
    let now = chrono::Utc::now().timestamp();
    Ok(html! {
        p { a href=(scope.base) { "← All clients of “" (scope.test.subject) "”" } }
        h1 { "Side by side" }
        @if chosen.len() < 2 {
            p.error role="alert" { "Pick two or more clients on the test's page, then choose “Compare selected side by side”." }
        } @else {
            @if common.len() > 1 {
                form.inline method="get" {
                    @for r in &chosen { input type="hidden" name="c" value=(r.client_id); }
                    label for="compare-variant" { "Variant" }
                    select #compare-variant name="variant" {
                        @for v in &common { option value=(v.as_str()) selected[*v == variant] { (v.label()) } }
                    }
                    button type="submit" { "Show" }
                }
            }
            p.help { "All at one scale: a CSS pixel of the email is the same size in every picture, so a phone's screenshot stands beside a desktop window as it would on a desk. Their tops are aligned; scroll the page to move through them together (on a narrow screen the row also scrolls sideways)." }
            div.compare.one-scale tabindex="0" role="region" aria-label="Screenshots side by side" {
                @for r in &chosen {
                    @let name = display_name(state, &r.client_id);
                    figure data-client=(r.client_id) data-css-width=(css_width(&r.client_id)) style=(width_style(&r.client_id)) {
                        @if r.status == ScreenshotStatus::Complete {
                            img src=(picture_url(state, scope, &r.client_id, &Picture::Shot(variant), now))
                                alt={ "Screenshot of the email in " (name) ", " (variant.label()) };
                        } @else {
                            p { "No screenshot yet." }
                        }
                        figcaption { (name) " — " (r.status.as_str()) }
                    }
                }
            }
        }
    })
}

async fn render_compare(state: &WebState, scope: Scope<'_>, raw: Option<&str>) -> Response {
    match compare_markup(state, &scope, raw).await {
        Ok(main) => page(
            StatusCode::OK,
            layout("Side by side", scope.chrome(), None, main),
        ),
        Err(r) => r,
    }
}

pub async fn compare_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/tests/{}", test.id),
        test,
        owner: Some(&viewer),
    };
    render_compare(&state, scope, raw.as_deref()).await
}

pub async fn shared_compare(
    State(state): State<WebState>,
    Path(token): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let test = match shared(&state, &token).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let scope = Scope {
        base: format!("/share/{token}"),
        test,
        owner: None,
    };
    render_compare(&state, scope, raw.as_deref()).await
}

#[derive(Deserialize, Default)]
pub struct ContentQuery {
    view: Option<String>,
}

pub async fn content_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ContentQuery>,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let html_src = match app::results::stored_content(&state.app, &test).await {
        Ok(h) => h,
        Err(e) => return crate::app_error(&e),
    };
    let view = q.view.as_deref().unwrap_or("source");
    let (title, body) = match view {
        "inlinecss" => {
            let inlined =
                tokio::task::spawn_blocking(move || content::inline::inline_css(&html_src)).await;
            match inlined {
                Ok(Ok(s)) => ("CSS inlined", s),
                Ok(Err(e)) => ("CSS inlined", format!("The CSS could not be inlined: {e}")),
                Err(e) => return internal("CSS inlining failed", e),
            }
        }
        "text" => {
            match tokio::task::spawn_blocking(move || content::text::text_only(&html_src)).await {
                Ok(s) => ("Text version", s),
                Err(e) => return internal("text conversion failed", e),
            }
        }
        _ => ("Source", html_src),
    };
    let base = format!("/tests/{}", test.id);
    let main = html! {
        p { a href=(base) { "← Back to “" (test.subject) "”" } }
        h1 { (title) }
        nav.tabs aria-label="Content" {
            a href={ (base) "/content?view=source" } aria-current=[(title == "Source").then_some("page")] { "Source" }
            a href={ (base) "/content?view=inlinecss" } aria-current=[(title == "CSS inlined").then_some("page")] { "CSS inlined" }
            a href={ (base) "/content?view=text" } aria-current=[(title == "Text version").then_some("page")] { "Text version" }
        }
        @if title == "Source" {
            pre.content.numbered tabindex="0" aria-label=(title) { (crate::why::numbered_source(&body)) }
        } @else {
            pre.content tabindex="0" aria-label=(title) { (body) }
        }
    };
    page(StatusCode::OK, layout(title, chrome(&viewer), None, main))
}

#[derive(Deserialize)]
pub struct ReprocessForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    client: String,
}

pub async fn reprocess(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(f): Form<ReprocessForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let now = chrono::Utc::now().timestamp();
    match state
        .app
        .store
        .reprocess(&test.id, std::slice::from_ref(&f.client), now)
        .await
    {
        Ok(outcomes) => {
            if let Some((_, store::ReprocessOutcome::Refused { reason, .. })) = outcomes.first() {
                return crate::page_error(StatusCode::FORBIDDEN, "Not reprocessed", reason);
            }
            state.app.work_ready.notify_waiters();
            Redirect::to(&format!("/tests/{}/clients/{}", test.id, f.client)).into_response()
        }
        Err(e) => internal("queueing the reprocess failed", e),
    }
}

#[derive(Deserialize)]
pub struct ShareForm {
    #[serde(default)]
    csrf: String,
    days: Option<String>,
}

pub async fn create_share(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(f): Form<ShareForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let days = f
        .days
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map_or(Some(state.options.share_days), |d| d.parse::<i64>().ok())
        .filter(|d| (1..=365).contains(d));
    let Some(days) = days else {
        return crate::page_error(
            StatusCode::BAD_REQUEST,
            "Share link not created",
            "The expiry must be a whole number of days from 1 to 365.",
        );
    };
    let token = session::new_secret();
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = state
        .app
        .store
        .create_share(
            &session::secret_hash(&token),
            &test.id,
            test.account_id,
            now,
            now + days * 86_400,
        )
        .await
    {
        return internal("creating the share link failed", e);
    }
    let link = format!("{}/share/{token}", state.app.settings.public_url);
    let main = html! {
        h1 { "Share link created" }
        p { "Anyone with this link can see the results of “" (test.subject) "” until " (date(now + days * 86_400)) ". It is shown only now: copy it." }
        div.share-link {
            label for="share-link" { "Link" }
            input id="share-link" type="text" readonly value=(link);
            button type="button" id="copy-share" data-copy="share-link" hidden { "Copy link" }
            span id="copy-done" role="status" {}
        }
        p { a id="share-open" href=(link) { "Open the shared proof" } }
        p { a href={ "/tests/" (test.id) "#share" } { "Back to the test" } }
    };
    page(
        StatusCode::OK,
        layout("Share link created", chrome(&viewer), None, main),
    )
}

#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    share: String,
}

pub async fn revoke_share(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(f): Form<RevokeForm>,
) -> Response {
    if let Err(r) = viewer.check_csrf(&f.csrf) {
        return r;
    }
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let now = chrono::Utc::now().timestamp();
    match state
        .app
        .store
        .revoke_share(test.account_id, &f.share, now)
        .await
    {
        Ok(_) => Redirect::to(&format!("/tests/{}#share", test.id)).into_response(),
        Err(e) => internal("revoking the share link failed", e),
    }
}
