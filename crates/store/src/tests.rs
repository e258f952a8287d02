//! Email and spam tests: creation (with their queue rows, in one transaction), lookup, listing and
//! search, deletion, reprocessing and the automatic requeue of stalled screenshots.

use std::collections::BTreeMap;

use domain::{FilterType, ScreenshotStatus, SpamMethod, Spelled, TestKind, Variant};
use sqlx::Row;

use crate::sql::{like_literal, Query};
use crate::{json_vec, parse_json_vec, Result, Store, StoreError};

/// A client of a new email test and the screenshots it gets.
#[derive(Clone, Debug)]
pub struct NewTestClient {
    pub client_id: String,
    pub variants: Vec<Variant>,
}

#[derive(Clone, Debug)]
pub struct NewTest {
    pub id: String,
    pub account_id: i64,
    pub kind: TestKind,
    pub subject: String,
    pub html: String,
    pub created_at: i64,
    pub reference_id: Option<String>,
    pub customer_id: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub image_blocking: bool,
    pub free_test: bool,
    pub source_url: Option<String>,
    pub clients: Vec<NewTestClient>,
    pub spam_method: Option<SpamMethod>,
    pub seed_key: Option<String>,
    /// The `From` the svc method sends with; `None` for the service's own address. Nothing else of
    /// a spam request is kept (the caller's SMTP credentials are used at creation and forgotten).
    pub spam_from_address: Option<String>,
    /// Spam filter profiles `(client, type)` whose rows start empty.
    pub spam_filters: Vec<(String, FilterType)>,
    pub reprocesses: i64,
    /// `(limit, month)` when this test counts against a per-customer monthly limit.
    pub monthly_limit: Option<(i64, String)>,
    /// Where to POST the completion summary; `None` falls back to the account's default.
    pub callback_url: Option<String>,
    /// Whether the message had a text/plain part; `None` when only HTML was submitted.
    pub text_part: Option<bool>,
    /// The message's `From` (mail to the auto-inbox); `None` for tests made through the API.
    pub sender: Option<String>,
}

#[derive(Clone, Debug)]
pub struct TestRow {
    pub id: String,
    pub account_id: i64,
    pub kind: TestKind,
    pub subject: String,
    pub created_at: i64,
    pub reference_id: Option<String>,
    pub customer_id: Option<String>,
    pub image_blocking: bool,
    pub free_test: bool,
    pub spam_method: Option<SpamMethod>,
    pub seed_key: Option<String>,
    pub reprocesses_left: i64,
    pub purged_at: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct ClientRow {
    pub client_id: String,
    pub variants: Vec<Variant>,
    pub status: ScreenshotStatus,
    pub submitted_at: i64,
    pub processing_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub attempts: i64,
    pub bounce_code: Option<String>,
    pub bounce_message: Option<String>,
    pub engine: Option<String>,
    pub rule_set: Option<String>,
    /// Per screenshot variant that is done, what its page said when drawn (in the order of
    /// `variants`).
    pub shots: Vec<(Variant, ShotFacts)>,
}

/// What one screenshot's page said when it was drawn, beyond the picture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShotFacts {
    /// The images and stylesheets it could not load.
    pub failed: Vec<domain::FailedResource>,
    /// The email's laid-out width in CSS px when it was wider than the client's window: the
    /// picture is cut at the window's edge.
    pub overflow_width: Option<u32>,
    /// The rule set and the behaviours that changed this screenshot (`ClientRow::rule_set` is the
    /// default screenshot's).
    pub rule_set: Option<String>,
}

impl ClientRow {
    /// Every failed resource of every variant, once per address (the same image fails in each).
    pub fn failed_once(&self) -> Vec<&domain::FailedResource> {
        let mut seen = std::collections::HashSet::new();
        self.shots
            .iter()
            .flat_map(|(_, shot)| &shot.failed)
            .filter(|f| seen.insert((f.url.as_str(), f.kind)))
            .collect()
    }

    /// What `variant`'s screenshot said, once it is done.
    pub fn shot(&self, variant: Variant) -> Option<&ShotFacts> {
        self.shots
            .iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, s)| s)
    }
}

#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub kind: Option<TestKind>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub subject: Option<String>,
    /// Lower-cased header name -> value; all must match.
    pub headers: Vec<(String, String)>,
    pub customer_id: Option<String>,
    pub reference_id: Option<String>,
    /// Tests whose subject starts with one of these (any case) are left out: the tests the web
    /// interface makes for itself, such as a click map's.
    pub hide_subject_prefixes: Vec<String>,
    pub limit: i64,
    pub offset: i64,
}

#[derive(Clone, Debug)]
pub struct ListedTest {
    pub id: String,
    pub created_at: i64,
    pub kind: TestKind,
    pub headers: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ReprocessOutcome {
    Queued { remaining: i64 },
    Refused { remaining: i64, reason: String },
}

fn test_from_row(row: &sqlx::any::AnyRow) -> Result<TestRow> {
    let kind: String = row.try_get("kind")?;
    let method: Option<String> = row.try_get("spam_method")?;
    Ok(TestRow {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        kind: TestKind::parse_known(&kind)?,
        subject: row.try_get("subject")?,
        created_at: row.try_get("created_at")?,
        reference_id: row.try_get("reference_id")?,
        customer_id: row.try_get("customer_id")?,
        image_blocking: row.try_get::<i64, _>("image_blocking")? != 0,
        free_test: row.try_get::<i64, _>("free_test")? != 0,
        spam_method: method
            .map(|m| {
                m.parse()
                    .map_err(|()| StoreError::Corrupt(format!("spam method {m:?}")))
            })
            .transpose()?,
        seed_key: row.try_get("seed_key")?,
        reprocesses_left: row.try_get("reprocesses_left")?,
        purged_at: row.try_get("purged_at")?,
    })
}

fn client_from_row(row: &sqlx::any::AnyRow) -> Result<ClientRow> {
    let status: String = row.try_get("status")?;
    let variants: String = row.try_get("variants")?;
    let variants = parse_json_vec(&variants)?
        .iter()
        .map(|v| Ok(Variant::parse_known(v)?))
        .collect::<Result<Vec<_>>>()?;
    Ok(ClientRow {
        client_id: row.try_get("client_id")?,
        variants,
        status: ScreenshotStatus::parse_known(&status)?,
        submitted_at: row.try_get("submitted_at")?,
        processing_at: row.try_get("processing_at")?,
        completed_at: row.try_get("completed_at")?,
        attempts: row.try_get("attempts")?,
        bounce_code: row.try_get("bounce_code")?,
        bounce_message: row.try_get("bounce_message")?,
        engine: row.try_get("engine")?,
        rule_set: row.try_get("rule_set")?,
        shots: Vec::new(),
    })
}

impl Store {
    /// Writes a test with its content, headers, client rows, render jobs, empty spam rows and seed
    /// key binding in one transaction: either all of it exists afterwards or none of it.
    pub async fn create_test(&self, t: &NewTest) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        // Count first, then check: the upsert is the transaction's first statement, so SQLite takes
        // the write lock at once and two concurrent creations cannot both see the last free slot.
        if let (Some((limit, month)), Some(customer)) = (&t.monthly_limit, &t.customer_id) {
            let used: i64 = sqlx::query_scalar(
                "INSERT INTO monthly_usage (account_id, customer_id, month, tests) VALUES ($1, $2, $3, 1)
                 ON CONFLICT (account_id, customer_id, month) DO UPDATE SET tests = monthly_usage.tests + 1
                 RETURNING tests",
            )
            .bind(t.account_id)
            .bind(customer)
            .bind(month)
            .fetch_one(&mut *tx)
            .await?;
            if used > *limit {
                tx.rollback().await?;
                return Err(StoreError::TestLimitReached {
                    customer_id: customer.clone(),
                    limit: *limit,
                });
            }
        }
        sqlx::query(
            "INSERT INTO tests (id, account_id, kind, subject, created_at, reference_id, customer_id,
                image_blocking, free_test, source_url, spam_method, seed_key, spam_from_address,
                reprocesses_left, callback_url, sender)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(&t.id)
        .bind(t.account_id)
        .bind(t.kind.as_str())
        .bind(&t.subject)
        .bind(t.created_at)
        .bind(&t.reference_id)
        .bind(&t.customer_id)
        .bind(i64::from(t.image_blocking))
        .bind(i64::from(t.free_test))
        .bind(&t.source_url)
        .bind(t.spam_method.map(|m| m.as_str()))
        .bind(&t.seed_key)
        .bind(&t.spam_from_address)
        .bind(t.reprocesses)
        .bind(&t.callback_url)
        .bind(&t.sender)
        .execute(&mut *tx)
        .await?;
        if t.kind == TestKind::Email {
            self.join_versions(&mut tx, t.account_id, &t.id, &t.subject, &t.html)
                .await?;
        }
        sqlx::query("INSERT INTO test_content (test_id, html, text_part) VALUES ($1, $2, $3)")
            .bind(&t.id)
            .bind(&t.html)
            .bind(t.text_part.map(i64::from))
            .execute(&mut *tx)
            .await?;
        for (name, value) in &t.headers {
            sqlx::query(
                "INSERT INTO test_headers (test_id, name, name_lower, value) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (test_id, name_lower) DO UPDATE SET name = excluded.name,
                    value = excluded.value",
            )
            .bind(&t.id)
            .bind(name)
            .bind(name.to_ascii_lowercase())
            .bind(value)
            .execute(&mut *tx)
            .await?;
        }
        for (pos, c) in t.clients.iter().enumerate() {
            let variants: Vec<String> = c.variants.iter().map(|v| v.as_str().to_string()).collect();
            sqlx::query(
                "INSERT INTO test_clients (test_id, client_id, position, variants, status, submitted_at)
                 VALUES ($1, $2, $3, $4, 'Pending', $5)",
            )
            .bind(&t.id)
            .bind(&c.client_id)
            .bind(pos as i64)
            .bind(json_vec(&variants))
            .bind(t.created_at)
            .execute(&mut *tx)
            .await?;
            for v in &c.variants {
                sqlx::query(
                    "INSERT INTO render_jobs (test_id, client_id, variant, state, not_before)
                     VALUES ($1, $2, $3, 'queued', $4)",
                )
                .bind(&t.id)
                .bind(&c.client_id)
                .bind(v.as_str())
                .bind(t.created_at)
                .execute(&mut *tx)
                .await?;
            }
        }
        for (pos, (client, kind)) in t.spam_filters.iter().enumerate() {
            sqlx::query(
                "INSERT INTO spam_results (test_id, client, position, kind) VALUES ($1, $2, $3, $4)",
            )
            .bind(&t.id)
            .bind(client)
            .bind(pos as i64)
            .bind(kind.as_str())
            .execute(&mut *tx)
            .await?;
        }
        if let Some(key) = &t.seed_key {
            sqlx::query(
                "INSERT INTO seed_keys (key, account_id, test_id, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (key) DO UPDATE SET test_id = excluded.test_id",
            )
            .bind(key)
            .bind(t.account_id)
            .bind(&t.id)
            .bind(t.created_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The test if it exists and belongs to `account_id`; another account's test is `None`, exactly
    /// as a missing one, so that ids reveal nothing across tenants.
    pub async fn test(&self, account_id: i64, id: &str) -> Result<Option<TestRow>> {
        let row = sqlx::query("SELECT * FROM tests WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(test_from_row).transpose()
    }

    /// Lookup by id alone, for workers that act on behalf of whichever account owns the test.
    pub async fn test_any_account(&self, id: &str) -> Result<Option<TestRow>> {
        let row = sqlx::query("SELECT * FROM tests WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(test_from_row).transpose()
    }

    /// Who the test's email is from, as an inbox row names it: the message's `From`, else the
    /// `from_address` its spam part was given.
    pub async fn test_sender(&self, test_id: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT COALESCE(sender, spam_from_address) FROM tests WHERE id = $1",
        )
        .bind(test_id)
        .fetch_optional(&self.pool)
        .await?
        .flatten())
    }

    pub async fn test_content(&self, test_id: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT html FROM test_content WHERE test_id = $1")
                .bind(test_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Whether the test's message had a text/plain part (`None`: unknown, or content removed).
    pub async fn test_text_part(&self, test_id: &str) -> Result<Option<bool>> {
        // A 0/1 integer: the `Any` driver cannot decode SQLite's integers as `bool`.
        let found: Option<Option<i64>> =
            sqlx::query_scalar("SELECT text_part FROM test_content WHERE test_id = $1")
                .bind(test_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.flatten().map(|v| v != 0))
    }

    pub async fn test_headers(&self, test_id: &str) -> Result<BTreeMap<String, String>> {
        let rows =
            sqlx::query("SELECT name, value FROM test_headers WHERE test_id = $1 ORDER BY name")
                .bind(test_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("name")?, r.try_get("value")?)))
            .collect()
    }

    pub async fn test_clients(&self, test_id: &str) -> Result<Vec<ClientRow>> {
        let rows = sqlx::query("SELECT * FROM test_clients WHERE test_id = $1 ORDER BY position")
            .bind(test_id)
            .fetch_all(&self.pool)
            .await?;
        let mut clients = rows
            .iter()
            .map(client_from_row)
            .collect::<Result<Vec<_>>>()?;
        let shots = sqlx::query(
            "SELECT client_id, variant, failed_resources, overflow_width, rule_set FROM render_jobs
             WHERE test_id = $1 AND state = 'done' AND failed_resources IS NOT NULL",
        )
        .bind(test_id)
        .fetch_all(&self.pool)
        .await?;
        for row in &shots {
            let client: String = row.try_get("client_id")?;
            let variant = Variant::parse_known(&row.try_get::<String, _>("variant")?)?;
            let facts = ShotFacts {
                failed: serde_json::from_str(&row.try_get::<String, _>("failed_resources")?)?,
                overflow_width: row
                    .try_get::<Option<i64>, _>("overflow_width")?
                    .and_then(|w| u32::try_from(w).ok()),
                rule_set: row.try_get("rule_set")?,
            };
            if let Some(c) = clients.iter_mut().find(|c| c.client_id == client) {
                c.shots.push((variant, facts));
            }
        }
        for c in &mut clients {
            let order = c.variants.clone();
            c.shots
                .sort_by_key(|(v, _)| order.iter().position(|o| o == v).unwrap_or(usize::MAX));
        }
        Ok(clients)
    }

    /// Deletes a test and everything hanging off it. Returns false if it was not the account's.
    pub async fn delete_test(&self, account_id: i64, id: &str) -> Result<bool> {
        let res = sqlx::query("DELETE FROM tests WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .execute(&self.pool)
            .await?;
        Ok(res.rows_affected() > 0)
    }

    /// Newest first; `filter.limit`/`offset` page through the matches.
    pub async fn list_tests(
        &self,
        account_id: i64,
        filter: &ListFilter,
    ) -> Result<Vec<ListedTest>> {
        let mut q =
            Query::new("SELECT t.id, t.created_at, t.kind FROM tests t WHERE t.account_id = ");
        q.bind(account_id);
        if let Some(kind) = filter.kind {
            q.push(" AND t.kind = ").bind(kind.as_str());
        }
        if let Some(from) = filter.from {
            q.push(" AND t.created_at >= ").bind(from);
        }
        if let Some(to) = filter.to {
            q.push(" AND t.created_at <= ").bind(to);
        }
        if let Some(s) = &filter.subject {
            // An exact substring, case-insensitive: the caller's text with LIKE's wildcards
            // escaped.
            q.push(" AND lower(t.subject) LIKE '%' || lower(")
                .bind(like_literal(s))
                .push(") || '%' ESCAPE '\\'");
        }
        for prefix in &filter.hide_subject_prefixes {
            q.push(" AND lower(t.subject) NOT LIKE lower(")
                .bind(like_literal(prefix))
                .push(") || '%' ESCAPE '\\'");
        }
        if let Some(c) = &filter.customer_id {
            q.push(" AND t.customer_id = ").bind(c.as_str());
        }
        if let Some(r) = &filter.reference_id {
            q.push(" AND t.reference_id = ").bind(r.as_str());
        }
        for (name, value) in &filter.headers {
            q.push(" AND EXISTS (SELECT 1 FROM test_headers h WHERE h.test_id = t.id AND h.name_lower = ")
                .bind(name.to_ascii_lowercase())
                .push(" AND h.value = ")
                .bind(value.as_str())
                .push(")");
        }
        q.push(&format!(
            " ORDER BY t.created_at DESC, t.{} DESC LIMIT ",
            self.backend.insertion_order()
        ))
        .bind(filter.limit)
        .push(" OFFSET ")
        .bind(filter.offset);
        let rows = q.build().fetch_all(&self.pool).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let id: String = r.try_get("id")?;
            let kind: String = r.try_get("kind")?;
            out.push(ListedTest {
                headers: self.test_headers(&id).await?,
                created_at: r.try_get("created_at")?,
                kind: TestKind::parse_known(&kind)?,
                id,
            });
        }
        Ok(out)
    }

    /// Requeues the screenshots of a test that have been Processing since before `stale_before`
    /// (spec §3: more than three minutes). Returns how many clients were requeued.
    pub async fn requeue_stale(&self, test_id: &str, stale_before: i64, now: i64) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE render_jobs SET state = 'queued', lease_owner = NULL, lease_expires = NULL,
                not_before = $1
             WHERE test_id = $2 AND state = 'leased' AND client_id IN (
                SELECT client_id FROM test_clients
                WHERE test_id = $3 AND status = 'Processing' AND processing_at < $4)",
        )
        .bind(now)
        .bind(test_id)
        .bind(test_id)
        .bind(stale_before)
        .execute(&mut *tx)
        .await?;
        let res = sqlx::query(
            "UPDATE test_clients SET status = 'Pending', processing_at = NULL
             WHERE test_id = $1 AND status = 'Processing' AND processing_at < $2",
        )
        .bind(test_id)
        .bind(stale_before)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(res.rows_affected())
    }

    /// Queues a new rendering of each named client, spending one reprocess each (a client named
    /// more than once counts once). A bounced client may be reprocessed too: the spec's "cannot be
    /// retried" is about automatic retries, and a bounce the service caused (an engine or storage
    /// fault) must not be final. Clients not in the test and an exhausted quota are refused with a
    /// reason.
    pub async fn reprocess(
        &self,
        test_id: &str,
        clients: &[String],
        now: i64,
    ) -> Result<Vec<(String, ReprocessOutcome)>> {
        let mut tx = self.pool.begin().await?;
        // A write first, so the transaction holds SQLite's write lock from its start.
        let mut remaining: i64 = sqlx::query_scalar(
            "UPDATE tests SET reprocesses_left = reprocesses_left WHERE id = $1 RETURNING reprocesses_left",
        )
                .bind(test_id)
                .fetch_one(&mut *tx)
                .await?;
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for client in clients {
            // A client named twice is one reprocess: queued once, paid for once.
            if !seen.insert(client.as_str()) {
                continue;
            }
            let status: Option<String> = sqlx::query_scalar(
                "SELECT status FROM test_clients WHERE test_id = $1 AND client_id = $2",
            )
            .bind(test_id)
            .bind(client)
            .fetch_optional(&mut *tx)
            .await?;
            let outcome = match status.as_deref() {
                None => ReprocessOutcome::Refused {
                    remaining,
                    reason: format!("client {client:?} is not in this test"),
                },
                Some(_) if remaining <= 0 => ReprocessOutcome::Refused {
                    remaining,
                    reason: "no reprocesses remain for this test".to_string(),
                },
                Some(_) => {
                    remaining -= 1;
                    sqlx::query(
                        "UPDATE render_jobs SET state = 'queued', attempts = 0, lease_owner = NULL,
                            lease_expires = NULL, not_before = $1, last_error = NULL,
                            failed_resources = NULL, overflow_width = NULL, rule_set = NULL
                         WHERE test_id = $2 AND client_id = $3",
                    )
                    .bind(now)
                    .bind(test_id)
                    .bind(client)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "UPDATE test_clients SET status = 'Pending', submitted_at = $1,
                            processing_at = NULL, completed_at = NULL, attempts = 0,
                            bounce_code = NULL, bounce_message = NULL
                         WHERE test_id = $2 AND client_id = $3",
                    )
                    .bind(now)
                    .bind(test_id)
                    .bind(client)
                    .execute(&mut *tx)
                    .await?;
                    ReprocessOutcome::Queued { remaining }
                }
            };
            out.push((client.clone(), outcome));
        }
        sqlx::query("UPDATE tests SET reprocesses_left = $1 WHERE id = $2")
            .bind(remaining)
            .bind(test_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(out)
    }
}
