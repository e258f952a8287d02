//! HTTP Basic authentication against stored accounts (spec §5), the sandbox credentials, and the
//! per-account rate limit.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use store::Account;

use crate::error::{ApiError, ErrorName};
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
    let account = state.store.account_by_key(&user).await?;
    let Some(account) = account else {
        return Err(denied("unknown API key or wrong password"));
    };
    let phc = account.password_hash.clone();
    let ok = tokio::task::spawn_blocking(move || verify_password(&pass, &phc))
        .await
        .map_err(|e| ApiError::internal("password check failed", e))?;
    if !ok {
        return Err(denied("unknown API key or wrong password"));
    }
    state.credentials.put(cache_key, account.id);
    Ok(Some(Caller::Account(account)))
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
