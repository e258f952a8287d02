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

/// The largest reply line the engine accepts from the helper: room for [`DRAWN_PAGE_SCRIPT`]'s
/// 400 addresses of up to 2,049 characters each.
pub const MAX_REPLY_LINE_BYTES: usize = 1024 * 1024;

/// Cairo cannot make an image surface taller or wider than this many device pixels.
pub const MAX_SURFACE_PX: u32 = 32_767;

/// Settings the helper takes once, on its command line, for its whole life.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HelperOptions {
    /// Forward proxy every request goes through (`http://127.0.0.1:PORT`), with no bypass list.
    pub proxy: Option<String>,
    /// How long to wait for subresources after the document itself loaded before shooting anyway.
    pub resource_wait_ms: u64,
    /// Misbehaviour asked for by tests, so that the checks guarding against it can be shown to
    /// work on the real engine; all off in service.
    #[serde(default)]
    pub faults: Faults,
}

/// Ways a test can make the helper misbehave.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Faults {
    /// Never clear the view after a capture, and load no document while the view holds one:
    /// every capture after the first shows the document the first request asked for.
    pub keep_previous_document: bool,
}

/// What the page itself says about the document the engine holds, read in an isolated script
/// world just before and just after the capture (see [`PAGE_FACTS_SCRIPT`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PageFacts {
    /// `document.URL`: the per-request address the document was loaded under, which nothing in
    /// an email can change, so it tells this request's document from any other.
    pub url: String,
    /// The root element's scroll height, in CSS px.
    pub height: f64,
    /// Whether some text of the body is drawn where a reader can see it.
    pub visible_text: bool,
    /// Whether every web font the page asked for has loaded or failed (`document.fonts.status`).
    pub fonts_loaded: bool,
}

/// The read-back every engine runs on the page (in an isolated world: the email's own script
/// never runs, and this sees none of its globals). Returns [`PageFacts`] as JSON text.
///
/// Visible text is text with a box of at least 1x1 px and a font size of at least 6 px, in an
/// element that is not hidden or transparent, whose colour differs from the first opaque
/// background behind it; the walk stops at the first such text or after 20,000 text nodes, so
/// a huge email costs bounded time.
pub const PAGE_FACTS_SCRIPT: &str = r#"(function () {
  var d = document, root = d.documentElement;
  function opaque(c) { return c && c !== 'transparent' && !/^rgba\([^)]*,\s*0\)$/.test(c); }
  function behind(el) {
    for (var e = el; e && e.nodeType === 1; e = e.parentElement) {
      var bg = getComputedStyle(e).backgroundColor;
      if (opaque(bg)) return bg;
    }
    return 'rgb(255, 255, 255)';
  }
  function shown(el) {
    for (var e = el; e && e.nodeType === 1; e = e.parentElement) {
      var cs = getComputedStyle(e);
      if (cs.visibility !== 'visible' || parseFloat(cs.opacity) === 0) return false;
    }
    return true;
  }
  function visibleText() {
    if (!d.body) return false;
    var walk = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT), n, seen = 0;
    while ((n = walk.nextNode()) && seen++ < 20000) {
      if (!/\S/.test(n.data)) continue;
      var el = n.parentElement;
      if (!el) continue;
      var cs = getComputedStyle(el);
      if (parseFloat(cs.fontSize) < 6 || !opaque(cs.color) || cs.color === behind(el)) continue;
      var r = d.createRange();
      r.selectNodeContents(n);
      var boxes = r.getClientRects(), big = false;
      for (var i = 0; i < boxes.length; i++) {
        if (boxes[i].width >= 1 && boxes[i].height >= 1) { big = true; break; }
      }
      if (big && shown(el)) return true;
    }
    return false;
  }
  return JSON.stringify({
    url: d.URL,
    height: root ? root.scrollHeight : 0,
    visible_text: visibleText(),
    fonts_loaded: !d.fonts || d.fonts.status === 'loaded'
  });
})()"#;

/// What the page says of itself once drawn ([`DRAWN_PAGE_SCRIPT`]): its resources and how far its
/// content reaches to the right.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DrawnPage {
    pub resources: Vec<PageResource>,
    /// The right edge of the rightmost visible box, in CSS px, at most the root's scroll width
    /// (so content clipped by an `overflow: hidden` box does not count): wider than the window
    /// when the email overflows it and the picture is cut there.
    pub content_width: f64,
}

/// A resource the page references and what the page knows of it, read once after the capture
/// by [`DRAWN_PAGE_SCRIPT`]; `render` adds what its proxy saw and keeps the ones that failed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageResource {
    pub url: String,
    pub kind: domain::ResourceKind,
    pub state: ResourceState,
}

/// What the page says of a resource when it was drawn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ResourceState {
    Loaded,
    /// Finished without a usable resource (an image with no pixels, a stylesheet with no sheet).
    Broken,
    /// Not finished when the page was drawn.
    Loading,
    /// The page cannot tell (a CSS background image): only the proxy's record says.
    Unknown,
}

/// The page as drawn, as JSON text of a [`DrawnPage`], run once after the capture in the same
/// isolated world as [`PAGE_FACTS_SCRIPT`]. Its content width is measured over the boxes of the
/// first 20,000 elements. Its resources and their states: every `<img>` (`complete` and its pixels; a lazy
/// image not yet asked for is left out), every stylesheet link (none without a sheet; an engine may keep an
/// empty sheet for an error answer, so one with a sheet is left to the proxy's record), and the
/// http(s) background images of the first 20,000 elements. At most 400 entries, addresses cut after
/// 2,049 characters (`domain::resources` marks the cut); `data:` and other inline addresses are
/// not fetched and are left out.
pub const DRAWN_PAGE_SCRIPT: &str = r#"(function () {
  var d = document, out = [], seen = {}, max = 400, i, right = 0;
  function add(url, kind, state) {
    if (!url || out.length >= max || !/^https?:/i.test(url)) return;
    var key = kind + ' ' + url;
    if (seen[key]) return;
    seen[key] = 1;
    out.push({url: url.length > 2049 ? url.slice(0, 2049) : url, kind: kind, state: state});
  }
  var images = d.querySelectorAll('img, input[type=image i]');
  for (i = 0; i < images.length && i < 5000; i++) {
    var im = images[i], src = im.currentSrc || im.src;
    if (im.tagName === 'INPUT') { add(im.src, 'image', 'unknown'); continue; }
    if (!im.complete) { if (im.loading !== 'lazy') add(src, 'image', 'loading'); continue; }
    add(src, 'image', im.naturalWidth > 0 ? 'loaded' : 'broken');
  }
  var links = d.querySelectorAll('link[href]');
  for (i = 0; i < links.length && i < 1000; i++) {
    if (!/(^|\s)stylesheet(\s|$)/i.test(links[i].rel)) continue;
    add(links[i].href, 'stylesheet', links[i].sheet ? 'unknown' : 'broken');
  }
  var all = d.getElementsByTagName('*'), re = /url\(\s*(["']?)(.*?)\1\s*\)/g, m;
  for (i = 0; i < all.length && i < 20000; i++) {
    var box = all[i].getBoundingClientRect();
    if (box.width > 0 && box.height > 0 && box.right > right) right = box.right;
    var bg = getComputedStyle(all[i]).backgroundImage;
    if (!bg || bg === 'none' || bg.indexOf('url(') < 0) continue;
    re.lastIndex = 0;
    while ((m = re.exec(bg))) add(m[2], 'background_image', 'unknown');
  }
  var root = d.documentElement, scrolled = root ? root.scrollWidth : 0;
  return JSON.stringify({resources: out, content_width: Math.min(right + scrollX, scrolled)});
})()"#;

/// One page to render.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RenderRequest {
    pub html: String,
    /// The address the document is loaded under: a per-request nonce that the page reports back
    /// as `document.URL` ([`PageFacts::url`]). Relative URLs in the email resolve against it.
    pub document_url: String,
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
        /// Read from the page before the capture.
        before: PageFacts,
        /// Read from the page after the capture.
        after: PageFacts,
        /// [`DRAWN_PAGE_SCRIPT`]'s answer, read after the capture.
        #[serde(default)]
        drawn: DrawnPage,
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
