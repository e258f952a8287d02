//! mailproof's durable state: accounts, tests and their results, the render queue, inbound mail
//! and screenshot blobs.
//!
//! Invariants:
//! - Handlers and workers speak to storage only through [`Store`] and [`Blobs`]; SQL stays in this
//!   crate.
//! - Two backends, SQLite (the default, a file in the data dir) and PostgreSQL (`postgres://` URL),
//!   behind the same methods. See "Writing SQL for both backends" below.
//! - Whatever the service acknowledges is committed first: a test, its queue rows and its spam rows
//!   are written in one transaction before the API answers; an SMTP message before `250`.
//! - SQLite runs in WAL mode with `synchronous=NORMAL`: a committed transaction survives the process
//!   being killed (it may not survive power loss, which `synchronous=FULL` would add).
//! - Every queue ([`QUEUES`]: render jobs, link and content checks, inbox rows, callbacks, inbound mail, svc
//!   sends) is claimed by one statement under a lease, so any number of processes can drain it and a dead process's work is taken
//!   over once its lease expires. The per-test queues (render jobs, link and content checks,
//!   callbacks) pick the row through [`fair`]: the account with the fewest live leases, then the
//!   least recently served, skipping accounts at their cap ([`AccountCaps`]).
//!
//! # Writing SQL for both backends
//! Queries go through sqlx's `Any` driver: one pool type, one SQL text for both databases.
//! - Placeholders are `$1, $2, ...` (PostgreSQL's form, which SQLite accepts too); never `?`.
//!   A number may be used twice. Dynamic queries use [`sql::Query`], not sqlx's `QueryBuilder`
//!   (which writes `?` for the `Any` driver).
//! - Only the types `Any` carries: `i64` (columns are `BIGINT` on PostgreSQL, so bind `i64`,
//!   never `i32`), `String`/`&str`, `Vec<u8>` (`BYTEA`), their `Option`s. Flags are 0/1 integers
//!   on both (`Any` cannot decode a SQLite integer as `bool`); `SUM` needs a cast on PostgreSQL.
//! - Write SQL both dialects accept: `ON CONFLICT ... DO UPDATE` (not `INSERT OR REPLACE`),
//!   `CASE` (not two-argument `MAX`), `LIKE` on `lower()` (not `instr`); in `DO UPDATE`, name the
//!   table's own columns with the table (`SET n = t.n + 1`: PostgreSQL finds a bare `n` ambiguous). The few fragments that
//!   must differ are methods of [`Backend`] (`skip_locked`, `lock_row`, `insertion_order`), spliced in with
//!   `format!`; add one there rather than branching in a query.
//! - Queue claims, renewals and finishes are written once, in [`queue`], for every queue described
//!   there ([`Queue`]); a new queue is a new description, not new claim SQL.
//! - Migrations: SQLite's in `migrations/`, PostgreSQL's in `migrations/postgres/`, with the same
//!   number for the same change (`postgres/0001` is the schema of SQLite's 0001–0005). A new
//!   migration is written twice, once per dialect (a test checks every SQLite migration has its
//!   PostgreSQL twin); everything else is written once.
//! - Store tests run on both backends (`tests/it`, the `on_both!` macro), with databases from
//!   [`testing`] (feature `testing`).

mod accounts;
mod analytics;
mod blobs;
mod callbacks;
mod checks;
mod fair;
mod inbound;
mod jobs;
mod links;
mod queue;
mod retention;
mod review;
mod spam;
pub(crate) mod sql;
#[cfg(any(test, feature = "test-s3"))]
pub mod test_s3;
#[cfg(feature = "testing")]
pub mod testing;
mod tests;
#[cfg(all(test, feature = "testing"))]
mod vocab_tests;
mod web;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

/// The typed report `Store::campaign_report` answers, and its parts.
pub use ::analytics::report as campaign_report;
pub use accounts::{Account, NewAccount};
pub use analytics::{
    CampaignRow, CampaignUpdate, HitBudgets, HitRow, HitsWritten, NewCampaign, NewHit,
};
pub use blobs::{screenshot_key, BlobError, Blobs, BlobsConfig};
pub use callbacks::{CallbackOutcome, CallbackRow, ClaimedCallback};
pub use checks::ReportRow;
pub use fair::AccountCaps;
pub use inbound::{InboundRow, NewInbound};
pub use jobs::{ClaimedJob, JobOutcome};
pub use links::LinkCheckRow;
pub use queue::{
    Backoff, Claim, Claimed, Key, Lease, Outcome, Queue, QueueStat, States, CALLBACKS,
    CONTENT_CHECKS, INBOUND, INBOX_ROWS, LINK_CHECKS, QUEUES, RENDER, SVC_SENDS,
};
pub use retention::{CONTENT_TABLES, KEPT_PER_TEST};
pub use review::{ApprovalRow, Reviewer, VersionRow, MAX_VERSIONS_LISTED};
pub use spam::{PendingSend, SpamRow, SpamUpdate};
pub use tests::{
    ClientRow, ListFilter, ListedTest, NewTest, NewTestClient, ReprocessOutcome, ShotFacts, TestRow,
};
pub use web::{SessionRow, ShareRow, TestSummary};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Config(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the monthly test limit of {limit} for customer {customer_id:?} is reached")]
    TestLimitReached { customer_id: String, limit: i64 },
}

impl StoreError {
    /// The database is away or too slow, not the request wrong: no connection within the pool's
    /// acquire timeout, a connection lost or refused, the server shutting down or starting, a
    /// statement over `statement_timeout`. The caller may retry the same request later.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Db(
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::Tls(_),
            ) => true,
            StoreError::Db(sqlx::Error::Database(e)) => e.code().is_some_and(|code| {
                // SQLSTATE class 08: connection exception; 57P01–57P03: shutting down or not yet
                // accepting connections; 57014: canceled (our statement_timeout).
                code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "57014")
            }),
            _ => false,
        }
    }
}

#[cfg(test)]
mod unavailable_tests {
    use super::StoreError;

    #[test]
    fn a_database_away_is_told_from_a_failed_request() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(StoreError::Db(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(StoreError::Db(sqlx::Error::Io(refused)).is_unavailable());
        assert!(!StoreError::Db(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::Conflict("taken".into()).is_unavailable());
    }
}

/// A stored spelling no vocabulary value has: the row was written by something else.
impl From<domain::UnknownValue> for StoreError {
    fn from(e: domain::UnknownValue) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Which database a [`Store`] speaks to, and the few SQL fragments in which the two differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a database URL names, or `None` for a scheme we do not support.
    pub fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }

    /// Ends a queue claim's inner `SELECT` (its table named `q`): on PostgreSQL the chosen queue
    /// row is locked and rows other claimers hold are skipped, so two claims never pick the same
    /// row (joined rows are only read). SQLite has one writer at a time, so its `UPDATE` with a
    /// sub-select is already atomic.
    pub(crate) fn skip_locked(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => "FOR UPDATE OF q SKIP LOCKED",
        }
    }

    /// Ends a `SELECT` of one row that the transaction must hold until it commits: PostgreSQL locks
    /// the row, so a second transaction asking for it waits for the first's commit and then sees
    /// its changes. SQLite needs nothing: its write transactions already run one at a time.
    pub(crate) fn lock_row(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => "FOR UPDATE",
        }
    }

    /// Serialises the claims of one queue until the transaction ends (`$1`: the queue's key), so
    /// that a per-account cap holds under concurrent claims (see [`fair`]). SQLite needs none.
    pub(crate) fn claim_lock(self) -> Option<&'static str> {
        match self {
            Backend::Sqlite => None,
            // `pg_advisory_xact_lock` returns `void`, which the `Any` driver cannot carry.
            Backend::Postgres => Some("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS l"),
        }
    }

    /// The first statement of a batch of hits, around the list of the batch's guids: it reads
    /// their campaigns (`guid`, `activated_at`, `account_id`, `stored_hits`) and locks them. On
    /// SQLite it is a no-op write, so that the transaction takes the write lock at once (SQLite
    /// serialises batches anyway); on PostgreSQL a locking read in guid order (so two batches
    /// never wait on each other), so that batches of different campaigns commit side by side
    /// while those of one campaign take turns at its mode and `stored_hits` count.
    pub(crate) fn read_campaigns_for_hits(self) -> (&'static str, &'static str) {
        match self {
            Backend::Sqlite => (
                "UPDATE analytics_campaigns SET activated_at = activated_at WHERE guid IN (",
                ") RETURNING guid, activated_at, account_id, stored_hits",
            ),
            Backend::Postgres => (
                "SELECT guid, activated_at, account_id, stored_hits FROM analytics_campaigns
                 WHERE guid IN (",
                ") ORDER BY guid FOR UPDATE",
            ),
        }
    }

    /// A column of `tests` and `analytics_campaigns` that grows with insertion, as the tie-break
    /// of listings and versions (`rowid` is SQLite's implicit one; PostgreSQL's schema has `seq`).
    pub(crate) fn insertion_order(self) -> &'static str {
        match self {
            Backend::Sqlite => "rowid",
            Backend::Postgres => "seq",
        }
    }
}

/// How long the service waits on its PostgreSQL database (SQLite, a local file, is never away).
/// Sized for an interactive service: while the database is away a request fails within `acquire`
/// (and is answered) instead of waiting for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbTimeouts {
    /// Longest wait for a pooled connection, including connecting when none is open.
    pub acquire: Duration,
    /// Longest run of one statement on PostgreSQL (`statement_timeout`; migrations excepted);
    /// `None`: no limit.
    pub statement: Option<Duration>,
}

impl Default for DbTimeouts {
    fn default() -> Self {
        DbTimeouts {
            // Under 2 s so that a request meeting a database that is away is answered within
            // 2 s; a healthy pool hands out a connection in microseconds.
            acquire: Duration::from_millis(1500),
            // Longer than any query of a request (reports of the largest campaigns, the CSV
            // export's pages, retention's batches) and short enough to end a lock wait.
            statement: Some(Duration::from_secs(10)),
        }
    }
}

/// `name` as a quoted literal can hold it: only characters that need no quoting, at most the 63
/// bytes PostgreSQL keeps.
fn safe_application_name(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || " ,-_.()".contains(*c))
        .take(63)
        .collect()
}

/// The database. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    caps: AccountCaps,
}

impl Store {
    /// Opens (creating if needed) `mailproof.sqlite` in `data_dir` and brings its schema up to date.
    pub async fn open(data_dir: &Path) -> Result<Store> {
        Store::connect(&sqlite_url(data_dir)?).await
    }

    /// Connects to `url` (`sqlite://FILE?mode=rwc` or `postgres://USER@HOST:PORT/DB`) with the
    /// default [`DbTimeouts`] and brings its schema up to date.
    pub async fn connect(url: &str) -> Result<Store> {
        Store::connect_with(url, DbTimeouts::default()).await
    }

    /// [`Store::connect`] with `timeouts`.
    pub async fn connect_with(url: &str, timeouts: DbTimeouts) -> Result<Store> {
        Store::connect_as(url, timeouts, "mailproof").await
    }

    /// [`Store::connect_with`], naming this process's connections `application_name` on
    /// PostgreSQL (`pg_stat_activity`), so that an operator sees which process and role holds a
    /// connection or a lock. Characters other than ASCII letters, digits, space and `,-_.()` are
    /// left out, and the name is cut to PostgreSQL's 63 bytes.
    pub async fn connect_as(
        url: &str,
        timeouts: DbTimeouts,
        application_name: &str,
    ) -> Result<Store> {
        let backend = Backend::of_url(url).ok_or_else(|| {
            StoreError::Config(format!(
                "database URL {:?} is neither sqlite:// nor postgres://; set database_url to one of those",
                redact_url(url)
            ))
        })?;
        sqlx::any::install_default_drivers();
        let opts = AnyConnectOptions::from_str(url)?;
        let pool = match backend {
            Backend::Sqlite => {
                AnyPoolOptions::new()
                    .max_connections(8)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // Per connection, as SqliteConnectOptions would set them (the `Any`
                            // driver only takes a URL). Retention and deletion must really remove
                            // content (secure_delete); the CLI writes while the server runs, so
                            // wait rather than fail (busy_timeout).
                            conn.execute(
                                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
                                 PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON;
                                 PRAGMA busy_timeout = 10000;",
                            )
                            .await?;
                            Ok(())
                        })
                    })
                    .connect_with(opts)
                    .await?
            }
            Backend::Postgres => {
                let statement_ms = timeouts.statement.map_or(0, |t| t.as_millis().max(1));
                let set = format!(
                    "SET statement_timeout = {statement_ms}; SET application_name = '{}'",
                    safe_application_name(application_name)
                );
                AnyPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(timeouts.acquire)
                    .after_connect(move |conn, _| {
                        let set = set.clone();
                        Box::pin(async move {
                            conn.execute(set.as_str()).await?;
                            Ok(())
                        })
                    })
                    .connect_with(opts)
                    .await?
            }
        };
        match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations").run(&pool).await?,
            Backend::Postgres => {
                // A migration may rewrite a large table: it runs on a connection of its own without
                // the interactive statement limit, which is closed after.
                let mut conn = pool.acquire().await?;
                conn.execute("SET statement_timeout = 0").await?;
                sqlx::migrate!("./migrations/postgres")
                    .run(&mut *conn)
                    .await?;
                conn.close().await?;
            }
        }
        Ok(Store {
            pool,
            backend,
            caps: AccountCaps::default(),
        })
    }

    /// This handle with other per-account caps on the queues' live leases.
    pub fn with_account_caps(mut self, caps: AccountCaps) -> Store {
        self.caps = caps;
        self
    }

    /// The fair part of a claim on `queue`, with this handle's caps.
    pub(crate) fn fair(&self, queue: &Queue) -> fair::Fair {
        fair::Fair::new(queue, &self.caps, self.backend)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// One trivial query: the database answers (for `GET /healthz`).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Publishes `fingerprint` as the one of key `name` unless one is already published, and
    /// returns the published one: a caller whose own differs holds another key than the
    /// processes before it.
    pub async fn publish_key_fingerprint(
        &self,
        name: &str,
        fingerprint: &str,
        now: i64,
    ) -> Result<String> {
        sqlx::query(
            "INSERT INTO service_keys (name, fingerprint, published_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(fingerprint)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT fingerprint FROM service_keys WHERE name = $1")
                .bind(name)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Publishes `fingerprint` as the one of key `name`, replacing any published before.
    pub async fn replace_key_fingerprint(
        &self,
        name: &str,
        fingerprint: &str,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO service_keys (name, fingerprint, published_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET fingerprint = $2, published_at = $3",
        )
        .bind(name)
        .bind(fingerprint)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The URL of the default database, `mailproof.sqlite` in `data_dir` (created if missing).
pub fn sqlite_url(data_dir: &Path) -> Result<String> {
    let path = std::path::absolute(data_dir.join("mailproof.sqlite")).map_err(|e| {
        StoreError::Config(format!(
            "cannot resolve the data directory {}: {e}",
            data_dir.display()
        ))
    })?;
    let path = path.to_str().ok_or_else(|| {
        StoreError::Config(format!(
            "the data directory {} is not valid UTF-8; choose another data_dir",
            data_dir.display()
        ))
    })?;
    // The driver percent-decodes the path and splits off `?` options.
    let mut encoded = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '%' | '?' | '#' | ' ' => encoded.push_str(&format!("%{:02X}", c as u32)),
            c => encoded.push(c),
        }
    }
    Ok(format!("sqlite://{encoded}?mode=rwc"))
}

/// `url` without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            // Only fails for URLs that cannot have a password, and this one has one.
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

pub(crate) fn json_vec(v: &[String]) -> String {
    serde_json::Value::from(v.to_vec()).to_string()
}

pub(crate) fn parse_json_vec(s: &str) -> Result<Vec<String>> {
    Ok(serde_json::from_str(s)?)
}
