//! Bounds on password verification, so that a storm of logins (wrong passwords, or right ones
//! with a cold credential cache) cannot take the CPU, memory or database from other tenants:
//! argon2 runs a few at a time on threads of its own that reuse their memory (19 MiB a check,
//! which the allocator would otherwise keep per thread), one verification per distinct credential
//! is in flight (the others wait for its result), and failed logins are limited per client address
//! and per API key.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use argon2::Block;
use store::Account;
use tokio::sync::{oneshot, OnceCell};

/// What checking one credential found.
#[derive(Clone, Debug)]
pub(crate) enum Verdict {
    Valid(Account),
    /// The key exists and the password is wrong.
    WrongPassword,
    UnknownKey,
    /// Too many verifications are queued; nothing was checked.
    Busy,
    /// Storage or the hashing thread failed; the cause was logged.
    Failed(String),
}

/// Verifications waiting for or on a hashing thread beyond which new ones are turned away (`Busy`):
/// a queue longer than this only makes every login slow.
const MAX_QUEUED: usize = 128;
/// Tracked addresses and keys beyond which fully refilled entries are forgotten.
const MAX_TRACKED: usize = 10_000;

/// A password check run on a hashing thread, with that thread's reusable argon2 memory.
type HashJob = Box<dyn FnOnce(&mut Vec<Block>) + Send>;

/// Hashing threads. Dedicated threads, not the runtime's blocking pool: each keeps one argon2
/// buffer for good, so memory stays at `threads` × the cost parameter however many checks run.
struct HashPool {
    jobs: Mutex<std::sync::mpsc::Sender<HashJob>>,
}

impl HashPool {
    fn start(threads: usize) -> HashPool {
        let (tx, rx) = std::sync::mpsc::channel::<HashJob>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("argon2-{n}"))
                .spawn(move || {
                    let mut memory = Vec::new();
                    loop {
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(&mut memory),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password hashing thread");
            }
        }
        HashPool {
            jobs: Mutex::new(tx),
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Vec<Block>) -> T + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = oneshot::channel();
        let job: HashJob = Box::new(move |memory| {
            let _ = tx.send(job(memory));
        });
        self.jobs
            .lock()
            .map_err(|_| "the hashing threads are gone".to_string())?
            .send(job)
            .map_err(|_| "the hashing threads are gone".to_string())?;
        rx.await
            .map_err(|_| "a hashing thread stopped during a check".to_string())
    }
}

pub(crate) struct LoginGuard {
    hashing: HashPool,
    queued: AtomicUsize,
    in_flight: Mutex<HashMap<[u8; 32], Arc<OnceCell<Verdict>>>>,
    by_address: FailureBudget<IpAddr>,
    by_key: FailureBudget<String>,
}

impl Default for LoginGuard {
    fn default() -> Self {
        // Half the cores (at least one): the other half keeps serving requests meanwhile.
        let slots = std::thread::available_parallelism()
            .map(|n| n.get() / 2)
            .unwrap_or(1)
            .max(1);
        LoginGuard {
            hashing: HashPool::start(slots),
            queued: AtomicUsize::new(0),
            in_flight: Mutex::new(HashMap::new()),
            by_address: FailureBudget::default(),
            by_key: FailureBudget::default(),
        }
    }
}

/// Removes a finished (or abandoned) verification from the in-flight table.
struct InFlight<'a> {
    guard: &'a LoginGuard,
    key: [u8; 32],
    cell: Arc<OnceCell<Verdict>>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut map) = self.guard.in_flight.lock() {
            // Only the last interested caller removes an unfinished entry, so that a cancelled
            // leader does not strand the ones waiting on it.
            let last = Arc::strong_count(&self.cell) <= 2;
            if (self.cell.initialized() || last)
                && map
                    .get(&self.key)
                    .is_some_and(|c| Arc::ptr_eq(c, &self.cell))
            {
                map.remove(&self.key);
            }
        }
    }
}

struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LoginGuard {
    /// `Err(seconds)` when the address or the key has used its budget of failed logins.
    pub fn admit(
        &self,
        address: Option<IpAddr>,
        key: &str,
        per_address: u32,
        per_key: u32,
    ) -> Result<(), u64> {
        if let Some(ip) = address {
            self.by_address.check(&ip, per_address)?;
        }
        self.by_key.check(&key.to_string(), per_key)
    }

    pub fn record_failure(
        &self,
        address: Option<IpAddr>,
        key: Option<&str>,
        per_address: u32,
        per_key: u32,
    ) {
        if let Some(ip) = address {
            self.by_address.spend(ip, per_address);
        }
        if let Some(key) = key {
            self.by_key.spend(key.to_string(), per_key);
        }
    }

    /// Runs `check` for `credential` unless a check of the same credential is in flight, in which
    /// case its verdict is shared. `hash` runs on a hashing thread, with that thread's memory.
    pub async fn verify<L, LF, H>(&self, credential: [u8; 32], lookup: L, hash: H) -> Verdict
    where
        L: FnOnce() -> LF,
        LF: Future<Output = Result<Option<Account>, String>>,
        H: FnOnce(Account, &mut Vec<Block>) -> Result<bool, String> + Send + 'static,
    {
        let cell = match self.in_flight.lock() {
            Ok(mut map) => map.entry(credential).or_default().clone(),
            Err(_) => Arc::new(OnceCell::new()),
        };
        let entry = InFlight {
            guard: self,
            key: credential,
            cell,
        };
        let verdict = entry
            .cell
            .get_or_init(|| async move {
                let account = match lookup().await {
                    Ok(Some(a)) => a,
                    Ok(None) => return Verdict::UnknownKey,
                    Err(e) => return Verdict::Failed(e),
                };
                if self.queued.fetch_add(1, Ordering::SeqCst) >= MAX_QUEUED {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    return Verdict::Busy;
                }
                let _queued = Queued(&self.queued);
                let checked = account.clone();
                match self.hashing.run(move |memory| hash(checked, memory)).await {
                    Ok(Ok(true)) => Verdict::Valid(account),
                    Ok(Ok(false)) => Verdict::WrongPassword,
                    Ok(Err(e)) | Err(e) => Verdict::Failed(e),
                }
            })
            .await
            .clone();
        drop(entry);
        verdict
    }
}

/// Failed logins allowed per key (address or API key): a bucket of `per_minute` that refills
/// evenly over a minute.
struct FailureBudget<K> {
    buckets: Mutex<HashMap<K, (f64, Instant)>>,
}

impl<K> Default for FailureBudget<K> {
    fn default() -> Self {
        FailureBudget {
            buckets: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq> FailureBudget<K> {
    fn refilled(entry: &mut (f64, Instant), capacity: f64, now: Instant) {
        let (tokens, last) = entry;
        *tokens =
            (*tokens + now.duration_since(*last).as_secs_f64() * capacity / 60.0).min(capacity);
        *last = now;
    }

    /// `Err(seconds until one more attempt is allowed)` once the budget is spent.
    fn check(&self, key: &K, per_minute: u32) -> Result<(), u64> {
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(());
        };
        let capacity = f64::from(per_minute.max(1));
        let Some(entry) = map.get_mut(key) else {
            return Ok(());
        };
        Self::refilled(entry, capacity, Instant::now());
        if entry.0 >= 1.0 {
            Ok(())
        } else {
            Err(((1.0 - entry.0) * 60.0 / capacity).ceil().max(1.0) as u64)
        }
    }

    fn spend(&self, key: K, per_minute: u32) {
        let Ok(mut map) = self.buckets.lock() else {
            return;
        };
        let capacity = f64::from(per_minute.max(1));
        let now = Instant::now();
        if map.len() >= MAX_TRACKED {
            map.retain(|_, e| {
                Self::refilled(e, capacity, now);
                e.0 < capacity
            });
        }
        let entry = map.entry(key).or_insert((capacity, now));
        Self::refilled(entry, capacity, now);
        entry.0 = (entry.0 - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn account() -> Account {
        Account {
            id: 1,
            api_key: "k".into(),
            password_hash: String::new(),
            plan: domain::Plan::Standard,
            monthly_test_limit: None,
            rate_limit_per_minute: None,
            allowed_clients: None,
            auto_inbox: None,
            default_clients: None,
            created_at: 0,
        }
    }

    /// Many callers with the same credential at once: one lookup and one hash between them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn one_verification_per_credential_is_in_flight() {
        let guard = Arc::new(LoginGuard::default());
        let lookups = Arc::new(AtomicU32::new(0));
        let hashes = Arc::new(AtomicU32::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (guard, lookups, hashes) = (guard.clone(), lookups.clone(), hashes.clone());
            tasks.push(tokio::spawn(async move {
                guard
                    .verify(
                        [7; 32],
                        || async move {
                            lookups.fetch_add(1, Ordering::SeqCst);
                            Ok(Some(account()))
                        },
                        move |_, _| {
                            hashes.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(300));
                            Ok(true)
                        },
                    )
                    .await
            }));
        }
        for t in tasks {
            let v = t.await.expect("task");
            assert!(matches!(v, Verdict::Valid(_)), "{v:?}");
        }
        assert_eq!(lookups.load(Ordering::SeqCst), 1);
        assert_eq!(hashes.load(Ordering::SeqCst), 1);
        assert!(guard
            .in_flight
            .lock()
            .map(|m| m.is_empty())
            .unwrap_or(false));
    }

    #[test]
    fn failures_are_budgeted_per_address_and_key() {
        let g = LoginGuard::default();
        let ip = |s: &str| -> Option<IpAddr> { s.parse().ok() };
        for _ in 0..3 {
            assert!(g.admit(ip("192.0.2.1"), "k", 3, 5).is_ok());
            g.record_failure(ip("192.0.2.1"), Some("k"), 3, 5);
        }
        let wait = g
            .admit(ip("192.0.2.1"), "k", 3, 5)
            .expect_err("address budget spent");
        assert!((1..=20).contains(&wait), "{wait}");
        // Another address may still try the key, until the key's own budget is spent.
        for _ in 0..2 {
            assert!(g.admit(ip("192.0.2.2"), "k", 3, 5).is_ok());
            g.record_failure(ip("192.0.2.2"), Some("k"), 3, 5);
        }
        assert!(g.admit(ip("192.0.2.3"), "k", 3, 5).is_err());
        assert!(g.admit(ip("192.0.2.3"), "other", 3, 5).is_ok());
    }
}
