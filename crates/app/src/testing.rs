//! Fixtures for tests of the application layer and of the front ends on it (feature `testing`).

use std::sync::Arc;

use crate::state::Settings;

/// Settings of a service at `http://mailproof.test` with a fixed signing key and generous limits.
pub fn settings() -> Settings {
    Settings {
        public_url: "http://mailproof.test".into(),
        tracking_base: "http://mailproof.test/t".into(),
        signing_key: vec![7; 32],
        net_policy: content::netpolicy::NetPolicy::default(),
        reprocess_quota: 3,
        default_rate_limit: 600,
        seed_domain: "seed.mailproof.test".into(),
        max_body_bytes: 1 << 20,
        failed_logins_per_address: 10,
        failed_logins_per_key: 10,
        sandbox_requests_per_minute: 60,
    }
}

/// The shipped client catalog (data/clients.toml).
///
/// # Panics
/// When the shipped catalog is invalid (its own test in `domain` says why).
pub fn catalog() -> Arc<domain::Catalog> {
    let catalog = domain::Catalog::parse(include_str!("../../../data/clients.toml"));
    Arc::new(catalog.unwrap_or_else(|e| panic!("data/clients.toml is invalid: {e}")))
}
