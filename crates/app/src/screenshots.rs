//! Screenshot names, their presigned URLs (spec §2.5) and their stored pictures.

use crate::error::{Error, Result};
use crate::state::{AppState, Settings};

const PRESIGNED_LIFE_SECS: i64 = 24 * 3600;

/// Names a screenshot file may have: the four variants and the two thumbnails (and diffs, see
/// `valid_name`).
const NAMES: [&str; 6] = [
    "default",
    "no_images",
    "horizontal",
    "horizontal_no_images",
    "thumbnail",
    "full_thumbnail",
];

/// A screenshot or thumbnail name, or the name of a visual diff's highlight image
/// (`store::diff_name`).
pub fn valid_name(name: &str) -> bool {
    NAMES.contains(&name)
        || store::parse_diff_name(name).is_some_and(|(base, variant)| {
            domain::TestId::parse(base).is_some() && domain::Variant::parse(variant).is_some()
        })
}

pub fn signature(key: &[u8], test: &str, client: &str, name: &str, expires: i64) -> String {
    let signed = format!("{test}/{client}/{name}/{expires}");
    domain::signing::hmac_sha256_hex(key, &[signed.as_bytes()])
}

/// A fresh URL for a screenshot, presigned for 24 hours from `now`.
pub fn url(s: &Settings, test: &str, client: &str, name: &str, now: i64) -> String {
    let expires = now + PRESIGNED_LIFE_SECS;
    let sig = signature(&s.signing_key, test, client, name, expires);
    format!(
        "{}/screenshots/{test}/{client}/{name}.png?expires={expires}&signature={sig}",
        s.public_url
    )
}

/// The stored picture `name` of `client` in `test` (PNG bytes), or `None` while it does not
/// exist; for a caller already allowed to see it (a presigned URL, the owner, a share link).
pub async fn png(
    state: &AppState,
    test: &str,
    client: &str,
    name: &str,
) -> Result<Option<bytes::Bytes>> {
    state
        .blobs
        .get(&store::screenshot_key(test, client, name))
        .await
        .map_err(|e| Error::internal("reading a screenshot failed", e))
}
