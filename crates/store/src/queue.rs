//! Every leased queue of the service, described once ([`Queue`]) and driven by one implementation
//! of claim under a lease, renewal, finish, retry with backoff, giving up and stats. A queue's
//! typed methods (`claim_job`, `claim_link_check`, ...) only add what is their own (the columns
//! they return and write, the rows they touch beside the queue's); the lease rules live here.
//!
//! A row is *open* while it still has work to do, *leased* while a worker holds it, and *due* when
//! it is open and either not leased and past its `not_before`, or leased with a lease that expired
//! (its worker died or stalled): so a crash delays work, never loses it. A claim is one
//! `UPDATE ... WHERE key = (SELECT ... LIMIT 1 {skip locked}) RETURNING ...`, so two workers never
//! claim one row; per-account queues pick the row through [`crate::fair`].

use std::time::Duration;

use domain::{QueueState, Spelled};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::sql::{Arg, Query};
use crate::{Backend, Result, Store};

/// How long a failed attempt waits before the next: `first_secs` after the first failure,
/// doubling per further failure up to `max_secs`, less a random share of up to `jitter` (0 to 1)
/// of it, so that the rows that failed together (an outage) do not all come back at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub first_secs: i64,
    pub max_secs: i64,
    pub jitter: f64,
}

impl Backoff {
    /// Doubling from `first_secs` up to `max_secs`, with up to half taken off at random.
    pub const fn doubling(first_secs: i64, max_secs: i64) -> Backoff {
        Backoff {
            first_secs,
            max_secs,
            jitter: 0.5,
        }
    }

    /// The same wait after every failure, with up to a fifth taken off at random.
    pub const fn fixed(secs: i64) -> Backoff {
        Backoff {
            first_secs: secs,
            max_secs: secs,
            jitter: 0.2,
        }
    }

    /// Seconds to wait after the `attempt`-th attempt failed (1 = the first), with `roll` in
    /// [0, 1) choosing how much of the jitter is taken off. Never below one second.
    pub fn delay_secs(&self, attempt: i64, roll: f64) -> i64 {
        let doublings = u32::try_from(attempt.saturating_sub(1).clamp(0, 62)).unwrap_or(62);
        let full = self
            .first_secs
            .max(1)
            .saturating_mul(2_i64.saturating_pow(doublings))
            .min(self.max_secs.max(1));
        let off = (full as f64 * self.jitter.clamp(0.0, 1.0) * roll.clamp(0.0, 1.0)) as i64;
        (full - off).max(1)
    }

    /// When the row whose `attempt`-th attempt failed at `now` is due again (random jitter).
    pub fn retry_at(&self, now: i64, attempt: i64) -> i64 {
        now.saturating_add(self.delay_secs(attempt, rand::random::<f64>()))
    }
}

/// How long a claimed row is its worker's without renewal, and how often the worker's heartbeat
/// renews it. Short, so that the rows of a worker that died (`kill -9`, a lost machine) are
/// claimed again within about `hold`; renewed well inside `hold`, so that a live worker keeps its
/// row through a database blip of a few seconds and through work of any length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub hold: Duration,
    pub renew_every: Duration,
}

impl Lease {
    /// Every queue's lease unless it says otherwise: a dead worker's row is due again after 10 s
    /// (the bound is 15 s, which leaves a loop's 1-2 s poll), renewed every 3 s (two
    /// renewals may fail before a live worker loses its row).
    pub const SHORT: Lease = Lease::secs(10, 3);

    pub const fn secs(hold: u64, renew_every: u64) -> Lease {
        Lease {
            hold: Duration::from_secs(hold),
            renew_every: Duration::from_secs(renew_every),
        }
    }

    /// `hold` in whole seconds (at least one), as a claim takes it.
    pub fn hold_secs(&self) -> i64 {
        i64::try_from(self.hold.as_secs().max(1)).unwrap_or(i64::MAX)
    }
}

/// The values of a queue's `state` column (a leased row is always `leased`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct States {
    /// Waiting to be claimed (first time or again).
    pub waiting: QueueState,
    pub done: QueueState,
    /// Given up.
    pub failed: QueueState,
}

impl States {
    /// The state a row of this queue has stored as `s`: one of its four, else an error (a state
    /// of another queue, or no state at all, means the row was written by something else).
    pub fn parse(&self, s: &str) -> Result<QueueState> {
        let state = QueueState::parse_known(s)?;
        if [self.waiting, QueueState::Leased, self.done, self.failed].contains(&state) {
            Ok(state)
        } else {
            Err(crate::StoreError::Corrupt(format!(
                "queue state {s:?} is not one of {}, leased, {}, {}",
                self.waiting, self.done, self.failed
            )))
        }
    }
}

/// A leased queue: a table, the columns that carry the lease, and the rules of its work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Queue {
    /// The queue's name in `/metrics`, `queue_turns`, the caps and the lease owners.
    pub name: &'static str,
    pub table: &'static str,
    /// The row's key, and whether it is an integer (else text).
    pub key: &'static str,
    pub key_is_int: bool,
    /// The `state` column's values; `None` for a queue kept in columns of another table (svc
    /// sends, in `tests`), whose open rows are those [`Queue::open_rows`] names.
    pub states: Option<States>,
    /// For a queue without `state`: the condition (on `q.`) of rows still to do.
    pub open_rows: &'static str,
    pub lease_owner: &'static str,
    pub lease_expires: &'static str,
    pub attempts: &'static str,
    /// When a waiting row becomes due; `None`: as soon as it is waiting.
    pub not_before: Option<&'static str>,
    /// Where the last failure's reason is kept, if anywhere.
    pub last_error: Option<&'static str>,
    /// Keeps the owner of an expired lease that a claim took over, if the queue records it.
    pub taken_over_from: Option<&'static str>,
    /// Since when an open row has been due (on `q.`), for `/metrics`' oldest age.
    pub due_since: &'static str,
    /// The order of due rows (on `q.`), after the fair order if any.
    pub order: &'static str,
    /// Shared between accounts ([`crate::fair`]): the table has a `test_id`.
    pub fair: bool,
    pub backoff: Backoff,
    /// How long a claim holds a row and how often its worker renews it (`background::Loops`
    /// starts the renewals; no handler does).
    pub lease: Lease,
    /// Attempts after which the work is given up; `None`: the worker decides.
    pub max_attempts: Option<i64>,
    /// PostgreSQL advisory lock key of the queue's fair claims.
    pub(crate) lock_key: i64,
}

/// What most queues share: a table of their own keyed by test, with a `state` column
/// (`queued`, `leased`, `done`, `failed`) and the lease columns by their usual names.
const PER_TEST: Queue = Queue {
    name: "",
    table: "",
    key: "test_id",
    key_is_int: false,
    states: Some(States {
        waiting: QueueState::Queued,
        done: QueueState::Done,
        failed: QueueState::Failed,
    }),
    open_rows: "",
    lease_owner: "lease_owner",
    lease_expires: "lease_expires",
    attempts: "attempts",
    not_before: Some("not_before"),
    last_error: Some("last_error"),
    taken_over_from: None,
    due_since: "q.not_before",
    order: "q.not_before, q.test_id",
    fair: true,
    backoff: Backoff::fixed(5),
    lease: Lease::SHORT,
    max_attempts: None,
    lock_key: 0,
};

/// The render queue: one row per screenshot variant.
pub const RENDER: Queue = Queue {
    name: "render",
    table: "render_jobs",
    key: "id",
    key_is_int: true,
    taken_over_from: Some("taken_over_from"),
    order: "q.not_before, q.id",
    // 2 s, 4 s, 8 s ...: an engine that crashed on an email gets a moment before the next try.
    backoff: Backoff::doubling(2, 64),
    max_attempts: Some(3),
    lock_key: 0x6d61_696c_0001,
    ..PER_TEST
};

/// Link checks: one row per test, requested again by every PUT; no retry (a link that does not
/// answer is a finding, not a failure).
pub const LINK_CHECKS: Queue = Queue {
    name: "link_checks",
    table: "link_checks",
    not_before: None,
    last_error: None,
    due_since: "q.requested_at",
    order: "q.requested_at, q.test_id",
    lock_key: 0x6d61_696c_0002,
    ..PER_TEST
};

/// Accessibility and content checks: one row per test.
pub const CONTENT_CHECKS: Queue = Queue {
    name: "content_checks",
    table: "content_checks",
    order: "q.requested_at, q.test_id",
    // After the last attempt the report is stored without the engine's part.
    max_attempts: Some(3),
    lock_key: 0x6d61_696c_0003,
    ..PER_TEST
};

/// Inbox rows: one row per test, laid out and drawn in the engines.
pub const INBOX_ROWS: Queue = Queue {
    name: "inbox_rows",
    table: "inbox_rows",
    order: "q.requested_at, q.test_id",
    // After the last attempt the report says why no row was drawn.
    max_attempts: Some(3),
    lock_key: 0x6d61_696c_0007,
    ..PER_TEST
};

/// Completion callbacks: one row per test. The delivery worker's settings replace the backoff
/// and the attempts ([`Queue::with_backoff`]).
pub const CALLBACKS: Queue = Queue {
    name: "callbacks",
    table: "callbacks",
    states: Some(States {
        waiting: QueueState::Queued,
        done: QueueState::Delivered,
        failed: QueueState::Failed,
    }),
    backoff: Backoff::doubling(10, 3600),
    max_attempts: Some(8),
    lock_key: 0x6d61_696c_0004,
    ..PER_TEST
};

/// Mail accepted over SMTP, processed after the `250`.
pub const INBOUND: Queue = Queue {
    name: "inbound",
    table: "inbound_messages",
    key: "id",
    key_is_int: true,
    states: Some(States {
        waiting: QueueState::New,
        done: QueueState::Done,
        failed: QueueState::Failed,
    }),
    due_since: "CASE WHEN q.not_before > q.received_at THEN q.not_before ELSE q.received_at END",
    order: "q.id",
    fair: false,
    // With 300 attempts and the cap, a message is retried for over a day before it is set aside.
    backoff: Backoff::doubling(5, 300),
    max_attempts: Some(300),
    lock_key: 0x6d61_696c_0005,
    ..PER_TEST
};

/// The `svc` method's sends of spam tests, kept in `tests`' `spam_send_*` columns.
pub const SVC_SENDS: Queue = Queue {
    name: "svc_sends",
    table: "tests",
    key: "id",
    states: None,
    open_rows: "q.spam_method = 'svc' AND q.spam_sent_at IS NULL AND q.seed_key IS NOT NULL
                AND q.purged_at IS NULL AND q.spam_send_attempts < 5",
    lease_owner: "spam_send_lease_owner",
    lease_expires: "spam_send_lease_expires",
    attempts: "spam_send_attempts",
    not_before: Some("spam_send_not_before"),
    last_error: Some("spam_send_error"),
    due_since: "CASE WHEN q.spam_send_not_before > q.created_at THEN q.spam_send_not_before
                ELSE q.created_at END",
    order: "q.created_at, q.id",
    fair: false,
    backoff: Backoff::fixed(30),
    // The `5` of `open_rows`: a send given up is no longer open.
    max_attempts: Some(5),
    lock_key: 0x6d61_696c_0006,
    ..PER_TEST
};

/// Every leased queue: `/metrics` reports these, and a store test fails if a table with a lease
/// column is missing here.
pub const QUEUES: &[Queue] = &[
    RENDER,
    LINK_CHECKS,
    CONTENT_CHECKS,
    INBOX_ROWS,
    CALLBACKS,
    INBOUND,
    SVC_SENDS,
];

/// A queue row's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Int(i64),
    Text(String),
}

impl From<&Key> for Arg {
    fn from(k: &Key) -> Arg {
        match k {
            Key::Int(v) => Arg::Int(*v),
            Key::Text(v) => Arg::Text(v.clone()),
        }
    }
}

/// A row just claimed: its key and the attempt this is (1 = the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    pub key: Key,
    pub attempts: i64,
}

/// How a claimed row's attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The work is done.
    Done,
    /// Try again from `not_before`. `counted: false` gives the attempt back: the row waited, or a
    /// dependency (not the work) failed.
    Retry {
        error: Option<String>,
        not_before: i64,
        counted: bool,
    },
    /// No further attempt.
    GiveUp { error: Option<String> },
}

impl Queue {
    /// This queue with another backoff and number of attempts (from the configuration).
    pub const fn with_backoff(mut self, backoff: Backoff, max_attempts: i64) -> Queue {
        self.backoff = backoff;
        self.max_attempts = Some(max_attempts);
        self
    }

    /// True when the `attempts`-th attempt was the last allowed.
    pub fn gives_up(&self, attempts: i64) -> bool {
        self.max_attempts.is_some_and(|max| attempts >= max)
    }

    /// The outcome of a failed attempt: retried after the backoff, or given up after the last.
    pub fn failed(&self, attempts: i64, now: i64, error: String) -> Outcome {
        if self.gives_up(attempts) {
            Outcome::GiveUp { error: Some(error) }
        } else {
            Outcome::Retry {
                error: Some(error),
                not_before: self.backoff.retry_at(now, attempts),
                counted: true,
            }
        }
    }

    /// The state a row of this queue has stored as `s` (see [`States::parse`]).
    pub fn parse_state(&self, s: &str) -> Result<QueueState> {
        match &self.states {
            Some(states) => states.parse(s),
            None => Err(crate::StoreError::Corrupt(format!(
                "queue {} has no state column, yet a state {s:?} was read for it",
                self.name
            ))),
        }
    }

    /// Open rows (on `q.`).
    fn open(&self) -> String {
        match self.states {
            Some(s) => format!("q.state IN ('{}', '{}')", s.waiting, QueueState::Leased),
            None => self.open_rows.to_string(),
        }
    }

    /// Rows under a lease, live or expired (on `q.`).
    fn leased(&self) -> String {
        match self.states {
            Some(_) => format!("q.state = '{}'", QueueState::Leased),
            None => format!("q.{} IS NOT NULL", self.lease_expires),
        }
    }

    /// Open rows that are due at `now` (a placeholder).
    fn due(&self, now: &str) -> String {
        let waiting_due = match self.not_before {
            Some(nb) => format!("q.{nb} <= {now}"),
            None => "1 = 1".into(),
        };
        format!(
            "({}) AND ((NOT ({leased}) AND {waiting_due}) OR (({leased}) AND q.{exp} < {now}))",
            self.open(),
            leased = self.leased(),
            exp = self.lease_expires,
        )
    }

    /// The guard of every write by a lease holder: the row is `worker`'s (`$w` bound by caller).
    fn held_by(&self, q: &mut Query, key: &Key, worker: &str) {
        q.push(&format!(" WHERE {} = ", self.key))
            .bind(key)
            .push(&format!(" AND {} = ", self.lease_owner))
            .bind(worker);
        if self.states.is_some() {
            q.push(&format!(" AND state = '{}'", QueueState::Leased));
        }
    }

    fn key_of(&self, row: &AnyRow) -> Result<Key> {
        Ok(if self.key_is_int {
            Key::Int(row.try_get(self.key)?)
        } else {
            Key::Text(row.try_get(self.key)?)
        })
    }

    /// Claims the next due row for `worker` until `now + lease_secs` on `conn` (in the caller's
    /// transaction, which should be the claim's own: fair queues lock per queue until it ends),
    /// limited to rows whose `only.0` is one of `only.1` when given. Returns the row's `returning`
    /// columns (besides its key and `attempts`). A worker taking back its own expired lease lost
    /// the answer to its claim to a database fault (lease owners are unique per process and loop):
    /// that is not an attempt.
    pub(crate) async fn claim_in(
        &self,
        store: &Store,
        conn: &mut AnyConnection,
        claim: &Claim<'_>,
        returning: &str,
    ) -> Result<Option<(Claimed, AnyRow)>> {
        if claim.only.is_some_and(|(_, list)| list.is_empty()) {
            return Ok(None);
        }
        let fair = self.fair.then(|| store.fair(self));
        if let Some(fair) = &fair {
            fair.lock(conn).await?;
        }
        let (owner, exp, attempts) = (self.lease_owner, self.lease_expires, self.attempts);
        let mut q = Query::new(&format!("UPDATE {} SET ", self.table));
        if self.states.is_some() {
            q.push(&format!("state = '{}', ", QueueState::Leased));
        }
        if let Some(col) = self.taken_over_from {
            q.push(&format!("{col} = {owner}, "));
        }
        q.push(&format!("{owner} = "))
            .bind(claim.worker)
            .push(&format!(", {exp} = "))
            .bind(claim.now.saturating_add(claim.lease_secs))
            .push(&format!(", {attempts} = {attempts} + CASE WHEN {owner} = "))
            .bind(claim.worker)
            .push(&format!(
                " THEN 0 ELSE 1 END WHERE {key} = (SELECT q.{key} FROM ",
                key = self.key
            ));
        match &fair {
            Some(fair) => fair.push_from(&mut q, claim.now),
            None => {
                q.push(&format!("{} q", self.table));
            }
        }
        // `due` names `now` several times: one placeholder, bound once.
        let now = q.placeholder(claim.now);
        q.push(" WHERE ").push(&self.due(&now));
        if let Some(fair) = &fair {
            q.push(" AND ").push(&fair.filter());
        }
        if let Some((col, list)) = claim.only {
            q.push(&format!(" AND q.{col} IN ("))
                .bind_list(list)
                .push(")");
        }
        q.push(" ORDER BY ");
        if let Some(fair) = &fair {
            q.push(fair.order());
        }
        q.push(&format!(
            "{} LIMIT 1 {}) RETURNING {key}, {attempts} AS attempts",
            self.order,
            store.backend.skip_locked(),
            key = self.key,
        ));
        // The fair turn goes to the row's account, found through its test.
        if self.fair && self.key != "test_id" {
            q.push(", test_id AS fair_test_id");
        }
        if !returning.is_empty() {
            q.push(", ").push(returning);
        }
        let Some(row) = q.build().fetch_optional(&mut *conn).await? else {
            return Ok(None);
        };
        let claimed = Claimed {
            key: self.key_of(&row)?,
            attempts: row.try_get("attempts")?,
        };
        if let Some(fair) = &fair {
            let test_id: String = match &claimed.key {
                Key::Text(id) if self.key == "test_id" => id.clone(),
                _ => row.try_get("fair_test_id")?,
            };
            fair.served(conn, &test_id).await?;
        }
        Ok(Some((claimed, row)))
    }

    /// Extends `worker`'s lease of `key` to `until`; false when the lease is no longer `worker`'s.
    pub(crate) async fn renew_in(
        &self,
        conn: &mut AnyConnection,
        key: &Key,
        worker: &str,
        until: i64,
    ) -> Result<bool> {
        let mut q = Query::new(&format!(
            "UPDATE {} SET {} = ",
            self.table, self.lease_expires
        ));
        q.bind(until);
        self.held_by(&mut q, key, worker);
        Ok(q.build().execute(&mut *conn).await?.rows_affected() > 0)
    }

    /// Ends `worker`'s lease of `key` with `outcome`, also setting the columns `set` (the queue's
    /// own results). False (and nothing written) when the lease is no longer `worker`'s.
    pub(crate) async fn finish_in(
        &self,
        conn: &mut AnyConnection,
        key: &Key,
        worker: &str,
        outcome: &Outcome,
        set: &[(&str, Arg)],
    ) -> Result<bool> {
        let mut q = Query::new(&format!(
            "UPDATE {} SET {} = NULL, {} = NULL",
            self.table, self.lease_owner, self.lease_expires
        ));
        let (state, error, not_before) = match (outcome, self.states) {
            (Outcome::Done, s) => (s.map(|s| s.done), None, None),
            (
                Outcome::Retry {
                    error, not_before, ..
                },
                s,
            ) => (s.map(|s| s.waiting), error.clone(), Some(*not_before)),
            (Outcome::GiveUp { error }, s) => (s.map(|s| s.failed), error.clone(), None),
        };
        if let Some(state) = state {
            q.push(", state = ").bind(state.as_str());
        }
        if let Some(col) = self.last_error {
            q.push(&format!(", {col} = ")).bind(Arg::opt_text(error));
        }
        if let (Some(col), Some(at)) = (self.not_before, not_before) {
            q.push(&format!(", {col} = ")).bind(at);
        }
        let attempts = self.attempts;
        match outcome {
            Outcome::Retry { counted: false, .. } => {
                q.push(&format!(
                    ", {attempts} = CASE WHEN {attempts} > 0 THEN {attempts} - 1 ELSE 0 END"
                ));
            }
            // A queue without states has no failed state: its open rows end at the last attempt.
            Outcome::GiveUp { .. } if self.states.is_none() => {
                if let Some(max) = self.max_attempts {
                    q.push(&format!(", {attempts} = ")).bind(max);
                }
            }
            _ => {}
        }
        for (col, value) in set {
            q.push(&format!(", {col} = ")).bind(value.clone());
        }
        self.held_by(&mut q, key, worker);
        Ok(q.build().execute(&mut *conn).await?.rows_affected() > 0)
    }

    /// This queue's figures at `now`.
    pub(crate) async fn stats_in(&self, conn: &mut AnyConnection, now: i64) -> Result<QueueStat> {
        let live = format!("({}) AND q.{} >= $1", self.leased(), self.lease_expires);
        let expired = format!("({}) AND q.{} < $1", self.leased(), self.lease_expires);
        // Portable SQL: CASE, not boolean sums; sums cast (PostgreSQL's SUM of BIGINT is NUMERIC).
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(CASE WHEN {live} THEN 0 ELSE 1 END), 0) AS BIGINT),
                    CAST(COALESCE(SUM(CASE WHEN {live} THEN 1 ELSE 0 END), 0) AS BIGINT),
                    MIN(CASE WHEN {due} THEN {since} END),
                    CAST(COALESCE(SUM(CASE WHEN {expired} THEN 1 ELSE 0 END), 0) AS BIGINT),
                    MIN(CASE WHEN {expired} THEN q.{lease_expires} END)
             FROM {table} q WHERE {open}",
            lease_expires = self.lease_expires,
            due = self.due("$1"),
            since = self.due_since,
            table = self.table,
            open = self.open(),
        );
        let row = sqlx::query(&sql).bind(now).fetch_one(&mut *conn).await?;
        let oldest: Option<i64> = row.try_get(2)?;
        let longest_expired: Option<i64> = row.try_get(4)?;
        Ok(QueueStat {
            queue: self.name,
            waiting: row.try_get(0)?,
            leased: row.try_get(1)?,
            oldest_age_secs: oldest.map_or(0, |t| (now - t).max(0)),
            expired_leases: row.try_get(3)?,
            expired_lease_secs: longest_expired.map_or(0, |t| (now - t).max(0)),
        })
    }
}

/// One claim's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    pub worker: &'a str,
    pub now: i64,
    pub lease_secs: i64,
    /// Only rows whose column is one of these (an empty list claims nothing).
    pub only: Option<(&'static str, &'a [String])>,
}

impl<'a> Claim<'a> {
    pub fn new(worker: &'a str, now: i64, lease_secs: i64) -> Claim<'a> {
        Claim {
            worker,
            now,
            lease_secs,
            only: None,
        }
    }
}

/// One queue's figures at a moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStat {
    pub queue: &'static str,
    /// Claimable or waiting for its backoff, including rows whose lease expired.
    pub waiting: i64,
    /// Under a lease that has not expired.
    pub leased: i64,
    /// Seconds since the oldest due row became due; 0 when none is due.
    pub oldest_age_secs: i64,
    /// Rows still marked leased whose lease ran out: their holder stopped renewing (it died, or
    /// lost the database) and no worker has taken them over yet. Counted in `waiting` too.
    pub expired_leases: i64,
    /// Seconds since the longest-expired of those leases ran out; 0 when none has.
    pub expired_lease_secs: i64,
}

impl Store {
    /// Claims the next due row of `queue` (any queue: the generic claim that the typed ones are
    /// built on, for tests and new queues).
    pub async fn claim(&self, queue: &Queue, claim: &Claim<'_>) -> Result<Option<Claimed>> {
        let mut tx = self.pool.begin().await?;
        let claimed = queue.claim_in(self, &mut tx, claim, "").await?;
        tx.commit().await?;
        Ok(claimed.map(|(c, _)| c))
    }

    /// Extends `worker`'s lease of `key` in `queue` to `until` (a worker's heartbeat). False when
    /// the lease is no longer `worker`'s: it expired and another worker took the row over.
    pub async fn renew_lease(
        &self,
        queue: &Queue,
        key: &Key,
        worker: &str,
        until: i64,
    ) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        queue.renew_in(&mut conn, key, worker, until).await
    }

    /// Ends `worker`'s lease of `key` in `queue` with `outcome`; false when the lease was lost.
    pub async fn finish(
        &self,
        queue: &Queue,
        key: &Key,
        worker: &str,
        outcome: &Outcome,
    ) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        queue.finish_in(&mut conn, key, worker, outcome, &[]).await
    }

    /// The tables of the schema with a column whose name is `LIKE column`, sorted: for tests that
    /// hold the lists of queues and of content tables to the schema.
    pub async fn tables_with_column(&self, column: &str) -> Result<Vec<String>> {
        let sql = match self.backend {
            Backend::Sqlite => {
                "SELECT DISTINCT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c
                 WHERE m.type = 'table' AND c.name LIKE $1 ORDER BY m.name"
            }
            Backend::Postgres => {
                "SELECT DISTINCT CAST(table_name AS TEXT) FROM information_schema.columns
                 WHERE table_schema = current_schema() AND column_name LIKE $1 ORDER BY 1"
            }
        };
        Ok(sqlx::query_scalar(sql)
            .bind(column)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Figures for every queue of [`QUEUES`] at `now` (unix seconds).
    pub async fn queue_stats(&self, now: i64) -> Result<Vec<QueueStat>> {
        let mut conn = self.pool.acquire().await?;
        let mut stats = Vec::with_capacity(QUEUES.len());
        for queue in QUEUES {
            stats.push(queue.stats_in(&mut conn, now).await?);
        }
        Ok(stats)
    }
}
