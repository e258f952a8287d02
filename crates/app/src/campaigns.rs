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

/// A whole-number field given as text (a form, a JSON string): blank is absent. A count of
/// subscribers may have its digits grouped by three as people write them ("2,500", "2 500",
/// "2.500", "2'500", "2_500"); seconds may not, as "2.500" there is more likely two and a half.
pub fn whole_from_text(field: &str, text: &str) -> Result<Option<i64>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let digits = if field == "total_subscribers" {
        grouped_digits(text)
    } else {
        Some(text.to_string())
    };
    digits
        .and_then(|digits| digits.parse().ok())
        .map(Some)
        .ok_or_else(|| out_of_range(field))
}

/// Separators people put between groups of three digits (the space ones included: U+00A0 and
/// U+202F are what locales write).
const GROUP_SEPARATORS: [char; 7] = [',', '.', ' ', '\u{a0}', '\u{202f}', '\'', '_'];

/// `text`'s digits when it is a whole number, plain or grouped by three with one kind of
/// separator; `None` otherwise ("2,5" is not a whole number, whatever the locale).
fn grouped_digits(text: &str) -> Option<String> {
    let (sign, body) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.strip_prefix('+').unwrap_or(text)),
    };
    if body.chars().all(|c| c.is_ascii_digit()) && !body.is_empty() {
        return Some(format!("{sign}{body}"));
    }
    let sep = body.chars().find(|c| !c.is_ascii_digit())?;
    if !GROUP_SEPARATORS.contains(&sep) {
        return None;
    }
    let mut groups = body.split(sep);
    let first = groups.next()?;
    let rest: Vec<&str> = groups.collect();
    let digits = |g: &str| g.chars().all(|c| c.is_ascii_digit());
    let well_grouped = (1..=3).contains(&first.len())
        && digits(first)
        && rest.iter().all(|g| g.len() == 3 && digits(g));
    well_grouped.then(|| format!("{sign}{first}{}", rest.concat()))
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

/// A field of a campaign request, as the interface names it: what a refusal is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum CampaignField {
    Name,
    TotalSubscribers,
    ReadThreshold,
    SkimThreshold,
    DeleteThreshold,
    MergeTag,
    CustomerId,
    ClickTracking,
}

/// One refusal and the field it is about.
#[derive(Clone, Debug)]
pub struct Problem {
    pub field: CampaignField,
    pub error: Error,
}

/// A request's fields once checked.
struct Checked {
    name: String,
    total_subscribers: i64,
    read: i64,
    skim: i64,
    delete: i64,
    merge_tag: Option<String>,
    customer_id: Option<String>,
}

/// Every problem of `req` that can be told without storing or fetching anything, in the order the
/// API answers them (it sends the first; the web's form shows them all at once).
pub fn problems(req: &CampaignRequest, enterprise: bool) -> Vec<Problem> {
    check(req, enterprise).err().unwrap_or_default()
}

fn check(req: &CampaignRequest, enterprise: bool) -> std::result::Result<Checked, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut note = |field, r: Result<()>| {
        if let Err(error) = r {
            problems.push(Problem { field, error });
        }
    };
    let name = check_name(req);
    note(
        CampaignField::Name,
        name.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let total_subscribers = in_range(
        "total_subscribers",
        req.total_subscribers,
        1,
        i64::from(i32::MAX),
    )
    .and_then(|n| {
        n.ok_or_else(|| {
            invalid(
                "the `total_subscribers` field is required: the number of recipients the email goes to",
            )
        })
    });
    note(
        CampaignField::TotalSubscribers,
        total_subscribers.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let mut threshold = |field, name: &str, n: Option<i64>, default: i64| {
        let r = in_range(name, n, 0, MAX_THRESHOLD).map(|n| n.unwrap_or(default));
        note(field, r.as_ref().map(|_| ()).map_err(Clone::clone));
        r.ok()
    };
    let read = threshold(
        CampaignField::ReadThreshold,
        "read_threshold",
        req.read_threshold,
        DEFAULT_READ,
    );
    let skim = threshold(
        CampaignField::SkimThreshold,
        "skim_threshold",
        req.skim_threshold,
        DEFAULT_SKIM,
    );
    let delete = threshold(
        CampaignField::DeleteThreshold,
        "delete_threshold",
        req.delete_threshold,
        DEFAULT_DELETE,
    );
    if let (Some(read), Some(skim), Some(delete)) = (read, skim, delete) {
        // The rule ties the three; the field shown is the first one given that breaks it.
        let field = if req.read_threshold.is_some() && skim > read {
            CampaignField::ReadThreshold
        } else if req.delete_threshold.is_some() && delete > skim {
            CampaignField::DeleteThreshold
        } else {
            CampaignField::SkimThreshold
        };
        note(field, check_thresholds(read, skim, delete));
    }
    let merge_tag = req.merge_tag.clone().filter(|t| !t.trim().is_empty());
    if let Some(tag) = &merge_tag {
        note(
            CampaignField::MergeTag,
            ::analytics::check_merge_tag(tag).map_err(|e| invalid(e.to_string())),
        );
    }
    let customer_id = req.customer_id.clone().filter(|c| !c.trim().is_empty());
    if customer_id.is_some() && !enterprise {
        note(
            CampaignField::CustomerId,
            Err(Error::new(
                ErrorName::PermissionError,
                "`customer_id` is an enterprise feature; your plan does not include it: remove it or upgrade the plan",
            )),
        );
    }
    match (name, total_subscribers, read, skim, delete) {
        (Ok(name), Ok(total_subscribers), Some(read), Some(skim), Some(delete))
            if problems.is_empty() =>
        {
            Ok(Checked {
                name,
                total_subscribers,
                read,
                skim,
                delete,
                merge_tag,
                customer_id,
            })
        }
        _ => Err(problems),
    }
}

/// The campaign's name, decoded as the request says it is encoded.
fn check_name(req: &CampaignRequest) -> Result<String> {
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
    Ok(name)
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
    let plan_enterprise = caller.account().is_none_or(|a| a.plan.is_enterprise());
    let checked = check(&req, plan_enterprise).map_err(|problems| {
        problems.into_iter().next().map_or_else(
            || Error::internal("checking a campaign", "refused without a reason"),
            |p| p.error,
        )
    })?;
    let click_html = click_source(state, &req, caller.account().is_none()).await?;
    let guid = ::analytics::guid_from(rand::random());
    let (rewritten, links) = match &click_html {
        Some(html) => {
            let (out, links) = ::analytics::rewrite_links(
                html,
                &tracking_base(&state.settings),
                &guid,
                checked.merge_tag.as_deref(),
            )
            .map_err(|e| invalid(format!("`click_tracking.html`: {e}")))?;
            (Some(out), links)
        }
        None => (None, Vec::new()),
    };
    let campaign = NewCampaign {
        guid,
        account_id: caller.account().map_or(0, |a| a.id),
        name: checked.name,
        customer_id: checked.customer_id,
        total_subscribers: checked.total_subscribers,
        merge_tag: checked.merge_tag,
        read_threshold: checked.read,
        skim_threshold: checked.skim,
        delete_threshold: checked.delete,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_may_be_grouped_by_three_as_people_write_them() {
        let n = |t: &str| whole_from_text("total_subscribers", t).ok().flatten();
        for t in [
            "2500",
            "2,500",
            "2 500",
            "2.500",
            "2'500",
            "2_500",
            "2\u{a0}500",
            " 2,500 ",
        ] {
            assert_eq!(n(t), Some(2_500), "{t:?}");
        }
        assert_eq!(n("1,234,567"), Some(1_234_567));
        assert!(
            whole_from_text("skim_threshold", "2.500").is_err(),
            "seconds are not grouped"
        );
        assert_eq!(
            whole_from_text("skim_threshold", "12").ok().flatten(),
            Some(12)
        );
        assert_eq!(n("-5"), Some(-5));
        assert_eq!(n(""), None);
        for t in [
            "2,5",
            "2,50",
            "25,00",
            "2,500.5",
            "2,500 000",
            "1,2345",
            ",500",
            "2,",
            "ten",
            "2e3",
        ] {
            assert!(
                whole_from_text("total_subscribers", t).is_err(),
                "{t:?} is not a whole number"
            );
        }
    }

    fn req(f: impl FnOnce(&mut CampaignRequest)) -> CampaignRequest {
        let mut r = CampaignRequest {
            name: Some("Spring".into()),
            total_subscribers: Some(10),
            ..CampaignRequest::default()
        };
        f(&mut r);
        r
    }

    #[test]
    fn every_problem_is_told_at_once_each_with_its_field() {
        assert!(problems(&req(|_| ()), false).is_empty());
        let all = problems(
            &req(|r| {
                r.name = None;
                r.total_subscribers = Some(0);
                r.read_threshold = Some(9_999);
                r.merge_tag = Some("<id>".into());
                r.customer_id = Some("c".into());
            }),
            false,
        );
        let fields: Vec<&str> = all.iter().map(|p| p.field.into()).collect();
        assert_eq!(
            fields,
            [
                "name",
                "total_subscribers",
                "read_threshold",
                "merge_tag",
                "customer_id"
            ]
        );
        // The order rule is told once, on the field given that breaks it.
        let order = problems(&req(|r| r.read_threshold = Some(3)), true);
        assert_eq!(order.len(), 1);
        assert_eq!(order[0].field, CampaignField::ReadThreshold);
        assert!(order[0]
            .error
            .message
            .contains("delete_threshold ≤ skim_threshold"));
    }
}
