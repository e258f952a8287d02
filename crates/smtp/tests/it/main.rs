//! Integration tests of the smtp crate: the real inbound server over TCP, outbound sending against a
//! local aiosmtpd server with AUTH, and DKIM signatures checked by a verifier.

mod dkim;
mod inbound;
mod outbound;
mod support;
