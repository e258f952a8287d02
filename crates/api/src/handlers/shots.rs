//! Screenshot URLs (spec §2.5): served by the service; with the owner's Basic credentials for the
//! test's life, without credentials as presigned URLs valid 24 hours; `403` otherwise and while the
//! file does not exist.

use axum::body::Body as HttpBody;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::{authenticate, Caller};
use crate::error::{ApiError, ErrorName};
use crate::state::AppState;

use app::screenshots::signature;
pub use app::screenshots::url;
use domain::Picture;

pub struct Presign {
    expires: Option<i64>,
    signature: Option<String>,
}

impl Presign {
    /// `expires` and `signature`, each at most once: two values would leave it unclear which one
    /// was signed. Other parameters are ignored (spec §1's permissive handling).
    fn parse(raw: Option<&str>) -> Result<Presign, ApiError> {
        let invalid = |m: String| ApiError::new(ErrorName::InvalidParameter, m);
        let mut p = Presign {
            expires: None,
            signature: None,
        };
        for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match name.as_ref() {
                "expires" => {
                    if p.expires.is_some() {
                        return Err(invalid(
                            "`expires` is given more than once; use the screenshot URL exactly as the results gave it".into(),
                        ));
                    }
                    p.expires = Some(value.trim().parse().map_err(|_| {
                        invalid(format!(
                            "`expires` {value:?} must be a Unix time in seconds, as in the URL the results gave"
                        ))
                    })?);
                }
                "signature" => {
                    if p.signature.is_some() {
                        return Err(invalid(
                            "`signature` is given more than once; use the screenshot URL exactly as the results gave it".into(),
                        ));
                    }
                    p.signature = Some(value.into_owned());
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

fn forbidden(msg: &str) -> Response {
    ApiError::new(ErrorName::Forbidden, msg).into_response()
}

pub async fn serve(
    State(state): State<AppState>,
    Path((test, client, file)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
    req: Request,
) -> Response {
    let q = match Presign::parse(raw.as_deref()) {
        Ok(q) => q,
        Err(e) => return e.into_response(),
    };
    let (parts, _) = req.into_parts();
    let Some(picture) = file.strip_suffix(".png").and_then(Picture::parse) else {
        return forbidden("no such screenshot");
    };
    if domain::TestId::parse(&test).is_none() {
        return forbidden("no such screenshot");
    }
    let owner = match authenticate(&parts, &state).await {
        Ok(Some(caller @ Caller::Account(_))) => Some(caller),
        Ok(Some(Caller::Sandbox)) | Err(_) => {
            return forbidden("these credentials do not give access to this screenshot")
        }
        Ok(None) => None,
    };
    let now = chrono::Utc::now().timestamp();
    let allowed = match &owner {
        Some(caller) => app::owned_test_of_any_kind(&state, caller, &test)
            .await
            .is_ok(),
        None => match (q.expires, q.signature.as_deref()) {
            (Some(expires), Some(sig)) if expires >= now => {
                let name = picture.name();
                let want = signature(&state.settings.signing_key, &test, &client, &name, expires);
                domain::signing::secret_eq(&want, sig)
            }
            _ => false,
        },
    };
    if !allowed {
        return forbidden("this screenshot URL is expired or not signed for you: fetch fresh results, or send your credentials");
    }
    png(&state, &test, &client, &picture).await
}

/// The stored `picture` of `client` in `test` as a response, for a caller already allowed to see
/// it (the presigned check above, or the web's share-link check).
pub async fn png(state: &AppState, test: &str, client: &str, picture: &Picture) -> Response {
    match app::screenshots::png(state, test, client, picture).await {
        Ok(Some(bytes)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "image/png"),
                (header::CACHE_CONTROL, "private, max-age=60"),
            ],
            HttpBody::from(bytes),
        )
            .into_response(),
        Ok(None) => forbidden(
            "this screenshot does not exist yet; check the client's status in the results",
        ),
        Err(e) => ApiError::from(e).into_response(),
    }
}
