//! The inbox row each client shows for an email before it is opened: sender, subject and the
//! preview text (the preheader), cut where the client's inbox list cuts them.
//!
//! Three parts, none of which touches an engine or the database:
//! - [`InboxRows`]: `data/inbox-rows.toml`, the row profiles (layout, width, fonts, lines per
//!   field) with the published measurement each is calibrated to, or a statement that none
//!   exists. Every catalog profile belongs to exactly one row profile.
//! - [`preview`]: the text clients take from the body, as they take it: the first text in
//!   document order, hidden text included (that is what a hidden preheader is for), with runs of
//!   white space collapsed and the spacing characters of preheader padding (`&zwnj;`, `&nbsp;`,
//!   ...) kept, since they are what pushes body text out of the row.
//! - The pages: [`measure_page`] lays every row out with its profile's fonts and widths, and
//!   [`CUT_PROBE`] finds in the engine the longest start of each field that fits its width and
//!   lines with an ellipsis; [`picture_page`] draws the rows with that text, in the profile's
//!   engine, with the source of its figures written under it. [`report`] joins it all and names
//!   the problems a sender can fix ([`RowWarning`]).

use std::collections::BTreeSet;

use domain::ColorScheme;
use serde::{Deserialize, Serialize};

/// The file, beside the client catalog.
pub const INBOX_ROWS_FILE: &str = "inbox-rows.toml";

/// The most characters of body text a preview keeps: more than any row shows, padding included
/// (a padded preheader is typically 100–200 spacing characters).
pub const MAX_PREVIEW_CHARS: usize = 1000;

/// Characters that draw nothing and take no room: what preheader padding is made of (with
/// `&nbsp;`, which takes room but does not collapse). U+200B..U+200D zero-width space, non-joiner
/// and joiner; U+034F combining grapheme joiner; U+00AD soft hyphen; U+2060 word joiner; U+FEFF.
const INVISIBLE: &[char] = &[
    '\u{200b}', '\u{200c}', '\u{200d}', '\u{034f}', '\u{00ad}', '\u{2060}', '\u{feff}',
];

/// How a client lays out its inbox row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Sender on its own line, then the subject, then the preview on its own lines (phones,
    /// Outlook's reading-pane list).
    Stacked,
    /// Sender in a column; subject and preview share one line, the preview getting the width the
    /// subject leaves (Gmail's web inbox).
    Inline,
}

/// One row profile of `data/inbox-rows.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowProfile {
    pub id: String,
    /// As shown beside the picture: "Apple Mail (iPhone)".
    pub name: String,
    pub layout: Layout,
    /// The catalog profiles that show this row.
    pub clients: Vec<String>,
    /// CSS px of the column the subject and preview are cut to.
    pub width: u32,
    /// CSS px of the sender column ([`Layout::Inline`] only).
    #[serde(default)]
    pub sender_width: u32,
    /// Device pixels per CSS px of the picture.
    pub scale: f32,
    /// CSS `font-family` of the row; the fonts the engines have stand in for the client's own.
    pub font: String,
    pub sender_size: f32,
    pub subject_size: f32,
    /// CSS weight of the subject: unread mail's bold, or regular where the client sets the
    /// subject in the preview's weight (iOS Mail).
    pub subject_weight: u32,
    pub preview_size: f32,
    pub subject_lines: u32,
    pub preview_lines: u32,
    /// Where the layout, sizes and lines come from, or that nothing published says.
    pub layout_source: String,
    /// The published measurement the width is calibrated to; `None` where there is none.
    #[serde(default)]
    pub calibration: Option<Calibration>,
}

/// A third-party measurement of how many characters a client shows, and the text it was made
/// with: the width is set so that this text, laid out here, is cut where it was measured.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub subject_chars: u32,
    #[serde(default)]
    pub preview_chars: Option<u32>,
    /// The text the measurement was made with.
    pub sample: String,
    /// Who measured, where and when.
    pub source: String,
    /// `firm` (several sources agree), `single` or `single, old`.
    pub confidence: String,
}

impl RowProfile {
    /// The width of the row's picture in CSS px: the columns and their padding.
    pub fn picture_width(&self) -> u32 {
        self.width + self.sender_width + 32
    }

    /// What the picture says of its figures: the measurement or that there is none.
    pub fn source_note(&self) -> String {
        match &self.calibration {
            Some(c) => format!(
                "Width calibrated to {} characters of subject{} ({}; {})",
                c.subject_chars,
                c.preview_chars
                    .map(|p| format!(" and {p} of preview"))
                    .unwrap_or_default(),
                c.source,
                c.confidence
            ),
            None => "No published measurement of this client's inbox row: the width is an \
                     estimate, the cut may differ"
                .into(),
        }
    }
}

/// `data/inbox-rows.toml`, read and checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxRows {
    #[serde(rename = "row")]
    pub rows: Vec<RowProfile>,
}

impl InboxRows {
    /// Parses and checks the file on its own: unique ids, bounded figures, a source for each.
    pub fn parse(text: &str) -> Result<InboxRows, String> {
        let rows: InboxRows = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut ids = BTreeSet::new();
        let mut clients = BTreeSet::new();
        for r in &rows.rows {
            let at = |what: &str| format!("row {:?}: {what}", r.id);
            if r.id.is_empty() || !ids.insert(r.id.as_str()) {
                return Err(at("the id is empty or not unique"));
            }
            if r.clients.is_empty() {
                return Err(at("names no client"));
            }
            for c in &r.clients {
                if !clients.insert(c.as_str()) {
                    return Err(at(&format!("client {c:?} is in another row too")));
                }
            }
            if !(100..=2000).contains(&r.width) || r.sender_width > 600 {
                return Err(at("width must be 100 to 2000 px, sender_width at most 600"));
            }
            if (r.layout == Layout::Inline) != (r.sender_width > 0) {
                return Err(at("sender_width is for (and needed by) the inline layout"));
            }
            if !(1.0..=4.0).contains(&r.scale) {
                return Err(at("scale must be 1 to 4"));
            }
            for size in [r.sender_size, r.subject_size, r.preview_size] {
                if !(8.0..=40.0).contains(&size) {
                    return Err(at("font sizes must be 8 to 40 px"));
                }
            }
            if !(100..=900).contains(&r.subject_weight) {
                return Err(at("subject_weight must be a CSS weight, 100 to 900"));
            }
            if !(1..=4).contains(&r.subject_lines) || !(1..=4).contains(&r.preview_lines) {
                return Err(at("lines must be 1 to 4"));
            }
            if r.layout == Layout::Inline && (r.subject_lines, r.preview_lines) != (1, 1) {
                return Err(at("an inline row has one line"));
            }
            if r.layout_source.trim().is_empty() || r.font.trim().is_empty() {
                return Err(at("layout_source and font must be said"));
            }
            if let Some(c) = &r.calibration {
                if c.source.trim().is_empty() || c.sample.chars().count() < 60 {
                    return Err(at(
                        "a calibration needs its source and a sample of 60+ characters",
                    ));
                }
            }
        }
        Ok(rows)
    }

    /// Checks the file against the catalog's profiles: each in exactly one row, no other id.
    pub fn check_ids<'a>(&self, profiles: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
        let named: BTreeSet<&str> = self
            .rows
            .iter()
            .flat_map(|r| r.clients.iter().map(String::as_str))
            .collect();
        let profiles: BTreeSet<&str> = profiles.into_iter().collect();
        let missing: Vec<_> = profiles.difference(&named).collect();
        let unknown: Vec<_> = named.difference(&profiles).collect();
        if !missing.is_empty() || !unknown.is_empty() {
            return Err(format!(
                "{INBOX_ROWS_FILE} and the catalog disagree: profiles in no row {missing:?}, \
                 rows naming no profile {unknown:?}"
            ));
        }
        Ok(())
    }

    /// The row profile that `client` shows.
    pub fn of_client(&self, client: &str) -> Option<&RowProfile> {
        self.rows
            .iter()
            .find(|r| r.clients.iter().any(|c| c == client))
    }
}

/// The text clients take from an email's body for its inbox row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// The text as the row gets it: white space collapsed, spacing characters kept; at most
    /// [`MAX_PREVIEW_CHARS`].
    pub text: String,
    /// How many characters of `text` came from hidden elements at its start: the preheader, its
    /// padding included.
    pub hidden_chars: usize,
    /// The preheader as a person reads it (spacing removed); `None` when the body starts with
    /// visible text.
    pub preheader: Option<String>,
    /// Whether the preheader is followed by padding (10 or more spacing characters).
    pub padded: bool,
}

impl Preview {
    /// The visible text that follows the preheader, read: what fills a row the preheader leaves
    /// room in.
    pub fn body_start(&self) -> String {
        readable(
            &self
                .text
                .chars()
                .skip(self.hidden_chars)
                .collect::<String>(),
        )
    }
}

/// `s` as a person reads it: spacing characters dropped, non-breaking spaces as spaces, runs of
/// spaces as one.
pub fn readable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !INVISIBLE.contains(c)) {
        let c = if c == '\u{a0}' { ' ' } else { c };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

/// Whether an element is hidden the way preheaders are (`display:none`, `mso-hide:all`, zero
/// height with hidden overflow, zero opacity, or a class naming a preheader or preview).
pub fn hidden_like_a_preheader(class: &str, style: &str) -> bool {
    let class = class.to_ascii_lowercase();
    if class.contains("preheader") || class.contains("preview") {
        return true;
    }
    let style: String = style
        .to_ascii_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    style.contains("display:none")
        || style.contains("mso-hide:all")
        || (style.contains("max-height:0") && style.contains("overflow:hidden"))
        || style.contains("opacity:0;")
        || style.ends_with("opacity:0")
}

/// The preview text of `html`: its body's text in document order, hidden elements included,
/// without `<head>`, scripts, styles, templates and SVG; ASCII white space collapsed to one space,
/// other characters (non-breaking and zero-width ones) kept as written.
pub fn preview(html: &str) -> Preview {
    let doc = scraper::Html::parse_document(html);
    let mut text = String::new();
    let mut chars = 0usize;
    let mut hidden_chars = 0usize;
    let mut seen_visible = false;
    let mut space = true;
    let root = doc
        .select(&body_selector())
        .next()
        .map(|b| *b)
        .unwrap_or_else(|| doc.tree.root());
    let mut stack = vec![(root, false)];
    while let Some((node, hidden)) = stack.pop() {
        if chars >= MAX_PREVIEW_CHARS {
            break;
        }
        match node.value() {
            scraper::Node::Element(el) => {
                let name = el.name();
                if matches!(
                    name,
                    "head" | "script" | "style" | "template" | "svg" | "title" | "noscript"
                ) {
                    continue;
                }
                let hidden = hidden
                    || hidden_like_a_preheader(
                        el.attr("class").unwrap_or_default(),
                        el.attr("style").unwrap_or_default(),
                    );
                if matches!(
                    name,
                    "br" | "p" | "div" | "td" | "tr" | "li" | "h1" | "h2" | "h3"
                ) && !space
                {
                    // A block boundary reads as a space in the row, not as words run together.
                    text.push(' ');
                    chars += 1;
                    space = true;
                }
                let children: Vec<_> = node.children().collect();
                for child in children.into_iter().rev() {
                    stack.push((child, hidden));
                }
            }
            scraper::Node::Text(t) => {
                for c in t.chars() {
                    if chars >= MAX_PREVIEW_CHARS {
                        break;
                    }
                    let c = if c.is_ascii_whitespace() { ' ' } else { c };
                    // A snippet starts at its first character: a layout cell's `&nbsp;` before
                    // the preheader is not shown as an indent.
                    if text.is_empty() && c == '\u{a0}' {
                        continue;
                    }
                    if c == ' ' {
                        if space {
                            continue;
                        }
                        space = true;
                    } else {
                        space = false;
                    }
                    text.push(c);
                    chars += 1;
                    let drawn = !INVISIBLE.contains(&c) && c != '\u{a0}' && c != ' ';
                    if drawn && !hidden {
                        seen_visible = true;
                    }
                    if !seen_visible {
                        hidden_chars = chars;
                    }
                }
            }
            _ => {}
        }
    }
    let trimmed = text.trim_end().to_string();
    let hidden_chars = hidden_chars.min(trimmed.chars().count());
    let hidden: String = trimmed.chars().take(hidden_chars).collect();
    let preheader = Some(readable(&hidden)).filter(|p| !p.is_empty());
    let spacing = hidden
        .chars()
        .filter(|c| INVISIBLE.contains(c) || *c == '\u{a0}')
        .count();
    Preview {
        text: trimmed,
        hidden_chars: if preheader.is_some() { hidden_chars } else { 0 },
        padded: preheader.is_some() && spacing >= 10,
        preheader,
    }
}

fn body_selector() -> scraper::Selector {
    // A constant selector: parsing it cannot fail.
    scraper::Selector::parse("body").unwrap_or_else(|_| unreachable!("`body` is a selector"))
}

/// The sender as an inbox row names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sender {
    pub name: Option<String>,
    pub address: Option<String>,
}

impl Sender {
    /// From a `From` header's value: `"Name" <address>`, `Name <address>` or a bare address.
    pub fn from_header(value: Option<&str>) -> Sender {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Sender::default();
        };
        match (value.rfind('<'), value.rfind('>')) {
            (Some(open), Some(close)) if open < close => {
                let name = value[..open].trim().trim_matches('"').trim();
                Sender {
                    name: (!name.is_empty()).then(|| name.chars().take(200).collect()),
                    address: Some(value[open + 1..close].trim().chars().take(320).collect()),
                }
            }
            _ => Sender {
                name: None,
                address: Some(value.chars().take(320).collect()),
            },
        }
    }

    /// What a row shows: the name, else the address, else a note that there is none.
    pub fn shown(&self) -> &str {
        self.name
            .as_deref()
            .or(self.address.as_deref())
            .unwrap_or("(no From header)")
    }
}

/// One field of a row, as the engine cut it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CutText {
    /// The text as shown, as a person reads it, with `…` where it was cut.
    pub text: String,
    /// The text as drawn: the start of the field that fits, spacing characters kept.
    #[serde(default)]
    pub drawn: String,
    pub cut: bool,
    /// The width the field may take, and what the shown text took, in CSS px.
    pub width: f64,
    pub used_width: f64,
    /// Lines the field may take and took.
    pub lines: u32,
    pub used_lines: u32,
}

/// One client family's inbox row for this email.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxRow {
    /// The row profile's id and name.
    pub id: String,
    pub name: String,
    /// This test's clients that show this row.
    pub clients: Vec<String>,
    /// The pictures drawn: one per colour scheme among `clients`.
    pub schemes: Vec<ColorScheme>,
    pub sender: CutText,
    pub subject: CutText,
    pub preview: CutText,
    /// Body text shown after the preheader on this row, read; `None` when the preheader (or its
    /// padding) fills the row.
    pub body_text: Option<String>,
    /// Where the row's figures come from ([`RowProfile::source_note`]).
    pub source: String,
    pub calibrated: bool,
    /// The pictures' width in CSS px (their pixels are this times the profile's scale).
    #[serde(default)]
    pub css_width: u32,
}

/// A problem with the email's inbox rows, named for the sender to fix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowWarning {
    /// `no-preheader`, `short-preheader` or `subject-cut`.
    pub id: String,
    /// The row it was seen on; `None` for the email as a whole.
    pub row: Option<String>,
    pub message: String,
}

/// A test's inbox rows, as stored and as the API answers them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InboxReport {
    pub sender: Sender,
    pub subject: String,
    pub preview: Preview,
    pub rows: Vec<InboxRow>,
    pub warnings: Vec<RowWarning>,
    /// Why no row could be drawn (no Chromium in this service, the engine failed every attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_drawn: Option<String>,
}

/// What [`CUT_PROBE`] answers for one field.
#[derive(Clone, Debug, Deserialize)]
pub struct MeasuredField {
    pub row: String,
    pub field: String,
    /// The start of the field that fits, as drawn.
    pub shown: String,
    pub cut: bool,
    pub width: f64,
    pub used_width: f64,
    pub lines: u32,
    pub used_lines: u32,
}

/// Escapes text for an HTML text node or a double-quoted attribute.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// CSS font-family values come from our data file, but are still kept to what a font list holds.
fn font_family(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | ',' | '-' | '"' | '\''))
        .collect()
}

const LINE_HEIGHT: f32 = 1.3;

fn field_style(size: f32, weight: u32, lines: u32) -> String {
    format!(
        "font-size:{size}px;line-height:{lh}px;font-weight:{weight};max-height:{max}px",
        lh = (size * LINE_HEIGHT).round(),
        max = (size * LINE_HEIGHT).round() * lines as f32,
    )
}

/// The page [`CUT_PROBE`] measures: every row of `rows` with the whole of each field, at its
/// profile's width and fonts.
pub fn measure_page(
    rows: &[&RowProfile],
    sender: &Sender,
    subject: &str,
    preview: &Preview,
) -> String {
    let mut body = String::new();
    for r in rows {
        let font = font_family(&r.font);
        let sender_width = if r.layout == Layout::Inline {
            r.sender_width
        } else {
            r.width
        };
        let fields = [
            (
                "sender",
                sender.shown(),
                r.sender_size,
                700,
                1,
                sender_width,
            ),
            (
                "subject",
                subject,
                r.subject_size,
                r.subject_weight,
                r.subject_lines,
                r.width,
            ),
            (
                "preview",
                preview.text.as_str(),
                r.preview_size,
                400,
                r.preview_lines,
                r.width,
            ),
        ];
        body.push_str(&format!(
            "<section data-row=\"{}\" data-layout=\"{}\" style=\"font-family:{font}\">",
            esc(&r.id),
            if r.layout == Layout::Inline {
                "inline"
            } else {
                "stacked"
            }
        ));
        for (field, text, size, weight, lines, width) in fields {
            body.push_str(&format!(
                "<div data-field=\"{field}\" data-lines=\"{lines}\" data-width=\"{width}\" \
                 data-line-height=\"{lh}\" style=\"{style}\">{text}</div>",
                lh = (size * LINE_HEIGHT).round(),
                style = field_style(size, weight, lines),
                text = esc(text),
            ));
        }
        body.push_str("<span data-separator style=\"font-size:");
        body.push_str(&format!(
            "{}px\">&nbsp;-&nbsp;</span></section>",
            r.preview_size
        ));
    }
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>\
         body{{margin:0}} section{{margin:8px}} \
         [data-field]{{overflow-wrap:anywhere;overflow:visible}}</style></head>\
         <body>{body}</body></html>"
    )
}

/// Run in Chromium on [`measure_page`]: for each field, the longest start (whole grapheme
/// clusters) that, with `…` after it when cut, fits its width on one line (`nowrap`) or its lines
/// (wrapped). An inline row's preview gets the width its subject and the separator leave. Answers
/// a list of [`MeasuredField`].
pub const CUT_PROBE: &str = r#"(function () {
  var out = [];
  var seg = (typeof Intl !== 'undefined' && Intl.Segmenter) ? new Intl.Segmenter() : null;
  function units(s) {
    if (!seg) return Array.from(s);
    var r = []; for (var x of seg.segment(s)) r.push(x.segment); return r;
  }
  var trailing = /[\s\u00a0\u200b\u200c\u200d\u034f\u00ad\u2060\ufeff]+$/;
  function fit(el, text, width, lines, lh) {
    var u = units(text);
    el.style.width = width + 'px';
    el.style.whiteSpace = lines === 1 ? 'nowrap' : 'normal';
    el.style.maxHeight = 'none';
    el.style.display = lines === 1 ? 'inline-block' : 'block';
    if (lines === 1) el.style.width = 'auto';
    function measure(s) {
      el.textContent = s;
      var r = el.getBoundingClientRect();
      var used = lines === 1 ? r.width : Math.round(r.height / lh);
      var ok = lines === 1 ? r.width <= width + 0.01 : r.height <= lines * lh + 0.5;
      return {ok: ok, width: r.width, lines: lines === 1 ? (s ? 1 : 0) : used};
    }
    function shown(n) {
      if (n >= u.length) return u.join('');
      return u.slice(0, n).join('').replace(trailing, '');
    }
    function drawn(n) { return n >= u.length ? shown(n) : shown(n) + '\u2026'; }
    var whole = measure(drawn(u.length));
    if (whole.ok) return {shown: shown(u.length), cut: false, used_width: Math.min(whole.width, width), used_lines: whole.lines};
    var lo = 0, hi = u.length - 1;
    while (lo < hi) {
      var mid = Math.ceil((lo + hi) / 2);
      if (measure(drawn(mid)).ok) lo = mid; else hi = mid - 1;
    }
    var m = measure(drawn(lo));
    return {shown: shown(lo), cut: true, used_width: Math.min(m.width, width), used_lines: m.lines};
  }
  var rows = document.querySelectorAll('section[data-row]');
  for (var i = 0; i < rows.length; i++) {
    var row = rows[i], inline = row.getAttribute('data-layout') === 'inline', left = null;
    var fields = row.querySelectorAll('[data-field]');
    for (var j = 0; j < fields.length; j++) {
      var el = fields[j], name = el.getAttribute('data-field');
      var text = el.textContent, lines = +el.getAttribute('data-lines');
      var width = +el.getAttribute('data-width'), lh = +el.getAttribute('data-line-height');
      if (inline && name === 'preview') width = Math.max(0, left);
      var r = width < 1 ? {shown: '', cut: text.length > 0, used_width: 0, used_lines: 0} : fit(el, text, width, lines, lh);
      if (inline && name === 'subject') {
        var sep = row.querySelector('[data-separator]').getBoundingClientRect().width;
        left = width - r.used_width - sep;
      }
      out.push({row: row.getAttribute('data-row'), field: name, shown: r.shown, cut: r.cut,
                width: width, used_width: r.used_width, lines: lines, used_lines: r.used_lines});
    }
  }
  return out;
})()"#;

/// Palette of a row picture per scheme: background, sender and subject, preview, note.
fn palette(scheme: ColorScheme) -> [&'static str; 4] {
    match scheme {
        ColorScheme::Light => ["#ffffff", "#1f1f1f", "#5f6368", "#8a5a00"],
        ColorScheme::Dark => ["#1c1c1e", "#f2f2f7", "#a1a1a6", "#e8b04a"],
    }
}

/// The picture of one row as `profile`'s client shows it, in `scheme`: the cut text of `row`
/// (nothing is cut again here, so the picture is exactly the text the API names), then the
/// source of the row's figures.
pub fn picture_page(profile: &RowProfile, row: &InboxRow, scheme: ColorScheme) -> String {
    let [bg, fg, muted, note] = palette(scheme);
    let font = font_family(&profile.font);
    // Each field gets exactly its measured text. Another engine's glyphs may be a little wider
    // than Chromium's, so a wrapped field is drawn 4 % wider than it was cut at (the same line
    // breaks, never one more line) and a one-line field never wraps.
    let field = |class: &str, text: &str, size: f32, weight: u32, lines: u32| {
        let lh = (size * LINE_HEIGHT).round();
        let wrap = if lines == 1 {
            "white-space:nowrap".to_string()
        } else {
            format!(
                "width:{:.0}px;max-height:{}px",
                f64::from(profile.width) * 1.04,
                lh * lines as f32
            )
        };
        format!(
            "<div class=\"{class}\" style=\"font-size:{size}px;line-height:{lh}px;font-weight:{weight};{wrap}\">{}</div>",
            esc(text)
        )
    };
    let sender = field(
        "sender",
        &row.sender.drawn_or_text(),
        profile.sender_size,
        700,
        1,
    );
    let subject = field(
        "subject",
        &row.subject.drawn_with_ellipsis(),
        profile.subject_size,
        profile.subject_weight,
        profile.subject_lines,
    );
    let preview = field(
        "preview",
        &row.preview.drawn_with_ellipsis(),
        profile.preview_size,
        400,
        profile.preview_lines,
    );
    let content = match profile.layout {
        Layout::Stacked => format!("<div class=\"row\">{sender}{subject}{preview}</div>"),
        // A subject that fills the line leaves no separator and no preview.
        Layout::Inline if row.preview.drawn.is_empty() => format!(
            "<div class=\"row inline\"><div style=\"width:{sw}px;flex:none\">{sender}</div>\
             <div class=\"line\" style=\"width:{w}px\">{subject}</div></div>",
            sw = profile.sender_width,
            w = profile.width,
        ),
        Layout::Inline => format!(
            "<div class=\"row inline\"><div style=\"width:{sw}px;flex:none\">{sender}</div>\
             <div class=\"line\" style=\"width:{w}px\">{subject}\
             <div class=\"preview\" style=\"font-size:{ps}px\">&nbsp;-&nbsp;</div>{preview}</div></div>",
            sw = profile.sender_width,
            w = profile.width,
            ps = profile.preview_size
        ),
    };
    let total = profile.picture_width();
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>\
         html,body{{margin:0;background:{bg};color:{fg};font-family:{font}}}\
         body{{width:{total}px}}\
         .row{{padding:12px 16px;overflow:hidden;overflow-wrap:anywhere;border-bottom:1px solid {muted}}}\
         .row.inline{{display:flex;gap:0}}\
         .line{{display:flex;white-space:nowrap;align-items:baseline;overflow:hidden}}\
         .line>div{{flex:none}} .row>div{{overflow:hidden}}\
         .preview{{color:{muted}}}\
         .note{{font:11px/1.3 'Liberation Sans',sans-serif;color:{note};padding:4px 16px 8px}}\
         </style></head><body>{content}<div class=\"note\">{n}</div></body></html>",
        n = esc(&format!("{}: {}", profile.name, row.source)),
    )
}

impl CutText {
    fn drawn_or_text(&self) -> String {
        if self.drawn.is_empty() {
            self.text.clone()
        } else {
            self.drawn_with_ellipsis()
        }
    }

    fn drawn_with_ellipsis(&self) -> String {
        if self.cut {
            format!("{}…", self.drawn)
        } else {
            self.drawn.clone()
        }
    }
}

/// The rows of `profiles` from what [`CUT_PROBE`] measured, with the warnings they give rise to.
/// `clients` is this test's clients with their colour schemes.
pub fn report(
    profiles: &[&RowProfile],
    clients: &[(String, ColorScheme)],
    sender: Sender,
    subject: &str,
    preview: Preview,
    measured: &[MeasuredField],
) -> Result<InboxReport, String> {
    let mut rows = Vec::new();
    for p in profiles {
        let field = |name: &str| -> Result<CutText, String> {
            let m = measured
                .iter()
                .find(|m| m.row == p.id && m.field == name)
                .ok_or_else(|| format!("the engine did not measure {}'s {name}", p.id))?;
            let text = readable(&m.shown);
            Ok(CutText {
                text: if m.cut && !text.is_empty() {
                    format!("{text}…")
                } else {
                    text
                },
                drawn: m.shown.clone(),
                cut: m.cut,
                width: m.width,
                used_width: m.used_width,
                lines: m.lines,
                used_lines: m.used_lines,
            })
        };
        let preview_cut = field("preview")?;
        let shown_chars = preview_cut.drawn.chars().count();
        let body_text = (shown_chars > preview.hidden_chars)
            .then(|| {
                readable(
                    &preview_cut
                        .drawn
                        .chars()
                        .skip(preview.hidden_chars)
                        .collect::<String>(),
                )
            })
            .filter(|t| !t.is_empty());
        let mine: Vec<&(String, ColorScheme)> = clients
            .iter()
            .filter(|(c, _)| p.clients.contains(c))
            .collect();
        let mut schemes: Vec<ColorScheme> = Vec::new();
        for (_, s) in &mine {
            if !schemes.contains(s) {
                schemes.push(*s);
            }
        }
        schemes.sort_by_key(|s| *s == ColorScheme::Dark);
        rows.push(InboxRow {
            id: p.id.clone(),
            name: p.name.clone(),
            clients: mine.iter().map(|(c, _)| c.clone()).collect(),
            schemes,
            sender: field("sender")?,
            subject: field("subject")?,
            preview: preview_cut,
            body_text,
            source: p.source_note(),
            calibrated: p.calibration.is_some(),
            css_width: p.picture_width(),
        });
    }
    let warnings = warnings(&preview, &rows);
    Ok(InboxReport {
        sender,
        subject: subject.to_string(),
        preview,
        rows,
        warnings,
        not_drawn: None,
    })
}

fn quote(s: &str, max: usize) -> String {
    let cut: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        format!("“{}…”", cut.trim_end())
    } else {
        format!("“{cut}”")
    }
}

/// The problems a sender can fix, named with what the reader sees.
fn warnings(preview: &Preview, rows: &[InboxRow]) -> Vec<RowWarning> {
    let mut out = Vec::new();
    match &preview.preheader {
        None => {
            let first = readable(&preview.text);
            out.push(RowWarning {
                id: "no-preheader".into(),
                row: None,
                message: if first.is_empty() {
                    "no preheader and no body text: inbox rows show an empty preview; add a \
                     hidden preheader at the top of the body"
                        .into()
                } else {
                    format!(
                        "no preheader: inbox rows show the email's first text, {}; add a hidden \
                         preheader at the top of the body",
                        quote(&first, 60)
                    )
                },
            });
        }
        Some(pre) => {
            let n = pre.chars().count();
            for r in rows {
                if let Some(leak) = &r.body_text {
                    out.push(RowWarning {
                        id: "short-preheader".into(),
                        row: Some(r.id.clone()),
                        message: format!(
                            "the preheader is {n} characters: {} fills the row with {}; \
                             lengthen it or pad it with &zwnj;&nbsp;",
                            r.name,
                            quote(leak, 60)
                        ),
                    });
                }
            }
        }
    }
    for r in rows.iter().filter(|r| r.subject.cut) {
        out.push(RowWarning {
            id: "subject-cut".into(),
            row: Some(r.id.clone()),
            message: format!(
                "the subject is cut after {} characters in {}: {}",
                readable(&r.subject.drawn).chars().count(),
                r.name,
                quote(&r.subject.text, 80)
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests;
