//! The states of a leased queue's row, as its `state` column and the callback endpoint spell them.

use serde::{Deserialize, Serialize};
use strum::EnumString;

use crate::spelling::{vocabulary, Spelled};

vocabulary! {
    /// Where a queued piece of work stands. Each queue uses four of these: one waiting state
    /// (`queued`, or `new` for inbound mail), `leased`, one done state (`done`, or `delivered` for
    /// callbacks) and `failed`; `store::Queue` says which.
    #[derive(Serialize, Deserialize, EnumString)]
    #[serde(rename_all = "lowercase")]
    #[strum(serialize_all = "lowercase")]
    pub enum QueueState {
        /// Waiting to be claimed, the first time or again after a failed attempt.
        Queued,
        /// Inbound mail accepted over SMTP and not yet processed (the inbound queue's `queued`).
        New,
        /// Claimed by a worker under a lease.
        Leased,
        Done,
        /// A callback the receiver answered with 2xx (the callback queue's `done`).
        Delivered,
        /// Given up after the last attempt.
        Failed,
    }
}

impl Spelled for QueueState {
    const WHAT: &'static str = "queue state";
}

#[cfg(test)]
mod tests {
    use strum::VariantNames;

    use super::*;

    #[test]
    fn every_state_reads_back_from_its_stored_spelling() {
        let spelled: Vec<&str> = QueueState::VARIANTS.to_vec();
        assert_eq!(
            spelled,
            ["queued", "new", "leased", "done", "delivered", "failed"]
        );
        for s in spelled {
            let state = QueueState::parse_known(s).expect("known");
            assert_eq!(state.as_str(), s);
            assert_eq!(state.to_string(), s);
            assert_eq!(serde_json::to_value(state).ok(), Some(s.into()));
        }
    }

    #[test]
    fn an_unknown_stored_state_is_refused_by_name() {
        let err = QueueState::parse_known("Done").expect_err("spellings are exact");
        assert_eq!(err.what, "queue state");
        assert_eq!(
            err.to_string(),
            "\"Done\" is not a queue state (one of: queued, new, leased, done, delivered, failed)"
        );
        assert!(QueueState::parse_known("").is_err());
    }
}
