//! The API's one error type: every failure a caller can see has a §7.1 name, an HTTP status and a
//! message that says how to fix the request. Internal causes are logged, never sent.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Error names of spec §7.1 and §7.2 (plus `Forbidden` for screenshot URLs, which answer 403).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorName {
    NoAccept,
    AccessDenied,
    RateLimited,
    InvalidJson,
    WrongVersion,
    InvalidParameter,
    NotFound,
    BadMethod,
    BadRequest,
    ServerError,
    ProcessingError,
    TestLimitReached,
    PermissionError,
    InvalidTestId,
    NoClient,
    NoClients,
    InvalidClient,
    InvalidFreeClient,
    InvalidTestClient,
    ClientNotFound,
    NoSubject,
    NoSource,
    InvalidUrl,
    MissingCustomerId,
    SmtpError,
    SmtpAuthenticationError,
    InvalidSpamType,
    NoSpamResults,
    NoSeedList,
    Forbidden,
    NoContent,
    ErrorCreateCampaign,
    ErrorUpdateCampaign,
    ErrorGetCampaign,
    ErrorActivatingCampaign,
    InvalidData,
    NoCampaigns,
    CampaignAlreadyActive,
    CannotClearData,
    CampaignNotActive,
    ExpirationLessThanMinimum,
    ExpirationMaximumExceeded,
}

impl ErrorName {
    pub const ALL: [ErrorName; 42] = [
        ErrorName::NoAccept,
        ErrorName::AccessDenied,
        ErrorName::RateLimited,
        ErrorName::InvalidJson,
        ErrorName::WrongVersion,
        ErrorName::InvalidParameter,
        ErrorName::NotFound,
        ErrorName::BadMethod,
        ErrorName::BadRequest,
        ErrorName::ServerError,
        ErrorName::ProcessingError,
        ErrorName::TestLimitReached,
        ErrorName::PermissionError,
        ErrorName::InvalidTestId,
        ErrorName::NoClient,
        ErrorName::NoClients,
        ErrorName::InvalidClient,
        ErrorName::InvalidFreeClient,
        ErrorName::InvalidTestClient,
        ErrorName::ClientNotFound,
        ErrorName::NoSubject,
        ErrorName::NoSource,
        ErrorName::InvalidUrl,
        ErrorName::MissingCustomerId,
        ErrorName::SmtpError,
        ErrorName::SmtpAuthenticationError,
        ErrorName::InvalidSpamType,
        ErrorName::NoSpamResults,
        ErrorName::NoSeedList,
        ErrorName::Forbidden,
        ErrorName::NoContent,
        ErrorName::ErrorCreateCampaign,
        ErrorName::ErrorUpdateCampaign,
        ErrorName::ErrorGetCampaign,
        ErrorName::ErrorActivatingCampaign,
        ErrorName::InvalidData,
        ErrorName::NoCampaigns,
        ErrorName::CampaignAlreadyActive,
        ErrorName::CannotClearData,
        ErrorName::CampaignNotActive,
        ErrorName::ExpirationLessThanMinimum,
        ErrorName::ExpirationMaximumExceeded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorName::NoAccept => "NoAccept",
            ErrorName::AccessDenied => "AccessDenied",
            ErrorName::RateLimited => "RateLimited",
            ErrorName::InvalidJson => "InvalidJSON",
            ErrorName::WrongVersion => "WrongVersion",
            ErrorName::InvalidParameter => "InvalidParameter",
            ErrorName::NotFound => "NotFound",
            ErrorName::BadMethod => "BadMethod",
            ErrorName::BadRequest => "BadRequest",
            ErrorName::ServerError => "ServerError",
            ErrorName::ProcessingError => "ProcessingError",
            ErrorName::TestLimitReached => "TestLimitReached",
            ErrorName::PermissionError => "PermissionError",
            ErrorName::InvalidTestId => "InvalidTestID",
            ErrorName::NoClient => "NoClient",
            ErrorName::NoClients => "NoClients",
            ErrorName::InvalidClient => "InvalidClient",
            ErrorName::InvalidFreeClient => "InvalidFreeClient",
            ErrorName::InvalidTestClient => "InvalidTestClient",
            ErrorName::ClientNotFound => "ClientNotFound",
            ErrorName::NoSubject => "NoSubject",
            ErrorName::NoSource => "NoSource",
            ErrorName::InvalidUrl => "InvalidURL",
            ErrorName::MissingCustomerId => "MissingCustomerID",
            ErrorName::SmtpError => "SMTPError",
            ErrorName::SmtpAuthenticationError => "SMTPAuthenticationError",
            ErrorName::InvalidSpamType => "InvalidSpamType",
            ErrorName::NoSpamResults => "NoSpamResults",
            ErrorName::NoSeedList => "NoSeedList",
            ErrorName::Forbidden => "Forbidden",
            ErrorName::NoContent => "NoContent",
            ErrorName::ErrorCreateCampaign => "ErrorCreateCampaign",
            ErrorName::ErrorUpdateCampaign => "ErrorUpdateCampaign",
            ErrorName::ErrorGetCampaign => "ErrorGetCampaign",
            ErrorName::ErrorActivatingCampaign => "ErrorActivatingCampaign",
            ErrorName::InvalidData => "InvalidData",
            ErrorName::NoCampaigns => "NoCampaigns",
            ErrorName::CampaignAlreadyActive => "CampaignAlreadyActive",
            ErrorName::CannotClearData => "CannotClearData",
            ErrorName::CampaignNotActive => "CampaignNotActive",
            ErrorName::ExpirationLessThanMinimum => "ExpirationLessThanMinimum",
            ErrorName::ExpirationMaximumExceeded => "ExpirationMaximumExceeded",
        }
    }

    /// The status code of each error name. README's error table is generated from this list by a
    /// test, so the two cannot drift apart.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorName::NoAccept => StatusCode::NOT_ACCEPTABLE,
            ErrorName::AccessDenied => StatusCode::UNAUTHORIZED,
            ErrorName::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorName::NotFound
            | ErrorName::InvalidTestId
            | ErrorName::ClientNotFound
            | ErrorName::NoCampaigns => StatusCode::NOT_FOUND,
            // A storage failure the caller may retry (§7.2 says "retry").
            ErrorName::ErrorCreateCampaign
            | ErrorName::ErrorUpdateCampaign
            | ErrorName::ErrorGetCampaign
            | ErrorName::ErrorActivatingCampaign => StatusCode::SERVICE_UNAVAILABLE,
            // The campaign's state forbids the action now.
            ErrorName::CampaignAlreadyActive
            | ErrorName::CannotClearData
            | ErrorName::CampaignNotActive => StatusCode::CONFLICT,
            ErrorName::BadMethod => StatusCode::METHOD_NOT_ALLOWED,
            ErrorName::ServerError | ErrorName::ProcessingError => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ErrorName::TestLimitReached | ErrorName::PermissionError | ErrorName::Forbidden => {
                StatusCode::FORBIDDEN
            }
            ErrorName::SmtpError | ErrorName::SmtpAuthenticationError => StatusCode::BAD_GATEWAY,
            ErrorName::InvalidJson
            | ErrorName::WrongVersion
            | ErrorName::InvalidParameter
            | ErrorName::BadRequest
            | ErrorName::NoClient
            | ErrorName::NoClients
            | ErrorName::InvalidClient
            | ErrorName::InvalidFreeClient
            | ErrorName::InvalidTestClient
            | ErrorName::NoSubject
            | ErrorName::NoSource
            | ErrorName::InvalidUrl
            | ErrorName::MissingCustomerId
            | ErrorName::InvalidSpamType
            | ErrorName::NoSpamResults
            | ErrorName::NoSeedList
            | ErrorName::NoContent
            | ErrorName::InvalidData
            | ErrorName::ExpirationLessThanMinimum
            | ErrorName::ExpirationMaximumExceeded => StatusCode::BAD_REQUEST,
        }
    }
}

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
        tracing::error!(error = %cause, "{context}");
        ApiError::new(
            ErrorName::ServerError,
            format!("{context}; the failure was logged, please retry shortly"),
        )
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> ApiError {
        match e {
            store::StoreError::TestLimitReached { customer_id, limit } => ApiError::new(
                ErrorName::TestLimitReached,
                format!(
                    "customer {customer_id:?} has used its {limit} tests for this calendar month; \
                     more can be created from the first day of next month (UTC)"
                ),
            ),
            other => ApiError::internal("storage failed", other),
        }
    }
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
        let status = self.status.unwrap_or(self.name.status());
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
    use super::{ApiError, ErrorName};

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
                name.status().as_str(),
                "README status of {}",
                name.as_str()
            );
        }
    }
}
