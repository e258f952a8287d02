//! What mailproof does to submitted email source before it is stored or drawn: transfer and
//! charset decoding, CSS inlining, the text-only view, the inbox preview, and fetching remote content under the
//! network policy.
//!
//! Invariant: nothing here touches the database; fetching goes only through [`netpolicy`].

pub mod checks;
#[cfg(test)]
mod corpus;
pub mod decode;
pub mod dns;
pub mod fetch;
pub mod inbox;
pub mod inline;
pub mod links;
pub mod netpolicy;
pub mod text;
pub mod uribl;

pub use decode::{decode_source, DecodeError, TransferEncoding};
pub use fetch::{fetch_source, FetchError, FetchedSource};
pub use inline::{inline_css, InlineError};
pub use netpolicy::NetPolicy;
pub use text::text_only;
