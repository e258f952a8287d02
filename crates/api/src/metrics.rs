//! `GET /metrics` (Prometheus text format, `telemetry`'s figures plus the queues read from the
//! store at scrape time) and the middleware that counts requests by route template.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorName};
use crate::state::AppState;

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
    let now = chrono::Utc::now().timestamp();
    let queues = match state.store.queue_stats(now).await {
        Ok(stats) => stats,
        Err(e) => {
            return ApiError::internal("cannot read the queues for /metrics", e).into_response()
        }
    };
    let queues: Vec<telemetry::QueueFigures> = queues
        .into_iter()
        .map(|q| telemetry::QueueFigures {
            queue: q.queue.to_owned(),
            waiting: q.waiting,
            leased: q.leased,
            oldest_age_secs: q.oldest_age_secs,
        })
        .collect();
    match telemetry::encode(telemetry::global(), &queues) {
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
