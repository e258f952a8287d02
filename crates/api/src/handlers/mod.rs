//! Request handlers, one module per area of the interface.

pub mod analysis;
pub mod analytics;
pub mod checks;
pub mod clients;
pub mod create;
pub mod diff;
pub mod email;
pub mod inbox;
pub mod links;
pub mod lists;
pub mod review;
pub mod shots;
pub mod spam;
pub mod webhooks;

use axum::Json;
use serde_json::{json, Value};

use crate::auth::Authed;

/// `GET /v5/auth` and `/v5/analytics/analytics_auth` (spec §4.1): reaching here means the
/// credentials were accepted.
pub async fn auth_check(_caller: Authed) -> Json<Value> {
    Json(json!({"success": true}))
}
