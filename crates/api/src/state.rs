//! What every handler shares: the application layer's state ([`app::AppState`], reached through
//! `Deref`) and what only the HTTP side holds: its own settings, the tracking hits' writer, the
//! health report and the analytics hit runtime.

use std::sync::Arc;

use domain::Catalog;
use store::{Blobs, Store};
use tokio::sync::Notify;

pub use app::{Settings as AppSettings, SmtpProbe, SmtpSendError, SmtpSendRequest, SpamClientInfo};

#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// What the application layer needs (URLs, keys, quotas, login limits).
    pub app: AppSettings,
    /// When set, `GET /metrics` answers only `Authorization: Bearer <token>`.
    pub metrics_token: Option<String>,
    /// The HTTP port listens on more than loopback: `GET /metrics` then needs the token.
    pub metrics_port_public: bool,
    /// The tracking hits' group commit and rate limits.
    pub hits: crate::hits::HitSettings,
}

#[derive(Clone)]
pub struct AppState {
    pub app: app::AppState,
    pub http: Arc<ApiSettings>,
    /// The tracking hits' writer and rate limits.
    pub(crate) hits: Arc<crate::hits::Hits>,
    /// What `GET /healthz` reports; the service wiring keeps it current.
    pub health: Arc<crate::health::Health>,
    /// Analytics hits: Apple's relay ranges, held-open responses, recipients' first opens.
    pub analytics: Arc<crate::handlers::analytics::HitRuntime>,
}

impl std::ops::Deref for AppState {
    type Target = app::AppState;

    fn deref(&self) -> &app::AppState {
        &self.app
    }
}

impl AppState {
    pub fn new(
        store: Store,
        blobs: Blobs,
        catalog: Arc<Catalog>,
        spam_clients: Vec<SpamClientInfo>,
        settings: ApiSettings,
        work_ready: Arc<Notify>,
    ) -> AppState {
        let hits = crate::hits::Hits::new(settings.hits.clone());
        let app = app::AppState::new(
            store,
            blobs,
            catalog,
            spam_clients,
            settings.app.clone(),
            work_ready,
        );
        AppState {
            app,
            http: Arc::new(settings),
            hits: Arc::new(hits),
            health: Arc::default(),
            analytics: Arc::default(),
        }
    }

    pub fn with_analytics_matrix(mut self, matrix: Arc<analytics::matrix::Matrix>) -> AppState {
        self.app.analytics_matrix = matrix;
        self
    }

    pub fn with_analytics(
        mut self,
        runtime: Arc<crate::handlers::analytics::HitRuntime>,
    ) -> AppState {
        self.app.relay_ranges_configured = runtime.egress.configured();
        self.analytics = runtime;
        self
    }

    pub fn with_rules(mut self, rules: Arc<emulate::RuleBook>) -> AppState {
        self.app.rules = rules;
        self
    }

    pub fn with_health(mut self, health: Arc<crate::health::Health>) -> AppState {
        self.health = health;
        self
    }

    pub fn with_smtp_probe(mut self, probe: Arc<dyn SmtpProbe>) -> AppState {
        self.app.smtp_probe = Some(probe);
        self
    }
}
