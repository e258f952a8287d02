//! mailproof's web interface: server-rendered pages (maud) on the application layer (`app`), served
//! on the API's port under `/` while the API stays under `/v5`.
//!
//! Invariants:
//! - No rule of the API is repeated here: sign-in goes through `app::check_credentials` (argon2
//!   bounded, failed-login limits), test and campaign creation through `app::create` and
//!   `app::campaigns`, and ownership through `app::owned` (another account's test is "not found").
//! - Every state-changing form is a POST carrying the session's CSRF token.
//! - Screenshots are shown through the API's presigned URLs, so local files and S3 both work.

// Page handlers return a finished error page as `Err(Response)`; boxing it would only add an
// allocation on the error path.
#![allow(clippy::result_large_err)]

mod arrival;
mod campaigns;
mod clickmap;
mod contentchecks;
mod inboxrows;
mod linkcheck;
mod newtest;
mod pages;
mod report;
mod review;
mod session;
mod visdiff;
mod why;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, DOCTYPE};

pub use session::{secret_hash, SESSION_COOKIE};

/// How the pages are served.
#[derive(Clone, Debug)]
pub struct WebOptions {
    /// Mark cookies `Secure` (the public URL is https).
    pub secure_cookies: bool,
    /// Days a new share link lives unless the owner picks otherwise.
    pub share_days: i64,
    /// Which analytics work in which client profile (data/analytics-matrix.toml).
    pub analytics_matrix: std::sync::Arc<analytics::matrix::Matrix>,
}

#[derive(Clone)]
pub struct WebState {
    pub app: app::AppState,
    pub options: WebOptions,
}

/// Every page of the web interface. Mount it in front of `api::router` (as its fallback) so that
/// both answer on one port.
pub fn router(app: app::AppState, options: WebOptions) -> Router {
    let max_body = app.settings.max_body_bytes;
    let state = WebState { app, options };
    Router::new()
        .route("/", get(pages::home))
        .route("/signin", get(pages::signin_form).post(pages::signin))
        .route("/signout", post(pages::signout))
        .route("/tests", get(pages::tests_list))
        .route("/tests/new", get(newtest::form).post(newtest::submit))
        .route("/tests/{id}", get(pages::test_page))
        .route("/tests/{id}/status.json", get(pages::test_status))
        .route("/tests/{id}/clients/{client}", get(pages::client_page))
        .route("/tests/{id}/compare", get(pages::compare_page))
        .route("/tests/{id}/content", get(pages::content_page))
        .route("/tests/{id}/diff", get(visdiff::diff_page))
        .route(
            "/tests/{id}/links",
            get(linkcheck::report).post(linkcheck::start),
        )
        .route("/tests/{id}/checks", get(contentchecks::report))
        .route("/tests/{id}/reprocess", post(pages::reprocess))
        .route("/tests/{id}/shares", post(pages::create_share))
        .route("/tests/{id}/review", post(review::owner_decides))
        .route("/share/{token}/review", post(review::reviewer_decides))
        .route("/tests/{id}/shares/revoke", post(pages::revoke_share))
        .route("/share/{token}", get(pages::shared_test))
        .route("/share/{token}/status.json", get(pages::shared_status))
        .route("/share/{token}/clients/{client}", get(pages::shared_client))
        .route("/share/{token}/compare", get(pages::shared_compare))
        .route(
            "/share/{token}/shots/{client}/{file}",
            get(pages::shared_picture),
        )
        .route("/campaigns", get(campaigns::list))
        .route(
            "/campaigns/new",
            get(campaigns::new_form).post(campaigns::create),
        )
        .route("/campaigns/{guid}", get(campaigns::campaign_page))
        .route(
            "/campaigns/{guid}/activate",
            get(campaigns::activate_form).post(campaigns::activate),
        )
        .route(
            "/campaigns/{guid}/clear",
            get(campaigns::clear_form).post(campaigns::clear),
        )
        .route(
            "/campaigns/{guid}/delete",
            get(campaigns::delete_form).post(campaigns::delete),
        )
        .route("/campaigns/{guid}/end", post(campaigns::set_end))
        .route("/campaigns/{guid}/clickmap", post(clickmap::draw))
        .route("/analytics/clients", get(campaigns::matrix_page))
        .route("/static/app.js", get(app_js))
        .route("/static/app.css", get(app_css))
        .route("/favicon.ico", get(favicon))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

const APP_JS: &str = include_str!("../static/app.js");
const APP_CSS: &str = include_str!("../static/app.css");

async fn app_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        APP_JS,
    )
        .into_response()
}

const FAVICON: &[u8] = include_bytes!("../static/favicon.ico");

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/x-icon"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        FAVICON,
    )
        .into_response()
}

async fn app_css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        APP_CSS,
    )
        .into_response()
}

pub(crate) fn pages_chrome(v: &session::Viewer) -> Chrome<'_> {
    pages::chrome(v)
}

/// Who the page is for, as the layout shows it.
pub(crate) enum Chrome<'a> {
    /// Signed in: the API key (or the sandbox) and the sign-out form's token.
    SignedIn {
        who: &'a str,
        sandbox: bool,
        csrf: &'a str,
    },
    /// A shared proof or the sign-in page: nothing of any account.
    Bare,
}

/// The frame of every page. `body_attrs` carries data for app.js (the polling URL).
pub(crate) fn layout(
    title: &str,
    chrome: Chrome<'_>,
    status_url: Option<&str>,
    main: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · mailproof" }
                link rel="stylesheet" href="/static/app.css";
                link rel="icon" href="/favicon.ico";
                script src="/static/app.js" defer {}
            }
            body data-status-url=[status_url] {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    @match &chrome {
                        Chrome::SignedIn { who, sandbox, csrf } => {
                            a.brand href="/tests" { "mailproof" }
                            nav aria-label="Main" {
                                a href="/tests" { "Tests" }
                                a href="/tests/new" { "New test" }
                                a href="/campaigns" { "Campaigns" }
                            }
                            span.who { "Signed in as " strong { (masked_key(who)) } }
                            form method="post" action="/signout" {
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" { "Sign out" }
                            }
                            @if *sandbox {
                                p.banner role="note" { "Sandbox: requests are checked and answered, but nothing is stored." }
                            }
                        }
                        Chrome::Bare => {
                            span.brand { "mailproof" }
                        }
                    }
                }
                main id="main" tabindex="-1" { (main) }
            }
        }
    }
}

/// An account's API key as the header shows it: enough to tell accounts apart, not enough to
/// read it off a screen share or a screenshot (it is half of the API's credentials).
fn masked_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    match chars.len() {
        0..=4 => key.to_string(),
        n if n <= 8 => format!("{}…", chars[..2].iter().collect::<String>()),
        n => format!(
            "{}…{}",
            chars[..4].iter().collect::<String>(),
            chars[n - 2..].iter().collect::<String>()
        ),
    }
}

pub(crate) fn page(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        Html(markup.into_string()),
    )
        .into_response()
}

/// A page that only says what went wrong and what to do.
pub(crate) fn page_error(status: StatusCode, title: &str, message: &str) -> Response {
    page(
        status,
        layout(
            title,
            Chrome::Bare,
            None,
            html! {
                h1 { (title) }
                p { (message) }
                // Shown to strangers too (a revoked proof): the start page sends a signed-in
                // person to their tests and anyone else to sign in.
                p { a href="/" { "Go to mailproof's start page" } }
            },
        ),
    )
}

pub(crate) fn not_found() -> Response {
    page_error(
        StatusCode::NOT_FOUND,
        "Test not found",
        "There is no such test on this account, or the link has expired or was revoked.",
    )
}

pub(crate) fn internal(context: &str, cause: impl std::fmt::Display) -> Response {
    tracing::error!(error = %cause, "{context}");
    page_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something failed",
        &format!("{context}; the failure was logged. Please retry in a moment."),
    )
}

/// The HTTP status of an error name.
pub(crate) fn status_of(name: app::ErrorName) -> StatusCode {
    StatusCode::from_u16(name.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An application error as a page.
pub(crate) fn app_error(e: &app::Error) -> Response {
    page_error(status_of(e.name), e.name.as_str(), &e.message)
}

/// `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn date(ts: i64) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ts.to_string())
}
