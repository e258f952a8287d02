//! The visual diff page: a test's screenshots against another test's of the same account, per
//! client present in both, through the comparison the API runs too (`app::diff`), so the figures
//! and highlight images are those of `GET /v5/email/tests/<id>/diff/<other>`. The page is sent
//! before any comparison; it fetches each client's (`?client=`) in turn.

use app::diff::{self, ClientOutcome, Comparison, VariantOutcome, Variants};
use app::screenshots as shots;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::{Picture, ScreenshotStatus, TestKind, Variant};
use maud::{html, Markup};
use serde::Deserialize;
use store::{ClientRow, ListFilter, TestRow};

use crate::pages::{chrome, display_name, owned};
use crate::session::Viewer;
use crate::{date, internal, layout, not_found, page, WebState};

/// Tests offered in the picker: the newest of the account, enough to find last week's version.
const PICKER_SIZE: i64 = 20;

#[derive(Deserialize, Default)]
pub struct DiffQuery {
    with: Option<String>,
    /// One client's comparison only: what the page fetches for each client as it goes.
    client: Option<String>,
}

/// One test offered in the picker.
struct Choice {
    id: String,
    label: String,
}

/// The account's recent email tests other than `test`, newest first, and the one to preselect:
/// the previous version of the same email (`app::review::previous_version`).
async fn choices(
    state: &WebState,
    account_id: i64,
    test: &TestRow,
) -> Result<(Vec<Choice>, Option<String>), Response> {
    let recent = ListFilter {
        kind: Some(TestKind::Email),
        hide_subject_prefixes: crate::clickmap::helper_prefixes(),
        limit: PICKER_SIZE,
        ..ListFilter::default()
    };
    let store = &state.app.store;
    let recent = match store.list_tests(account_id, &recent).await {
        Ok(r) => r,
        Err(e) => return Err(internal("listing tests failed", e)),
    };
    let mut listed: Vec<store::ListedTest> =
        recent.into_iter().filter(|t| t.id != test.id).collect();
    let previous = match app::review::previous_version(&state.app, test).await {
        Ok(p) => p,
        Err(e) => return Err(crate::app_error(&e)),
    };
    if let Some(p) = &previous {
        if !listed.iter().any(|t| t.id == p.test_id) {
            listed.push(store::ListedTest {
                id: p.test_id.clone(),
                kind: TestKind::Email,
                created_at: p.created_at,
                headers: Default::default(),
            });
        }
    }
    let ids: Vec<String> = listed.iter().map(|t| t.id.clone()).collect();
    let summaries = match store.test_summaries(account_id, &ids).await {
        Ok(s) => s,
        Err(e) => return Err(internal("reading test summaries failed", e)),
    };
    let out = listed
        .iter()
        .map(|t| Choice {
            id: t.id.clone(),
            label: format!(
                "{} — {}",
                summaries
                    .get(&t.id)
                    .map_or("(content removed)", |s| s.subject.as_str()),
                date(t.created_at)
            ),
        })
        .collect();
    Ok((out, previous.map(|p| p.test_id)))
}

/// The "compare with another test" form, on the test's page and atop the diff page.
pub(crate) async fn picker(
    state: &WebState,
    viewer: &Viewer,
    test: &TestRow,
    current: Option<&str>,
) -> Result<Markup, Response> {
    let Some(account) = viewer.caller.account() else {
        return Ok(html! {});
    };
    let (choices, previous) = choices(state, account.id, test).await?;
    let selected = current.map(str::to_string).or(previous.clone());
    Ok(html! {
        section.diff-pick aria-labelledby="diff-pick-h" {
            h2 id="diff-pick-h" { "Visual diff" }
            @if choices.is_empty() {
                p { "There is no other email test on this account to compare with." }
            } @else {
                form.inline method="get" action={ "/tests/" (test.id) "/diff" } {
                    label for="diff-with" { "Compare this test with" }
                    select id="diff-with" name="with" {
                        // Nothing is preselected unless it is the previous version of this email.
                        option value="" selected[selected.is_none()] { "Choose a test" }
                        @for c in &choices {
                            option value=(c.id) selected[selected.as_deref() == Some(c.id.as_str())] {
                                (c.label)
                                @if previous.as_deref() == Some(c.id.as_str()) { " (previous version)" }
                            }
                        }
                    }
                    button type="submit" { "Show changes" }
                }
            }
        }
    })
}

fn unfinished(rows: &[ClientRow]) -> usize {
    rows.iter().filter(|r| !r.status.is_final()).count()
}

fn percent(share: f64) -> String {
    if share == 0.0 {
        "0 % (no change)".to_string()
    } else if share < 0.0001 {
        "less than 0.01 %".to_string()
    } else {
        format!("{:.2} %", share * 100.0)
    }
}

fn extra_height(px: i64) -> String {
    if px == 0 {
        "none (same height)".to_string()
    } else {
        format!("{px:+} px")
    }
}

fn names(state: &WebState, ids: &[String]) -> String {
    ids.iter()
        .map(|c| display_name(state, c))
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn diff_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<DiffQuery>,
) -> Response {
    let test = match owned(&state, &viewer, &id).await {
        Ok(t) if t.kind == TestKind::Email => t,
        Ok(_) => return not_found(),
        Err(r) => return r,
    };
    let with = q.with.as_deref().map(str::trim).filter(|w| !w.is_empty());
    let other = match with {
        None => None,
        Some(w) => match owned(&state, &viewer, w).await {
            Ok(t) if t.kind == TestKind::Email => Some(t),
            Ok(_) => return not_found(),
            Err(r) => return r,
        },
    };
    let pick = match picker(&state, &viewer, &test, with).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let body = match &other {
        None => html! { p { "Pick a test above to see what changed between the two." } },
        Some(other) => match comparison(&state, &test, other, q.client.as_deref()).await {
            Ok(m) => m,
            Err(r) => return r,
        },
    };
    let main = html! {
        p { a href={ "/tests/" (test.id) } { "← Back to “" (test.subject) "”" } }
        h1 { "Changes in “" (test.subject) "”" }
        (pick)
        (body)
    };
    page(
        StatusCode::OK,
        layout("Visual diff", chrome(&viewer), None, main),
    )
}

/// The comparison of `other` (before) with `test` (after): the highlights are drawn over `test`'s
/// screenshots, and extra height is `test`'s minus `other`'s.
///
/// The page is sent before any screenshot is compared: each client screenshotted in both tests
/// is a placeholder that the page fills by fetching that client's comparison (`?client=`), one
/// after another, the summary's figures arriving with them and the pictures loading as they are
/// scrolled to. Without script, each placeholder links to its client's comparison.
async fn comparison(
    state: &WebState,
    test: &TestRow,
    other: &TestRow,
    only: Option<&str>,
) -> Result<Markup, Response> {
    let store = &state.app.store;
    let (rows, other_rows) = match (
        store.test_clients(&test.id).await,
        store.test_clients(&other.id).await,
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Err(internal("reading the tests' clients failed", e)),
    };
    // What is computed now: one client's diff when asked for; nothing otherwise.
    let computed: Option<Comparison> = match only {
        Some(client) => match diff::compare_clients(
            &state.app,
            other,
            test,
            Variants::Only(Variant::Default),
            Some(client),
        )
        .await
        {
            Ok(c) => Some(c),
            Err(e) => return Err(crate::app_error(&e)),
        },
        None => None,
    };
    let now = chrono::Utc::now().timestamp();
    let in_test = |id: &str| rows.iter().find(|r| r.client_id == id);
    // Both tests' clients in the order of the earlier one, as `diff::compare` lists them.
    let common: Vec<(&ClientRow, &ClientRow)> = other_rows
        .iter()
        .filter(|o| only.is_none_or(|c| c == o.client_id))
        .filter_map(|o| in_test(&o.client_id).map(|t| (o, t)))
        .collect();
    let only_in = |a: &[ClientRow], b: &[ClientRow]| -> Vec<String> {
        a.iter()
            .filter(|r| !b.iter().any(|o| o.client_id == r.client_id))
            .map(|r| r.client_id.clone())
            .collect()
    };
    let (only_in_before, only_in_after) =
        (only_in(&other_rows, &rows), only_in(&rows, &other_rows));
    let both_complete = |(o, t): &(&ClientRow, &ClientRow)| {
        o.status == ScreenshotStatus::Complete && t.status == ScreenshotStatus::Complete
    };
    let figures = |client: &str| -> Option<(f64, i64)> {
        computed
            .as_ref()?
            .clients
            .iter()
            .find(|c| c.client == client)
            .and_then(|cc| match &cc.outcome {
                ClientOutcome::Compared(variants) => {
                    variants.iter().find_map(|(_, out)| match out {
                        VariantOutcome::Diffed { diff: d, .. } => {
                            Some((d.changed_share(), d.extra_height))
                        }
                        VariantOutcome::Failed(_) => None,
                    })
                }
                ClientOutcome::NotCompared { .. } => None,
            })
    };
    let base = format!("/tests/{}/diff?with={}", test.id, other.id);
    // A test compared with itself is said to be processing once.
    let sides: &[(&TestRow, &[ClientRow])] = if test.id == other.id {
        &[(test, &rows)]
    } else {
        &[(test, &rows), (other, &other_rows)]
    };
    let processing: Vec<(&TestRow, usize, usize)> = sides
        .iter()
        .map(|(t, r)| (*t, unfinished(r), r.len()))
        .filter(|(_, n, _)| *n > 0)
        .collect();
    let summarised: Vec<&(&ClientRow, &ClientRow)> =
        common.iter().filter(|p| both_complete(p)).collect();
    Ok(html! {
        p.meta {
            "Before: " a href={ "/tests/" (other.id) } { "“" (other.subject) "”" } ", " (date(other.created_at))
            ". After: this test, " (date(test.created_at)) "."
            @if test.id == other.id { " (The same test on both sides: nothing can differ.)" }
        }
        @if only.is_some() {
            p { a href=(base) { "← Every client of the comparison" } }
        }
        @for (t, left, total) in &processing {
            p.note role="status" {
                "“" (t.subject) "” (" (date(t.created_at)) ") is still processing: "
                (total - left) " of " (total) " screenshots finished. Clients not finished in both tests are listed without figures; reload this page once processing ends."
            }
        }
        @if common.is_empty() && only.is_none() {
            p.error role="alert" {
                "These two tests have no client in common, so there is nothing to compare. "
                "“" (other.subject) "” has " (names(state, &only_in_before)) "; this test has "
                (names(state, &only_in_after)) ". Pick a test made for some of the same clients."
            }
        }
        @if !summarised.is_empty() {
            table.list.diff-summary {
                caption { "Most changed first" @if only.is_none() && summarised.len() > 1 { span.help #diff-progress role="status" {} } }
                thead { tr { th scope="col" { "Client" } th scope="col" { "Changed" } th scope="col" { "Extra height" } } }
                tbody {
                    @for (o, _) in &summarised {
                        @let client = o.client_id.as_str();
                        @match figures(client) {
                            Some((share, extra)) => tr data-client=(client) data-share=(share) {
                                td { a href={ "#d-" (client) } { (display_name(state, client)) } }
                                td { (percent(share)) }
                                td { (extra_height(extra)) }
                            },
                            None => tr data-client=(client) data-pending="1" {
                                td { a href={ "#d-" (client) } { (display_name(state, client)) } }
                                td { "…" }
                                td { "…" }
                            },
                        }
                    }
                }
            }
        }
        @for pair in &common {
            @let client = pair.0.client_id.as_str();
            @let name = display_name(state, client);
            @if !both_complete(pair) {
                section.diff-client data-client=(client) aria-labelledby={ "d-" (client) } {
                    h2 id={ "d-" (client) } { (name) }
                    p.status data-state="not-compared" {
                        "Not compared: only screenshots Complete in both tests are. Before: "
                        (pair.0.status.as_str()) "; after: " (pair.1.status.as_str()) "."
                    }
                }
            } @else if let Some(cc) = computed.as_ref().and_then(|c| c.clients.iter().find(|cc| cc.client == client)) {
                (client_section(state, test, other, cc, now))
            } @else {
                section.diff-client data-client=(client) aria-labelledby={ "d-" (client) }
                    data-diff-src={ (base) "&client=" (client) } {
                    h2 id={ "d-" (client) } { (name) }
                    p.status data-state="pending" {
                        a href={ (base) "&client=" (client) } { "Compare " (name) }
                        " (the page compares each client in turn)"
                    }
                }
            }
        }
        @if only.is_none() && !common.is_empty() && !only_in_before.is_empty() {
            p.help { "Only in “" (other.subject) "”: " (names(state, &only_in_before)) "." }
        }
        @if only.is_none() && !common.is_empty() && !only_in_after.is_empty() {
            p.help { "Only in this test: " (names(state, &only_in_after)) "." }
        }
    })
}

/// One client's compared screenshots: figures, the slider and the three pictures (loaded as they
/// are scrolled to).
fn client_section(
    state: &WebState,
    test: &TestRow,
    other: &TestRow,
    cc: &diff::ClientComparison,
    now: i64,
) -> Markup {
    let name = display_name(state, &cc.client);
    html! {
        section.diff-client data-client=(cc.client) aria-labelledby={ "d-" (cc.client) } {
            h2 id={ "d-" (cc.client) } { (name) }
            @match &cc.outcome {
                ClientOutcome::NotCompared { test_status, other_status } => {
                    p.status data-state="not-compared" {
                        "Not compared: only screenshots Complete in both tests are. Before: "
                        (test_status.as_str()) "; after: " (other_status.as_str()) "."
                    }
                }
                ClientOutcome::Compared(variants) => {
                    @if variants.is_empty() {
                        p.status { "The default screenshot is missing from one of the tests." }
                    }
                    @for (_, out) in variants {
                        @match out {
                            VariantOutcome::Failed(why) => p.error { "Not compared: " (why) },
                            VariantOutcome::Diffed { diff: d, diff_image } => {
                                dl.meta.diff-figures {
                                    dt { "Changed" } dd.changed data-share=(d.changed_share()) { (percent(d.changed_share())) }
                                    dt { "Changed regions" } dd.regions { (d.boxes.len()) }
                                    dt { "Extra height" } dd.extra { (extra_height(d.extra_height)) }
                                }
                                @let before_src = shots::url(&state.app.settings, &other.id, &cc.client, &Picture::Shot(Variant::Default), now);
                                @let after_src = shots::url(&state.app.settings, &test.id, &cc.client, &Picture::Shot(Variant::Default), now);
                                div.swipe hidden {
                                    label { "Before " input.swipe-range type="range" min="0" max="100" value="50" aria-label={ "Slide between before and after in " (name) }; " after" }
                                    div.swipe-stage {
                                        img.swipe-before src=(before_src) alt={ "Before, in " (name) } loading="lazy";
                                        img.swipe-after src=(after_src) alt={ "After, in " (name) } loading="lazy";
                                    }
                                }
                                div.compare.diff-shots tabindex="0" role="region" aria-label={ "Screenshots of " (name) ": changes, before and after" } {
                                    figure {
                                        figcaption { "Changes highlighted" }
                                        img.highlight src=(diff_image) loading="lazy"
                                            alt={ "The email in " (name) " with the changes since “" (other.subject) "” highlighted" };
                                    }
                                    figure {
                                        figcaption { "Before" }
                                        img.before src=(before_src) loading="lazy"
                                            alt={ "Screenshot of “" (other.subject) "” in " (name) };
                                    }
                                    figure {
                                        figcaption { "After" }
                                        img.after src=(after_src) loading="lazy"
                                            alt={ "Screenshot of this test in " (name) };
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_read_as_percentages_and_zero_says_so() {
        assert_eq!(percent(0.0), "0 % (no change)");
        assert_eq!(percent(0.00001), "less than 0.01 %");
        assert_eq!(percent(0.1234), "12.34 %");
        assert_eq!(extra_height(0), "none (same height)");
        assert_eq!(extra_height(-12), "-12 px");
        assert_eq!(extra_height(30), "+30 px");
    }
}
