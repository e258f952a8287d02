//! Completion webhooks: the JSON summary POSTed when a test completes, its signature header and
//! the per-account signing secret (`summary`, the wire shape the API documents and `api` shows the
//! header of), and the delivery worker that builds, signs and posts it (`delivery`).
//!
//! Below `api` and `jobs`: the API hands out secrets and the worker signs with them, so the shape
//! and the signature live once, here.

mod delivery;
mod summary;

pub use delivery::{DeliveryError, DeliveryWorker, Retries};
pub use summary::{
    new_secret, signature, ClientStatus, Counts, FilterVerdict, Summary, DELIVERY_HEADER,
    EVENT_COMPLETED, EVENT_HEADER, SIGNATURE_HEADER,
};
