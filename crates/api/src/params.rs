//! Permissive request parsing (spec §1): a JSON body with or without a Content-Type, booleans as
//! `true`, `"true"` or `1`, client lists as arrays or comma-separated strings, numbers as strings.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{FromRequest, Request};
use serde_json::{Map, Value};

use crate::error::{ApiError, ErrorName};
use crate::state::AppState;

/// Largest request body accepted with the sandbox credentials.
pub const SANDBOX_MAX_BODY_BYTES: usize = 1024 * 1024;

/// A request body parsed as a JSON object, whatever its Content-Type said.
pub struct Body(pub Map<String, Value>);

impl FromRequest<AppState> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Body, ApiError> {
        // The public sandbox credentials get a smaller share: their bodies are parsed and
        // dropped, and large ones from strangers would take memory and time from tenants.
        let sandbox = crate::auth::is_sandbox(req.headers());
        let limit = if sandbox {
            state.settings.max_body_bytes.min(SANDBOX_MAX_BODY_BYTES)
        } else {
            state.settings.max_body_bytes
        };
        let bytes = axum::body::to_bytes(req.into_body(), limit).await.map_err(|e| {
            if timed_out(&e) {
                return ApiError::new(
                    ErrorName::BadRequest,
                    "the request body did not arrive in time (see [http_limits] body_timeout); send the whole body at once",
                )
                .with_status(axum::http::StatusCode::REQUEST_TIMEOUT);
            }
            let whose = if sandbox { " with the sandbox credentials" } else { "" };
            ApiError::new(
                ErrorName::BadRequest,
                format!(
                    "could not read the request body (at most {limit} bytes are accepted{whose}): {e}"
                ),
            )
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(Map::new()));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::new(
                ErrorName::InvalidJson,
                format!("the request body is not valid JSON ({e}); send a JSON object"),
            )
        })?;
        match value {
            Value::Object(m) => Ok(Body(m)),
            other => Err(ApiError::new(
                ErrorName::InvalidJson,
                format!(
                    "the request body must be a JSON object, not {}",
                    kind(&other)
                ),
            )),
        }
    }
}

/// Did reading the body fail because the service's body timeout (set where the server is run) ran
/// out?
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() || c.is::<BodyTooSlow>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// A request body that must arrive in full within a total time, counted from when it is first
/// read: a client trickling one byte at a time holds a connection no longer than that.
pub struct DeadlineBody<B> {
    inner: Pin<Box<B>>,
    limit: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> DeadlineBody<B> {
    pub fn new(inner: B, limit: Duration) -> DeadlineBody<B> {
        DeadlineBody {
            inner: Box::pin(inner),
            limit,
            deadline: None,
        }
    }
}

/// The error of a [`DeadlineBody`] whose time ran out.
#[derive(Debug)]
pub struct BodyTooSlow(Duration);

impl std::fmt::Display for BodyTooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body took longer than {:?}", self.0)
    }
}

impl std::error::Error for BodyTooSlow {}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body,
    B::Error: Into<axum::BoxError>,
{
    type Data = B::Data;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, axum::BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTooSlow(limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn bad(field: &str, expected: &str, got: &Value) -> ApiError {
    ApiError::new(
        ErrorName::BadRequest,
        format!("`{field}` must be {expected}, not {}", kind(got)),
    )
}

/// A string field; numbers are taken as their decimal text. `null` and absent are `None`.
pub fn string(m: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(v) => Err(bad(field, "a string", v)),
    }
}

/// A boolean: `true`/`false`, `"true"`/`"false"`, `1`/`0`, `"1"`/`"0"`, `"yes"`/`"no"`, `"on"`/`"off"`.
pub fn boolean(m: &Map<String, Value>, field: &str) -> Result<Option<bool>, ApiError> {
    let Some(v) = m.get(field) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::Null => return Ok(None),
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(true),
            "false" | "0" | "no" | "off" | "" => Some(false),
            _ => None,
        },
        _ => None,
    };
    parsed.map(Some).ok_or_else(|| {
        bad(
            field,
            "a boolean (true, false, \"true\", \"false\", 1 or 0)",
            v,
        )
    })
}

/// An integer, also from a numeric string.
pub fn integer(m: &Map<String, Value>, field: &str) -> Result<Option<i64>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad(field, "an integer", &Value::Number(n.clone()))),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| {
            ApiError::new(
                ErrorName::BadRequest,
                format!("`{field}` must be an integer, not {s:?}"),
            )
        }),
        Some(v) => Err(bad(field, "an integer", v)),
    }
}

/// A list of ids: a JSON array of strings or one comma-separated string. Ids are trimmed and
/// lower-cased (client ids are lower case); empty entries are dropped.
pub fn id_list(m: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, ApiError> {
    let items: Vec<String> = match m.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.split(',').map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(bad(field, "an array of strings", other)),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(bad(
                field,
                "an array of client ids or a comma-separated string",
                v,
            ))
        }
    };
    Ok(Some(
        items
            .iter()
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect(),
    ))
}

/// A nested object (e.g. `spam`, `smtp_info`); a JSON string holding an object is accepted too.
pub fn object(m: &Map<String, Value>, field: &str) -> Result<Option<Map<String, Value>>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o.clone())),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Ok(Some(o)),
            _ => Err(ApiError::new(
                ErrorName::BadRequest,
                format!("`{field}` must be an object"),
            )),
        },
        Some(v) => Err(bad(field, "an object", v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn booleans_are_read_permissively() {
        let m = obj(json!({"a": true, "b": "true", "c": 1, "d": "0", "e": "maybe"}));
        assert_eq!(boolean(&m, "a").ok().flatten(), Some(true));
        assert_eq!(boolean(&m, "b").ok().flatten(), Some(true));
        assert_eq!(boolean(&m, "c").ok().flatten(), Some(true));
        assert_eq!(boolean(&m, "d").ok().flatten(), Some(false));
        assert!(boolean(&m, "e").is_err());
        assert_eq!(boolean(&m, "missing").ok().flatten(), None);
    }

    #[test]
    fn client_lists_come_as_arrays_or_comma_strings() {
        let m = obj(json!({"a": ["X1", " y2 "], "b": "x1, y2,,", "c": 3}));
        assert_eq!(
            id_list(&m, "a").ok().flatten(),
            Some(vec!["x1".into(), "y2".into()])
        );
        assert_eq!(
            id_list(&m, "b").ok().flatten(),
            Some(vec!["x1".into(), "y2".into()])
        );
        assert!(id_list(&m, "c").is_err());
    }
}
