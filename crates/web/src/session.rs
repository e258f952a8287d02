//! Sign-in sessions and CSRF tokens: a 128-bit random cookie whose SHA-256 is the stored row,
//! and a per-session CSRF token derived from it with the service's signing key (nothing more to
//! store, and it ends with the session).

use std::net::SocketAddr;

use app::Caller;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::{page_error, WebState};

pub const SESSION_COOKIE: &str = "mp_session";
/// The sign-in form's own CSRF cookie (double submit): there is no session yet to derive one from.
pub const SIGNIN_CSRF_COOKIE: &str = "mp_signin";
/// How long a sign-in lasts.
pub const SESSION_SECS: i64 = 12 * 3600;

/// 128 random bits, hex-encoded.
pub fn new_secret() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// What is stored for a session id or share token.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The CSRF token of a session.
pub fn csrf_for(key: &[u8], session: &str) -> String {
    domain::signing::hmac_sha256_hex(key, &[b"web-csrf\0", session.as_bytes()])
}

/// Constant-time comparison of a submitted token with the expected one; an empty token never
/// matches.
pub fn token_matches(expected: &str, given: &str) -> bool {
    domain::signing::secret_eq(expected, given)
}

pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_string())
}

/// A `Set-Cookie` value: always `HttpOnly`, `SameSite=Lax` and path `/`; `Secure` when the public
/// URL is https.
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// A sandbox sign-in: nothing is stored for the public credentials, so the cookie carries its
/// own expiry and a MAC with the service's key (`sandbox.<expiry>.<nonce>.<mac>`).
pub fn sandbox_session(key: &[u8], expires: i64) -> String {
    let body = format!("sandbox.{expires}.{}", new_secret());
    format!("{body}.{}", sandbox_mac(key, &body))
}

fn sandbox_mac(key: &[u8], body: &str) -> String {
    domain::signing::hmac_sha256_hex(key, &[b"web-sandbox\0", body.as_bytes()])
}

/// Is `id` a sandbox session cookie made with `key` that has not expired?
pub fn is_sandbox_session(key: &[u8], id: &str, now: i64) -> bool {
    let Some((body, mac)) = id.rsplit_once('.') else {
        return false;
    };
    let expires = body
        .strip_prefix("sandbox.")
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(e, _)| e.parse::<i64>().ok());
    expires.is_some_and(|e| e > now) && token_matches(&sandbox_mac(key, body), mac)
}

/// A signed-in person: who they are to the API, and the CSRF token their forms carry.
pub struct Viewer {
    pub caller: Caller,
    pub session_hash: String,
    pub csrf: String,
}

impl Viewer {
    /// Checks a submitted form's CSRF token; the refusal is the 403 page.
    pub fn check_csrf(&self, given: &str) -> Result<(), Response> {
        if token_matches(&self.csrf, given) {
            Ok(())
        } else {
            Err(csrf_refused())
        }
    }
}

pub fn csrf_refused() -> Response {
    page_error(
        axum::http::StatusCode::FORBIDDEN,
        "Form refused",
        "The form was sent without its security token, or with a stale one. Go back, reload the page and send it again.",
    )
}

/// The client address, for the API's failed-login limits.
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

impl FromRequestParts<WebState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &WebState) -> Result<Viewer, Response> {
        let to_signin = || {
            let next = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            let q: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("next", next)
                .finish();
            Redirect::to(&format!("/signin?{q}")).into_response()
        };
        let Some(id) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(to_signin());
        };
        let hash = secret_hash(&id);
        let now = chrono::Utc::now().timestamp();
        if is_sandbox_session(&state.app.settings.signing_key, &id, now) {
            return Ok(Viewer {
                caller: Caller::Sandbox,
                csrf: csrf_for(&state.app.settings.signing_key, &id),
                session_hash: hash,
            });
        }
        let session = match state.app.store.session(&hash, now).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err(to_signin()),
            Err(e) => return Err(crate::internal("reading the session failed", e)),
        };
        let caller = match session.account_id {
            None => Caller::Sandbox,
            Some(account_id) => match state.app.store.account_by_id(account_id).await {
                Ok(Some(a)) => Caller::Account(a),
                Ok(None) => return Err(to_signin()),
                Err(e) => return Err(crate::internal("reading the account failed", e)),
            },
        };
        Ok(Viewer {
            caller,
            csrf: csrf_for(&state.app.settings.signing_key, &id),
            session_hash: hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_are_per_session_and_never_match_empty() {
        let a = csrf_for(b"key", "s1");
        assert_ne!(a, csrf_for(b"key", "s2"));
        assert_ne!(a, csrf_for(b"other", "s1"));
        assert!(token_matches(&a, &a.clone()));
        assert!(!token_matches(&a, ""));
        assert!(!token_matches("", ""));
    }

    #[test]
    fn sandbox_sessions_are_signed_and_expire() {
        let id = sandbox_session(b"key", 100);
        assert!(is_sandbox_session(b"key", &id, 99));
        assert!(!is_sandbox_session(b"key", &id, 100));
        assert!(!is_sandbox_session(b"other", &id, 99));
        let forged = id.replacen("sandbox.100.", "sandbox.999.", 1);
        assert!(!is_sandbox_session(b"key", &forged, 99));
        assert!(!is_sandbox_session(b"key", "sandbox.999", 0));
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "x_mp_session=no; mp_session=abc; other=1"
                .parse()
                .expect("header"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE).as_deref(), Some("abc"));
        assert!(set_cookie("a", "b", 5, true).ends_with("; Secure"));
        assert!(set_cookie("a", "b", 5, false).contains("HttpOnly; SameSite=Lax"));
    }
}
