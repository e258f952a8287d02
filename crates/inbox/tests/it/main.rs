//! The inbound processor against a real database and real filters: what happens to seed mail when
//! a filter is down or the seed key is not yet bound to a test; and the svc sender's messages.

mod processor;
mod svc;
