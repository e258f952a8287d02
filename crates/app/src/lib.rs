//! mailproof's application layer: the operations the HTTP API (`api`) and the web interface
//! (`web`) both perform, between HTTP and storage.
//!
//! Invariants:
//! - Inputs and outputs are typed: no JSON and no HTTP types here. `api` parses the wire shapes
//!   into these inputs and serializes the outputs; `web` builds the inputs from its forms.
//! - Every refusal is an [`Error`] carrying a spec §7.1 name and a message saying how to fix the
//!   request; only `api` turns it into the §7 JSON shape.
//! - Ownership is checked here, once ([`owned`]): another account's test id is `InvalidTestID`,
//!   another account's campaign guid is `NoCampaigns`.

pub mod auth;
pub mod campaign_changes;
pub mod campaigns;
pub mod checks;
pub mod create;
pub mod diff;
pub mod error;
pub mod inbox;
pub mod links;
pub mod lists;
mod login;
pub mod owned;
pub mod results;
pub mod review;
pub mod screenshots;
pub mod state;
#[cfg(feature = "testing")]
pub mod testing;

pub use auth::{check_credentials, hash_password, Caller};
pub use error::{Error, ErrorName, Result};
pub use owned::{owned_campaign, owned_test, owned_test_of_any_kind};
pub use state::{
    AppState, RateLimiter, Settings, SmtpProbe, SmtpSendError, SmtpSendRequest, SpamClientInfo,
};
