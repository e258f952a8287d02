//! Bounds on password verification, so that a storm of logins (wrong passwords, or right ones
//! with a cold credential cache) cannot take the CPU, memory or database from other tenants:
//! argon2 runs a few at a time on threads of its own that reuse their memory (19 MiB a check,
//! which the allocator would otherwise keep per thread), one verification per distinct credential
//! is in flight (the others wait for its result), and failed logins are limited per client address
//! and per API key. Every attempt that reaches argon2 is counted as a failure before the hash is
//! checked (so concurrent clients cannot outrun the limit) and given back when the password was
//! right; an unknown key is checked against a dummy hash, so it takes as long as a known one.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Storage or the hashing thread failed: the caller's answer (`ServiceUnavailable` while the
    /// database is away, else `ServerError` with the cause logged).
    Failed(crate::Error),
}

/// Verifications waiting for or on a hashing thread beyond which new ones are turned away (`Busy`):
/// a queue longer than this only makes every login slow.
const MAX_QUEUED: usize = 128;
/// Tracked addresses and keys beyond which fully refilled entries are forgotten.
const MAX_TRACKED: usize = 10_000;
/// An address with no failed login for this long may try a key whose own budget is spent: a
/// storm against a key never locks out its owner, and the storm gets one try per address per
/// quiet period.
const QUIET: Duration = Duration::from_secs(15 * 60);

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

/// Failures counted in advance for one login attempt, to be kept or given back by
/// [`LoginGuard::settle`].
#[must_use]
pub(crate) struct Attempt {
    /// The address charged, and when it had last failed before this attempt.
    address: Option<(IpAddr, Option<Instant>)>,
    /// The key charged (not charged when the address was let past the key's spent budget).
    key: Option<String>,
}

/// How an admitted attempt ended.
pub(crate) enum Outcome {
    Valid,
    WrongPassword,
    UnknownKey,
    /// Nothing was checked (busy, or a storage failure).
    NotChecked,
}

impl LoginGuard {
    /// Counts a failed login for the address and the key before the password is checked;
    /// `Err(seconds)` when the address has spent its budget, or the key has and the address
    /// failed within [`QUIET`].
    pub fn admit(
        &self,
        address: Option<IpAddr>,
        key: &str,
        per_address: u32,
        per_key: u32,
    ) -> Result<Attempt, u64> {
        let (address, quiet) = match address {
            Some(ip) => {
                let before = self.by_address.take(ip, per_address)?;
                let quiet = before.is_none_or(|t| t.elapsed() >= QUIET);
                (Some((ip, before)), quiet)
            }
            None => (None, false),
        };
        match self.by_key.take(key.to_string(), per_key) {
            Ok(_) => Ok(Attempt {
                address,
                key: Some(key.to_string()),
            }),
            Err(_) if quiet => Ok(Attempt { address, key: None }),
            Err(wait) => {
                if let Some((ip, before)) = address {
                    self.by_address.give_back(&ip, per_address, before);
                }
                Err(wait)
            }
        }
    }

    /// Keeps the failures an attempt was charged, or gives back what it did not earn: nothing
    /// for a right password, the key's share for an unknown key (random keys must not fill the
    /// table), everything when nothing was checked.
    pub fn settle(&self, attempt: Attempt, outcome: Outcome, per_address: u32, per_key: u32) {
        let (refund_address, refund_key) = match outcome {
            Outcome::Valid | Outcome::NotChecked => (true, true),
            Outcome::WrongPassword => (false, false),
            Outcome::UnknownKey => (false, true),
        };
        if let (true, Some((ip, before))) = (refund_address, attempt.address) {
            // A right password clears the address's record: it is its owner's.
            let before = if matches!(outcome, Outcome::Valid) {
                None
            } else {
                before
            };
            self.by_address.give_back(&ip, per_address, before);
        }
        if let (true, Some(key)) = (refund_key, attempt.key) {
            self.by_key.give_back(&key, per_key, None);
        }
    }

    /// Runs `check` for `credential` unless a check of the same credential is in flight, in which
    /// case its verdict is shared. `hash` runs on a hashing thread, with that thread's memory.
    pub async fn verify<L, LF, H>(&self, credential: [u8; 32], lookup: L, hash: H) -> Verdict
    where
        L: FnOnce() -> LF,
        LF: Future<Output = Result<Option<Account>, crate::Error>>,
        H: FnOnce(&str, &mut Vec<Block>) -> Result<bool, String> + Send + 'static,
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
                    Ok(a) => a,
                    Err(e) => return Verdict::Failed(e),
                };
                if self.queued.fetch_add(1, Ordering::SeqCst) >= MAX_QUEUED {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    return Verdict::Busy;
                }
                let _queued = Queued(&self.queued);
                // An unknown key is checked against a dummy hash of the same cost, so that the
                // answer's timing does not tell which keys exist.
                let phc = account.as_ref().map_or_else(
                    || crate::auth::dummy_hash().to_owned(),
                    |a| a.password_hash.clone(),
                );
                let checked = self.hashing.run(move |memory| hash(&phc, memory)).await;
                match (account, checked) {
                    (None, Ok(_)) => Verdict::UnknownKey,
                    (Some(account), Ok(Ok(true))) => Verdict::Valid(account),
                    (Some(_), Ok(Ok(false))) => Verdict::WrongPassword,
                    (_, Ok(Err(e)) | Err(e)) => Verdict::Failed(crate::Error::internal(
                        "checking the credentials failed",
                        e,
                    )),
                }
            })
            .await
            .clone();
        drop(entry);
        verdict
    }
}

/// Failed logins allowed per key (address or API key): a bucket of `per_minute` that refills
/// evenly over a minute, and when the key last failed.
struct FailureBudget<K> {
    buckets: Mutex<HashMap<K, Bucket>>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    last_failure: Option<Instant>,
}

impl<K> Default for FailureBudget<K> {
    fn default() -> Self {
        FailureBudget {
            buckets: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq> FailureBudget<K> {
    fn refill(bucket: &mut Bucket, capacity: f64, now: Instant) {
        bucket.tokens = (bucket.tokens
            + now.duration_since(bucket.refilled).as_secs_f64() * capacity / 60.0)
            .min(capacity);
        bucket.refilled = now;
    }

    /// Spends one failure from `key`'s budget, in one step with the check; `Ok(when it last
    /// failed before)`, or `Err(seconds until one more attempt is allowed)` once it is spent.
    fn take(&self, key: K, per_minute: u32) -> Result<Option<Instant>, u64> {
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(None);
        };
        let capacity = f64::from(per_minute.max(1));
        let now = Instant::now();
        if map.len() >= MAX_TRACKED {
            map.retain(|_, b| {
                Self::refill(b, capacity, now);
                b.tokens < capacity || b.last_failure.is_some_and(|t| now - t < QUIET)
            });
        }
        let bucket = map.entry(key).or_insert(Bucket {
            tokens: capacity,
            refilled: now,
            last_failure: None,
        });
        Self::refill(bucket, capacity, now);
        if bucket.tokens < 1.0 {
            return Err(((1.0 - bucket.tokens) * 60.0 / capacity).ceil().max(1.0) as u64);
        }
        bucket.tokens -= 1.0;
        Ok(bucket.last_failure.replace(now))
    }

    /// Gives back one failure taken by [`take`](Self::take), with the previous failure time.
    fn give_back(&self, key: &K, per_minute: u32, last_failure: Option<Instant>) {
        let Ok(mut map) = self.buckets.lock() else {
            return;
        };
        if let Some(bucket) = map.get_mut(key) {
            bucket.tokens = (bucket.tokens + 1.0).min(f64::from(per_minute.max(1)));
            bucket.last_failure = last_failure;
        }
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
                        move |_: &str, _: &mut Vec<Block>| {
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

    /// An unknown key costs one hash like a known one: the time of a refusal tells nothing.
    #[tokio::test]
    async fn unknown_keys_are_hashed_too() {
        let guard = LoginGuard::default();
        let hashes = Arc::new(AtomicU32::new(0));
        let counted = hashes.clone();
        let v = guard
            .verify(
                [3; 32],
                || async { Ok(None) },
                move |phc: &str, _: &mut Vec<Block>| {
                    assert!(phc.starts_with("$argon2"), "{phc}");
                    counted.fetch_add(1, Ordering::SeqCst);
                    Ok(true)
                },
            )
            .await;
        assert!(matches!(v, Verdict::UnknownKey), "{v:?}");
        assert_eq!(hashes.load(Ordering::SeqCst), 1);
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn failures_are_budgeted_per_address_and_key() {
        let g = LoginGuard::default();
        for _ in 0..3 {
            let a = g.admit(ip("192.0.2.1"), "k", 3, 5).expect("within budget");
            g.settle(a, Outcome::WrongPassword, 3, 5);
        }
        let wait = g
            .admit(ip("192.0.2.1"), "k", 3, 5)
            .err()
            .expect("address budget spent");
        assert!((1..=20).contains(&wait), "{wait}");
        // Another address may still try the key, until the key's own budget is spent.
        for _ in 0..2 {
            let a = g
                .admit(ip("192.0.2.2"), "k", 3, 5)
                .expect("key budget left");
            g.settle(a, Outcome::WrongPassword, 3, 5);
        }
        // 192.0.2.2 has failed recently: the spent key refuses it.
        assert!(g.admit(ip("192.0.2.2"), "k", 3, 5).is_err());
        // An address with no failures gets its one try at the locked key, and only one.
        let a = g
            .admit(ip("192.0.2.3"), "k", 3, 5)
            .expect("a quiet address");
        g.settle(a, Outcome::WrongPassword, 3, 5);
        assert!(g.admit(ip("192.0.2.3"), "k", 3, 5).is_err());
        assert!(g.admit(ip("192.0.2.3"), "other", 3, 5).is_ok());
    }

    /// Admission counts before the check: of many concurrent attempts, only the budget passes.
    #[test]
    fn concurrent_attempts_are_counted_before_the_check() {
        let g = Arc::new(LoginGuard::default());
        let admitted = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (g, admitted) = (g.clone(), admitted.clone());
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for _ in 0..50 {
                        if let Ok(a) = g.admit(ip("192.0.2.9"), "k", 30, 30) {
                            admitted.fetch_add(1, Ordering::SeqCst);
                            held.push(a);
                        }
                    }
                    held
                })
            })
            .collect();
        let mut held = Vec::new();
        for t in threads {
            held.extend(t.join().expect("thread"));
        }
        assert_eq!(admitted.load(Ordering::SeqCst), 30);
        for a in held {
            g.settle(a, Outcome::WrongPassword, 30, 30);
        }
    }

    /// A right password gives back what it was charged and clears the address's record.
    #[test]
    fn a_right_password_costs_nothing() {
        let g = LoginGuard::default();
        for _ in 0..10 {
            let a = g
                .admit(ip("192.0.2.4"), "k", 3, 3)
                .expect("refunded each time");
            g.settle(a, Outcome::Valid, 3, 3);
        }
    }
}
