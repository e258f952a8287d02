//! Analytics campaigns (spec §8): creating one from a typed request, its status and tracking code,
//! and its report with the per-client matrix. Reading a campaign checks ownership (see `owned`).

use chrono::Utc;
use store::{CampaignRow, NewCampaign};

use crate::auth::Caller;
use crate::error::{Error, ErrorName, Result};
use crate::owned::{failed, owned_campaign};
use crate::state::{AppState, Settings};

/// Defaults of the interface (seconds the email stayed open).
pub const DEFAULT_READ: i64 = 15;
pub const DEFAULT_SKIM: i64 = 7;
pub const DEFAULT_DELETE: i64 = 2;
/// Longest threshold accepted: an hour is far beyond any reading time a tracking code measures.
pub const MAX_THRESHOLD: i64 = 3_600;
/// Longest campaign name accepted, in characters.
const MAX_NAME_CHARS: usize = 500;

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorName::InvalidData, msg)
}

/// A request to create a campaign, as the caller sent it.
#[derive(Clone, Debug, Default)]
pub struct CampaignRequest {
    pub name: Option<String>,
    /// How `name` is encoded (`base64`, `quoted-printable`) and its charset.
    pub transfer_encoding: Option<String>,
    pub charset: Option<String>,
    pub total_subscribers: Option<i64>,
    pub read_threshold: Option<i64>,
    pub skim_threshold: Option<i64>,
    pub delete_threshold: Option<i64>,
    pub merge_tag: Option<String>,
    pub customer_id: Option<String>,
    pub google_analytics: bool,
    /// The click-tracking HTML; or else a page `click_url` names.
    pub click_html: Option<String>,
    pub click_url: Option<String>,
}

impl CampaignRequest {
    /// Nothing was given at all (an empty JSON object, a blank form).
    fn is_empty(&self) -> bool {
        let CampaignRequest {
            name,
            transfer_encoding,
            charset,
            total_subscribers,
            read_threshold,
            skim_threshold,
            delete_threshold,
            merge_tag,
            customer_id,
            google_analytics,
            click_html,
            click_url,
        } = self;
        [
            name,
            transfer_encoding,
            charset,
            merge_tag,
            customer_id,
            click_html,
            click_url,
        ]
        .iter()
        .all(|v| v.is_none())
            && [
                total_subscribers,
                read_threshold,
                skim_threshold,
                delete_threshold,
            ]
            .iter()
            .all(|v| v.is_none())
            && !google_analytics
    }
}

/// `NoContent`: a request without a single field.
pub fn no_content() -> Error {
    Error::new(
        ErrorName::NoContent,
        "the request has no content: send a JSON object with the campaign's fields",
    )
}

/// What creating a campaign answers.
#[derive(Clone, Debug)]
pub struct CreatedCampaign {
    pub guid: String,
    pub tracking_code: String,
    /// The click-tracking HTML with its links rewritten, and how many links it tracks.
    pub click_tracking: Option<(String, usize)>,
    /// False in the sandbox, which stores nothing.
    pub stored: bool,
}

/// The refusal of a whole-number field outside `min..=max` (or not a number at all).
pub fn out_of_range(field: &str) -> Error {
    match field {
        "total_subscribers" => invalid("total subscribers must be an integer: `total_subscribers` is the number of recipients, at least 1"),
        _ => invalid(format!(
            "`{field}` must be an integer from 0 to {MAX_THRESHOLD}"
        )),
    }
}

/// A whole-number field given as text (a form, a JSON string): blank is absent.
pub fn whole_from_text(field: &str, text: &str) -> Result<Option<i64>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| out_of_range(field))
}

fn in_range(field: &str, n: Option<i64>, min: i64, max: i64) -> Result<Option<i64>> {
    match n {
        Some(n) if !(min..=max).contains(&n) => Err(out_of_range(field)),
        n => Ok(n),
    }
}

/// `delete ≤ skim ≤ read`: each bucket starts where the one below it ends.
pub fn check_thresholds(read: i64, skim: i64, delete: i64) -> Result<()> {
    if delete <= skim && skim <= read {
        Ok(())
    } else {
        Err(invalid(format!(
            "thresholds must satisfy delete_threshold ≤ skim_threshold ≤ read_threshold; got {delete}, {skim}, {read}"
        )))
    }
}

/// The base of every tracking URL (`[analytics] tracking_base_url`, by default the service's
/// public URL with `/t`).
pub fn tracking_base(s: &Settings) -> String {
    s.tracking_base.trim_end_matches('/').to_string()
}

/// `testing`, `current` or `expired`.
pub fn status(row: &CampaignRow, now: i64) -> &'static str {
    match (row.activated_at, row.expires_at) {
        (None, _) => "testing",
        (Some(_), Some(end)) if end <= now => "expired",
        _ => "current",
    }
}

/// The click-tracking HTML with its links rewritten, for a campaign that has one.
pub fn tracked_html(s: &Settings, c: &NewCampaign) -> Result<Option<String>> {
    c.click_html
        .as_deref()
        .map(|html| {
            ::analytics::rewrite_links(html, &tracking_base(s), &c.guid, c.merge_tag.as_deref())
                .map(|(out, _)| out)
                .map_err(|e| Error::internal("rewriting the stored click-tracking HTML", e))
        })
        .transpose()
}

/// The campaign's tracking code on this service's tracking base.
pub fn tracking_code(s: &Settings, c: &NewCampaign) -> String {
    ::analytics::tracking_code(&tracking_base(s), &c.guid, c.merge_tag.as_deref())
}

/// The click-tracking HTML of a request: `click_html`, or the page `click_url` names (fetched
/// under the network policy, as an email test's `url`; checked but not fetched in the sandbox).
async fn click_source(
    state: &AppState,
    req: &CampaignRequest,
    sandbox: bool,
) -> Result<Option<String>> {
    if let Some(html) = req.click_html.clone().filter(|h| !h.trim().is_empty()) {
        return Ok(Some(html));
    }
    let Some(url) = req.click_url.clone().filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    crate::create::check_source_url(url.trim())?;
    if sandbox {
        return Ok(None);
    }
    let fetched = content::fetch::fetch_source(url.trim(), &state.settings.net_policy)
        .await
        .map_err(|e| {
            Error::new(
                ErrorName::InvalidUrl,
                format!("`click_tracking.url` {url:?} could not be fetched: {e}"),
            )
        })?;
    Ok(Some(fetched.body))
}

/// The checks and the storing of a new campaign; the API's `createcampaign` and the web's form
/// both call it, so that both word every refusal the same way.
pub async fn create_campaign(
    state: &AppState,
    caller: &Caller,
    req: CampaignRequest,
) -> Result<CreatedCampaign> {
    if req.is_empty() {
        return Err(no_content());
    }
    let name = req
        .name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("the `name` field is required: give the campaign a name"))?;
    let name = content::decode::decode_source(
        &name,
        req.transfer_encoding.as_deref(),
        req.charset.as_deref(),
        "name",
    )
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
    let total_subscribers = in_range(
        "total_subscribers",
        req.total_subscribers,
        1,
        i64::from(i32::MAX),
    )?
    .ok_or_else(|| {
        invalid(
            "the `total_subscribers` field is required: the number of recipients the email goes to",
        )
    })?;
    let read =
        in_range("read_threshold", req.read_threshold, 0, MAX_THRESHOLD)?.unwrap_or(DEFAULT_READ);
    let skim =
        in_range("skim_threshold", req.skim_threshold, 0, MAX_THRESHOLD)?.unwrap_or(DEFAULT_SKIM);
    let delete = in_range("delete_threshold", req.delete_threshold, 0, MAX_THRESHOLD)?
        .unwrap_or(DEFAULT_DELETE);
    check_thresholds(read, skim, delete)?;
    let merge_tag = req.merge_tag.clone().filter(|t| !t.trim().is_empty());
    if let Some(tag) = &merge_tag {
        ::analytics::check_merge_tag(tag).map_err(|e| invalid(e.to_string()))?;
    }
    let customer_id = req.customer_id.clone().filter(|c| !c.trim().is_empty());
    let plan_enterprise = caller.account().is_none_or(|a| a.plan.is_enterprise());
    if customer_id.is_some() && !plan_enterprise {
        return Err(Error::new(
            ErrorName::PermissionError,
            "`customer_id` is an enterprise feature; your plan does not include it: remove it or upgrade the plan",
        ));
    }
    let click_html = click_source(state, &req, caller.account().is_none()).await?;
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
        google_analytics: req.google_analytics,
        click_html,
        click_links: links,
        created_at: Utc::now().timestamp(),
    };
    // The sandbox answers from the request and stores nothing (spec §5.3).
    let stored = caller.account().is_some();
    if stored {
        state
            .store
            .create_campaign(&campaign)
            .await
            .map_err(failed(
                ErrorName::ErrorCreateCampaign,
                "creating the campaign",
            ))?;
    }
    Ok(CreatedCampaign {
        tracking_code: tracking_code(&state.settings, &campaign),
        click_tracking: rewritten.map(|html| (html, campaign.click_links.len())),
        guid: campaign.guid,
        stored,
    })
}

/// One profile's row of the matrix, with its image proxy when one stands between the reader and
/// the service (a fact from the sources, not measured).
#[derive(Clone, Debug)]
pub struct ClientAnalytics {
    pub signals: ::analytics::matrix::ClientSignals,
    pub image_proxy: Option<&'static str>,
    /// Reading time cannot be measured behind the proxy, whatever the engine does.
    pub proxy_hides_timing: bool,
}

/// Which of the report's signals each client profile lets through.
pub fn client_analytics(state: &AppState) -> Vec<ClientAnalytics> {
    state
        .analytics_matrix
        .clients
        .iter()
        .map(|signals| {
            let proxy = state
                .catalog
                .get(&signals.id)
                .and_then(|c| ::analytics::matrix::proxy_fact(&c.family));
            ClientAnalytics {
                signals: signals.clone(),
                image_proxy: proxy.map(|p| p.name),
                proxy_hides_timing: proxy.is_some_and(|p| p.hides_timing),
            }
        })
        .collect()
}

/// The caller's campaign `guid` with its report (what the API's `getcampaignstats` sends and the
/// web's campaign page draws).
pub async fn campaign_report(
    state: &AppState,
    caller: &Caller,
    guid: &str,
) -> Result<(CampaignRow, ::analytics::CampaignReport)> {
    let row = owned_campaign(state, caller, guid).await?;
    let report = state
        .store
        .report_of(&row, state.relay_ranges_configured)
        .await
        .map_err(failed(
            ErrorName::ErrorGetCampaign,
            "reading the campaign's report",
        ))?;
    Ok((row, report))
}
