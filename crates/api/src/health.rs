//! What `GET /healthz` reports: the state of each part of the service (database, object storage,
//! SMTP, rendering engines, spam filters), kept up to date by the service wiring, which the api crate does not
//! otherwise know about.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use serde_json::{json, Map, Value};

/// Where a component stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Ok,
    Starting,
    Down,
    /// Turned off by configuration.
    Off,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Starting => "starting",
            State::Down => "down",
            State::Off => "off",
        }
    }
}

/// One component's state, with why it is down and when it is tried again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    pub state: State,
    pub reason: Option<String>,
    /// UNIX time of the next start attempt.
    pub next_retry: Option<i64>,
}

impl Component {
    pub fn new(state: State) -> Component {
        Component {
            state,
            reason: None,
            next_retry: None,
        }
    }

    pub fn down(reason: impl Into<String>, next_retry: Option<i64>) -> Component {
        Component {
            state: State::Down,
            reason: Some(reason.into()),
            next_retry,
        }
    }

    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("state".into(), self.state.as_str().into());
        if let Some(reason) = &self.reason {
            o.insert("reason".into(), reason.clone().into());
        }
        if let Some(at) = self.next_retry {
            o.insert("next_retry".into(), at.into());
        }
        Value::Object(o)
    }
}

/// The registry the wiring updates and `/healthz` reads. Components are named by a group
/// (`database`, `smtp`, `engines`, `filters`) and, within a group of several, a name.
#[derive(Default, Debug)]
pub struct Health {
    components: RwLock<BTreeMap<(String, String), Component>>,
}

impl Health {
    /// Sets a single component (`name` empty, e.g. `smtp`) or one of a group (`filters`,
    /// `rspamd`).
    pub fn set(&self, group: &str, name: &str, component: Component) {
        // Plain values replaced whole: a panic elsewhere cannot leave the map inconsistent.
        self.components
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((group.to_owned(), name.to_owned()), component);
    }

    pub fn get(&self, group: &str, name: &str) -> Option<Component> {
        self.components
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(group.to_owned(), name.to_owned()))
            .cloned()
    }

    /// `{"status": "ok"|"starting"|"degraded", "components": {...}}`: `degraded` when any
    /// component is down, `starting` when any is still starting.
    pub fn to_json(&self) -> Value {
        let components = self
            .components
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut groups = Map::new();
        for ((group, name), component) in components.iter() {
            if name.is_empty() {
                groups.insert(group.clone(), component.to_json());
            } else if let Value::Object(members) = groups
                .entry(group.clone())
                .or_insert_with(|| Value::Object(Map::new()))
            {
                members.insert(name.clone(), component.to_json());
            }
        }
        let states = || components.values().map(|c| c.state);
        let status = if states().any(|s| s == State::Down) {
            "degraded"
        } else if states().any(|s| s == State::Starting) {
            "starting"
        } else {
            "ok"
        };
        json!({"status": status, "components": groups})
    }
}

/// How long `/healthz` waits for the database or the object store before calling it down: an
/// orchestrator's probe (and an operator) needs an answer in bounded time whatever is down, and a
/// pool waiting for a connection would otherwise hold the answer for its whole acquire timeout.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1500);

/// The state of one live probe: ok, its error, or no answer within [`PROBE_TIMEOUT`].
async fn probe<E: std::fmt::Display>(
    what: &str,
    check: impl std::future::Future<Output = Result<(), E>>,
) -> Component {
    match tokio::time::timeout(PROBE_TIMEOUT, check).await {
        Ok(Ok(())) => Component::new(State::Ok),
        Ok(Err(e)) => Component::down(format!("{what} fails: {e}"), None),
        Err(_) => Component::down(
            format!(
                "{what} does not answer within {} ms",
                PROBE_TIMEOUT.as_millis()
            ),
            None,
        ),
    }
}

/// `GET /healthz`: 200 with the components while the service can serve; 503 when its database
/// does not answer. The database and the object store are checked live, at once, on every call,
/// each within [`PROBE_TIMEOUT`].
pub async fn healthz(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (database, storage) = tokio::join!(
        probe("the database", state.store.ping()),
        probe("the object store", state.blobs.check()),
    );
    let status = if database.state == State::Ok {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    state.health.set("database", "", database);
    state.health.set("storage", "", storage);
    (status, axum::Json(state.health.to_json())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_nest_and_a_down_component_degrades_the_whole() {
        let h = Health::default();
        h.set("database", "", Component::new(State::Ok));
        h.set("filters", "spamassassin", Component::new(State::Starting));
        assert_eq!(h.to_json()["status"], "starting");
        h.set(
            "filters",
            "rspamd",
            Component::down("exited (signal 9)", Some(1_700_000_000)),
        );
        let body = h.to_json();
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["components"]["database"]["state"], "ok");
        assert_eq!(
            body["components"]["filters"]["spamassassin"]["state"],
            "starting"
        );
        let rspamd = &body["components"]["filters"]["rspamd"];
        assert_eq!(rspamd["state"], "down");
        assert_eq!(rspamd["reason"], "exited (signal 9)");
        assert_eq!(rspamd["next_retry"], 1_700_000_000);
    }

    #[tokio::test]
    async fn a_probe_that_hangs_is_down_within_the_timeout() {
        let started = std::time::Instant::now();
        let c = probe::<std::io::Error>("the database", std::future::pending()).await;
        assert!(
            started.elapsed() < PROBE_TIMEOUT * 2,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(c.state, State::Down);
        assert_eq!(
            c.reason.as_deref(),
            Some("the database does not answer within 1500 ms")
        );
        let failed = probe("the object store", async {
            Err::<(), _>("connection refused")
        })
        .await;
        assert_eq!(
            failed.reason.as_deref(),
            Some("the object store fails: connection refused")
        );
    }
}
