//! API versions (spec §9): `v5` and the micro version `v5.0.1`; anything else is `WrongVersion`.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiVersion {
    V5,
    V5_0_1,
}

impl ApiVersion {
    pub fn parse(segment: &str) -> Option<ApiVersion> {
        match segment {
            "v5" => Some(ApiVersion::V5),
            "v5.0.1" => Some(ApiVersion::V5_0_1),
            _ => None,
        }
    }

    /// `full_thumbnail` arrived with v5.0.1.
    pub fn has_full_thumbnail(self) -> bool {
        self == ApiVersion::V5_0_1
    }
}

pub fn first_segment(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

impl<S: Send + Sync> FromRequestParts<S> for ApiVersion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ApiVersion, ApiError> {
        let seg = first_segment(parts.uri.path());
        ApiVersion::parse(seg).ok_or_else(|| crate::wrong_version(seg))
    }
}
