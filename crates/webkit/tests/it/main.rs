//! Integration tests of the WebKit engine against real WebKitGTK on its own Xvfb.

mod recovery;
mod sizes;
mod support;
mod variants;
