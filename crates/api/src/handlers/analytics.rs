//! Analytics campaigns (issue 22): the calls of the public analytics v5 interface
//! (`createcampaign`, `gettrackingcode`, `getcampaigninfo`, `campaigns`) and mailproof's own
//! (activate, set expiration, clear data, update, delete), with the §7.2 errors; and the public
//! tracking hits under `/t/`.
//!
//! Another account's guid is `NoCampaigns`, exactly like a guid that never existed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path as FilePath, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use ::analytics::{CampaignReport, EgressSet, HitFacts, HitKind, Source};
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Version};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use store::{CampaignRow, CampaignUpdate, NewHit};

use crate::auth::{Authed, Caller};
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::hits::{HitUnrecorded, Lookup};
use crate::params::{self, Body};
use crate::state::AppState;

use app::campaign_changes as changes;
use app::campaigns::{out_of_range, status, tracked_html, tracking_code, MAX_THRESHOLD};

const DAY: i64 = 86_400;

fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::new(ErrorName::InvalidData, msg)
}

/// A storage failure as the §7.2 name of what was being done; the cause goes to the log.
fn failed(name: ErrorName, doing: &str) -> impl FnOnce(store::StoreError) -> ApiError + '_ {
    let failed = app::owned::failed(name, doing);
    move |e| failed(e).into()
}

fn check_guid(guid: &str) -> ApiResult<()> {
    Ok(app::owned::check_guid(guid)?)
}

/// The caller's campaign `guid`, or `NoCampaigns`.
async fn owned(state: &AppState, caller: &Caller, guid: &str) -> ApiResult<CampaignRow> {
    Ok(app::owned_campaign(state, caller, guid).await?)
}

/// A whole number in `min..=max`; strings of digits are taken too (spec §1's permissive handling).
fn whole(m: &Map<String, Value>, field: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
    let n = match m.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => {
            return whole_in(field, app::campaigns::whole_from_text(field, s)?, min, max)
        }
        Some(_) => None,
    };
    whole_in(field, Some(n.ok_or_else(|| out_of_range(field))?), min, max)
}

fn whole_in(field: &str, n: Option<i64>, min: i64, max: i64) -> ApiResult<Option<i64>> {
    match n {
        Some(n) if !(min..=max).contains(&n) => Err(out_of_range(field).into()),
        n => Ok(n),
    }
}

fn no_content() -> ApiError {
    app::campaigns::no_content().into()
}

/// `YYYY-MM-DD HH:MM:SS` (UTC), the interface's date form.
fn datetime(t: Option<i64>) -> Value {
    t.and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
        .map_or(Value::Null, |d| {
            Value::from(d.format("%Y-%m-%d %H:%M:%S").to_string())
        })
}

/// `POST /v5/analytics/createcampaign` → `{guid, tracking_code}` (with click tracking also
/// `click_tracking.html`, the sender's HTML with every web link going through the service).
pub async fn create(
    State(state): State<AppState>,
    caller: Authed,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    if m.is_empty() {
        return Err(no_content());
    }
    let total_subscribers = whole(&m, "total_subscribers", i64::MIN, i64::MAX)
        .map_err(|_| ApiError::from(out_of_range("total_subscribers")))?;
    let click = params::object(&m, "click_tracking")?.unwrap_or_default();
    let req = app::campaigns::CampaignRequest {
        name: params::string(&m, "name")?,
        transfer_encoding: params::string(&m, "transfer_encoding")?,
        charset: params::string(&m, "charset")?,
        total_subscribers,
        read_threshold: whole(&m, "read_threshold", 0, MAX_THRESHOLD)?,
        skim_threshold: whole(&m, "skim_threshold", 0, MAX_THRESHOLD)?,
        delete_threshold: whole(&m, "delete_threshold", 0, MAX_THRESHOLD)?,
        merge_tag: params::string(&m, "merge_tag")?,
        customer_id: params::string(&m, "customer_id")?,
        google_analytics: params::boolean(&click, "google_analytics")?.unwrap_or(false),
        click_html: params::string(&click, "html")?,
        click_url: params::string(&click, "url")?,
    };
    let created = app::campaigns::create_campaign(&state, &caller, req).await?;
    let mut out = json!({
        "guid": created.guid,
        "tracking_code": created.tracking_code,
    });
    if let Some((html, links)) = created.click_tracking {
        out["click_tracking"] = json!({"html": html, "links": links});
    }
    Ok(Json(out))
}

/// `GET /v5/analytics/gettrackingcode/<guid>` → `{tracking_code, guid}`.
pub async fn get_tracking_code(
    State(state): State<AppState>,
    caller: Authed,
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
    caller: Authed,
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
    caller: Authed,
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
pub async fn missing_guid(_caller: Authed) -> ApiError {
    invalid("the guid is missing: put the campaign's guid at the end of the path")
}

/// `POST /v5/analytics/activatecampaign/<guid>` (mailproof's own): test mode ends, test hits are
/// cleared, and the campaign runs for 90 days (change with `setcampaignexpiration`).
pub async fn activate(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let run = changes::activate(&state, &caller, &guid).await?;
    state.hits.forget(&guid);
    Ok(Json(json!({
        "success": true,
        "guid": guid,
        "status": "current",
        "start_date": datetime(Some(run.start)),
        "end_date": datetime(Some(run.end)),
    })))
}

/// `POST /v5/analytics/setcampaignexpiration/<guid>` `{date: "YYYY-MM-DD"}` (mailproof's own):
/// the campaign ends at the end of that day (UTC), at least 30 days and at most 3 years after its
/// start (spec §8).
pub async fn set_expiration(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    check_guid(&guid)?;
    if m.is_empty() {
        return Err(no_content());
    }
    let date = params::string(&m, "date")?.unwrap_or_default();
    let end = changes::set_expiration(&state, &caller, &guid, &date).await;
    state.hits.forget(&guid);
    Ok(Json(
        json!({"success": true, "guid": guid, "end_date": datetime(Some(end?))}),
    ))
}

/// `POST /v5/analytics/clearcampaigndata/<guid>` (mailproof's own): removes the hits of a campaign
/// still in test mode.
pub async fn clear(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let cleared = changes::clear_data(&state, &caller, &guid).await?;
    Ok(Json(
        json!({"success": true, "guid": guid, "cleared": cleared}),
    ))
}

/// `PUT` or `POST /v5/analytics/updatecampaign/<guid>` (mailproof's own): `total_subscribers` and
/// the three thresholds, in test mode or active.
pub async fn update(
    State(state): State<AppState>,
    caller: Authed,
    Path((v, guid)): Path<(String, String)>,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    check_guid(&guid)?;
    if m.is_empty() {
        return Err(no_content());
    }
    let u = CampaignUpdate {
        total_subscribers: whole(&m, "total_subscribers", 1, i64::from(i32::MAX))
            .map_err(|_| ApiError::from(out_of_range("total_subscribers")))?,
        read_threshold: whole(&m, "read_threshold", 0, MAX_THRESHOLD)?,
        skim_threshold: whole(&m, "skim_threshold", 0, MAX_THRESHOLD)?,
        delete_threshold: whole(&m, "delete_threshold", 0, MAX_THRESHOLD)?,
    };
    changes::update(&state, &caller, &guid, &u).await?;
    get_campaign_info(State(state), caller, Path((v, guid))).await
}

/// `DELETE /v5/analytics/campaigns/<guid>` (mailproof's own): the campaign and all its hits.
pub async fn delete(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let deleted = changes::delete(&state, &caller, &guid).await;
    state.hits.forget(&guid);
    deleted?;
    Ok(Json(json!({"success": true})))
}

/// What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list): `=`, `+`, `-`,
/// `@`, TAB and CR at the start.
const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];
/// Where a spreadsheet may start a new cell inside ours: the export's `,`, and the `;` that
/// spreadsheets in locales with a decimal comma split on.
const SEPARATORS: [char; 2] = [',', ';'];

/// A text cell as a spreadsheet will not run it: a `'` goes before a formula character at its
/// start, or at the start of any piece a separator may split off (spaces before it skipped).
/// Merge values come from whoever fetched a tracking URL.
fn inert_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    let mut at_start = true;
    for c in s.chars() {
        if at_start && FORMULA_START.contains(&c) {
            out.push('\'');
        }
        out.push(c);
        at_start = SEPARATORS.contains(&c) || (at_start && c == ' ');
    }
    out
}

/// Hits read and written per piece of a streamed export.
const EXPORT_PAGE: i64 = 1_000;

/// Writes `hits` as CSV rows, after the header line when `header`.
fn hits_csv(hits: &[(i64, store::HitRow)], header: bool) -> Result<Vec<u8>, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    if header {
        out.write_record([
            "time",
            "kind",
            "number",
            "merge_value",
            "agent_class",
            "test",
            "source",
            "client",
            "device",
        ])
        .map_err(|e| e.to_string())?;
    }
    for (_, h) in hits {
        let time = datetime(Some(h.hit.at));
        out.write_record([
            time.as_str().unwrap_or(""),
            h.hit.kind.as_str(),
            &h.hit.number.to_string(),
            &inert_cell(h.hit.merge_value.as_deref().unwrap_or("")),
            &h.agent_class,
            if h.test { "1" } else { "0" },
            h.hit.source.as_str(),
            h.hit.client.as_str(),
            h.hit.device.as_str(),
        ])
        .map_err(|e| e.to_string())?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// Where a streamed export stands: a page read and not yet written, the id after which to read
/// the next one, or the end.
enum ExportStep {
    Write(Vec<(i64, store::HitRow)>, bool),
    ReadAfter(i64),
    Done,
}

/// `GET /v5/analytics/getcampaignexport/<guid>` (mailproof's own): every recorded hit as CSV,
/// oldest first: `time` (`YYYY-MM-DD HH:MM:SS`, UTC), `kind`, `number` (seconds of a reading step,
/// link number of a click, seconds held of a held-open image), `merge_value`, `agent_class`,
/// `test` (1 for hits in test mode), `source`, `client`, `device` (the hit's classes).
///
/// Streamed a page of [`EXPORT_PAGE`] hits at a time, so a campaign's size never sits in memory.
/// The first page is read before answering, so a failing database still gets its §7 error; a
/// failure after that can only cut the download short (logged).
pub async fn export(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Response> {
    let row = owned(&state, &caller, &guid).await?;
    let reading = || failed(ErrorName::ErrorGetCampaign, "reading the campaign's hits");
    let first = state
        .store
        .campaign_hits_after(&row.campaign.guid, 0, EXPORT_PAGE)
        .await
        .map_err(reading())?;
    let store = state.store.clone();
    let campaign = row.campaign.guid.clone();
    let body = futures::stream::unfold(ExportStep::Write(first, true), move |step| {
        let (store, campaign) = (store.clone(), campaign.clone());
        async move {
            let (page, header) = match step {
                ExportStep::Done => return None,
                ExportStep::Write(page, header) => (page, header),
                ExportStep::ReadAfter(after) => {
                    match store
                        .campaign_hits_after(&campaign, after, EXPORT_PAGE)
                        .await
                    {
                        Ok(page) => (page, false),
                        Err(e) => {
                            tracing::error!(error = %e, "reading a page of a campaign's export");
                            return Some((Err(std::io::Error::other(e)), ExportStep::Done));
                        }
                    }
                }
            };
            let next = match page.last() {
                Some((id, _)) if page.len() as i64 == EXPORT_PAGE => ExportStep::ReadAfter(*id),
                _ => ExportStep::Done,
            };
            Some((hits_csv(&page, header).map_err(std::io::Error::other), next))
        }
    });
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
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// The report as `getcampaignstats` sends it: the typed report, and which of its signals each
/// client profile lets through (the per-client matrix the campaign page shows too).
#[derive(serde::Serialize)]
pub struct Stats {
    #[serde(flatten)]
    pub report: CampaignReport,
    /// Not `clients`: the report has that field (the clients of reliable opens).
    pub client_matrix: Vec<ClientAnalytics>,
}

/// One profile's row of the matrix, with its image proxy.
#[derive(serde::Serialize)]
pub struct ClientAnalytics {
    #[serde(flatten)]
    pub signals: ::analytics::matrix::ClientSignals,
    pub image_proxy: Option<&'static str>,
    pub proxy_hides_timing: bool,
}

/// `GET /v5/analytics/getcampaignstats/<guid>` (mailproof's own): the campaign's report, the
/// typed `analytics::CampaignReport` as JSON (what the web pages draw too), and the per-client
/// matrix of what each profile lets through.
pub async fn stats(
    State(state): State<AppState>,
    caller: Authed,
    Path((_, guid)): Path<(String, String)>,
) -> ApiResult<Json<Stats>> {
    let (_, report) = app::campaigns::campaign_report(&state, &caller, &guid).await?;
    let client_matrix = app::campaigns::client_analytics(&state)
        .into_iter()
        .map(|c| ClientAnalytics {
            signals: c.signals,
            image_proxy: c.image_proxy,
            proxy_hides_timing: c.proxy_hides_timing,
        })
        .collect();
    Ok(Json(Stats {
        report,
        client_matrix,
    }))
}

/// The 1×1 transparent GIF every image hit is answered with.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// Longest merge value kept from a hit; longer ones are cut.
const MAX_MERGE_VALUE_CHARS: usize = 320;

/// A recipient's first open is remembered this long, for the scanner rule (a click within
/// `analytics::classify::SCANNER_WINDOW` of it). Only an open starts the clock, so forgetting it
/// can at worst make a later open count as the first, and no person clicks within the window of
/// an email appearing.
const FIRST_OPEN_KEPT: Duration = Duration::from_secs(3_600);
/// Remembered first opens before those older than [`FIRST_OPEN_KEPT`] are swept; if that is not
/// enough, only those still inside the scanner window are kept (a flood must not grow the map
/// without bound, nor make each hit sweep it).
const FIRST_OPEN_SWEEP_AT: usize = 20_000;

/// Longest a held-open response is held: the reading-time scale ends there.
const HOLD_MAX: Duration = Duration::from_secs(::analytics::READ_MAX_SECS as u64);

/// Apple's relay egress ranges as configured (`[analytics] apple_egress_csv`), reloaded when the
/// file changes.
#[derive(Default)]
pub struct AppleEgress {
    path: Option<PathBuf>,
    current: RwLock<Option<LoadedEgress>>,
}

struct LoadedEgress {
    set: Arc<EgressSet>,
    /// Modification time and length of the file the set was read from.
    stamp: (SystemTime, u64),
}

fn file_stamp(path: &FilePath) -> Result<(SystemTime, u64), String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read Apple's relay ranges {}: {e}", path.display()))?;
    Ok((
        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        meta.len(),
    ))
}

fn read_egress(path: &FilePath) -> Result<LoadedEgress, String> {
    let stamp = file_stamp(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read Apple's relay ranges {}: {e}", path.display()))?;
    let set = EgressSet::parse(&text)
        .map_err(|e| format!("Apple's relay ranges {}: {e}", path.display()))?;
    Ok(LoadedEgress {
        set: Arc::new(set),
        stamp,
    })
}

impl AppleEgress {
    /// Reads and checks the file: a missing or malformed file stops the start.
    pub fn load(path: PathBuf) -> Result<AppleEgress, String> {
        let loaded = read_egress(&path)?;
        tracing::info!(
            path = %path.display(),
            ranges = loaded.set.ranges(),
            "Apple relay ranges loaded"
        );
        Ok(AppleEgress {
            path: Some(path),
            current: RwLock::new(Some(loaded)),
        })
    }

    /// Whether ranges are configured (without them Apple MPP is judged on the user agent alone).
    pub fn configured(&self) -> bool {
        self.path.is_some()
    }

    pub fn set(&self) -> Option<Arc<EgressSet>> {
        self.current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|l| l.set.clone()))
    }

    /// Rereads the file when its modification time or length changed; `Ok(true)` when it was
    /// reloaded. A file that became unreadable or malformed keeps the ranges loaded before.
    pub fn refresh(&self) -> Result<bool, String> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let stamp = file_stamp(path)?;
        let unchanged = self
            .current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|l| l.stamp == stamp))
            .unwrap_or(false);
        if unchanged {
            return Ok(false);
        }
        let loaded = read_egress(path)?;
        if let Ok(mut current) = self.current.write() {
            *current = Some(loaded);
        }
        Ok(true)
    }
}

/// How many held-open responses may be in flight, in all and from one client address (an IPv6
/// /64 counting as one, [`domain::address_group`]). Each account's campaigns together hold at
/// most a fair share of `max`: `max / (accounts holding + 1)`, so that there is always room for
/// one more account's readers, and strangers requesting one account's guids from many addresses
/// cannot take the places of every other account's readers.
#[derive(Clone, Copy, Debug)]
pub struct HoldLimits {
    pub max: usize,
    pub per_address: usize,
}

impl Default for HoldLimits {
    fn default() -> Self {
        HoldLimits {
            max: 512,
            per_address: 16,
        }
    }
}

/// What the hit handler keeps between hits: Apple's relay ranges, recipients' first opens (for
/// the scanner rule) and the held-open responses in flight. Per process: with several api
/// processes each judges the hits it answers.
pub struct HitRuntime {
    pub egress: AppleEgress,
    first_opens: Mutex<HashMap<(String, String), Instant>>,
    limits: HoldLimits,
    held: Mutex<HeldCount>,
    /// Set on shutdown: held responses finish at once (and are recorded), none are held anew.
    release: tokio::sync::watch::Sender<bool>,
}

impl Default for HitRuntime {
    fn default() -> Self {
        HitRuntime {
            egress: AppleEgress::default(),
            first_opens: Mutex::default(),
            limits: HoldLimits::default(),
            held: Mutex::default(),
            release: tokio::sync::watch::channel(false).0,
        }
    }
}

#[derive(Default)]
struct HeldCount {
    total: usize,
    /// By [`domain::address_group`].
    by_address: HashMap<IpAddr, usize>,
    by_account: HashMap<i64, usize>,
}

/// Takes one from `key`'s count, forgetting keys at zero so that the maps hold only what is held.
fn give_back<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = counts.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(key);
        }
    }
}

/// One held-open response in flight; dropping it frees its place.
struct HoldPermit {
    runtime: Arc<HitRuntime>,
    group: IpAddr,
    account: i64,
}

impl Drop for HoldPermit {
    fn drop(&mut self) {
        if let Ok(mut held) = self.runtime.held.lock() {
            held.total = held.total.saturating_sub(1);
            give_back(&mut held.by_address, &self.group);
            give_back(&mut held.by_account, &self.account);
        }
    }
}

impl HitRuntime {
    pub fn new(egress: AppleEgress, limits: HoldLimits) -> HitRuntime {
        HitRuntime {
            egress,
            limits,
            ..HitRuntime::default()
        }
    }

    /// For a click, how long after this recipient's first open of the campaign it came (`None`
    /// when no open was seen); an open is remembered as the first when it is. Reading steps,
    /// held-open and dark-mode images never start the clock: a person clicking 100 ms after a
    /// reading step, seconds after opening, is a person.
    fn since_first_open(&self, guid: &str, merge_value: &str, kind: HitKind) -> Option<Duration> {
        if !matches!(kind, HitKind::Open | HitKind::Click(_)) {
            return None;
        }
        let mut first_opens = self.first_opens.lock().ok()?;
        let now = Instant::now();
        let key = (guid.to_string(), merge_value.to_string());
        if kind != HitKind::Open {
            return first_opens.get(&key).map(|at| now.duration_since(*at));
        }
        if first_opens.len() >= FIRST_OPEN_SWEEP_AT && !first_opens.contains_key(&key) {
            // Forgetting a first open can at worst make a later open the first: no person clicks
            // within the scanner window of an email appearing. So under pressure only the opens
            // still inside that window are kept, and past that, none.
            first_opens.retain(|_, at| now.duration_since(*at) < FIRST_OPEN_KEPT);
            if first_opens.len() >= FIRST_OPEN_SWEEP_AT {
                first_opens.retain(|_, at| {
                    now.duration_since(*at) < ::analytics::classify::SCANNER_WINDOW
                });
            }
            if first_opens.len() >= FIRST_OPEN_SWEEP_AT {
                first_opens.clear();
            }
        }
        match first_opens.get(&key) {
            Some(at) if now.duration_since(*at) < FIRST_OPEN_KEPT => {}
            _ => {
                first_opens.insert(key, now);
            }
        }
        None
    }

    /// Ends every held-open response now (each is recorded with the time it was held) and holds
    /// no more: the process is stopping, and its HTTP server waits for responses in progress.
    pub fn release_held(&self) {
        self.release.send_replace(true);
    }

    /// A place for one more held-open response from `address` for a campaign of `account`,
    /// within the limits (see [`HoldLimits`]).
    fn try_hold(self: &Arc<Self>, address: IpAddr, account: i64) -> Option<HoldPermit> {
        if *self.release.borrow() {
            return None;
        }
        let group = domain::address_group(address);
        let mut held = self.held.lock().ok()?;
        let from = held.by_address.get(&group).copied().unwrap_or(0);
        let of_account = held.by_account.get(&account).copied().unwrap_or(0);
        let accounts = held.by_account.len() + usize::from(of_account == 0);
        let share = (self.limits.max / (accounts + 1)).max(1);
        if held.total >= self.limits.max || from >= self.limits.per_address || of_account >= share {
            return None;
        }
        held.total += 1;
        held.by_address.insert(group, from + 1);
        held.by_account.insert(account, of_account + 1);
        Some(HoldPermit {
            runtime: self.clone(),
            group,
            account,
        })
    }
}

fn no_store() -> (header::HeaderName, HeaderValue) {
    (
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-store, private"),
    )
}

fn pixel() -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("image/gif")),
            no_store(),
        ],
        PIXEL,
    )
        .into_response()
}

/// The held-open image: the GIF without its last byte at once, the last byte when the reader has
/// kept the email open [`HOLD_MAX`]; the hit is recorded when the client closes the response (or
/// at that cap) with the seconds it was held, timed from the request. An HTTP/1 connection is
/// closed after it, so that its connection slot is given back with the held place: a client
/// that asks again at once must connect again, under the listener's per-address cap.
fn held_pixel(state: AppState, hit: NewHit, permit: HoldPermit, version: Version) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(2);
    let started = Instant::now();
    tokio::spawn(async move {
        let mut release = permit.runtime.release.subscribe();
        let _permit = permit;
        let (body, last) = PIXEL.split_at(PIXEL.len() - 1);
        if tx.send(bytes::Bytes::from_static(body)).await.is_err() {
            return;
        }
        // The receiver goes when the connection does: the client closed the email.
        let closed = tokio::select! {
            () = tx.closed() => true,
            () = tokio::time::sleep(HOLD_MAX) => false,
            _ = release.wait_for(|released| *released) => false,
        };
        if !closed {
            // Past the scale's end, or the service is stopping: finish the image.
            let _ = tx.send(bytes::Bytes::from_static(last)).await;
        }
        let held = started.elapsed().min(HOLD_MAX).as_secs();
        let hit = NewHit {
            number: i64::try_from(held).unwrap_or(0),
            ..hit
        };
        // Its wait starts when the reader lets go: that is when the hit is complete.
        let deadline = state.hits.deadline();
        let _ = state.hits.record(&state.store, hit, deadline).await;
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), rx))
    });
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("image/gif")),
            no_store(),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response();
    // Nothing the reader waits for is in flight: a full listener may close this connection for a
    // newcomer as readily as an idle one.
    response.extensions_mut().insert(admission::HeldOpen);
    if version < Version::HTTP_2 {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// `GET /t/<guid>/<file>`: a tracking hit. Answers the image, or for a click a 302 to the link,
/// never an error page: an unknown guid, an expired campaign or a path the tracking code never
/// makes gets the image and records nothing, and so does a hit over a rate limit or one the
/// database did not take within the hit's wait (both counted in `/metrics`; a click whose link
/// this process has read before still goes to it). The hit's classes are decided here
/// (`analytics::classify`); the client address serves only that and the rate limits, and is not
/// kept. A hit that is recorded is committed before the answer leaves, in a batch with the hits
/// that arrived with it (`crate::hits`), except the held-open image's, recorded when its client
/// lets go.
pub async fn hit(
    State(state): State<AppState>,
    Path((guid, file)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    method: Method,
    version: Version,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    let Some(kind) = HitKind::parse(&file) else {
        return pixel();
    };
    if !::analytics::is_guid(&guid) {
        return pixel();
    }
    let deadline = state.hits.deadline();
    let address = client.map(|Extension(ConnectInfo(a))| a.ip());
    let admitted = state.hits.admit_address(address);
    // Over its budget, an image hit is answered before the campaign is read, so that a flood of
    // made-up guids costs the database nothing; a click still needs its link.
    if admitted.is_err() && !matches!(kind, HitKind::Click(_)) {
        return pixel();
    }
    let row = match state.hits.campaign(&state.store, &guid, deadline).await {
        Lookup::Found(row) => row,
        Lookup::Unknown => return pixel(),
        Lookup::Unavailable(last_read) => {
            // Counted once: an address-limited click is counted under its rate limit already.
            if admitted.is_ok() {
                crate::hits::unrecorded(HitUnrecorded::Database);
            }
            let target = match (kind, last_read) {
                (HitKind::Click(n), Some(row)) => click_target(&row, n),
                _ => None,
            };
            return redirect_or_pixel(target);
        }
    };
    let now = Utc::now().timestamp();
    let expired = row.expires_at.is_some_and(|end| end <= now);
    let target = match kind {
        HitKind::Click(n) => click_target(&row, n),
        _ => None,
    };
    if matches!(kind, HitKind::Click(_)) && target.is_none() {
        return pixel();
    }
    if expired || admitted.is_err() {
        return redirect_or_pixel(target);
    }
    let merge_value = url::form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "d")
        .map(|(_, v)| v.chars().take(MAX_MERGE_VALUE_CHARS).collect::<String>())
        .filter(|v| !v.is_empty());
    let runtime = state.analytics.clone();
    let egress = runtime.egress.set();
    let since_first_open = merge_value
        .as_deref()
        .and_then(|m| runtime.since_first_open(&guid, m, kind));
    let classes = ::analytics::classify(
        &HitFacts {
            kind,
            head: method == Method::HEAD,
            user_agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
            address,
            since_first_open,
        },
        egress.as_deref(),
    );
    let hit = NewHit {
        guid: guid.clone(),
        at: now,
        kind,
        number: i64::from(kind.number()),
        merge_value,
        source: classes.source,
        client: classes.client,
        device: classes.device,
        mpp_by_agent_only: classes.mpp_by_agent_only,
    };
    if kind == HitKind::Hold {
        // Only a reader's own client can be timed: a proxy or scanner gets the image at once,
        // and so does anyone past the limits on held responses. Such a hold is not recorded: it
        // measured nothing.
        let permit = address
            .filter(|_| classes.source == Source::Direct)
            .and_then(|a| runtime.try_hold(a, row.campaign.account_id));
        return match permit {
            Some(permit) => held_pixel(state, hit, permit, version),
            None => pixel(),
        };
    }
    // Not recorded is not an error for the reader: the answer goes out either way, and the
    // writer and the limits have logged and counted why.
    let _ = state.hits.record(&state.store, hit, deadline).await;
    redirect_or_pixel(target)
}

/// Where click `n` (from 1) of the campaign goes, with its UTM tags when the campaign asks.
fn click_target(row: &CampaignRow, n: u32) -> Option<String> {
    let link = row
        .campaign
        .click_links
        .get(usize::try_from(n).ok()?.checked_sub(1)?)?;
    Some(if row.campaign.google_analytics {
        ::analytics::with_utm(link, &row.campaign.name)
    } else {
        link.clone()
    })
}

fn redirect_or_pixel(target: Option<String>) -> Response {
    match target.and_then(|t| HeaderValue::from_str(&t).ok()) {
        Some(location) => (
            StatusCode::FOUND,
            [(header::LOCATION, location), no_store()],
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
        for (cell, inert) in [
            ("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"),
            ("@SUM(1)", "'@SUM(1)"),
            ("+1+1", "'+1+1"),
            ("-2+3", "'-2+3"),
            // The attack's cells: a leading TAB or CR, and `;` before `=`.
            ("\t=1+1", "'\t=1+1"),
            ("\r=1+1", "'\r=1+1"),
            ("a;=cmd|' /C calc'!A0", "a;'=cmd|' /C calc'!A0"),
            ("a; =1", "a; '=1"),
            ("a,@SUM(1)", "a,'@SUM(1)"),
            ("  =1", "  '=1"),
        ] {
            assert_eq!(inert_cell(cell), inert, "{cell:?}");
        }
        for plain in [
            "a@example.org",
            "x-y",
            "a=b",
            "a;b=c",
            "ann+tag@example.org",
        ] {
            assert_eq!(inert_cell(plain), plain);
        }
    }

    #[test]
    fn the_pixel_is_a_one_by_one_gif() {
        assert!(PIXEL.starts_with(b"GIF89a"));
        assert_eq!((PIXEL[6], PIXEL[8]), (1, 1));
        assert_eq!(PIXEL.last(), Some(&0x3b));
    }

    #[test]
    fn held_responses_are_capped_in_all_and_per_address() {
        let runtime = Arc::new(HitRuntime::new(
            AppleEgress::default(),
            HoldLimits {
                max: 3,
                per_address: 2,
            },
        ));
        let a: IpAddr = [192, 0, 2, 1].into();
        let b: IpAddr = [192, 0, 2, 2].into();
        let first = runtime.try_hold(a, 1).expect("first");
        let _second = runtime.try_hold(a, 2).expect("second");
        assert!(runtime.try_hold(a, 3).is_none(), "per address");
        let _third = runtime.try_hold(b, 3).expect("another address");
        assert!(runtime.try_hold(b, 4).is_none(), "in all");
        drop(first);
        assert!(runtime.try_hold(a, 4).is_some(), "a place freed");
    }

    #[test]
    fn one_ipv6_64_holds_what_one_address_may() {
        let runtime = Arc::new(HitRuntime::new(
            AppleEgress::default(),
            HoldLimits {
                max: 100,
                per_address: 2,
            },
        ));
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 7, 7, n, 0, 0, 1]);
        let held: Vec<_> = (1..=10)
            .filter_map(|n| runtime.try_hold(in_64(n), n.into()))
            .collect();
        assert_eq!(held.len(), 2, "ten addresses of one /64");
        assert!(runtime
            .try_hold(IpAddr::from([0x2001, 0xdb8, 7, 8, 0, 0, 0, 1]), 1)
            .is_some());
    }

    /// One account's campaigns take at most a share that leaves room for the next account, which
    /// in turn leaves room for a third; a place an account gives back is its own again.
    #[test]
    fn accounts_share_the_held_places_and_one_account_cannot_take_them_all() {
        let runtime = Arc::new(HitRuntime::new(
            AppleEgress::default(),
            HoldLimits {
                max: 12,
                per_address: 100,
            },
        ));
        let from = |n: u8| IpAddr::from([192, 0, 2, n]);
        let mut first: Vec<_> = (0..12)
            .filter_map(|n| runtime.try_hold(from(n), 1))
            .collect();
        assert_eq!(first.len(), 6, "alone, an account holds half");
        let second: Vec<_> = (0..12)
            .filter_map(|n| runtime.try_hold(from(n), 2))
            .collect();
        assert_eq!(second.len(), 4, "with two accounts holding, a third each");
        assert!(
            runtime.try_hold(from(99), 3).is_some(),
            "a third account gets in"
        );
        first.truncate(2);
        assert!(
            runtime.try_hold(from(1), 1).is_some(),
            "back within its share"
        );
    }

    #[test]
    fn after_release_nothing_is_held() {
        let runtime = Arc::new(HitRuntime::default());
        assert!(runtime.try_hold([192, 0, 2, 1].into(), 1).is_some());
        runtime.release_held();
        assert!(runtime.try_hold([192, 0, 2, 1].into(), 1).is_none());
    }

    #[test]
    fn a_click_is_timed_from_the_recipients_first_open_only() {
        let runtime = HitRuntime::default();
        assert_eq!(
            runtime.since_first_open("g", "a", HitKind::Click(1)),
            None,
            "no open seen"
        );
        assert_eq!(runtime.since_first_open("g", "a", HitKind::Open), None);
        std::thread::sleep(Duration::from_millis(30));
        // A reading step, a later open and the dark-mode image do not move the clock.
        assert_eq!(runtime.since_first_open("g", "a", HitKind::Read(2)), None);
        assert_eq!(runtime.since_first_open("g", "a", HitKind::Open), None);
        assert_eq!(runtime.since_first_open("g", "a", HitKind::Dark), None);
        let since = runtime
            .since_first_open("g", "a", HitKind::Click(1))
            .expect("opened before");
        assert!(since >= Duration::from_millis(30), "{since:?}");
        assert_eq!(
            runtime.since_first_open("g", "b", HitKind::Click(1)),
            None,
            "another recipient"
        );
    }

    #[test]
    fn relay_ranges_reload_when_the_file_changes_and_survive_a_bad_one() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("egress.csv");
        std::fs::write(&path, "17.0.0.0/8,US,,,\n").expect("write");
        let egress = AppleEgress::load(path.clone()).expect("load");
        let has = |ip: [u8; 4]| egress.set().is_some_and(|s| s.contains(ip.into()));
        assert!(has([17, 1, 1, 1]) && !has([18, 1, 1, 1]));
        assert_eq!(egress.refresh(), Ok(false), "unchanged");
        std::fs::write(&path, "17.0.0.0/8,US,,,\n18.0.0.0/8,US,,,\n").expect("write");
        assert_eq!(egress.refresh(), Ok(true));
        assert!(has([18, 1, 1, 1]));
        std::fs::write(&path, "garbage\n").expect("write");
        assert!(egress.refresh().is_err());
        assert!(has([18, 1, 1, 1]), "the last good ranges stay");
        assert!(AppleEgress::load(dir.path().join("missing.csv")).is_err());
    }
}
