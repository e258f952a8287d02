//! mailproof's durable state: accounts, tests and their results, the render queue, inbound mail
//! and screenshot blobs.
//!
//! Invariants:
//! - Handlers and workers speak to storage only through [`Store`] and [`Blobs`]; SQL stays in this
//!   crate, so a PostgreSQL backend can be added behind the same methods.
//! - Whatever the service acknowledges is committed first: a test, its queue rows and its spam rows
//!   are written in one transaction before the API answers; an SMTP message before `250`.
//! - SQLite runs in WAL mode with `synchronous=NORMAL`: a committed transaction survives the process
//!   being killed (it may not survive power loss, which `synchronous=FULL` would add).

mod accounts;
mod blobs;
mod callbacks;
mod checks;
mod inbound;
mod jobs;
mod links;
mod queues;
mod retention;
mod spam;
#[cfg(any(test, feature = "test-s3"))]
pub mod test_s3;
mod tests;
mod web;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

pub use accounts::{Account, NewAccount};
pub use blobs::{
    diff_key, diff_name, parse_diff_name, screenshot_key, BlobError, Blobs, BlobsConfig,
};
pub use callbacks::{CallbackOutcome, CallbackRow, ClaimedCallback};
pub use checks::ContentCheckRow;
pub use inbound::{InboundRow, NewInbound};
pub use jobs::{ClaimedJob, JobOutcome};
pub use links::LinkCheckRow;
pub use queues::QueueStat;
pub use spam::{PendingSend, SpamRow, SpamUpdate};
pub use tests::{
    ClientRow, ListFilter, ListedTest, NewTest, NewTestClient, ReprocessOutcome, TestRow,
};
pub use web::{SessionRow, ShareRow, TestSummary};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the monthly test limit of {limit} for customer {customer_id:?} is reached")]
    TestLimitReached { customer_id: String, limit: i64 },
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The database. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating if needed) `mailproof.sqlite` in `data_dir` and brings its schema up to date.
    pub async fn open(data_dir: &Path) -> Result<Store> {
        let path = data_dir.join("mailproof.sqlite");
        let url = format!("sqlite://{}", path.display());
        let opts = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            // Retention and deletion must really remove content: deleted rows are overwritten
            // instead of lingering in free pages of the file.
            .pragma("secure_delete", "ON")
            // The CLI (`accounts add`) writes while the server runs; wait rather than fail.
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store { pool })
    }

    /// One trivial query: the database answers (for `GET /healthz`).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

pub(crate) fn json_vec(v: &[String]) -> String {
    serde_json::Value::from(v.to_vec()).to_string()
}

pub(crate) fn parse_json_vec(s: &str) -> Result<Vec<String>> {
    Ok(serde_json::from_str(s)?)
}
