//! Integration tests of the smtp crate: the real inbound server over TCP, outbound sending against
//! the test kit's SMTP stub with AUTH, and DKIM signatures checked by a verifier.

mod dkim;
mod inbound;
mod outbound;
mod support;
