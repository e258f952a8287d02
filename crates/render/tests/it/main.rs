//! Integration tests of the renderer against real Chromium, Firefox ESR and WebKitGTK.
//!
//! One renderer with all three engines is shared by every test in this binary (starting browsers
//! is the slow part); it runs on one shared runtime so its background tasks outlive each test.

mod checks;
mod dark;
mod heavy;
mod hostile;
mod leakage;
mod limits;
mod network;

mod probe;
mod recovery;
mod startup;
mod support;
mod variants;
