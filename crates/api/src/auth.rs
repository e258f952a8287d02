//! HTTP Basic authentication against stored accounts (spec §5), the sandbox credentials, and the
//! per-account rate limit.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use store::Account;

use crate::error::{ApiError, ErrorName};
use crate::login::Verdict;
use crate::state::AppState;

/// Who is calling.
#[derive(Clone, Debug)]
pub enum Caller {
    Account(Account),
    /// `sandbox`/`sandbox`: requests are validated and answered, nothing is created (spec §5.3).
    Sandbox,
}

impl Caller {
    pub fn account(&self) -> Option<&Account> {
        match self {
            Caller::Account(a) => Some(a),
            Caller::Sandbox => None,
        }
    }
}

pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash password: {e}"))
}

fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// `(user, password)` from an `Authorization: Basic` header, if there is a well-formed one.
pub fn basic_credentials(parts: &Parts) -> Option<(String, String)> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
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
    if user == "sandbox" && pass == "sandbox" {
        return Ok(Some(Caller::Sandbox));
    }
    let cache_key: [u8; 32] = Sha256::digest(format!("{user}\0{pass}").as_bytes()).into();
    if let Some(id) = state.credentials.get(&cache_key) {
        if let Some(account) = state.store.account_by_id(id).await? {
            if account.api_key == user {
                return Ok(Some(Caller::Account(account)));
            }
        }
    }
    // Only credentials that need argon2 are limited: a client whose login is cached keeps working
    // while others storm its key or its address.
    let address = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let (per_address, per_key) = (
        state.settings.failed_logins_per_address,
        state.settings.failed_logins_per_key,
    );
    if let Err(wait) = state.logins.admit(address, &user, per_address, per_key) {
        return Err(rate_limited(
            format!(
                "too many failed logins from this address or for this API key; retry in {wait} s"
            ),
            wait,
        ));
    }
    let verdict = state
        .logins
        .verify(
            cache_key,
            || async {
                state
                    .store
                    .account_by_key(&user)
                    .await
                    .map_err(|e| e.to_string())
            },
            move |account| Ok(verify_password(&pass, &account.password_hash)),
        )
        .await;
    match verdict {
        Verdict::Valid(account) => {
            state.credentials.put(cache_key, account.id);
            Ok(Some(Caller::Account(account)))
        }
        Verdict::WrongPassword => {
            state
                .logins
                .record_failure(address, Some(&user), per_address, per_key);
            Err(denied("unknown API key or wrong password"))
        }
        Verdict::UnknownKey => {
            // Unknown keys are not tracked per key, so random keys cannot grow the table.
            state
                .logins
                .record_failure(address, None, per_address, per_key);
            Err(denied("unknown API key or wrong password"))
        }
        Verdict::Busy => Err(rate_limited(
            "too many logins are being checked at once; retry in 1 s".into(),
            1,
        )),
        Verdict::Failed(cause) => Err(ApiError::internal("checking the credentials failed", cause)),
    }
}

fn rate_limited(message: String, wait: u64) -> ApiError {
    let mut e = ApiError::new(ErrorName::RateLimited, message);
    e.retry_after = Some(wait);
    e
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
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
        Ok(caller)
    }
}
