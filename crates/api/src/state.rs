//! What every handler shares: storage, the catalogs, settings, and the in-memory helpers
//! (credential cache, rate limiter, worker wake-up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use content::netpolicy::NetPolicy;
use domain::Catalog;
use store::{Blobs, Store};
use tokio::sync::Notify;

/// A spam filter profile as the API lists it (spec §2.7).
#[derive(Clone, Debug)]
pub struct SpamClientInfo {
    pub client: String,
    pub kind: String,
    pub description: String,
}

/// Sends a spam test's message through the caller's SMTP server at creation time (spec §1's
/// `smtp` method), so that connection and credential failures reach the creation response.
/// Implemented by the service wiring; absent, the `smtp` method queues the send instead.
#[async_trait::async_trait]
pub trait SmtpProbe: Send + Sync {
    async fn send_test(&self, req: SmtpSendRequest) -> Result<(), SmtpSendError>;
}

#[derive(Clone, Debug)]
pub struct SmtpSendRequest {
    pub host: String,
    pub port: u16,
    pub secure: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub from_address: String,
    pub subject: String,
    pub html: String,
    pub recipients: Vec<String>,
}

#[derive(Clone, Debug)]
pub enum SmtpSendError {
    /// The host is not one the network policy lets the service connect to; nothing was sent.
    Refused(String),
    /// Unknown host, refused connection, TLS failure.
    Connect(String),
    /// The server refused the credentials.
    Auth(String),
    Other(String),
}

#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// Base of the URLs the API hands out (screenshots), without a trailing slash.
    pub public_url: String,
    /// Key for presigned screenshot URLs.
    pub signing_key: Vec<u8>,
    pub net_policy: NetPolicy,
    /// Reprocesses granted to each email test.
    pub reprocess_quota: i64,
    /// Requests per minute for accounts without their own limit.
    pub default_rate_limit: u32,
    pub seed_domain: String,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
}

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub spam_clients: Arc<Vec<SpamClientInfo>>,
    pub settings: Arc<ApiSettings>,
    pub smtp_probe: Option<Arc<dyn SmtpProbe>>,
    /// Wakes render and spam workers when new work is committed.
    pub work_ready: Arc<Notify>,
    pub(crate) credentials: Arc<CredentialCache>,
    pub(crate) rate: Arc<RateLimiter>,
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
        AppState {
            store,
            blobs,
            catalog,
            spam_clients: Arc::new(spam_clients),
            settings: Arc::new(settings),
            smtp_probe: None,
            work_ready,
            credentials: Arc::new(CredentialCache::default()),
            rate: Arc::new(RateLimiter::default()),
        }
    }

    pub fn with_smtp_probe(mut self, probe: Arc<dyn SmtpProbe>) -> AppState {
        self.smtp_probe = Some(probe);
        self
    }
}

/// Remembers recently verified credentials for a short time: argon2 is deliberately slow, and an
/// API client sends the same Basic header with every call. Keyed by a hash of the header, so no
/// password is held in memory.
#[derive(Default)]
pub(crate) struct CredentialCache {
    entries: Mutex<HashMap<[u8; 32], (i64, Instant)>>,
}

const CREDENTIAL_TTL: Duration = Duration::from_secs(60);

impl CredentialCache {
    pub fn get(&self, key: &[u8; 32]) -> Option<i64> {
        let map = self.entries.lock().ok()?;
        map.get(key)
            .filter(|(_, at)| at.elapsed() < CREDENTIAL_TTL)
            .map(|(id, _)| *id)
    }

    pub fn put(&self, key: [u8; 32], account_id: i64) {
        if let Ok(mut map) = self.entries.lock() {
            if map.len() > 10_000 {
                map.retain(|_, (_, at)| at.elapsed() < CREDENTIAL_TTL);
            }
            map.insert(key, (account_id, Instant::now()));
        }
    }
}

/// Per-account request budget: a token bucket refilled at `limit` requests per minute.
#[derive(Default)]
pub(crate) struct RateLimiter {
    buckets: Mutex<HashMap<i64, (f64, Instant)>>,
}

impl RateLimiter {
    /// `Ok` to proceed, or `Err(seconds)` to wait before the next request will be admitted.
    pub fn check(&self, account_id: i64, per_minute: u32) -> Result<(), u64> {
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(());
        };
        let capacity = f64::from(per_minute.max(1));
        let rate = capacity / 60.0;
        let now = Instant::now();
        let (tokens, last) = map.entry(account_id).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(capacity);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}
