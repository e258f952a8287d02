//! HTTP Basic authentication (spec §5): the credentials of a request, checked by the application
//! layer, and the per-account rate limit.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use base64::Engine as _;

pub use app::auth::{check_credentials, hash_password, Caller};

use crate::error::{ApiError, ErrorName};
use crate::state::AppState;

/// The authenticated caller of a request, as a handler's argument; it reads as [`Caller`].
#[derive(Clone, Debug)]
pub struct Authed(pub Caller);

impl std::ops::Deref for Authed {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.0
    }
}

/// `(user, password)` from an `Authorization: Basic` header, if there is a well-formed one.
pub fn basic_credentials(parts: &Parts) -> Option<(String, String)> {
    basic_credentials_in(&parts.headers)
}

/// Does the request carry the public sandbox credentials?
pub(crate) fn is_sandbox(headers: &axum::http::HeaderMap) -> bool {
    basic_credentials_in(headers).is_some_and(|(u, p)| u == "sandbox" && p == "sandbox")
}

fn basic_credentials_in(headers: &axum::http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

fn denied(msg: &str) -> ApiError {
    ApiError::new(ErrorName::AccessDenied, msg)
}

/// Resolves the caller, or `None` when no credentials were sent. Wrong credentials are an error.
pub async fn authenticate(parts: &Parts, state: &AppState) -> Result<Option<Caller>, ApiError> {
    if parts.headers.get(header::AUTHORIZATION).is_none() {
        return Ok(None);
    }
    let Some((user, pass)) = basic_credentials(parts) else {
        return Err(denied(
            "the Authorization header is not valid HTTP Basic: send 'Authorization: Basic <base64(api_key:password)>'",
        ));
    };
    let address = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    check_credentials(state, user, pass, address)
        .await
        .map(Some)
        .map_err(ApiError::from)
}

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Authed, ApiError> {
        let caller = authenticate(parts, state).await?.ok_or_else(|| {
            denied("this call needs HTTP Basic authentication with your API key and password")
        })?;
        if let Caller::Account(a) = &caller {
            let limit = a
                .rate_limit_per_minute
                .and_then(|l| u32::try_from(l).ok())
                .unwrap_or(state.settings.default_rate_limit);
            if let Err(wait) = state.rate.check(a.id, limit) {
                let mut e = ApiError::new(
                    ErrorName::RateLimited,
                    format!("this account allows {limit} requests a minute; retry in {wait} s"),
                );
                e.retry_after = Some(wait);
                return Err(e);
            }
        }
        Ok(Authed(caller))
    }
}
