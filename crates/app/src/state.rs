//! What every operation shares: storage, the catalogs, settings, and the in-memory helpers
//! (credential cache, login guard, rate limiters, worker wake-up).

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
    pub kind: domain::FilterType,
    pub description: String,
}

/// Sends a spam test's message through the caller's SMTP server at creation time (spec §1's
/// `smtp` method), so that connection and credential failures reach the creation response.
/// Implemented by the service wiring; absent, the `smtp` method queues the send instead.
#[async_trait::async_trait]
pub trait SmtpProbe: Send + Sync {
    async fn send_test(&self, req: SmtpSendRequest) -> Result<(), SmtpSendError>;
}

/// One send through a caller's SMTP server. It lives only for that send: nothing of it is stored.
#[derive(Clone)]
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

impl std::fmt::Debug for SmtpSendRequest {
    // The caller's password must never reach a log line; the message body is left out as noise.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSendRequest")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("secure", &self.secure)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("from_address", &self.from_address)
            .field("recipients", &self.recipients)
            .finish_non_exhaustive()
    }
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

/// What the operations need to know of the service's configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Base of the URLs the service hands out (screenshots), without a trailing slash.
    pub public_url: String,
    /// Base of the tracking URLs of analytics campaigns, without a trailing slash; hits are
    /// served under `/t/` of an api process.
    pub tracking_base: String,
    /// Key for presigned screenshot URLs.
    pub signing_key: Vec<u8>,
    pub net_policy: NetPolicy,
    /// Reprocesses granted to each email test.
    pub reprocess_quota: i64,
    /// Requests per minute for accounts without their own limit.
    pub default_rate_limit: u32,
    pub seed_domain: String,
    /// Largest request body accepted, in bytes (the API's JSON and the web's forms alike).
    pub max_body_bytes: usize,
    /// Failed logins a client address may make per minute before it gets `RateLimited`.
    pub failed_logins_per_address: u32,
    /// Failed logins per minute for one API key, from all addresses together.
    pub failed_logins_per_key: u32,
    /// Requests per minute one client address may make with the sandbox credentials.
    pub sandbox_requests_per_minute: u32,
}

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub spam_clients: Arc<Vec<SpamClientInfo>>,
    pub settings: Arc<Settings>,
    pub smtp_probe: Option<Arc<dyn SmtpProbe>>,
    /// Wakes render and spam workers when new work is committed.
    pub work_ready: Arc<Notify>,
    /// Wakes the link-check worker when a check is requested.
    pub links_ready: Arc<Notify>,
    /// Wakes the content-check worker when a check is requested.
    pub checks_ready: Arc<Notify>,
    /// Wakes the inbox-row worker when a test's rows are requested.
    pub inbox_ready: Arc<Notify>,
    pub(crate) credentials: Arc<CredentialCache>,
    /// Each account's request budget; the API charges it per request.
    pub rate: Arc<RateLimiter<i64>>,
    /// The sandbox credentials' budget, per client address.
    pub(crate) sandbox_rate: Arc<RateLimiter<std::net::IpAddr>>,
    pub(crate) logins: Arc<crate::login::LoginGuard>,
    /// The client rule sets, for the code analysis and tips (empty until the wiring sets them).
    pub rules: Arc<emulate::RuleBook>,
    /// Which analytics work in which client profile (data/analytics-matrix.toml), for the report.
    pub analytics_matrix: Arc<analytics::matrix::Matrix>,
    /// Apple's relay ranges are configured: without them Apple MPP is judged on the user agent
    /// alone, which the campaign report says.
    pub relay_ranges_configured: bool,
}

impl AppState {
    pub fn new(
        store: Store,
        blobs: Blobs,
        catalog: Arc<Catalog>,
        spam_clients: Vec<SpamClientInfo>,
        settings: Settings,
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
            links_ready: Arc::default(),
            checks_ready: Arc::default(),
            inbox_ready: Arc::default(),
            credentials: Arc::new(CredentialCache::default()),
            rate: Arc::new(RateLimiter::default()),
            sandbox_rate: Arc::new(RateLimiter::default()),
            logins: Arc::new(crate::login::LoginGuard::default()),
            rules: Arc::default(),
            analytics_matrix: Arc::default(),
            relay_ranges_configured: false,
        }
    }
}

/// Remembers recently verified credentials: argon2 is deliberately slow, and an API client sends
/// the same Basic header with every call. Keyed by a hash of the header, so no password is held in
/// memory. An entry lives while it is used (an active client never falls back into argon2's queue,
/// which a login storm may have filled) and carries a digest of the stored hash it was checked
/// against, so a changed password ends it at once.
#[derive(Default)]
pub(crate) struct CredentialCache {
    entries: Mutex<HashMap<[u8; 32], CachedLogin>>,
}

/// Account id, digest of the stored hash, last use.
type CachedLogin = (i64, [u8; 32], Instant);

const CREDENTIAL_TTL: Duration = Duration::from_secs(60);

impl CredentialCache {
    /// The account id and stored-hash digest of a credential used within the last minute.
    pub fn get(&self, key: &[u8; 32]) -> Option<(i64, [u8; 32])> {
        let mut map = self.entries.lock().ok()?;
        let (id, digest, at) = map.get_mut(key)?;
        if at.elapsed() >= CREDENTIAL_TTL {
            return None;
        }
        *at = Instant::now();
        Some((*id, *digest))
    }

    pub fn put(&self, key: [u8; 32], account_id: i64, hash_digest: [u8; 32]) {
        if let Ok(mut map) = self.entries.lock() {
            if map.len() > 10_000 {
                map.retain(|_, (_, _, at)| at.elapsed() < CREDENTIAL_TTL);
            }
            map.insert(key, (account_id, hash_digest, Instant::now()));
        }
    }
}

/// Request budget per account (or per address, for the sandbox): a token bucket refilled at
/// `limit` requests per minute.
pub struct RateLimiter<K> {
    buckets: Mutex<HashMap<K, (f64, Instant)>>,
}

impl<K> Default for RateLimiter<K> {
    fn default() -> Self {
        RateLimiter {
            buckets: Mutex::new(HashMap::new()),
        }
    }
}

/// Buckets kept beyond which the full (idle for a minute) ones are forgotten.
const MAX_BUCKETS: usize = 10_000;

impl<K: std::hash::Hash + Eq> RateLimiter<K> {
    /// `Ok` to proceed, or `Err(seconds)` to wait before the next request will be admitted.
    pub fn check(&self, key: K, per_minute: u32) -> Result<(), u64> {
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(());
        };
        let capacity = f64::from(per_minute.max(1));
        let rate = capacity / 60.0;
        let now = Instant::now();
        if map.len() >= MAX_BUCKETS {
            map.retain(|_, (tokens, last)| {
                *tokens + now.duration_since(*last).as_secs_f64() * rate < capacity
            });
        }
        let (tokens, last) = map.entry(key).or_insert((capacity, now));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn age(cache: &CredentialCache, key: &[u8; 32], by: Duration) {
        if let Ok(mut map) = cache.entries.lock() {
            if let Some((_, _, at)) = map.get_mut(key) {
                *at = at.checked_sub(by).unwrap_or(*at);
            }
        }
    }

    /// A login in use stays cached past the TTL; an unused one expires.
    #[test]
    fn cached_logins_live_while_they_are_used() {
        let cache = CredentialCache::default();
        cache.put([1; 32], 7, [9; 32]);
        cache.put([2; 32], 8, [9; 32]);
        age(&cache, &[1; 32], Duration::from_secs(50));
        assert_eq!(cache.get(&[1; 32]), Some((7, [9; 32])));
        age(&cache, &[1; 32], Duration::from_secs(50));
        age(&cache, &[2; 32], Duration::from_secs(100));
        assert_eq!(cache.get(&[1; 32]), Some((7, [9; 32])));
        assert_eq!(cache.get(&[2; 32]), None);
    }

    #[test]
    fn a_send_request_never_shows_its_password() {
        let req = SmtpSendRequest {
            host: "smtp.example.org".into(),
            port: 587,
            secure: "tls".into(),
            username: Some("user".into()),
            password: Some("hunter2-secret".into()),
            from_address: "a@example.org".into(),
            subject: "s".into(),
            html: "<p>x</p>".into(),
            recipients: vec!["r@example.org".into()],
        };
        let shown = format!("{req:?} {req:#?}");
        assert!(!shown.contains("hunter2-secret"), "{shown}");
        assert!(shown.contains("smtp.example.org"));
    }
}
