//! The line-delimited JSON spoken between the engine (the library) and the helper process.
//!
//! One request line in, one reply line out, strictly in turn: the helper owns a single WebView and
//! renders one page at a time. The PNG travels through a file in the engine's work directory, not
//! through the pipe, so multi-megabyte screenshots never pass through a JSON parser.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The largest request line the helper accepts; keeps a runaway line from exhausting its memory.
/// Sized for the largest document mailproof renders (`render` refuses bigger ones before they
/// get here); JSON escaping can grow HTML up to six-fold (`\u0001`), hence the factor.
pub const MAX_REQUEST_LINE_BYTES: usize = 6 * domain::MAX_HTML_BYTES + 64 * 1024;

/// The largest reply line the engine accepts from the helper.
pub const MAX_REPLY_LINE_BYTES: usize = 64 * 1024;

/// Cairo cannot make an image surface taller or wider than this many device pixels.
pub const MAX_SURFACE_PX: u32 = 32_767;

/// Settings the helper takes once, on its command line, for its whole life.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HelperOptions {
    /// Forward proxy every request goes through (`http://127.0.0.1:PORT`), with no bypass list.
    pub proxy: Option<String>,
    /// How long to wait for subresources after the document itself loaded before shooting anyway.
    pub resource_wait_ms: u64,
}

/// One page to render.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RenderRequest {
    pub html: String,
    /// Viewport width in CSS pixels.
    pub width: u32,
    /// Viewport height in CSS pixels.
    pub height: u32,
    pub dark: bool,
    pub block_images: bool,
    /// Where the helper writes the PNG of the whole document.
    pub out: PathBuf,
}

/// The helper's answer to one [`RenderRequest`], or its announcement that it is ready.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Sent once after start-up: GTK and the WebView are up and the helper reads requests.
    Ready { pid: u32 },
    /// The PNG was written to the request's `out` path.
    Rendered {
        width_px: u32,
        height_px: u32,
        /// False when the resource wait ran out and the page was shot before it finished.
        loaded: bool,
        timings: Timings,
    },
    /// The page could not be rendered; the helper stays usable unless `fatal`.
    Failed { message: String, fatal: bool },
}

/// Where a render's time went, for logs and benchmarks.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Timings {
    pub load_ms: u64,
    pub snapshot_ms: u64,
    pub encode_ms: u64,
}
