//! `GET /metrics` (Prometheus text format, `telemetry`'s figures plus the queues read from the
//! store at scrape time) and the middleware that counts requests by route template.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Mutex;
use std::time::Duration;

use crate::error::{ApiError, ErrorName};
use crate::state::AppState;

/// How long a scrape waits for the database's queue figures, so that `/metrics` answers within a
/// second whatever the database does.
const QUEUES_WAIT: Duration = Duration::from_millis(700);

/// The queue figures last read and when (Unix seconds), shown while the database does not answer.
static LAST_QUEUES: Mutex<Option<(i64, Vec<telemetry::QueueFigures>)>> = Mutex::new(None);

/// Counts a request under its route template (never the raw path: ids would grow the series
/// without bound). For `route_layer`, which runs only for matched routes.
pub async fn count_requests(req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let resp = next.run(req).await;
    telemetry::global().http_request(&method, &route, resp.status().as_u16());
    resp
}

/// The queue figures read now, or when the database does not answer within [`QUEUES_WAIT`] the
/// last ones read; with their age in seconds (-1: none ever read).
async fn queue_figures(store: &store::Store) -> (Vec<telemetry::QueueFigures>, i64) {
    let now = chrono::Utc::now().timestamp();
    let read = tokio::time::timeout(QUEUES_WAIT, store.queue_stats(now)).await;
    let last = || {
        LAST_QUEUES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    match read {
        Ok(Ok(stats)) => {
            let figures: Vec<telemetry::QueueFigures> = stats
                .into_iter()
                .map(|q| telemetry::QueueFigures {
                    queue: q.queue.to_owned(),
                    waiting: q.waiting,
                    leased: q.leased,
                    oldest_age_secs: q.oldest_age_secs,
                    expired_leases: q.expired_leases,
                    expired_lease_secs: q.expired_lease_secs,
                })
                .collect();
            *LAST_QUEUES
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((now, figures.clone()));
            (figures, 0)
        }
        failed => {
            match failed {
                Ok(Err(e)) => tracing::warn!(error = %e, "reading the queues for /metrics; showing the last figures read"),
                _ => tracing::warn!("reading the queues for /metrics: no answer within {QUEUES_WAIT:?}; showing the last figures read"),
            }
            match last() {
                Some((at, figures)) => (figures, (now - at).max(1)),
                None => (Vec::new(), -1),
            }
        }
    }
}

/// `GET /metrics`. With `[metrics] token` set, only `Authorization: Bearer <token>` is answered;
/// without one, only a service listening on loopback alone answers.
pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if state.http.metrics_token.is_none() && state.http.metrics_port_public {
        return ApiError::new(
            ErrorName::AccessDenied,
            "GET /metrics is closed: the HTTP port listens beyond loopback and no [metrics] token \
             is configured; set one and send `Authorization: Bearer <token>`",
        )
        .into_response();
    }
    if let Some(token) = &state.http.metrics_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let matches = given
            .is_some_and(|g| domain::signing::constant_time_eq(token.as_bytes(), g.as_bytes()));
        if !matches {
            return ApiError::new(
                ErrorName::AccessDenied,
                "GET /metrics needs the `Authorization: Bearer <token>` header with the token of \
                 [metrics] token in the service configuration",
            )
            .into_response();
        }
    }
    let (queues, age) = queue_figures(&state.store).await;
    match telemetry::encode(telemetry::global(), &queues, age) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => ApiError::internal("cannot encode the metrics", e).into_response(),
    }
}
