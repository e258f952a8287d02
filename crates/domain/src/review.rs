//! Reviews of an email test (issue 32): a reviewer's decision on one version, and the state of a
//! version that those decisions give.

use serde::{Deserialize, Serialize};
use strum::EnumString;

use crate::spelling::{vocabulary, Spelled};

vocabulary! {
    /// One reviewer's decision on a test (a version of an email); the latest one counts.
    #[derive(Serialize, Deserialize, EnumString)]
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum Decision {
        Approved,
        ChangesRequested,
    }
}

impl Spelled for Decision {
    const WHAT: &'static str = "review decision";
}

vocabulary! {
    /// Where a version stands: changes requested by anyone outweighs approvals; approved needs
    /// one approval and no request for changes.
    #[derive(Serialize, Deserialize, EnumString)]
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum ApprovalState {
        Awaiting,
        Approved,
        ChangesRequested,
    }
}

impl ApprovalState {
    /// The state the reviewers' latest decisions give.
    pub fn of(decisions: impl IntoIterator<Item = Decision>) -> ApprovalState {
        let mut state = ApprovalState::Awaiting;
        for d in decisions {
            match d {
                Decision::ChangesRequested => return ApprovalState::ChangesRequested,
                Decision::Approved => state = ApprovalState::Approved,
            }
        }
        state
    }

    /// As a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            ApprovalState::Awaiting => "Awaiting review",
            ApprovalState::Approved => "Approved",
            ApprovalState::ChangesRequested => "Changes requested",
        }
    }
}

impl Decision {
    pub fn label(self) -> &'static str {
        match self {
            Decision::Approved => "Approved",
            Decision::ChangesRequested => "Requested changes",
        }
    }
}

/// Which email a version is, for comparing versions: SHA-256 of its stored HTML, in hex.
pub fn content_digest(html: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(html.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_requested_by_one_reviewer_outweigh_approvals() {
        use Decision::*;
        assert_eq!(ApprovalState::of([]), ApprovalState::Awaiting);
        assert_eq!(ApprovalState::of([Approved]), ApprovalState::Approved);
        assert_eq!(
            ApprovalState::of([Approved, ChangesRequested, Approved]),
            ApprovalState::ChangesRequested
        );
        assert_eq!(
            Decision::parse_known("changes_requested"),
            Ok(ChangesRequested)
        );
        assert!(Decision::parse_known("ok").is_err());
    }
}
