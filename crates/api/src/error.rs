//! The API's one error type: every failure a caller can see has a §7.1 name, an HTTP status and a
//! message that says how to fix the request. Internal causes are logged, never sent.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use app::ErrorName;

#[derive(Debug)]
pub struct ApiError {
    pub name: ErrorName,
    pub message: String,
    /// Seconds, for `RateLimited`.
    pub retry_after: Option<u64>,
    /// Allowed methods, for `BadMethod`.
    pub allow: Option<String>,
    /// A transport-level status (414, 431, 408) that says more than the name's own status; the
    /// name keeps the meaning clients switch on.
    pub status: Option<StatusCode>,
}

impl ApiError {
    pub fn new(name: ErrorName, message: impl Into<String>) -> ApiError {
        ApiError {
            name,
            message: message.into(),
            retry_after: None,
            allow: None,
            status: None,
        }
    }

    /// The same error sent with another HTTP status (see [`ApiError::status`]).
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = Some(status);
        self
    }

    /// The wire body. `name` comes before `message`: some SDKs show only the first bytes of a
    /// failed response, and the name is what tells the caller what went wrong.
    pub fn body(&self) -> Vec<u8> {
        error_body(self.name.as_str(), &self.message)
    }

    /// An internal failure: the cause goes to the log, the caller gets a generic message.
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> ApiError {
        app::Error::internal(context, cause).into()
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> ApiError {
        app::Error::from(e).into()
    }
}

impl From<app::Error> for ApiError {
    fn from(e: app::Error) -> ApiError {
        let mut out = ApiError::new(e.name, e.message);
        out.retry_after = e.retry_after;
        out
    }
}

/// The HTTP status of an error name.
pub fn status_of(name: ErrorName) -> StatusCode {
    StatusCode::from_u16(name.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

#[derive(Serialize)]
struct WireError<'a> {
    error: WireErrorFields<'a>,
}

/// Field order is the serialization order.
#[derive(Serialize)]
struct WireErrorFields<'a> {
    name: &'a str,
    message: &'a str,
}

/// `{"error":{"name":..,"message":..}}`, in that order.
pub fn error_body(name: &str, message: &str) -> Vec<u8> {
    let wire = WireError {
        error: WireErrorFields { name, message },
    };
    // Serializing two strings into a Vec cannot fail; the fallback keeps the shape regardless.
    serde_json::to_vec(&wire).unwrap_or_else(|_| {
        format!("{{\"error\":{{\"name\":\"{name}\",\"message\":\"\"}}}}").into_bytes()
    })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status.unwrap_or(status_of(self.name));
        let mut resp = (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body(),
        )
            .into_response();
        let h = resp.headers_mut();
        if let Some(secs) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(allow) = self.allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
            h.insert(header::ALLOW, allow.clone());
            // Spec §7.1: "the response's Accept header lists allowed methods".
            h.insert(header::ACCEPT, allow);
        }
        if self.name == ErrorName::AccessDenied {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"mailproof\""),
            );
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::{status_of, ApiError, ErrorName};

    /// Some SDKs show only the first 120 bytes of a failed response: the name must come first.
    #[test]
    fn error_bodies_write_the_name_before_the_message() {
        let e = ApiError::new(ErrorName::InvalidParameter, "x".repeat(500));
        let body = String::from_utf8(e.body()).unwrap_or_default();
        assert!(
            body.starts_with(r#"{"error":{"name":"InvalidParameter","message":"xxx"#),
            "{body}"
        );
    }

    /// README's error table must give every name with the status the code really sends.
    #[test]
    fn the_readme_error_table_matches_the_code() {
        let readme = include_str!("../../../README.md");
        for name in ErrorName::ALL {
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", name.as_str())))
                .unwrap_or_else(|| panic!("README has no row for {}", name.as_str()));
            let status = row.split('|').nth(2).unwrap_or("").trim();
            assert_eq!(
                status,
                status_of(name).as_str(),
                "README status of {}",
                name.as_str()
            );
        }
    }
}
