//! The application layer's one error: a spec §7.1 name and a message saying how to fix the
//! request. Only `api` gives it a wire shape (§7's JSON); `web` shows the message on a page.

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
    ServiceUnavailable,
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
    pub const ALL: [ErrorName; 43] = [
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
        ErrorName::ServiceUnavailable,
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
            ErrorName::ServiceUnavailable => "ServiceUnavailable",
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
    pub fn status(self) -> u16 {
        match self {
            ErrorName::NoAccept => 406,
            ErrorName::AccessDenied => 401,
            ErrorName::RateLimited => 429,
            ErrorName::NotFound
            | ErrorName::InvalidTestId
            | ErrorName::ClientNotFound
            | ErrorName::NoCampaigns => 404,
            // A storage failure the caller may retry (§7.2 says "retry").
            ErrorName::ErrorCreateCampaign
            | ErrorName::ErrorUpdateCampaign
            | ErrorName::ErrorGetCampaign
            | ErrorName::ErrorActivatingCampaign => 503,
            ErrorName::ServiceUnavailable => 503,
            // The campaign's state forbids the action now.
            ErrorName::CampaignAlreadyActive
            | ErrorName::CannotClearData
            | ErrorName::CampaignNotActive => 409,
            ErrorName::BadMethod => 405,
            ErrorName::ServerError | ErrorName::ProcessingError => 500,
            ErrorName::TestLimitReached | ErrorName::PermissionError | ErrorName::Forbidden => 403,
            ErrorName::SmtpError | ErrorName::SmtpAuthenticationError => 502,
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
            | ErrorName::ExpirationMaximumExceeded => 400,
        }
    }
}

/// A refusal or failure of an operation, as the caller may hear it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub name: ErrorName,
    pub message: String,
    /// Seconds to wait, for `RateLimited` and `ServiceUnavailable`.
    pub retry_after: Option<u64>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(name: ErrorName, message: impl Into<String>) -> Error {
        Error {
            name,
            message: message.into(),
            retry_after: None,
        }
    }

    /// An internal failure: the cause goes to the log, the caller gets a generic message.
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> Error {
        tracing::error!(error = %cause, "{context}");
        Error::new(
            ErrorName::ServerError,
            format!("{context}; the failure was logged, please retry shortly"),
        )
    }

    pub(crate) fn rate_limited(message: String, wait: u64) -> Error {
        let mut e = Error::new(ErrorName::RateLimited, message);
        e.retry_after = Some(wait);
        e
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name.as_str(), self.message)
    }
}

impl std::error::Error for Error {}

/// Seconds a caller is told to wait when the database is away: long enough not to hammer it
/// while it restarts, short enough for a failover.
const DATABASE_RETRY_AFTER: u64 = 5;

impl From<store::StoreError> for Error {
    fn from(e: store::StoreError) -> Error {
        match e {
            store::StoreError::TestLimitReached { customer_id, limit } => Error::new(
                ErrorName::TestLimitReached,
                format!(
                    "customer {customer_id:?} has used its {limit} tests for this calendar month; \
                     more can be created from the first day of next month (UTC)"
                ),
            ),
            e if e.is_unavailable() => {
                tracing::warn!(error = %e, "the database is unavailable");
                let mut out = Error::new(
                    ErrorName::ServiceUnavailable,
                    "the service's database is not answering; nothing was changed, retry shortly",
                );
                out.retry_after = Some(DATABASE_RETRY_AFTER);
                out
            }
            other => Error::internal("storage failed", other),
        }
    }
}
