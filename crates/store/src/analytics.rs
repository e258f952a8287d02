//! Analytics campaigns and their tracking hits (issue 22). Every read and change of a campaign is
//! scoped to its account; only recording a hit looks a campaign up by guid alone.

use ::analytics::report::{
    self, CampaignReport, ClientOpens, DeviceOpens, LinkClicks, MppBasis, Opens, Period,
    SourceOpens, Tally, Thresholds, Timing, TimingHit,
};
use ::analytics::{Client, Device, HitKind, Source};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::sql::{like_literal, Query};
use crate::{json_vec, parse_json_vec, ListFilter, Result, Store, StoreError};

/// Retention of hits (spec §8), counted from the campaign's end: removes the hits of campaigns
/// that ended before `cutoff`, inside the retention pass's transaction, and returns how many.
/// The campaign stays, as a test's metadata does; reports are computed from hits, so they
/// follow. A campaign still in test mode has not ended, so its test hits stay.
pub(crate) async fn purge_ended_campaign_hits(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    cutoff: i64,
) -> Result<u64> {
    let removed = sqlx::query(
        "DELETE FROM analytics_hits WHERE guid IN
            (SELECT guid FROM analytics_campaigns WHERE expires_at < $1)",
    )
    .bind(cutoff)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    sqlx::query("UPDATE analytics_campaigns SET stored_hits = 0 WHERE expires_at < $1")
        .bind(cutoff)
        .execute(&mut **tx)
        .await?;
    Ok(removed)
}

/// A campaign as created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCampaign {
    pub guid: String,
    pub account_id: i64,
    pub name: String,
    pub customer_id: Option<String>,
    pub total_subscribers: i64,
    pub merge_tag: Option<String>,
    pub read_threshold: i64,
    pub skim_threshold: i64,
    pub delete_threshold: i64,
    pub google_analytics: bool,
    pub click_html: Option<String>,
    pub click_links: Vec<String>,
    pub created_at: i64,
}

/// A campaign as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CampaignRow {
    pub campaign: NewCampaign,
    pub activated_at: Option<i64>,
    pub expires_at: Option<i64>,
}

/// The fields an update may change; `None` keeps the stored value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CampaignUpdate {
    pub total_subscribers: Option<i64>,
    pub read_threshold: Option<i64>,
    pub skim_threshold: Option<i64>,
    pub delete_threshold: Option<i64>,
}

/// One answered tracking hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewHit {
    pub guid: String,
    pub at: i64,
    /// Stored as its name (`open`, `print`, `forward`, `read`, `dark`, `click`, `hold`).
    pub kind: HitKind,
    /// Seconds of a reading step or of a hold, the link number of a click, else 0.
    pub number: i64,
    pub merge_value: Option<String>,
    /// Who fetched it (`analytics::classify`); also written to the 0010 `agent_class` column,
    /// which older rows alone fill differently (`none` where `source` says `unknown`).
    pub source: Source,
    pub client: Client,
    pub device: Device,
    /// Counted as Apple MPP on the bare user agent alone (no relay ranges configured).
    pub mpp_by_agent_only: bool,
}

/// A recorded hit, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HitRow {
    pub hit: NewHit,
    /// The stored `agent_class` column, as the export shows it.
    pub agent_class: String,
    pub test: bool,
}

const COLUMNS: &str = "guid, account_id, name, customer_id, total_subscribers, merge_tag,
    read_threshold, skim_threshold, delete_threshold, google_analytics, click_html, click_links,
    created_at, activated_at, expires_at";

fn campaign_row(r: &AnyRow) -> Result<CampaignRow> {
    let links: String = r.try_get("click_links")?;
    Ok(CampaignRow {
        campaign: NewCampaign {
            guid: r.try_get("guid")?,
            account_id: r.try_get("account_id")?,
            name: r.try_get("name")?,
            customer_id: r.try_get("customer_id")?,
            total_subscribers: r.try_get("total_subscribers")?,
            merge_tag: r.try_get("merge_tag")?,
            read_threshold: r.try_get("read_threshold")?,
            skim_threshold: r.try_get("skim_threshold")?,
            delete_threshold: r.try_get("delete_threshold")?,
            google_analytics: r.try_get::<i64, _>("google_analytics")? != 0,
            click_html: r.try_get("click_html")?,
            click_links: parse_json_vec(&links)?,
            created_at: r.try_get("created_at")?,
        },
        activated_at: r.try_get("activated_at")?,
        expires_at: r.try_get("expires_at")?,
    })
}

/// The columns of a hit row, in the order [`push_hit_values`] binds them.
const HIT_COLUMNS: &str = "guid, at, kind, number, merge_value, agent_class, test, source, client,
    device, mpp_by_agent_only";

/// Rows bound per multi-row insert: 11 parameters each stays far below SQLite's 32,766 and
/// PostgreSQL's 65,535.
const HITS_PER_INSERT: usize = 1_000;

fn push_hit_values(q: &mut Query, hit: &NewHit, test: bool) {
    q.push("(")
        .bind(hit.guid.as_str())
        .push(", ")
        .bind(hit.at)
        .push(", ")
        .bind(hit.kind.as_str())
        .push(", ")
        .bind(hit.number)
        .push(", ")
        .bind(hit.merge_value.clone())
        .push(", ")
        .bind(hit.source.as_str())
        .push(", ")
        .bind(i64::from(test))
        .push(", ")
        .bind(hit.source.as_str())
        .push(", ")
        .bind(hit.client.as_str())
        .push(", ")
        .bind(hit.device.as_str())
        .push(", ")
        .bind(i64::from(hit.mpp_by_agent_only))
        .push(")");
}

/// Inserts `rows` (hit, test flag) with one multi-row statement per [`HITS_PER_INSERT`].
async fn insert_hits(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    rows: &[(&NewHit, bool)],
) -> Result<()> {
    for chunk in rows.chunks(HITS_PER_INSERT) {
        let mut q = Query::new(&format!(
            "INSERT INTO analytics_hits ({HIT_COLUMNS}) VALUES "
        ));
        for (i, (hit, test)) in chunk.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            push_hit_values(&mut q, hit, *test);
        }
        q.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// How many hits may be stored, so that strangers who know a campaign's tracking URLs cannot
/// grow the database without bound; 0 is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HitBudgets {
    /// Hits one campaign may hold (test and real hits together).
    pub per_campaign: i64,
    /// Hits all campaigns of one account may hold together. Only the batch's own campaigns are
    /// locked, so on PostgreSQL batches of the account's other campaigns committing at the same
    /// moment may pass it by at most their size (writers − 1 batches).
    pub per_account: i64,
}

/// What writing a batch of hits did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HitsWritten {
    /// Rows written.
    pub recorded: usize,
    /// Hits of campaigns deleted before the batch was written (nothing to record them against).
    pub orphaned: usize,
    /// Hits refused because their campaign holds [`HitBudgets::per_campaign`] hits.
    pub over_campaign_budget: usize,
    /// Hits refused because their account's campaigns hold [`HitBudgets::per_account`] hits.
    pub over_account_budget: usize,
}

/// A campaign of a batch, as its hits are walked in order.
struct Target {
    account_id: i64,
    test: bool,
    /// Hits stored before the batch plus those of the batch taken so far.
    stored: i64,
    added: i64,
}

/// Whether `used` leaves room for one more under `budget` (0: no limit).
fn has_room(used: i64, budget: i64) -> bool {
    budget <= 0 || used < budget
}

impl Store {
    pub async fn create_campaign(&self, c: &NewCampaign) -> Result<()> {
        sqlx::query(&format!(
            "INSERT INTO analytics_campaigns ({COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL, NULL)"
        ))
        .bind(&c.guid)
        .bind(c.account_id)
        .bind(&c.name)
        .bind(&c.customer_id)
        .bind(c.total_subscribers)
        .bind(&c.merge_tag)
        .bind(c.read_threshold)
        .bind(c.skim_threshold)
        .bind(c.delete_threshold)
        .bind(i64::from(c.google_analytics))
        .bind(&c.click_html)
        .bind(json_vec(&c.click_links))
        .bind(c.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The account's campaign `guid`; `None` for another account's.
    pub async fn campaign(&self, account_id: i64, guid: &str) -> Result<Option<CampaignRow>> {
        self.campaign_of(guid, Some(account_id)).await
    }

    /// Any account's campaign `guid`: for recording a hit, which carries no credentials.
    pub async fn campaign_for_hit(&self, guid: &str) -> Result<Option<CampaignRow>> {
        self.campaign_of(guid, None).await
    }

    async fn campaign_of(
        &self,
        guid: &str,
        account_id: Option<i64>,
    ) -> Result<Option<CampaignRow>> {
        let mut q = Query::new(&format!(
            "SELECT {COLUMNS} FROM analytics_campaigns WHERE guid = "
        ));
        q.bind(guid);
        if let Some(account_id) = account_id {
            q.push(" AND account_id = ").bind(account_id);
        }
        q.build()
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(campaign_row)
            .transpose()
    }

    /// The account's campaigns by the §4.5 list rules (`from`, `to`, `subject` on the name,
    /// `customer_id`, paging), newest first. The filter's other fields do not apply to campaigns.
    pub async fn list_campaigns(
        &self,
        account_id: i64,
        filter: &ListFilter,
    ) -> Result<Vec<CampaignRow>> {
        let mut q = Query::new(&format!(
            "SELECT {COLUMNS} FROM analytics_campaigns WHERE account_id = "
        ));
        q.bind(account_id);
        if let Some(from) = filter.from {
            q.push(" AND created_at >= ").bind(from);
        }
        if let Some(to) = filter.to {
            q.push(" AND created_at <= ").bind(to);
        }
        if let Some(s) = &filter.subject {
            q.push(" AND lower(name) LIKE '%' || lower(")
                .bind(like_literal(s))
                .push(") || '%' ESCAPE '\\'");
        }
        if let Some(c) = &filter.customer_id {
            q.push(" AND customer_id = ").bind(c.as_str());
        }
        q.push(&format!(
            " ORDER BY created_at DESC, {} DESC LIMIT ",
            self.backend.insertion_order()
        ))
        .bind(filter.limit)
        .push(" OFFSET ")
        .bind(filter.offset);
        q.build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(campaign_row)
            .collect()
    }

    /// Activates a campaign in test mode until `expires_at` and removes its test hits, in one
    /// transaction. `false` when it was not in test mode (already active, or not the account's).
    pub async fn activate_campaign(
        &self,
        account_id: i64,
        guid: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE analytics_campaigns SET activated_at = $1, expires_at = $2, stored_hits = 0
             WHERE guid = $3 AND account_id = $4 AND activated_at IS NULL",
        )
        .bind(now)
        .bind(expires_at)
        .bind(guid)
        .bind(account_id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if done {
            sqlx::query("DELETE FROM analytics_hits WHERE guid = $1")
                .bind(guid)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(done)
    }

    /// Sets an active campaign's end. `false` when it is not the account's or not active.
    pub async fn set_campaign_expiration(
        &self,
        account_id: i64,
        guid: &str,
        expires_at: i64,
    ) -> Result<bool> {
        Ok(sqlx::query(
            "UPDATE analytics_campaigns SET expires_at = $1
             WHERE guid = $2 AND account_id = $3 AND activated_at IS NOT NULL",
        )
        .bind(expires_at)
        .bind(guid)
        .bind(account_id)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    /// Removes the test hits of a campaign still in test mode; `None` when it is not the
    /// account's or already active, else how many hits were removed.
    pub async fn clear_campaign_data(&self, account_id: i64, guid: &str) -> Result<Option<u64>> {
        let mut tx = self.pool.begin().await?;
        let in_test = sqlx::query(&format!(
            "SELECT guid FROM analytics_campaigns
             WHERE guid = $1 AND account_id = $2 AND activated_at IS NULL {}",
            self.backend.lock_row()
        ))
        .bind(guid)
        .bind(account_id)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if !in_test {
            return Ok(None);
        }
        let n = sqlx::query("DELETE FROM analytics_hits WHERE guid = $1")
            .bind(guid)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE analytics_campaigns SET stored_hits = 0 WHERE guid = $1")
            .bind(guid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(n))
    }

    /// Changes the given fields; `false` when the campaign is not the account's.
    pub async fn update_campaign(
        &self,
        account_id: i64,
        guid: &str,
        u: &CampaignUpdate,
    ) -> Result<bool> {
        let mut q = Query::new("UPDATE analytics_campaigns SET guid = guid");
        for (column, value) in [
            ("total_subscribers", u.total_subscribers),
            ("read_threshold", u.read_threshold),
            ("skim_threshold", u.skim_threshold),
            ("delete_threshold", u.delete_threshold),
        ] {
            if let Some(v) = value {
                q.push(&format!(", {column} = ")).bind(v);
            }
        }
        q.push(" WHERE guid = ")
            .bind(guid)
            .push(" AND account_id = ")
            .bind(account_id);
        Ok(q.build().execute(&self.pool).await?.rows_affected() == 1)
    }

    /// Deletes a campaign and its hits; `false` when it is not the account's.
    pub async fn delete_campaign(&self, account_id: i64, guid: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let owned = sqlx::query(&format!(
            "SELECT guid FROM analytics_campaigns WHERE guid = $1 AND account_id = $2 {}",
            self.backend.lock_row()
        ))
        .bind(guid)
        .bind(account_id)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if !owned {
            return Ok(false);
        }
        // Hits first, so the delete does not depend on the cascade being declared in both schemas.
        sqlx::query("DELETE FROM analytics_hits WHERE guid = $1")
            .bind(guid)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM analytics_campaigns WHERE guid = $1")
            .bind(guid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records one hit, committed before this returns, with an explicit test flag and no budget
    /// (tests and tools; the service writes through [`Store::record_hits`]).
    pub async fn record_hit(&self, hit: &NewHit, test: bool) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        insert_hits(&mut tx, &[(hit, test)]).await?;
        add_stored(&mut tx, &hit.guid, 1).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records a batch of hits in one transaction (group commit: the hit path answers each hit
    /// only after this returns). Whether a hit is test data is decided here, from the campaign's
    /// state under the transaction, not from what the caller read earlier. Hits never change a
    /// campaign's mode: anyone who has seen a tracking URL can send them, so only the owner
    /// activates (and so clears test hits). Hits are taken in order until their campaign or its
    /// account holds its budget; the rest are refused and counted. Hits of a campaign deleted
    /// meanwhile are left out.
    pub async fn record_hits(&self, hits: &[NewHit], budgets: HitBudgets) -> Result<HitsWritten> {
        let mut guids: Vec<&str> = hits.iter().map(|h| h.guid.as_str()).collect();
        guids.sort_unstable();
        guids.dedup();
        if guids.is_empty() {
            return Ok(HitsWritten::default());
        }
        let mut tx = self.pool.begin().await?;
        let (head, tail) = self.backend.read_campaigns_for_hits();
        let mut q = Query::new(head);
        q.bind_list(&guids).push(tail);
        // The batch's campaigns are locked (see `read_campaigns_for_hits`): an activation, a
        // clear or another batch of the same campaign waits for this commit, so no test hit
        // lands in an active campaign and the budgets hold exactly.
        let mut targets = std::collections::BTreeMap::new();
        for r in q.build().fetch_all(&mut *tx).await? {
            let target = Target {
                account_id: r.try_get("account_id")?,
                test: r.try_get::<Option<i64>, _>("activated_at")?.is_none(),
                stored: r.try_get("stored_hits")?,
                added: 0,
            };
            targets.insert(r.try_get::<String, _>("guid")?, target);
        }
        let mut accounts: std::collections::BTreeMap<i64, i64> = std::collections::BTreeMap::new();
        if budgets.per_account > 0 {
            for t in targets.values() {
                if let std::collections::btree_map::Entry::Vacant(e) = accounts.entry(t.account_id)
                {
                    e.insert(
                        sqlx::query_scalar(
                            "SELECT CAST(COALESCE(SUM(stored_hits), 0) AS BIGINT) FROM analytics_campaigns
                             WHERE account_id = $1",
                        )
                        .bind(t.account_id)
                        .fetch_one(&mut *tx)
                        .await?,
                    );
                }
            }
        }
        let mut out = HitsWritten::default();
        let mut rows: Vec<(&NewHit, bool)> = Vec::with_capacity(hits.len());
        for hit in hits {
            let Some(t) = targets.get_mut(&hit.guid) else {
                out.orphaned += 1;
                continue;
            };
            let account = accounts.entry(t.account_id).or_default();
            if !has_room(t.stored + t.added, budgets.per_campaign) {
                out.over_campaign_budget += 1;
            } else if !has_room(*account, budgets.per_account) {
                out.over_account_budget += 1;
            } else {
                t.added += 1;
                *account += 1;
                rows.push((hit, t.test));
            }
        }
        insert_hits(&mut tx, &rows).await?;
        for (guid, t) in &targets {
            if t.added > 0 {
                add_stored(&mut tx, guid, t.added).await?;
            }
        }
        tx.commit().await?;
        out.recorded = rows.len();
        Ok(out)
    }

    /// How many hits a campaign has stored.
    pub async fn campaign_hit_count(&self, guid: &str) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM analytics_hits WHERE guid = $1")
                .bind(guid)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// A campaign's hits in the order they were recorded.
    pub async fn campaign_hits(&self, guid: &str) -> Result<Vec<HitRow>> {
        Ok(self
            .campaign_hits_after(guid, 0, i64::MAX)
            .await?
            .into_iter()
            .map(|(_, h)| h)
            .collect())
    }

    /// At most `limit` of a campaign's hits recorded after the one whose id is `after` (0: from
    /// the first), in order, each with its id: a page of the export, so that a campaign of
    /// millions of hits is never read at once.
    pub async fn campaign_hits_after(
        &self,
        guid: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, HitRow)>> {
        let rows = sqlx::query(
            "SELECT id, guid, at, kind, number, merge_value, agent_class, test, source, client,
                    device, mpp_by_agent_only
             FROM analytics_hits WHERE guid = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .bind(guid)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let row = HitRow {
                    hit: NewHit {
                        guid: r.try_get("guid")?,
                        at: r.try_get("at")?,
                        kind: hit_kind(r)?,
                        number: r.try_get("number")?,
                        merge_value: r.try_get("merge_value")?,
                        source: class(r, "source", Source::parse)?,
                        client: class(r, "client", Client::parse)?,
                        device: class(r, "device", Device::parse)?,
                        mpp_by_agent_only: r.try_get::<i64, _>("mpp_by_agent_only")? != 0,
                    },
                    agent_class: r.try_get("agent_class")?,
                    test: r.try_get::<i64, _>("test")? != 0,
                };
                Ok((r.try_get("id")?, row))
            })
            .collect()
    }
}

/// Counts `n` more hits stored for campaign `guid`.
async fn add_stored(tx: &mut sqlx::Transaction<'_, sqlx::Any>, guid: &str, n: i64) -> Result<()> {
    sqlx::query("UPDATE analytics_campaigns SET stored_hits = stored_hits + $1 WHERE guid = $2")
        .bind(n)
        .bind(guid)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The kind of a hit row, from its `kind` and `number` columns.
fn hit_kind(r: &AnyRow) -> Result<HitKind> {
    let (name, number): (String, i64) = (r.try_get("kind")?, r.try_get("number")?);
    HitKind::from_stored(&name, number).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "analytics_hits.kind {name:?} with number {number} is no hit kind"
        ))
    })
}

/// A stored class column read back; a spelling no class has means the row is corrupt.
fn class<T>(r: &AnyRow, column: &str, parse: fn(&str) -> Option<T>) -> Result<T> {
    let text: String = r.try_get(column)?;
    parse(&text).ok_or_else(|| StoreError::Corrupt(format!("analytics_hits.{column} {text:?}")))
}

/// `source IN (…)` for the sources `keep` selects; the spellings are the classes' own constants.
fn sources_where(keep: fn(Source) -> bool) -> String {
    let list: Vec<String> = Source::ALL
        .iter()
        .filter(|s| keep(**s))
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("source IN ({})", list.join(", "))
}

/// Two columns `<name>_hits`, `<name>_unique` counting the rows where `cond` holds: hits, and
/// recipients by merge value (a row without one is its own recipient).
fn tally_columns(name: &str, cond: &str) -> String {
    format!(
        "COUNT(CASE WHEN {cond} THEN 1 END) AS {name}_hits,
         COUNT(DISTINCT CASE WHEN {cond} THEN merge_value END)
           + COUNT(CASE WHEN {cond} AND merge_value IS NULL THEN 1 END) AS {name}_unique"
    )
}

fn tally(r: &AnyRow, name: &str) -> Result<Tally> {
    Ok(Tally {
        hits: r.try_get(format!("{name}_hits").as_str())?,
        unique: r.try_get(format!("{name}_unique").as_str())?,
    })
}

const HOUR: i64 = 3_600;
const HOURS_PER_DAY: i64 = 24;

impl Store {
    /// The report of the account's campaign `guid` (`None` for another account's): SQL
    /// aggregates over the hits of the campaign's current mode (test hits while in test mode),
    /// with reading time attributed and bucketed by `analytics::report`. `ranges_configured` says
    /// whether Apple's relay ranges are configured in the service now.
    pub async fn campaign_report(
        &self,
        account_id: i64,
        guid: &str,
        ranges_configured: bool,
    ) -> Result<Option<CampaignReport>> {
        match self.campaign(account_id, guid).await? {
            Some(row) => Ok(Some(self.report_of(&row, ranges_configured).await?)),
            None => Ok(None),
        }
    }

    /// The report of a campaign already read (and its ownership checked) by the caller, so the
    /// row is not read twice.
    pub async fn report_of(
        &self,
        row: &CampaignRow,
        ranges_configured: bool,
    ) -> Result<CampaignReport> {
        let c = &row.campaign;
        let guid = c.guid.as_str();
        let test = i64::from(row.activated_at.is_none());
        let reliable = sources_where(Source::is_reliable);
        let machine = sources_where(Source::is_machine);
        let unknown = sources_where(|s| !s.is_reliable() && !s.is_machine());
        let open = "kind = 'open'";

        let totals_sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {},
                    COUNT(CASE WHEN {open} AND mpp_by_agent_only = 1 THEN 1 END) AS by_agent
             FROM analytics_hits WHERE guid = $1 AND test = $2",
            tally_columns("total", open),
            tally_columns("reliable", &format!("{open} AND {reliable}")),
            tally_columns("machine", &format!("{open} AND {machine}")),
            tally_columns("unknown", &format!("{open} AND {unknown}")),
            tally_columns("print", "kind = 'print'"),
            tally_columns("forward", "kind = 'forward'"),
            tally_columns("dark", "kind = 'dark'"),
        );
        let totals = sqlx::query(&totals_sql)
            .bind(guid)
            .bind(test)
            .fetch_one(&self.pool)
            .await?;
        let opens = Opens {
            total: tally(&totals, "total")?,
            reliable: tally(&totals, "reliable")?,
            machine: tally(&totals, "machine")?,
            unknown: tally(&totals, "unknown")?,
        };
        let dark = tally(&totals, "dark")?;

        let by_source = sqlx::query(&format!(
            "SELECT source, {} FROM analytics_hits
             WHERE guid = $1 AND test = $2 AND {open} GROUP BY source",
            tally_columns("opens", "1 = 1"),
        ))
        .bind(guid)
        .bind(test)
        .fetch_all(&self.pool)
        .await?;
        let mut sources: Vec<SourceOpens> = Source::ALL
            .iter()
            .map(|s| SourceOpens {
                source: *s,
                opens: Tally::default(),
            })
            .collect();
        for r in &by_source {
            let source = class(r, "source", Source::parse)?;
            if let Some(slot) = sources.iter_mut().find(|s| s.source == source) {
                slot.opens = tally(r, "opens")?;
            }
        }

        let hours = sqlx::query(&format!(
            "SELECT at / {HOUR} AS hour, COUNT(*) AS opens,
                    COUNT(CASE WHEN {reliable} THEN 1 END) AS reliable,
                    COUNT(CASE WHEN {machine} THEN 1 END) AS machine
             FROM analytics_hits WHERE guid = $1 AND test = $2 AND {open}
             GROUP BY at / {HOUR} ORDER BY hour"
        ))
        .bind(guid)
        .bind(test)
        .fetch_all(&self.pool)
        .await?;
        let mut per_hour = Vec::with_capacity(hours.len());
        for r in &hours {
            per_hour.push(Period {
                start: r.try_get::<i64, _>("hour")? * HOUR,
                opens: r.try_get("opens")?,
                reliable: r.try_get("reliable")?,
                machine: r.try_get("machine")?,
            });
        }
        let mut per_day: Vec<Period> = Vec::new();
        for h in &per_hour {
            let start = h.start.div_euclid(HOUR * HOURS_PER_DAY) * HOUR * HOURS_PER_DAY;
            match per_day.last_mut() {
                Some(d) if d.start == start => {
                    d.opens += h.opens;
                    d.reliable += h.reliable;
                    d.machine += h.machine;
                }
                _ => per_day.push(Period { start, ..*h }),
            }
        }

        let mut clients = Vec::new();
        for r in &self
            .reliable_opens_by(guid, test, "client", &reliable)
            .await?
        {
            clients.push(ClientOpens {
                client: class(r, "class", Client::parse)?,
                opens: r.try_get("opens")?,
            });
        }
        let mut devices = Vec::new();
        for r in &self
            .reliable_opens_by(guid, test, "device", &reliable)
            .await?
        {
            devices.push(DeviceOpens {
                device: class(r, "class", Device::parse)?,
                opens: r.try_get("opens")?,
            });
        }

        let timing_rows = sqlx::query(
            "SELECT merge_value, at, kind, number FROM analytics_hits
             WHERE guid = $1 AND test = $2 AND source = 'direct'
               AND kind IN ('open', 'read', 'hold')",
        )
        .bind(guid)
        .bind(test)
        .fetch_all(&self.pool)
        .await?;
        let mut timing = Vec::with_capacity(timing_rows.len());
        for r in &timing_rows {
            let seconds = u32::try_from(r.try_get::<i64, _>("number")?).unwrap_or(0);
            timing.push(TimingHit {
                merge_value: r.try_get("merge_value")?,
                at: r.try_get("at")?,
                signal: if hit_kind(r)? == HitKind::Open {
                    Timing::Open
                } else {
                    Timing::Seconds(seconds)
                },
            });
        }
        let direct_opens = sources
            .iter()
            .find(|s| s.source == Source::Direct)
            .map_or(0, |s| s.opens.hits);
        let thresholds = Thresholds {
            read: c.read_threshold,
            skim: c.skim_threshold,
            delete: c.delete_threshold,
        };
        let engagement =
            report::engagement(&timing, &thresholds, opens.reliable.hits - direct_opens);

        let click_rows = sqlx::query(&format!(
            "SELECT number, {},
                    COUNT(CASE WHEN {machine} THEN 1 END) AS machine
             FROM analytics_hits WHERE guid = $1 AND test = $2 AND kind = 'click'
             GROUP BY number",
            tally_columns("clicks", &format!("NOT ({machine})")),
        ))
        .bind(guid)
        .bind(test)
        .fetch_all(&self.pool)
        .await?;
        let mut clicks: Vec<LinkClicks> = c
            .click_links
            .iter()
            .zip(1u32..)
            .map(|(url, number)| LinkClicks {
                number,
                url: url.clone(),
                clicks: Tally::default(),
                machine: 0,
            })
            .collect();
        for r in &click_rows {
            let number: i64 = r.try_get("number")?;
            if let Some(link) = clicks.iter_mut().find(|l| i64::from(l.number) == number) {
                link.clicks = tally(r, "clicks")?;
                link.machine = r.try_get("machine")?;
            }
        }

        Ok(CampaignReport {
            guid: c.guid.clone(),
            test_mode: row.activated_at.is_none(),
            total_subscribers: c.total_subscribers,
            thresholds,
            dark_share: report::share(dark.unique, opens.total.unique),
            opens,
            sources,
            per_hour,
            per_day,
            engagement,
            clients,
            devices,
            prints: tally(&totals, "print")?,
            forwards: tally(&totals, "forward")?,
            dark,
            clicks,
            apple_mpp: MppBasis {
                by_agent_only: totals.try_get("by_agent")?,
                ranges_configured,
            },
        })
    }

    /// Reliable opens grouped by one class column (`client` or `device`), most first.
    async fn reliable_opens_by(
        &self,
        guid: &str,
        test: i64,
        column: &str,
        reliable: &str,
    ) -> Result<Vec<AnyRow>> {
        Ok(sqlx::query(&format!(
            "SELECT {column} AS class, COUNT(*) AS opens FROM analytics_hits
             WHERE guid = $1 AND test = $2 AND kind = 'open' AND {reliable}
             GROUP BY {column} ORDER BY opens DESC, class"
        ))
        .bind(guid)
        .bind(test)
        .fetch_all(&self.pool)
        .await?)
    }
}
