//! The ownership check, written once: a test or campaign is reachable only by the account that
//! made it. Another account's id, a missing id and (for tests) a test of the other kind are the
//! same answer, so that ids cannot be probed.

use domain::TestKind;
use store::{CampaignRow, TestRow};

use crate::auth::Caller;
use crate::error::{Error, ErrorName, Result};
use crate::state::AppState;

fn invalid_test(id: &str) -> Error {
    Error::new(
        ErrorName::InvalidTestId,
        format!("no test {id:?} on this account; list your tests with GET /v5/tests"),
    )
}

/// The caller's test of the given kind, or `InvalidTestID`.
pub async fn owned_test(
    state: &AppState,
    caller: &Caller,
    id: &str,
    kind: TestKind,
) -> Result<TestRow> {
    owned(state, caller, id, Some(kind)).await
}

/// The caller's test whatever its kind (the web pages show both), or `InvalidTestID`.
pub async fn owned_test_of_any_kind(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<TestRow> {
    owned(state, caller, id, None).await
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
    kind: Option<TestKind>,
) -> Result<TestRow> {
    let Some(account) = caller.account() else {
        return Err(invalid_test(id));
    };
    if domain::TestId::parse(id).is_none() {
        return Err(invalid_test(id));
    }
    match state.store.test(account.id, id).await? {
        Some(t) if kind.is_none_or(|k| t.kind == k) => Ok(t),
        _ => Err(invalid_test(id)),
    }
}

pub fn no_campaign(guid: &str) -> Error {
    Error::new(
        ErrorName::NoCampaigns,
        format!("no campaign {guid:?} for this account; GET /v5/analytics/campaigns lists yours"),
    )
}

/// A storage failure as the §7.2 name of what was being done; the cause goes to the log.
pub fn failed(name: ErrorName, doing: &str) -> impl FnOnce(store::StoreError) -> Error + '_ {
    move |e| {
        tracing::error!(error = %e, "{doing} failed");
        Error::new(
            name,
            format!("{doing} failed; the failure was logged, please retry shortly"),
        )
    }
}

/// The caller's analytics campaign `guid`: `InvalidData` for a malformed guid, `NoCampaigns` for
/// one that is not the caller's.
pub async fn owned_campaign(state: &AppState, caller: &Caller, guid: &str) -> Result<CampaignRow> {
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

/// `InvalidData` for a string that is not a campaign guid.
pub fn check_guid(guid: &str) -> Result<()> {
    if analytics::is_guid(guid) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorName::InvalidData,
            format!(
                "guid {guid:?} is malformed: a campaign guid looks like 0123abcd-0000-4000-8000-00000000beef"
            ),
        ))
    }
}
