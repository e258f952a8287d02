//! What mailproof does to submitted email source before it is stored or drawn: transfer and
//! charset decoding, CSS inlining, the text-only view, and fetching remote content under the
//! network policy.
//!
//! Invariant: nothing here touches the database; fetching goes only through [`netpolicy`].

pub mod netpolicy;
