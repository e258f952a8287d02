//! The sender-requirements report (issue 30): what `spam::requirements` finds on a spam test's
//! mail, stored as JSON, answered by the API and drawn by the test page. One card per mailbox
//! provider, each rule with its status, what was seen, the fix and the provider's source.

use serde::{Deserialize, Serialize};

use crate::SpamMethod;

/// How firmly a provider asks for a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Need {
    /// Mail breaking it is rejected or sent to spam.
    Required,
    /// A published best practice.
    Recommended,
}

/// One rule's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    NotApplicable,
    /// Not verified (no DNS, a lookup that did not answer); says why in `seen`.
    NotChecked,
}

/// What a provider would do with the message, from its required rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderVerdict {
    /// Every required rule passes (or does not apply).
    Meets,
    /// A required rule fails.
    WouldReject,
    /// No required rule fails, but some could not be checked.
    NotChecked,
}

/// The sender-requirements report of one message: a card per provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The spam test's method: which rules could apply.
    pub method: SpamMethod,
    pub providers: Vec<ProviderReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderReport {
    pub provider: String,
    pub name: String,
    pub verdict: ProviderVerdict,
    /// One line for the card: "Gmail: would reject — …".
    pub summary: String,
    pub enforcement: String,
    pub source: String,
    pub rules: Vec<RuleReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleReport {
    pub rule: String,
    pub title: String,
    pub need: Need,
    pub status: Status,
    /// What was seen, in words; for `not_checked`, why not.
    pub seen: String,
    /// The fix in one sentence, for a failed rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    pub source: String,
}
