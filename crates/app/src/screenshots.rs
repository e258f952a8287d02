//! Screenshot names, their presigned URLs (spec §2.5) and their stored pictures.

use domain::Picture;

use crate::error::{Error, Result};
use crate::state::{AppState, Settings};

const PRESIGNED_LIFE_SECS: i64 = 24 * 3600;

pub fn signature(key: &[u8], test: &str, client: &str, name: &str, expires: i64) -> String {
    let signed = format!("{test}/{client}/{name}/{expires}");
    domain::signing::hmac_sha256_hex(key, &[signed.as_bytes()])
}

/// A fresh URL for a screenshot, presigned for 24 hours from `now`.
pub fn url(s: &Settings, test: &str, client: &str, picture: &Picture, now: i64) -> String {
    let expires = now + PRESIGNED_LIFE_SECS;
    let name = picture.name();
    let sig = signature(&s.signing_key, test, client, &name, expires);
    format!(
        "{}/screenshots/{test}/{client}/{name}.png?expires={expires}&signature={sig}",
        s.public_url
    )
}

/// The stored `picture` of `client` in `test` (PNG bytes), or `None` while it does not
/// exist; for a caller already allowed to see it (a presigned URL, the owner, a share link).
pub async fn png(
    state: &AppState,
    test: &str,
    client: &str,
    picture: &Picture,
) -> Result<Option<bytes::Bytes>> {
    state
        .blobs
        .get(&store::screenshot_key(test, client, picture))
        .await
        .map_err(|e| Error::internal("reading a screenshot failed", e))
}
