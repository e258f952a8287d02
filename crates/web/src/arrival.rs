//! "Will it arrive": the mailbox providers' sender requirements on a test's page, one card per
//! provider, from the report `GET /v5/spam/tests/<id>/requirements` answers (the same stored
//! `domain::requirements::Report`). The status poll carries the section once it is ready, so a
//! page opened before the mail came fills in by itself.

use domain::requirements::{Need, ProviderVerdict, Report, RuleReport, Status};
use domain::SpamMethod;
use maud::{html, Markup};
use store::TestRow;

use crate::date;
use crate::WebState;

/// The section of a test with spam processing, and whether it still waits for the first message.
pub struct Section {
    pub markup: Markup,
    pub pending: bool,
}

/// The section for `test`, `None` for a test without spam processing.
pub async fn section(
    state: &WebState,
    test: &TestRow,
) -> Result<Option<Section>, store::StoreError> {
    if test.spam_method.is_none() {
        return Ok(None);
    }
    let report = match state.app.store.sender_requirements(&test.id).await {
        Ok(found) => found,
        Err(e @ store::StoreError::Corrupt(_)) => {
            tracing::error!(test_id = test.id, error = %e, "a stored sender-requirements report does not read back; the page shows it as pending");
            None
        }
        Err(e) => return Err(e),
    };
    Ok(Some(Section {
        pending: report.is_none(),
        markup: markup(report.as_ref().map(|(r, at)| (r, *at))),
    }))
}

fn verdict_label(v: ProviderVerdict) -> (&'static str, &'static str) {
    match v {
        ProviderVerdict::Meets => ("meets", "Meets the requirements"),
        ProviderVerdict::WouldReject => ("would-reject", "Would reject"),
        ProviderVerdict::NotChecked => ("not-checked", "Not fully checked"),
    }
}

fn status_label(s: Status) -> (&'static str, &'static str) {
    match s {
        Status::Pass => ("pass", "Passes"),
        Status::Fail => ("fail", "Fails"),
        Status::NotApplicable => ("not-applicable", "Does not apply"),
        Status::NotChecked => ("not-checked", "Not checked"),
    }
}

/// The summary without the card's own words: the heading names the provider and the verdict
/// line says the verdict, so the card shows what follows ("… would reject — <why>").
pub(crate) fn reason<'a>(name: &str, summary: &'a str) -> &'a str {
    summary
        .split_once(" — ")
        .map(|(_, why)| why)
        .or_else(|| {
            summary
                .strip_prefix(name)
                .and_then(|s| s.strip_prefix(": "))
        })
        .unwrap_or(summary)
}

/// What needs doing first: failed rules, then those not checked, then the rest in file order.
fn failures_first(rules: &[RuleReport]) -> Vec<&RuleReport> {
    let rank = |s: Status| match s {
        Status::Fail => 0,
        Status::NotChecked => 1,
        Status::Pass => 2,
        Status::NotApplicable => 3,
    };
    let mut sorted: Vec<&RuleReport> = rules.iter().collect();
    sorted.sort_by_key(|r| rank(r.status));
    sorted
}

fn markup(report: Option<(&Report, i64)>) -> Markup {
    html! {
        @match report {
            None => {
                section #arrival aria-labelledby="arrival-h" data-state="pending" {
                    h2 #arrival-h { "Will it arrive" }
                    p.pending role="status" {
                        "What Gmail, Yahoo and Microsoft require of senders is checked when the test's message reaches the first seed address."
                    }
                }
            }
            Some((r, at)) => {
                section #arrival aria-labelledby="arrival-h" data-state="complete" {
                    h2 #arrival-h { "Will it arrive" }
                    p.help {
                        "What the large mailbox providers require of senders, checked on the first message that arrived (" (date(at)) "). "
                        @if r.method == SpamMethod::Svc {
                            "mailproof sent this copy itself (svc method), so the rules about your own server and signature do not apply here: test with the seed method to check them."
                        }
                    }
                    div.providers {
                        @for p in &r.providers {
                            @let (v, label) = verdict_label(p.verdict);
                            article.provider data-provider=(p.provider) data-verdict=(v) aria-labelledby={ "prov-" (p.provider) } {
                                h3 id={ "prov-" (p.provider) } { (p.name) }
                                p.verdict { strong { (label) } }
                                p.summary { (reason(&p.name, &p.summary)) }
                                p.help { "Enforcement: " (p.enforcement) ". " a href=(p.source) rel="noopener noreferrer" { "Source" span.vh { ": " (p.name) "'s sender guidelines" } } }
                                details open[p.verdict != ProviderVerdict::Meets] {
                                    summary { "Each rule" span.vh { " of " (p.name) } }
                                    table.list.rules {
                                        thead { tr {
                                            th scope="col" { "Rule" } th scope="col" { "Asked as" } th scope="col" { "Result" } th scope="col" { "Seen" }
                                        } }
                                        tbody {
                                            @for rule in failures_first(&p.rules) {
                                                @let (state, result) = status_label(rule.status);
                                                tr data-rule=(rule.rule) data-status=(state) {
                                                    td { (rule.title) }
                                                    td { @if rule.need == Need::Required { "Required" } @else { "Recommended" } }
                                                    td.result { (result) }
                                                    td {
                                                        (rule.seen)
                                                        @if let Some(fix) = &rule.fix { " " br; span.fix { "Fix: " (fix) } }
                                                        " " a href=(rule.source) rel="noopener noreferrer" { "source" span.vh { " for " (rule.title) } }
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
            }
        }
    }
}
