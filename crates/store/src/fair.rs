//! Fair queues: every queue claim (render jobs, link checks, content checks, callbacks) picks its
//! row through [`Fair`], so background work is shared between accounts rather than served first
//! come. Among the due rows a claim takes one of the account with the fewest rows under a live
//! lease in that queue, then of the account whose last claim in that queue is oldest (its turn,
//! kept in `queue_turns`), then the queue's own order (oldest first); accounts already holding
//! their cap of live leases are skipped. So one account's many or slow jobs delay another
//! account's by at most one job per worker, and, with a cap below the number of workers, an
//! account's slow jobs never occupy every worker.
//!
//! A claim is one transaction: on PostgreSQL it first takes a lock per queue, so concurrent claims
//! see each other's leases and turns and a cap holds exactly (claims are short; the work is not
//! done under the lock); SQLite's write transactions already run one at a time. The claim's
//! `UPDATE ... RETURNING` comes first, then [`Fair::served`] records the turn.

use sqlx::AnyConnection;

use crate::sql::Query;
use crate::{Backend, Queue, Result};

/// Per queue, how many rows one account may hold under a live lease at once; `None` leaves only
/// the number of workers as the limit (the fair order still applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountCaps {
    pub render: Option<u32>,
    pub link_checks: Option<u32>,
    pub content_checks: Option<u32>,
    pub callbacks: Option<u32>,
}

impl Default for AccountCaps {
    /// Renders are bounded by the render timeout, so the fair order alone keeps another account's
    /// wait to one render; link checks, content checks and callbacks wait on outside hosts that
    /// may never answer, so one account runs one of each at a time.
    fn default() -> AccountCaps {
        AccountCaps {
            render: None,
            link_checks: Some(1),
            content_checks: Some(1),
            callbacks: Some(1),
        }
    }
}

impl AccountCaps {
    /// The cap of the queue named `queue` ([`crate::Queue::name`]).
    pub(crate) fn cap(&self, queue: &str) -> Option<u32> {
        match queue {
            "render" => self.render,
            "link_checks" => self.link_checks,
            "content_checks" => self.content_checks,
            "callbacks" => self.callbacks,
            _ => None,
        }
    }
}

/// The fair part of one claim on `queue`. The claim's inner `SELECT` reads from [`Fair::push_from`]
/// (the queue table as `q`, with its account's live leases and turn beside each row; the claim
/// qualifies its own columns with `q.`), ANDs [`Fair::filter`] into its `WHERE`, starts its
/// `ORDER BY` with [`Fair::order`] and ends with [`Backend::skip_locked`]. The leases are counted once
/// per account in a derived table, not once per candidate row, so a claim stays one pass over the
/// due rows however long the queue.
pub(crate) struct Fair {
    queue: Queue,
    cap: Option<u32>,
    backend: Backend,
}

impl Fair {
    pub(crate) fn new(queue: &Queue, caps: &AccountCaps, backend: Backend) -> Fair {
        Fair {
            queue: *queue,
            cap: caps.cap(queue.name),
            backend,
        }
    }

    /// The claim's `FROM`, binding the claim's time `now`: `q` the queue row, `fl.n` its
    /// account's rows under a lease still live at `now` (NULL: none), `fq.turn` the account's turn
    /// (NULL: never served).
    pub(crate) fn push_from(&self, q: &mut Query, now: i64) {
        let (before, after) = self.sources_around_now();
        q.push(&before).bind(now).push(&after);
    }

    /// The `FROM` text before and after its one placeholder of the claim's time.
    fn sources_around_now(&self) -> (String, String) {
        let table = self.queue.table;
        (
            format!(
                "{table} q JOIN tests fa ON fa.id = q.test_id
                 LEFT JOIN (SELECT lt.account_id AS account_id, COUNT(*) AS n
                            FROM {table} l JOIN tests lt ON lt.id = l.test_id
                            WHERE l.state = 'leased' AND l.lease_expires >= "
            ),
            format!(
                " GROUP BY lt.account_id) fl ON fl.account_id = fa.account_id
                 LEFT JOIN queue_turns fq ON fq.queue = '{}' AND fq.account_id = fa.account_id",
                self.queue.name
            ),
        )
    }

    /// A condition on the candidate row: its account is below its cap.
    pub(crate) fn filter(&self) -> String {
        match self.cap {
            Some(cap) => format!("COALESCE(fl.n, 0) < {cap}"),
            None => "1 = 1".into(),
        }
    }

    /// The leading keys of the claim's `ORDER BY`, ending with a comma: fewest live leases
    /// first, then the account whose turn is oldest.
    pub(crate) fn order(&self) -> &'static str {
        "COALESCE(fl.n, 0), COALESCE(fq.turn, 0), "
    }

    /// Takes the queue's claim lock (PostgreSQL; until the transaction ends). First statement of
    /// the claim's transaction.
    pub(crate) async fn lock(&self, conn: &mut AnyConnection) -> Result<()> {
        if let Some(sql) = self.backend.claim_lock() {
            sqlx::query(sql)
                .bind(self.queue.lock_key)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// Records that the account of `test_id` was just served: its turn becomes the newest.
    pub(crate) async fn served(&self, conn: &mut AnyConnection, test_id: &str) -> Result<()> {
        let queue = self.queue.name;
        sqlx::query(&format!(
            "INSERT INTO queue_turns (queue, account_id, turn)
             SELECT '{queue}', t.account_id,
                    (SELECT COALESCE(MAX(fq.turn), 0) + 1 FROM queue_turns fq WHERE fq.queue = '{queue}')
             FROM tests t WHERE t.id = $1
             ON CONFLICT (queue, account_id) DO UPDATE SET turn = excluded.turn"
        ))
        .bind(test_id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}
