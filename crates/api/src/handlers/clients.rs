//! The email client list and the per-account default clients (spec §4.3).

use axum::extract::State;
use axum::Json;
use domain::Client;
use serde_json::{json, Map, Value};

use crate::auth::{Authed, Caller};
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::AppState;

/// May this caller use this client? The intake rules decide, as for creating a test.
fn usable(state: &AppState, caller: &Caller, c: &Client) -> bool {
    intake::ClientRules::new(&state.catalog, caller.account()).usable(c)
}

pub fn client_json(c: &Client) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(c.id));
    o.insert("client".into(), json!(c.client));
    o.insert("display_name".into(), json!(c.display_name));
    o.insert("os".into(), json!(c.os));
    o.insert("category".into(), json!(c.category.as_str()));
    if let Some(b) = &c.browser {
        o.insert("browser".into(), json!(b));
    }
    o.insert("rotate".into(), json!(c.rotate));
    o.insert("image_blocking".into(), json!(c.image_blocking));
    o.insert("free".into(), json!(c.free));
    o.insert("default".into(), json!(c.default));
    // Ids from existing v5 client libraries that answer with this profile (issue 11).
    if !c.aliases.is_empty() {
        o.insert("aliases".into(), json!(c.aliases));
    }
    if let Some(profile) = &c.alias_of {
        o.insert("alias_of".into(), json!(profile));
    }
    // What makes this profile's pictures, said openly (beyond §2.6).
    o.insert("engine".into(), json!(c.engine.as_str()));
    o.insert("rule_set".into(), json!(c.rules));
    o.insert("color_scheme".into(), json!(c.color_scheme));
    o.insert(
        "viewport".into(),
        json!({"width": c.viewport.width, "height": c.viewport.height, "scale": c.scale}),
    );
    Value::Object(o)
}

/// Every usable profile and alias: an alias is listed under its own id with `alias_of` naming
/// its profile, so existing v5 tools that keep only the listed ids send their stock ids.
pub async fn list_clients(State(state): State<AppState>, caller: Authed) -> Json<Value> {
    let clients: Map<String, Value> = state
        .catalog
        .entries()
        .iter()
        .filter(|c| usable(&state, &caller, c))
        .map(|c| (c.id.clone(), client_json(c)))
        .collect();
    Json(json!({"clients": clients}))
}

pub async fn default_clients(State(state): State<AppState>, caller: Authed) -> Json<Value> {
    let ids = intake::ClientRules::new(&state.catalog, caller.account()).default_list();
    Json(json!({"clients": ids}))
}

/// Spec §4.3's three rules: invalid ids are dropped and reported in `warnings`; a list with no
/// valid id changes nothing and is an error; an empty list clears the defaults (all clients).
pub async fn set_default_clients(
    State(state): State<AppState>,
    caller: Authed,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let requested = params::id_list(&m, "clients")?.ok_or_else(|| {
        ApiError::new(
            ErrorName::NoClients,
            "send `clients`: an array of client ids (an empty array clears the defaults so that all clients are processed)",
        )
    })?;
    let (valid, invalid): (Vec<String>, Vec<String>) = requested.into_iter().partition(|id| {
        state
            .catalog
            .get(id)
            .is_some_and(|c| usable(&state, &caller, c))
    });
    let explicitly_empty = valid.is_empty() && invalid.is_empty();
    if valid.is_empty() && !explicitly_empty {
        return Err(ApiError::new(
            ErrorName::InvalidClient,
            format!(
                "none of the ids is a client you can use ({}); the default list was not changed",
                invalid.join(", ")
            ),
        ));
    }
    let mut valid_unique = Vec::new();
    for id in valid {
        if !valid_unique.contains(&id) {
            valid_unique.push(id);
        }
    }
    if let Some(a) = caller.account() {
        state.store.set_default_clients(a.id, &valid_unique).await?;
    }
    let mut out = Map::new();
    out.insert("clients".into(), json!(valid_unique));
    if !invalid.is_empty() {
        out.insert(
            "warnings".into(),
            Value::Array(
                invalid
                    .iter()
                    .map(|id| json!(format!("{id} is not a valid client id and was removed")))
                    .collect(),
            ),
        );
    }
    Ok(Json(Value::Object(out)))
}
