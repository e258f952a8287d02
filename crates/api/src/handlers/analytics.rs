//! Analytics campaigns (issue 22): the calls of the public analytics v5 interface
//! (`createcampaign`, `gettrackingcode`, `getcampaigninfo`, `campaigns`) and mailproof's own
//! (activate, set expiration, clear data, update, delete), with the §7.2 errors; and the public
//! tracking hits under `/t/`.
//!
//! Another account's guid is `NoCampaigns`, exactly like a guid that never existed.

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Months, NaiveDate, Utc};
use serde_json::{json, Map, Value};
use store::{CampaignRow, CampaignUpdate, NewCampaign, NewHit};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::{ApiSettings, AppState};

/// Defaults of the interface (seconds the email stayed open).
const DEFAULT_READ: i64 = 15;
const DEFAULT_SKIM: i64 = 7;
const DEFAULT_DELETE: i64 = 2;
/// Longest threshold accepted: an hour is far beyond any reading time a tracking code measures.
const MAX_THRESHOLD: i64 = 3_600;
/// Longest campaign name accepted, in characters.
const MAX_NAME_CHARS: usize = 500;
/// A campaign runs at least this long (spec §8)…
const MIN_RUN_DAYS: i64 = 30;
/// …at most this long from its start…
const MAX_RUN_MONTHS: u32 = 36;
/// …and this long when activated without a date (the retention of tests, §8).
const DEFAULT_RUN_DAYS: i64 = 90;
const DAY: i64 = 86_400;
/// A campaign still in test mode at this many test opens is activated, and those opens cleared
/// (the behaviour of the service our users come from).
const AUTO_ACTIVATE_OPENS: i64 = 500;

fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::new(ErrorName::InvalidData, msg)
}

fn no_campaign(guid: &str) -> ApiError {
    ApiError::new(
        ErrorName::NoCampaigns,
        format!("no campaign {guid:?} for this account; GET /v5/analytics/campaigns lists yours"),
    )
}

/// A storage failure as the §7.2 name of what was being done; the cause goes to the log.
fn failed(name: ErrorName, doing: &str) -> impl FnOnce(store::StoreError) -> ApiError + '_ {
    move |e| {
        tracing::error!(error = %e, "{doing} failed");
        ApiError::new(
            name,
            format!("{doing} failed; the failure was logged, please retry shortly"),
        )
    }
}

/// The base of every tracking URL: the service's public URL with `/t`.
fn tracking_base(s: &ApiSettings) -> String {
    format!("{}/t", s.public_url.trim_end_matches('/'))
}

fn check_guid(guid: &str) -> ApiResult<()> {
    if ::analytics::is_guid(guid) {
        Ok(())
    } else {
        Err(invalid(format!(
            "guid {guid:?} is malformed: a campaign guid looks like 0123abcd-0000-4000-8000-00000000beef"
        )))
    }
}

/// The caller's campaign `guid`, or `NoCampaigns`.
async fn owned(state: &AppState, caller: &Caller, guid: &str) -> ApiResult<CampaignRow> {
    check_guid(guid)?;
    let Some(account) = caller.account() else {
        return Err(no_campaign(guid));
    };
    state
        .store
        .campaign(account.id, guid)
        .await
        .map_err(failed(ErrorName::ErrorGetCampaign, "reading the campaign"))?
        .ok_or_else(|| no_campaign(guid))
}

/// A whole number in `min..=max`; strings of digits are taken too (spec §1's permissive handling).
fn whole(m: &Map<String, Value>, field: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
    let n = match m.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(invalid(format!(
            "`{field}` must be an integer from {min} to {max}"
        ))),
    }
}

/// `delete ≤ skim ≤ read`: each bucket starts where the one below it ends.
fn check_thresholds(read: i64, skim: i64, delete: i64) -> ApiResult<()> {
    if delete <= skim && skim <= read {
        Ok(())
    } else {
        Err(invalid(format!(
            "thresholds must satisfy delete_threshold ≤ skim_threshold ≤ read_threshold; got {delete}, {skim}, {read}"
        )))
    }
}

fn no_content() -> ApiError {
    ApiError::new(
        ErrorName::NoContent,
        "the request has no content: send a JSON object with the campaign's fields",
    )
}

/// `YYYY-MM-DD HH:MM:SS` (UTC), the interface's date form.
fn datetime(t: Option<i64>) -> Value {
    t.and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
        .map_or(Value::Null, |d| {
            Value::from(d.format("%Y-%m-%d %H:%M:%S").to_string())
        })
}

/// `testing`, `current` or `expired` (shown by the web pages too).
pub fn status(row: &CampaignRow, now: i64) -> &'static str {
    match (row.activated_at, row.expires_at) {
        (None, _) => "testing",
        (Some(_), Some(end)) if end <= now => "expired",
        _ => "current",
    }
}

/// The click-tracking HTML with its links rewritten, for a campaign that has one.
fn tracked_html(s: &ApiSettings, c: &NewCampaign) -> ApiResult<Option<String>> {
    c.click_html
        .as_deref()
        .map(|html| {
            ::analytics::rewrite_links(html, &tracking_base(s), &c.guid, c.merge_tag.as_deref())
                .map(|(out, _)| out)
                .map_err(|e| ApiError::internal("rewriting the stored click-tracking HTML", e))
        })
        .transpose()
}

/// The campaign's tracking code on this service's tracking base.
pub fn tracking_code(s: &ApiSettings, c: &NewCampaign) -> String {
    ::analytics::tracking_code(&tracking_base(s), &c.guid, c.merge_tag.as_deref())
}

/// The click-tracking HTML of a create request: `html`, or the page `url` names (fetched under
/// the network policy, as an email test's `url`; checked but not fetched in the sandbox).
async fn click_source(
    state: &AppState,
    click: &Map<String, Value>,
    sandbox: bool,
) -> ApiResult<Option<String>> {
    if let Some(html) = params::string(click, "html")?.filter(|h| !h.trim().is_empty()) {
        return Ok(Some(html));
    }
    let Some(url) = params::string(click, "url")?.filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    super::create::check_source_url(url.trim())?;
    if sandbox {
        return Ok(None);
    }
    let fetched = content::fetch::fetch_source(url.trim(), &state.settings.net_policy)
        .await
        .map_err(|e| {
            ApiError::new(
                ErrorName::InvalidUrl,
                format!("`click_tracking.url` {url:?} could not be fetched: {e}"),
            )
        })?;
    Ok(Some(fetched.body))
}

/// `POST /v5/analytics/createcampaign` → `{guid, tracking_code}` (with click tracking also
/// `click_tracking.html`, the sender's HTML with every web link going through the service).
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    create_campaign(&state, &caller, m).await.map(Json)
}

/// The checks and the storing of `createcampaign`, and its answer; the web interface's form calls
/// it too, so that both word every refusal the same way.
pub async fn create_campaign(
    state: &AppState,
    caller: &Caller,
    m: Map<String, Value>,
) -> ApiResult<Value> {
    if m.is_empty() {
        return Err(no_content());
    }
    let name = params::string(&m, "name")?
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("the `name` field is required: give the campaign a name"))?;
    let encoding = params::string(&m, "transfer_encoding")?;
    let charset = params::string(&m, "charset")?;
    let name =
        content::decode::decode_source(&name, encoding.as_deref(), charset.as_deref(), "name")
            .map_err(|e| invalid(e.to_string()))?;
    if name.trim().is_empty() {
        return Err(invalid(
            "the `name` field is empty once decoded: give the campaign a name",
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    let total_subscribers = match m.get("total_subscribers") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(_) => Some(
            whole(&m, "total_subscribers", 1, i64::from(i32::MAX)).map_err(|_| {
                invalid("total subscribers must be an integer: `total_subscribers` is the number of recipients, at least 1")
            })?,
        ),
    }
    .flatten()
    .ok_or_else(|| {
        invalid("the `total_subscribers` field is required: the number of recipients the email goes to")
    })?;
    let read = whole(&m, "read_threshold", 0, MAX_THRESHOLD)?.unwrap_or(DEFAULT_READ);
    let skim = whole(&m, "skim_threshold", 0, MAX_THRESHOLD)?.unwrap_or(DEFAULT_SKIM);
    let delete = whole(&m, "delete_threshold", 0, MAX_THRESHOLD)?.unwrap_or(DEFAULT_DELETE);
    check_thresholds(read, skim, delete)?;
    let merge_tag = params::string(&m, "merge_tag")?.filter(|t| !t.trim().is_empty());
    if let Some(tag) = &merge_tag {
        ::analytics::check_merge_tag(tag).map_err(|e| invalid(e.to_string()))?;
    }
    let customer_id = params::string(&m, "customer_id")?.filter(|c| !c.trim().is_empty());
    let plan_enterprise = caller.account().is_none_or(|a| a.plan.is_enterprise());
    if customer_id.is_some() && !plan_enterprise {
        return Err(ApiError::new(
            ErrorName::PermissionError,
            "`customer_id` is an enterprise feature; your plan does not include it: remove it or upgrade the plan",
        ));
    }
    let click = params::object(&m, "click_tracking")?.unwrap_or_default();
    let google_analytics = params::boolean(&click, "google_analytics")?.unwrap_or(false);
    let click_html = click_source(state, &click, caller.account().is_none()).await?;
    let guid = ::analytics::guid_from(rand::random());
    let (rewritten, links) = match &click_html {
        Some(html) => {
            let (out, links) = ::analytics::rewrite_links(
                html,
                &tracking_base(&state.settings),
                &guid,
                merge_tag.as_deref(),
            )
            .map_err(|e| invalid(format!("`click_tracking.html`: {e}")))?;
            (Some(out), links)
        }
        None => (None, Vec::new()),
    };
    let campaign = NewCampaign {
        guid,
        account_id: caller.account().map_or(0, |a| a.id),
        name,
        customer_id,
        total_subscribers,
        merge_tag,
        read_threshold: read,
        skim_threshold: skim,
        delete_threshold: delete,
        google_analytics,
        click_html,
        click_links: links,
        created_at: Utc::now().timestamp(),
    };
    // The sandbox answers from the request and stores nothing (spec §5.3).
    if caller.account().is_some() {
        state
            .store
            .create_campaign(&campaign)
            .await
            .map_err(failed(
                ErrorName::ErrorCreateCampaign,
                "creating the campaign",
            ))?;
    }
    let mut out = json!({
        "guid": campaign.guid,
        "tracking_code": tracking_code(&state.settings, &campaign),
    });
    if let Some(html) = rewritten {
        out["click_tracking"] = json!({"html": html, "links": campaign.click_links.len()});
    }
    Ok(out)
}

/// `GET /v5/analytics/gettrackingcode/<guid>` → `{tracking_code, guid}`.
pub async fn get_tracking_code(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let row = owned(&state, &caller, &guid).await?;
    let mut out = json!({
        "tracking_code": tracking_code(&state.settings, &row.campaign),
        "guid": row.campaign.guid,
    });
    if let Some(html) = tracked_html(&state.settings, &row.campaign)? {
        out["click_tracking"] = json!({"html": html});
    }
    Ok(Json(out))
}

/// `GET /v5/analytics/getcampaigninfo/<guid>`.
pub async fn get_campaign_info(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let row = owned(&state, &caller, &guid).await?;
    let now = Utc::now().timestamp();
    let c = &row.campaign;
    let days_remaining = row
        .activated_at
        .and(row.expires_at)
        .map(|end| ((end - now).max(0) + DAY - 1) / DAY);
    Ok(Json(json!({
        "name": c.name,
        "status": status(&row, now),
        "tracking_code": tracking_code(&state.settings, c),
        "total_subscribers": c.total_subscribers,
        "created_on": datetime(Some(c.created_at)),
        "start_date": datetime(row.activated_at),
        "end_date": datetime(row.expires_at),
        "merge_tag": c.merge_tag,
        "read_threshold": c.read_threshold,
        "skim_threshold": c.skim_threshold,
        "delete_threshold": c.delete_threshold,
        "days_remaining": days_remaining,
        "click_tracking": {"google": c.google_analytics, "html": c.click_html},
        "customer_id": c.customer_id,
        "guid": c.guid,
    })))
}

/// `GET /v5/analytics/campaigns[?from&to&subject&results&page&customer_id]`, by the §4.5 rules;
/// `subject` matches the campaign name.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    let enterprise = caller.account().is_none_or(|a| a.plan.is_enterprise());
    let filter = super::lists::parse_query(q.as_deref(), None, enterprise)?;
    let Some(account) = caller.account() else {
        return Ok(Json(json!([])));
    };
    let rows = state
        .store
        .list_campaigns(account.id, &filter)
        .await
        .map_err(failed(ErrorName::ErrorGetCampaign, "listing campaigns"))?;
    Ok(Json(Value::Array(
        rows.iter()
            .map(|r| {
                json!({"id": r.campaign.guid, "date": r.campaign.created_at, "type": "analytics",
                       "subject": r.campaign.name})
            })
            .collect(),
    )))
}

/// A path that names no guid (`/gettrackingcode/`).
pub async fn missing_guid(_caller: Caller) -> ApiError {
    invalid("the guid is missing: put the campaign's guid at the end of the path")
}

/// `POST /v5/analytics/activatecampaign/<guid>` (mailproof's own): test mode ends, test hits are
/// cleared, and the campaign runs for 90 days (change with `setcampaignexpiration`).
pub async fn activate(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let row = owned(&state, &caller, &guid).await?;
    let already = || {
        ApiError::new(
            ErrorName::CampaignAlreadyActive,
            format!(
                "campaign {guid:?} is already active; it was activated at {}",
                datetime(row.activated_at)
            ),
        )
    };
    if row.activated_at.is_some() {
        return Err(already());
    }
    let now = Utc::now().timestamp();
    let end = now + DEFAULT_RUN_DAYS * DAY;
    let done = state
        .store
        .activate_campaign(row.campaign.account_id, &guid, now, end)
        .await
        .map_err(failed(
            ErrorName::ErrorActivatingCampaign,
            "activating the campaign",
        ))?;
    if !done {
        return Err(already());
    }
    Ok(Json(json!({
        "success": true,
        "guid": guid,
        "status": "current",
        "start_date": datetime(Some(now)),
        "end_date": datetime(Some(end)),
    })))
}

/// `POST /v5/analytics/setcampaignexpiration/<guid>` `{date: "YYYY-MM-DD"}` (mailproof's own):
/// the campaign ends at the end of that day (UTC), at least 30 days and at most 3 years after its
/// start (spec §8).
pub async fn set_expiration(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    check_guid(&guid)?;
    if m.is_empty() {
        return Err(no_content());
    }
    let date = params::string(&m, "date")?
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| {
            invalid("the `date` field is required: the campaign's last day, YYYY-MM-DD")
        })?;
    let day = NaiveDate::parse_from_str(date.trim(), "%Y-%m-%d").map_err(|_| {
        invalid(format!(
            "expiration date {date:?} is invalid: the date must be YYYY-MM-DD"
        ))
    })?;
    let row = owned(&state, &caller, &guid).await?;
    let Some(start) = row
        .activated_at
        .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
    else {
        return Err(ApiError::new(
            ErrorName::CampaignNotActive,
            format!(
                "campaign {guid:?} is still in test mode; activate it before setting when it ends"
            ),
        ));
    };
    let end = day
        .and_hms_opt(23, 59, 59)
        .map(|d| d.and_utc())
        .ok_or_else(|| {
            invalid(format!(
                "expiration date {date:?} is invalid: the date must be YYYY-MM-DD"
            ))
        })?;
    if end.timestamp() - start.timestamp() < MIN_RUN_DAYS * DAY {
        return Err(ApiError::new(
            ErrorName::ExpirationLessThanMinimum,
            format!(
                "a campaign must run at least {MIN_RUN_DAYS} days; this one started {}, so choose {} or later",
                start.format("%Y-%m-%d %H:%M:%S"),
                (start + chrono::Duration::days(MIN_RUN_DAYS)).format("%Y-%m-%d")
            ),
        ));
    }
    let latest = start
        .checked_add_months(Months::new(MAX_RUN_MONTHS))
        .unwrap_or(start);
    if end.date_naive() > latest.date_naive() {
        return Err(ApiError::new(
            ErrorName::ExpirationMaximumExceeded,
            format!(
                "a campaign can run at most 3 years; this one started {}, so choose {} or earlier",
                start.format("%Y-%m-%d %H:%M:%S"),
                latest.format("%Y-%m-%d")
            ),
        ));
    }
    let done = state
        .store
        .set_campaign_expiration(row.campaign.account_id, &guid, end.timestamp())
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "setting the campaign's expiration",
        ))?;
    if !done {
        return Err(no_campaign(&guid));
    }
    Ok(Json(
        json!({"success": true, "guid": guid, "end_date": datetime(Some(end.timestamp()))}),
    ))
}

/// `POST /v5/analytics/clearcampaigndata/<guid>` (mailproof's own): removes the hits of a campaign
/// still in test mode.
pub async fn clear(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let row = owned(&state, &caller, &guid).await?;
    let active = || {
        ApiError::new(
            ErrorName::CannotClearData,
            format!("campaign {guid:?} is active: its data can no longer be cleared (only a campaign in test mode can be)"),
        )
    };
    if row.activated_at.is_some() {
        return Err(active());
    }
    let cleared = state
        .store
        .clear_campaign_data(row.campaign.account_id, &guid)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "clearing the campaign's data",
        ))?
        .ok_or_else(active)?;
    Ok(Json(
        json!({"success": true, "guid": guid, "cleared": cleared}),
    ))
}

/// `PUT` or `POST /v5/analytics/updatecampaign/<guid>` (mailproof's own): `total_subscribers` and
/// the three thresholds, in test mode or active.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path((v, guid)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    check_guid(&guid)?;
    if m.is_empty() {
        return Err(no_content());
    }
    let u = CampaignUpdate {
        total_subscribers: whole(&m, "total_subscribers", 1, i64::from(i32::MAX)).map_err(|_| {
            invalid("total subscribers must be an integer: `total_subscribers` is the number of recipients, at least 1")
        })?,
        read_threshold: whole(&m, "read_threshold", 0, MAX_THRESHOLD)?,
        skim_threshold: whole(&m, "skim_threshold", 0, MAX_THRESHOLD)?,
        delete_threshold: whole(&m, "delete_threshold", 0, MAX_THRESHOLD)?,
    };
    if u == CampaignUpdate::default() {
        return Err(invalid(
            "nothing to update: send total_subscribers, read_threshold, skim_threshold or delete_threshold",
        ));
    }
    let row = owned(&state, &caller, &guid).await?;
    let c = &row.campaign;
    check_thresholds(
        u.read_threshold.unwrap_or(c.read_threshold),
        u.skim_threshold.unwrap_or(c.skim_threshold),
        u.delete_threshold.unwrap_or(c.delete_threshold),
    )?;
    let done = state
        .store
        .update_campaign(c.account_id, &guid, &u)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "updating the campaign",
        ))?;
    if !done {
        return Err(no_campaign(&guid));
    }
    get_campaign_info(State(state), caller, Path((v, guid))).await
}

/// `DELETE /v5/analytics/campaigns/<guid>` (mailproof's own): the campaign and all its hits.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let row = owned(&state, &caller, &guid).await?;
    let done = state
        .store
        .delete_campaign(row.campaign.account_id, &guid)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "deleting the campaign",
        ))?;
    if !done {
        return Err(no_campaign(&guid));
    }
    Ok(Json(json!({"success": true})))
}

/// A text cell as a spreadsheet will not run it: a leading `=`, `+`, `-` or `@` (a formula) gets
/// a `'` before it. Merge values come from whoever fetched a tracking URL.
fn inert_cell(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_string()
    }
}

fn hits_csv(hits: &[store::HitRow]) -> Result<Vec<u8>, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record([
        "time",
        "kind",
        "number",
        "merge_value",
        "agent_class",
        "test",
    ])
    .map_err(|e| e.to_string())?;
    for h in hits {
        let time = datetime(Some(h.hit.at));
        out.write_record([
            time.as_str().unwrap_or(""),
            &h.hit.kind,
            &h.hit.number.to_string(),
            &inert_cell(h.hit.merge_value.as_deref().unwrap_or("")),
            &h.hit.agent_class,
            if h.test { "1" } else { "0" },
        ])
        .map_err(|e| e.to_string())?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// `GET /v5/analytics/getcampaignexport/<guid>` (mailproof's own): every recorded hit as CSV,
/// oldest first: `time` (`YYYY-MM-DD HH:MM:SS`, UTC), `kind`, `number` (seconds of a reading step,
/// link number of a click), `merge_value`, `agent_class`, `test` (1 for hits in test mode).
pub async fn export(
    State(state): State<AppState>,
    caller: Caller,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Response> {
    let row = owned(&state, &caller, &guid).await?;
    let hits = state
        .store
        .campaign_hits(&row.campaign.guid)
        .await
        .map_err(failed(
            ErrorName::ErrorGetCampaign,
            "reading the campaign's hits",
        ))?;
    let body = hits_csv(&hits).map_err(|e| ApiError::internal("writing the export", e))?;
    let disposition = format!("attachment; filename=\"campaign-{guid}.csv\"");
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition)
                    .unwrap_or(HeaderValue::from_static("attachment")),
            ),
        ],
        body,
    )
        .into_response())
}

/// The 1×1 transparent GIF every image hit is answered with.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// Longest merge value kept from a hit; longer ones are cut.
const MAX_MERGE_VALUE_CHARS: usize = 320;

fn pixel() -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("image/gif")),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("no-store, private"),
            ),
        ],
        PIXEL,
    )
        .into_response()
}

/// The class of a user agent, as much as this slice tells apart: the image proxies of Gmail and
/// Yahoo, Apple's bare `Mozilla/5.0` (Mail Privacy Protection, judged here by the agent alone),
/// anything else as a direct fetch. Machine-or-person classification is still to come.
fn agent_class(headers: &HeaderMap) -> &'static str {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    if ua.contains("GoogleImageProxy") {
        "gmail_proxy"
    } else if ua.contains("YahooMailProxy") {
        "yahoo_proxy"
    } else if ua == "Mozilla/5.0" {
        "apple_mpp"
    } else if ua.is_empty() {
        "none"
    } else {
        "direct"
    }
}

/// `GET /t/<guid>/<file>`: a tracking hit. Answers the image, or for a click a 302 to the link,
/// never an error page: an unknown guid, an expired campaign or a path the tracking code never
/// makes gets the image and records nothing. A hit that is recorded is committed before the
/// answer leaves (one write per hit; batching is still to come).
pub async fn hit(
    State(state): State<AppState>,
    Path((guid, file)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some(kind) = ::analytics::HitKind::parse(&file) else {
        return pixel();
    };
    if !::analytics::is_guid(&guid) {
        return pixel();
    }
    let row = match state.store.campaign_for_hit(&guid).await {
        Ok(Some(row)) => row,
        Ok(None) => return pixel(),
        Err(e) => {
            tracing::error!(error = %e, "reading a campaign for a tracking hit");
            return pixel();
        }
    };
    let now = Utc::now().timestamp();
    let expired = row.expires_at.is_some_and(|end| end <= now);
    let target = match kind {
        ::analytics::HitKind::Click(n) => row.campaign.click_links.get(n as usize - 1).map(|u| {
            if row.campaign.google_analytics {
                ::analytics::with_utm(u, &row.campaign.name)
            } else {
                u.clone()
            }
        }),
        _ => None,
    };
    if matches!(kind, ::analytics::HitKind::Click(_)) && target.is_none() {
        return pixel();
    }
    if !expired {
        let merge_value = url::form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
            .find(|(k, _)| k == "d")
            .map(|(_, v)| v.chars().take(MAX_MERGE_VALUE_CHARS).collect::<String>())
            .filter(|v| !v.is_empty());
        let hit = NewHit {
            guid: guid.clone(),
            at: now,
            kind: kind.as_str().to_string(),
            number: i64::from(kind.number()),
            merge_value,
            agent_class: agent_class(&headers).to_string(),
        };
        let recorded = if row.activated_at.is_none() {
            state
                .store
                .record_test_hit(&hit, AUTO_ACTIVATE_OPENS, now + DEFAULT_RUN_DAYS * DAY)
                .await
                .map(|activated| {
                    if activated {
                        tracing::info!(guid, "campaign activated by its test opens");
                    }
                })
        } else {
            state.store.record_hit(&hit, false).await
        };
        if let Err(e) = recorded {
            // The reader still gets the image; the failure is the operator's to see.
            tracing::error!(error = %e, "recording a tracking hit");
        }
    }
    match target.and_then(|t| HeaderValue::from_str(&t).ok()) {
        Some(location) => (
            StatusCode::FOUND,
            [
                (header::LOCATION, location),
                (
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("no-store, private"),
                ),
            ],
        )
            .into_response(),
        None => pixel(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_in_exported_cells_are_made_inert() {
        assert_eq!(inert_cell("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(inert_cell("@SUM(1)"), "'@SUM(1)");
        assert_eq!(inert_cell("a@example.org"), "a@example.org");
    }

    #[test]
    fn the_pixel_is_a_one_by_one_gif() {
        assert!(PIXEL.starts_with(b"GIF89a"));
        assert_eq!((PIXEL[6], PIXEL[8]), (1, 1));
        assert_eq!(PIXEL.last(), Some(&0x3b));
    }

    #[test]
    fn user_agents_are_classed_without_keeping_them() {
        let class = |ua: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::USER_AGENT, HeaderValue::from_str(ua).expect("ua"));
            agent_class(&h)
        };
        assert_eq!(class("Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"), "gmail_proxy");
        assert_eq!(
            class("YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html"),
            "yahoo_proxy"
        );
        assert_eq!(class("Mozilla/5.0"), "apple_mpp");
        assert_eq!(
            class("Mozilla/5.0 (Windows NT 10.0) Thunderbird/128.0"),
            "direct"
        );
        assert_eq!(agent_class(&HeaderMap::new()), "none");
    }
}
