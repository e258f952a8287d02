//! Changes to a campaign after it was created (mailproof's own calls, spec §8's rules): activate,
//! set when it ends, clear its test data, update its numbers, delete it. The API's handlers and
//! the web's campaign page both call these, so both refuse the same things in the same words.
//!
//! The hit path keeps campaigns it read for a second (`api::hits`); a change made here is seen by
//! hits within that second, or at once in the process whose caller also forgets its copy.

use chrono::{DateTime, Months, NaiveDate, Utc};
use store::{CampaignRow, CampaignUpdate};

use crate::auth::Caller;
use crate::campaigns::check_thresholds;
use crate::error::{Error, ErrorName, Result};
use crate::owned::{check_guid, failed, no_campaign, owned_campaign};
use crate::state::AppState;

/// A campaign runs at least this long (spec §8)…
pub const MIN_RUN_DAYS: i64 = 30;
/// …at most this long from its start…
pub const MAX_RUN_MONTHS: u32 = 36;
/// …and this long when activated without a date (the retention of tests, §8).
pub const DEFAULT_RUN_DAYS: i64 = 90;
const DAY: i64 = 86_400;

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorName::InvalidData, msg)
}

/// `YYYY-MM-DD HH:MM:SS` (UTC), the interface's date form; empty for a time out of range.
pub fn datetime(t: i64) -> String {
    DateTime::<Utc>::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The run of an activated campaign (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: i64,
    pub end: i64,
}

/// Ends test mode: the test hits are removed and the campaign runs for [`DEFAULT_RUN_DAYS`].
pub async fn activate(state: &AppState, caller: &Caller, guid: &str) -> Result<Run> {
    let row = owned_campaign(state, caller, guid).await?;
    let already = |at: Option<i64>| {
        Error::new(
            ErrorName::CampaignAlreadyActive,
            format!(
                "campaign {guid:?} is already active; it was activated at {}",
                at.map(datetime).unwrap_or_default()
            ),
        )
    };
    if row.activated_at.is_some() {
        return Err(already(row.activated_at));
    }
    let start = Utc::now().timestamp();
    let end = start + DEFAULT_RUN_DAYS * DAY;
    let done = state
        .store
        .activate_campaign(row.campaign.account_id, guid, start, end)
        .await
        .map_err(failed(
            ErrorName::ErrorActivatingCampaign,
            "activating the campaign",
        ))?;
    if !done {
        return Err(already(None));
    }
    Ok(Run { start, end })
}

/// The earliest and latest last day an active campaign that started at `start` may be given.
pub fn expiration_bounds(start: i64) -> Option<(NaiveDate, NaiveDate)> {
    let start = DateTime::<Utc>::from_timestamp(start, 0)?;
    let earliest = (start + chrono::Duration::days(MIN_RUN_DAYS)).date_naive();
    let latest = start
        .checked_add_months(Months::new(MAX_RUN_MONTHS))
        .unwrap_or(start)
        .date_naive();
    Some((earliest, latest))
}

/// Sets the last day of an active campaign: it ends at the end of `date` (`YYYY-MM-DD`, UTC), at
/// least [`MIN_RUN_DAYS`] and at most [`MAX_RUN_MONTHS`] months after its start. Returns the end.
pub async fn set_expiration(
    state: &AppState,
    caller: &Caller,
    guid: &str,
    date: &str,
) -> Result<i64> {
    check_guid(guid)?;
    let date = date.trim();
    if date.is_empty() {
        return Err(invalid(
            "the `date` field is required: the campaign's last day, YYYY-MM-DD",
        ));
    }
    let bad_date = || {
        invalid(format!(
            "expiration date {date:?} is invalid: the date must be YYYY-MM-DD"
        ))
    };
    let day = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|_| bad_date())?;
    let row = owned_campaign(state, caller, guid).await?;
    let Some(start) = row.activated_at else {
        return Err(Error::new(
            ErrorName::CampaignNotActive,
            format!(
                "campaign {guid:?} is still in test mode; activate it before setting when it ends"
            ),
        ));
    };
    let end = day
        .and_hms_opt(23, 59, 59)
        .map(|d| d.and_utc().timestamp())
        .ok_or_else(bad_date)?;
    let (earliest, latest) = expiration_bounds(start).ok_or_else(bad_date)?;
    if end - start < MIN_RUN_DAYS * DAY {
        return Err(Error::new(
            ErrorName::ExpirationLessThanMinimum,
            format!(
                "a campaign must run at least {MIN_RUN_DAYS} days; this one started {}, so choose {earliest} or later",
                datetime(start)
            ),
        ));
    }
    if day > latest {
        return Err(Error::new(
            ErrorName::ExpirationMaximumExceeded,
            format!(
                "a campaign can run at most 3 years; this one started {}, so choose {latest} or earlier",
                datetime(start)
            ),
        ));
    }
    let done = state
        .store
        .set_campaign_expiration(row.campaign.account_id, guid, end)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "setting the campaign's expiration",
        ))?;
    if !done {
        return Err(no_campaign(guid));
    }
    Ok(end)
}

/// Removes the hits of a campaign still in test mode; how many were removed.
pub async fn clear_data(state: &AppState, caller: &Caller, guid: &str) -> Result<u64> {
    let row = owned_campaign(state, caller, guid).await?;
    let active = || {
        Error::new(
            ErrorName::CannotClearData,
            format!("campaign {guid:?} is active: its data can no longer be cleared (only a campaign in test mode can be)"),
        )
    };
    if row.activated_at.is_some() {
        return Err(active());
    }
    state
        .store
        .clear_campaign_data(row.campaign.account_id, guid)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "clearing the campaign's data",
        ))?
        .ok_or_else(active)
}

/// Changes `total_subscribers` and the thresholds, in test mode or active.
pub async fn update(
    state: &AppState,
    caller: &Caller,
    guid: &str,
    u: &CampaignUpdate,
) -> Result<()> {
    check_guid(guid)?;
    if *u == CampaignUpdate::default() {
        return Err(invalid(
            "nothing to update: send total_subscribers, read_threshold, skim_threshold or delete_threshold",
        ));
    }
    let row = owned_campaign(state, caller, guid).await?;
    let c = &row.campaign;
    check_thresholds(
        u.read_threshold.unwrap_or(c.read_threshold),
        u.skim_threshold.unwrap_or(c.skim_threshold),
        u.delete_threshold.unwrap_or(c.delete_threshold),
    )?;
    let done = state
        .store
        .update_campaign(c.account_id, guid, u)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "updating the campaign",
        ))?;
    if done {
        Ok(())
    } else {
        Err(no_campaign(guid))
    }
}

/// Deletes the campaign and all its hits; the campaign as it was, to say what was deleted.
pub async fn delete(state: &AppState, caller: &Caller, guid: &str) -> Result<CampaignRow> {
    let row = owned_campaign(state, caller, guid).await?;
    let done = state
        .store
        .delete_campaign(row.campaign.account_id, guid)
        .await
        .map_err(failed(
            ErrorName::ErrorUpdateCampaign,
            "deleting the campaign",
        ))?;
    if done {
        Ok(row)
    } else {
        Err(no_campaign(guid))
    }
}

/// The caller's campaign with how many hits it has stored (test data while in test mode), for a
/// confirmation that says what a change removes.
pub async fn with_hit_count(
    state: &AppState,
    caller: &Caller,
    guid: &str,
) -> Result<(CampaignRow, i64)> {
    let row = owned_campaign(state, caller, guid).await?;
    let hits = state.store.campaign_hit_count(guid).await.map_err(failed(
        ErrorName::ErrorGetCampaign,
        "counting the campaign's hits",
    ))?;
    Ok((row, hits))
}
