//! mailproof's HTTP interface: the email-testing API v5 (`shared/spec/email-testing-api-v5.md`).
//!
//! Handlers parse the request, call the application layer (`app`) and serialize its answer.
//!
//! Invariants:
//! - Only this crate knows the API's JSON wire shapes; `app`, storage and workers see plain types.
//! - Every error a caller can see is an [`ApiError`] (from `app::Error`) with a §7.1 name and a
//!   message saying how to fix the request.
//! - Every test endpoint checks ownership through `app::owned`: another account's test id is
//!   `InvalidTestID`; every analytics campaign call likewise: another account's guid is
//!   `NoCampaigns`.

pub mod auth;
pub mod error;
pub mod handlers;
pub mod health;
pub mod hits;
pub mod metrics;
pub mod openapi;
pub mod params;
pub mod state;
pub mod version;

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;

pub use auth::hash_password;
pub use error::{ApiError, ErrorName};
pub use state::{
    ApiSettings, AppSettings, AppState, SmtpProbe, SmtpSendError, SmtpSendRequest, SpamClientInfo,
};

use handlers::{
    analysis, analytics, checks, clients, create, diff, email, inbox, links, lists, review, shots,
    spam, webhooks,
};
use version::{first_segment, ApiVersion};

pub(crate) fn wrong_version(segment: &str) -> ApiError {
    ApiError::new(
        ErrorName::WrongVersion,
        format!("API version {segment:?} is not supported: use /v5/ or /v5.0.1/ as the first path segment"),
    )
}

/// The versioned API routes, as `(path, methods)`: the router and the OpenAPI document are both
/// built from the handlers registered here.
fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/{version}/auth", get(handlers::auth_check))
        .route(
            "/{version}/analytics/analytics_auth",
            get(handlers::auth_check),
        )
        .route(
            "/{version}/analytics/createcampaign",
            post(analytics::create),
        )
        .route(
            "/{version}/analytics/gettrackingcode/{guid}",
            get(analytics::get_tracking_code),
        )
        .route(
            "/{version}/analytics/gettrackingcode/",
            get(analytics::missing_guid),
        )
        .route(
            "/{version}/analytics/getcampaigninfo/{guid}",
            get(analytics::get_campaign_info),
        )
        .route(
            "/{version}/analytics/getcampaigninfo/",
            get(analytics::missing_guid),
        )
        .route("/{version}/analytics/campaigns", get(analytics::list))
        .route("/{version}/analytics/campaigns/", get(analytics::list))
        .route(
            "/{version}/analytics/campaigns/{guid}",
            delete(analytics::delete),
        )
        .route(
            "/{version}/analytics/getcampaignexport/{guid}",
            get(analytics::export),
        )
        .route(
            "/{version}/analytics/getcampaignstats/{guid}",
            get(analytics::stats),
        )
        .route(
            "/{version}/analytics/getcampaignstats/",
            get(analytics::missing_guid),
        )
        .route(
            "/{version}/analytics/activatecampaign/{guid}",
            post(analytics::activate),
        )
        .route(
            "/{version}/analytics/setcampaignexpiration/{guid}",
            post(analytics::set_expiration),
        )
        .route(
            "/{version}/analytics/clearcampaigndata/{guid}",
            post(analytics::clear),
        )
        .route(
            "/{version}/analytics/updatecampaign/{guid}",
            put(analytics::update).post(analytics::update),
        )
        .route(
            "/{version}/email/tests",
            get(lists::list_email_tests).post(create::create_email_test),
        )
        .route(
            "/{version}/email/tests/{id}",
            get(email::test_info).delete(email::delete_email_test),
        )
        .route("/{version}/email/tests/{id}/results", get(email::results))
        .route(
            "/{version}/email/tests/{id}/results/",
            get(email::results_without_client),
        )
        .route(
            "/{version}/email/tests/{id}/results/reprocess",
            put(email::reprocess),
        )
        .route(
            "/{version}/email/tests/{id}/results/{client}",
            get(email::results_for_client),
        )
        .route(
            "/{version}/email/tests/{id}/codeanalysis/{client}",
            get(analysis::code_analysis),
        )
        .route(
            "/{version}/email/tests/{id}/codeanalysis",
            get(analysis::code_analysis_without_client),
        )
        .route(
            "/{version}/email/tests/{id}/codeanalysis/",
            get(analysis::code_analysis_without_client),
        )
        .route(
            "/{version}/email/tests/{id}/diff/{other}",
            get(diff::visual_diff),
        )
        .route("/{version}/email/tips/{client}", get(analysis::tips))
        .route("/{version}/email/tips", get(analysis::tips_without_client))
        .route("/{version}/email/tips/", get(analysis::tips_without_client))
        .route(
            "/{version}/email/tests/{id}/links",
            get(links::report).put(links::start),
        )
        .route("/{version}/email/tests/{id}/checks", get(checks::report))
        .route("/{version}/email/tests/{id}/inbox", get(inbox::rows))
        .route(
            "/{version}/email/tests/{id}/versions",
            get(review::versions).put(review::join),
        )
        .route(
            "/{version}/email/tests/{id}/approvals",
            get(review::approvals),
        )
        .route("/{version}/email/tests/{id}/approval", put(review::decide))
        .route("/{version}/email/tests/{id}/content", get(email::content))
        .route(
            "/{version}/email/tests/{id}/content/inlinecss",
            get(email::content_inlinecss),
        )
        .route(
            "/{version}/email/tests/{id}/content/textonly",
            get(email::content_textonly),
        )
        .route(
            "/{version}/email/tests/{id}/spam/results",
            get(spam::email_spam_results),
        )
        .route(
            "/{version}/email/tests/{id}/spam/seedlist",
            get(spam::email_spam_seedlist),
        )
        .route(
            "/{version}/email/tests/{id}/spam/requirements",
            get(spam::email_spam_requirements),
        )
        .route("/{version}/email/clients", get(clients::list_clients))
        .route(
            "/{version}/email/clients/default",
            get(clients::default_clients).put(clients::set_default_clients),
        )
        .route("/{version}/spam/clients", get(spam::spam_clients))
        .route(
            "/{version}/spam/tests",
            get(lists::list_spam_tests).post(create::create_spam_test),
        )
        .route(
            "/{version}/spam/tests/{id}",
            get(spam::spam_test_results).delete(spam::delete_spam_test),
        )
        .route(
            "/{version}/spam/tests/{id}/seedlist",
            get(spam::spam_test_seedlist),
        )
        .route(
            "/{version}/spam/tests/{id}/requirements",
            get(spam::spam_test_requirements),
        )
        .route("/{version}/spam/seedlist", get(spam::reserve_seedlist))
        .route(
            "/{version}/account/webhook",
            get(webhooks::get_account_webhook).put(webhooks::put_account_webhook),
        )
        .route(
            "/{version}/email/tests/{id}/callback",
            get(webhooks::email_test_callback),
        )
        .route(
            "/{version}/spam/tests/{id}/callback",
            get(webhooks::spam_test_callback),
        )
        .route("/{version}/tests", get(lists::list_all_tests))
}

/// The whole HTTP service.
pub fn router(state: AppState) -> Router {
    let max_body = state.settings.max_body_bytes;
    // The API rules wrap the versioned router as one service, not route by route: axum adds the
    // `Allow` header of a 405 outside per-route middleware, and `BadMethod` must repeat it.
    let api = api_routes()
        .route_layer(middleware::from_fn(metrics::count_requests))
        .fallback(not_found)
        .with_state(state.clone());
    let api = tower::Layer::layer(&middleware::from_fn(api_rules), api);
    Router::new()
        .route("/screenshots/{test}/{client}/{file}", get(shots::serve))
        .route("/t/{guid}/{file}", get(analytics::hit))
        .route("/healthz", get(health::healthz))
        .route(
            "/openapi.json",
            get(|| async { axum::Json(openapi::document()) }),
        )
        .route("/metrics", get(metrics::metrics))
        .route_layer(middleware::from_fn(metrics::count_requests))
        .fallback_service(api)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(request_shape))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// The content security policy of every answer: the web pages load their script, styles and
/// images from this site only and run no inline script (inline `style` attributes are allowed:
/// with images, fonts and connections limited to this site they cannot send anything away);
/// JSON answers and images need nothing at all.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds `Content-Security-Policy` and `X-Content-Type-Options: nosniff` to an answer that does
/// not set them itself; for `axum::middleware::map_response` around the whole service (the web
/// pages and the API).
pub async fn security_headers(mut resp: Response) -> Response {
    let headers = resp.headers_mut();
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(header::HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(header::HeaderValue::from_static("nosniff"));
    resp
}

/// Longest query string accepted; longer ones are refused before any handler parses them.
pub const MAX_QUERY_BYTES: usize = 32 * 1024;
/// Most query parameters accepted in one request.
pub const MAX_QUERY_PARAMS: usize = 256;

/// Rules for every request: a bounded query string, and every error answered in the §7 shape,
/// including the plain-text rejections of axum's extractors (invalid UTF-8 in a path, a query
/// that does not deserialize) and any other error response without a JSON body.
async fn request_shape(req: Request, next: Next) -> Response {
    if let Some(q) = req.uri().query() {
        if q.len() > MAX_QUERY_BYTES {
            return ApiError::new(
                ErrorName::InvalidParameter,
                format!(
                    "the query string is {} bytes; at most {MAX_QUERY_BYTES} are accepted",
                    q.len()
                ),
            )
            .with_status(StatusCode::URI_TOO_LONG)
            .into_response();
        }
        let count = q.split('&').filter(|p| !p.is_empty()).count();
        if count > MAX_QUERY_PARAMS {
            return ApiError::new(
                ErrorName::InvalidParameter,
                format!(
                    "the query string has {count} parameters; at most {MAX_QUERY_PARAMS} are accepted"
                ),
            )
            .into_response();
        }
    }
    let mut resp = as_section7(next.run(req).await).await;
    if resp.status() == StatusCode::REQUEST_TIMEOUT {
        // The rest of a stalled body may never come: the connection cannot be reused.
        resp.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    resp
}

/// Turns an error response that is not JSON into a §7 error with the same status and headers.
pub async fn as_section7(resp: Response) -> Response {
    let status = resp.status();
    if status.as_u16() < 400 || is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // Rejection texts are a line or two; anything longer is cut rather than buffered.
    let text = match axum::body::to_bytes(body, 16 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let name = name_for_status(status);
    let message = if text.is_empty() {
        format!(
            "the request was refused ({status}); check the URL, headers and body against /openapi.json"
        )
    } else {
        format!("the request was refused: {text}")
    };
    let e = ApiError::new(name, message).with_status(status);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(e.body()))
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"))
}

/// The §7.1 name for an error status that reached the wire without one.
pub fn name_for_status(status: StatusCode) -> ErrorName {
    match status {
        StatusCode::UNAUTHORIZED => ErrorName::AccessDenied,
        StatusCode::FORBIDDEN => ErrorName::Forbidden,
        StatusCode::NOT_FOUND => ErrorName::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorName::BadMethod,
        StatusCode::NOT_ACCEPTABLE => ErrorName::NoAccept,
        StatusCode::URI_TOO_LONG => ErrorName::InvalidParameter,
        StatusCode::TOO_MANY_REQUESTS => ErrorName::RateLimited,
        s if s.is_server_error() => ErrorName::ServerError,
        _ => ErrorName::BadRequest,
    }
}

/// Is `path` addressed to some API version other than the ones served? Its first segment is not
/// a served version and either more path follows it (`/V5/auth`, `/v²/auth`, `/hello/auth`) or
/// it looks like a version on its own (`/v4`). A lone other name (`/favicon.ico`) is `NotFound`.
fn names_another_version(path: &str, seg: &str) -> bool {
    let more = path
        .trim_start_matches('/')
        .split_once('/')
        .is_some_and(|(_, rest)| !rest.is_empty());
    let versionish = seg
        .strip_prefix(['v', 'V'])
        .is_some_and(|rest| rest.starts_with(|c: char| !c.is_ascii_alphabetic()));
    !seg.is_empty() && (more || versionish)
}

/// Rules every versioned call follows: a supported version, an `Accept` that allows JSON, and
/// `BadMethod` (with `Allow` and `Accept` listing the methods) for a method the path lacks.
async fn api_rules(req: Request, next: Next) -> Response {
    let seg = first_segment(req.uri().path()).to_string();
    if ApiVersion::parse(&seg).is_none() {
        if names_another_version(req.uri().path(), &seg) {
            return wrong_version(&seg).into_response();
        }
        return next.run(req).await;
    }
    if let Some(accept) = req.headers().get(header::ACCEPT) {
        let accept = accept.to_str().unwrap_or("");
        if !accepts_json(accept) {
            return ApiError::new(
                ErrorName::NoAccept,
                format!("the Accept header {accept:?} does not allow application/json, the only format this API answers in"),
            )
            .into_response();
        }
    }
    let method = req.method().clone();
    let resp = next.run(req).await;
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
        let allow = resp
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut e = ApiError::new(
            ErrorName::BadMethod,
            format!("{method} is not available here; allowed: {allow}"),
        );
        e.allow = Some(allow);
        return e.into_response();
    }
    resp
}

/// Does an `Accept` header value admit `application/json`? (`*/*`, `application/*`,
/// `application/json` with a non-zero quality.)
pub fn accepts_json(accept: &str) -> bool {
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q_zero = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !q_zero && matches!(media.as_str(), "*/*" | "application/*" | "application/json")
    })
}

async fn not_found(method: Method, req: Request) -> Response {
    let path = req.uri().path().to_string();
    ApiError::new(
        ErrorName::NotFound,
        format!("{method} {path} is not part of this API; see /openapi.json for the calls it has"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::accepts_json;

    #[test]
    fn accept_headers_are_judged_like_content_negotiation() {
        assert!(accepts_json("application/json"));
        assert!(accepts_json("text/html, */*;q=0.1"));
        assert!(accepts_json("application/*"));
        assert!(!accepts_json("text/html"));
        assert!(!accepts_json("application/json;q=0"));
        assert!(!accepts_json("application/xml"));
    }
}
