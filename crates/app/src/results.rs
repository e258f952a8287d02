//! Reading a test's results as the operations need them: its stored content, one of its clients,
//! the code analysis and tips for a client. The caller already owns the test (see `owned`).

use store::{ClientRow, TestRow};

use crate::auth::Caller;
use crate::error::{Error, ErrorName, Result};
use crate::state::AppState;

/// The email's HTML as stored, or `NotFound` once retention removed it.
pub async fn stored_content(state: &AppState, test: &TestRow) -> Result<String> {
    state.store.test_content(&test.id).await?.ok_or_else(|| {
        Error::new(
            ErrorName::NotFound,
            "this test's content was removed: tests keep their content for 90 days after processing",
        )
    })
}

/// The client `client` (a URL segment) of `test`, or `ClientNotFound` naming the test's clients.
pub async fn test_client(state: &AppState, test: &TestRow, client: &str) -> Result<ClientRow> {
    let client = client.trim().to_ascii_lowercase();
    let rows = state.store.test_clients(&test.id).await?;
    let names = || {
        rows.iter()
            .map(|r| r.client_id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match rows.iter().find(|r| r.client_id == client) {
        Some(row) => Ok(row.clone()),
        None => Err(Error::new(
            ErrorName::ClientNotFound,
            format!(
                "client {client:?} is not in test {}; its clients are: {}",
                test.id,
                names()
            ),
        )),
    }
}

/// The code analysis of `test`'s email for one of its clients, as the endpoint computes it; the
/// web pages show the same findings. The caller must already own `test`.
pub async fn client_analysis(
    state: &AppState,
    test: &TestRow,
    client: &str,
) -> Result<emulate::Analysis> {
    let row = test_client(state, test, client).await?;
    let profile = state.catalog.get(&row.client_id).cloned().ok_or_else(|| {
        Error::new(
            ErrorName::ClientNotFound,
            format!(
                "client {:?} of this test is no longer in the client catalog: create a new test",
                row.client_id
            ),
        )
    })?;
    let html = stored_content(state, test).await?;
    let rules = state.rules.clone();
    let mut analysis =
        tokio::task::spawn_blocking(move || emulate::analyze(&html, &profile, &rules))
            .await
            .map_err(|e| Error::internal("code analysis failed", e))?
            .map_err(|e| Error::internal("code analysis failed", e))?;
    // What depends on the laid-out page is said as the screenshot measured it.
    analysis.measured_by_rule_set(row.rule_set.as_deref());
    Ok(analysis)
}

/// The tips for `client` (an id or URL segment) as the caller may see them: the normalised id and
/// the ranked tips, or `InvalidClient` for an unknown client or one outside the caller's plan.
pub fn client_tips(
    state: &AppState,
    caller: &Caller,
    client: &str,
) -> Result<(String, Vec<emulate::Tip>)> {
    let id = client.trim().to_ascii_lowercase();
    let profile = state.catalog.get(&id).ok_or_else(|| {
        Error::new(
            ErrorName::InvalidClient,
            format!(
                "no client {id:?} in the catalog; list the client ids with GET /v5/email/clients"
            ),
        )
    })?;
    // A client-restricted or free plan hears about the clients it can test, as in the client list.
    if !intake::ClientRules::new(&state.catalog, caller.account()).usable(profile) {
        return Err(Error::new(
            ErrorName::InvalidClient,
            format!("client {id:?} is not available on your plan; GET /v5/email/clients lists the ids you can use"),
        ));
    }
    let tips = emulate::tips(profile, &state.rules)
        .map_err(|e| Error::internal("client tips failed", e))?;
    Ok((id, tips))
}
