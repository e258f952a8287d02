//! Accessibility and content checks of an email: the static ones (document language, image `alt`,
//! link text, heading order, layout tables, `<title>`, preheader, Gmail's clipping size) judged on
//! the source with line numbers, image weights measured under [`NetPolicy`], and the colour
//! contrast judged on the page a real engine drew ([`CONTRAST_PROBE`], whose answer
//! [`contrast_findings`] reads).
//!
//! Images and links come from [`crate::links::extract`], the one extractor of them.

use std::cell::RefCell;
use std::rc::Rc;

use base64::Engine as _;
use futures::stream::{self, StreamExt};
use lol_html::html_content::Element;
use lol_html::{element, end_tag, rewrite_str, text, RewriteStrSettings};
use serde::{Deserialize, Serialize};

use crate::fetch::{checked_url, client, next_hop, request_error, FetchError};
use crate::links::{extract, FoundLink, LinkKind};
use crate::netpolicy::NetPolicy;

/// Gmail cuts the message off behind a "[Message clipped]" link once its HTML passes about 102 KB.
pub const GMAIL_CLIP_BYTES: u64 = 102 * 1024;
/// One image heavier than this is reported: it slows the email down on mobile data.
pub const HEAVY_IMAGE_BYTES: u64 = 500 * 1024;
/// An email (HTML and images) heavier than this is reported.
pub const HEAVY_EMAIL_BYTES: u64 = 2 * 1024 * 1024;
/// Images measured per email at most; the rest are listed as not measured.
pub const MAX_IMAGES: usize = 100;
/// Images fetched at the same time for one email.
const IN_FLIGHT: usize = 4;
/// WCAG 2 AA contrast for normal text, and for large text (>= 24px, or >= 18.66px bold).
pub const AA_NORMAL: f64 = 4.5;
pub const AA_LARGE: f64 = 3.0;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// One thing found wrong (or not judged) in an email.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Which check: `lang`, `img-alt`, `link-text`, `heading-order`, `table-role`, `title`,
    /// `preheader`, `plain-text`, `gmail-clip`, `image-weight`, `email-weight`, `contrast`.
    pub id: String,
    pub severity: Severity,
    /// What is wrong and how to fix it.
    pub message: String,
    /// 1-based line in the email source, when the finding has one.
    pub line: Option<usize>,
    /// The colours behind a `contrast` finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrast: Option<Contrast>,
}

impl Finding {
    fn new(id: &str, severity: Severity, line: Option<usize>, message: String) -> Finding {
        Finding {
            id: id.to_owned(),
            severity,
            message,
            line,
            contrast: None,
        }
    }
}

/// Text whose colour is too close to its background's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contrast {
    /// The start of the text, as drawn.
    pub text: String,
    /// `#rrggbb`, after any transparency was blended with the background.
    pub foreground: String,
    pub background: String,
    /// The WCAG contrast ratio, to two decimals.
    pub ratio: f64,
    /// What WCAG AA asks for this text: 4.5, or 3 for large text.
    pub required: f64,
}

/// The weight of one image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageWeight {
    pub url: String,
    pub line: usize,
    /// Bytes of the image; `None` when it could not be measured.
    pub bytes: Option<u64>,
    /// Why it could not be measured.
    pub error: Option<String>,
}

/// Sizes of the email as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub html_bytes: u64,
    /// The HTML size at which Gmail clips, and whether this email passes it.
    pub gmail_clip_bytes: u64,
    pub gmail_clipped: bool,
    /// Each image, measured or not (`None` while the measuring has not run).
    pub images: Option<Vec<ImageWeight>>,
    /// Sum of the measured images.
    pub image_bytes: u64,
    /// HTML plus measured images.
    pub total_bytes: u64,
    /// Images whose size is unknown, so `total_bytes` is a lower bound when this is not zero.
    pub images_not_measured: usize,
}

/// Everything the checks found for one email.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub findings: Vec<Finding>,
    pub summary: Summary,
}

/// Words that say nothing about where a link goes.
const VAGUE_LINK_TEXT: &[&str] = &[
    "click here",
    "click",
    "here",
    "click this",
    "this",
    "this link",
    "link",
    "more",
    "read more",
    "learn more",
    "more info",
    "more information",
    "details",
    "go",
    "continue",
    "tap here",
];

/// What the walk of the document gathers.
#[derive(Default)]
struct Walk {
    /// The `<html>` element: its line and `lang` attribute.
    html: Option<(usize, Option<String>)>,
    /// The text of `<title>`, when there is one.
    title: Option<String>,
    in_title: bool,
    /// `(level, line)` of each heading, in order.
    headings: Vec<(u8, usize)>,
    /// Open links: line, accessible name gathered so far, `aria-label`.
    open_links: Vec<(usize, String, Option<String>)>,
    /// Finished links: line, text (with images' alt), `aria-label`.
    links: Vec<(usize, String, Option<String>)>,
    /// Open tables: line, role, whether a `<th>` was seen.
    open_tables: Vec<(usize, Option<String>, bool)>,
    tables: Vec<(usize, Option<String>, bool)>,
    /// Whether an element hidden the way preheaders are was seen in the body.
    preheader: bool,
}

fn line_index(html: &str) -> impl Fn(usize) -> usize + '_ {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(html.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    move |offset| starts.partition_point(|&start| start <= offset)
}

fn hidden_like_a_preheader(el: &Element) -> bool {
    crate::inbox::hidden_like_a_preheader(
        &el.get_attribute("class").unwrap_or_default(),
        &el.get_attribute("style").unwrap_or_default(),
    )
}

/// Walks `html` once and gathers what the static checks look at.
fn walk(html: &str) -> Result<Walk, String> {
    let line_at = line_index(html);
    let state = Rc::new(RefCell::new(Walk::default()));
    let (s1, s2, s3, s4, s5, s6, s7, s8, s9) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
    let line = |el: &Element| line_at(el.source_location().bytes().start);
    let handlers = vec![
        element!("html", |el| {
            s1.borrow_mut().html = Some((line(el), el.get_attribute("lang")));
            Ok(())
        }),
        element!("title", |el| {
            {
                let mut w = s2.borrow_mut();
                w.in_title = true;
                w.title.get_or_insert_with(String::new);
            }
            let after = s2.clone();
            if el.can_have_content() {
                el.on_end_tag(end_tag!(move |_| {
                    after.borrow_mut().in_title = false;
                    Ok(())
                }))?;
            }
            Ok(())
        }),
        text!("title", |t| {
            let mut w = s3.borrow_mut();
            if w.in_title {
                if let Some(title) = w.title.as_mut() {
                    title.push_str(t.as_str());
                }
            }
            Ok(())
        }),
        element!("h1, h2, h3, h4, h5, h6", |el| {
            let level = el.tag_name().as_bytes().get(1).map_or(1, |d| d - b'0');
            s4.borrow_mut().headings.push((level, line(el)));
            Ok(())
        }),
        element!("a[href]", |el| {
            s5.borrow_mut().open_links.push((
                line(el),
                String::new(),
                el.get_attribute("aria-label"),
            ));
            let after = s5.clone();
            el.on_end_tag(end_tag!(move |_| {
                let mut w = after.borrow_mut();
                if let Some(link) = w.open_links.pop() {
                    w.links.push(link);
                }
                Ok(())
            }))?;
            Ok(())
        }),
        text!("a[href]", |t| {
            if let Some(link) = s6.borrow_mut().open_links.last_mut() {
                link.1.push_str(t.as_str());
            }
            Ok(())
        }),
        element!("a[href] img", |el| {
            if let Some(link) = s7.borrow_mut().open_links.last_mut() {
                link.1.push(' ');
                link.1
                    .push_str(&el.get_attribute("alt").unwrap_or_default());
            }
            Ok(())
        }),
        element!("table, th", |el| {
            if el.tag_name() == "th" {
                if let Some(table) = s8.borrow_mut().open_tables.last_mut() {
                    table.2 = true;
                }
                return Ok(());
            }
            s8.borrow_mut()
                .open_tables
                .push((line(el), el.get_attribute("role"), false));
            let after = s8.clone();
            el.on_end_tag(end_tag!(move |_| {
                let mut w = after.borrow_mut();
                if let Some(table) = w.open_tables.pop() {
                    w.tables.push(table);
                }
                Ok(())
            }))?;
            Ok(())
        }),
        element!("body *", |el| {
            if hidden_like_a_preheader(el) {
                s9.borrow_mut().preheader = true;
            }
            Ok(())
        }),
    ];
    rewrite_str(
        html,
        handlers
            .into_iter()
            .fold(RewriteStrSettings::new(), |settings, handler| {
                settings.append_element_content_handler(handler)
            }),
    )
    .map_err(|e| format!("the email's HTML could not be read: {e}"))?;
    let mut walked = state.take();
    // Elements left open (no end tag) still count.
    let open_links = std::mem::take(&mut walked.open_links);
    walked.links.extend(open_links);
    let open_tables = std::mem::take(&mut walked.open_tables);
    walked.tables.extend(open_tables);
    walked.links.sort_by_key(|l| l.0);
    walked.tables.sort_by_key(|t| t.0);
    Ok(walked)
}

fn normalised(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_matches(|c: char| c.is_ascii_punctuation() || c == '»' || c == '›' || c == '→')
        .trim()
        .to_lowercase()
}

/// The checks that need nothing but the source, in line order (findings without a line first).
/// `text_part` says whether the message had a text/plain part (`None`: only HTML was submitted).
pub fn static_findings(html: &str, text_part: Option<bool>) -> Result<Vec<Finding>, String> {
    let w = walk(html)?;
    let mut out = Vec::new();
    match &w.html {
        Some((line, Some(lang))) if !lang.trim().is_empty() => {
            let _ = line;
        }
        Some((line, lang)) => out.push(Finding::new(
            "lang",
            Severity::Error,
            Some(*line),
            format!(
                "the <html> element has {} lang attribute: screen readers cannot pick the \
                 language to read it in; add e.g. <html lang=\"en\">",
                if lang.is_some() { "an empty" } else { "no" }
            ),
        )),
        None => out.push(Finding::new(
            "lang",
            Severity::Error,
            None,
            "the email has no <html> element, so no lang attribute: screen readers cannot pick \
             the language to read it in; wrap it in <html lang=\"en\">"
                .to_owned(),
        )),
    }
    match w.title.as_deref().map(str::trim) {
        Some(title) if !title.is_empty() => {}
        Some(_) => out.push(Finding::new(
            "title",
            Severity::Warning,
            None,
            "the <title> is empty: screen readers and 'view in browser' pages announce it; give \
             it the email's subject"
                .to_owned(),
        )),
        None => out.push(Finding::new(
            "title",
            Severity::Warning,
            None,
            "the email has no <title>: screen readers and 'view in browser' pages announce it; \
             add <title> with the email's subject to <head>"
                .to_owned(),
        )),
    }
    if !w.preheader {
        out.push(Finding::new(
            "preheader",
            Severity::Info,
            None,
            "no preheader found (a hidden element with display:none, mso-hide:all or class \
             \"preheader\"): inbox previews show the first text of the email instead; add a \
             hidden summary line at the top of <body>"
                .to_owned(),
        ));
    }
    let html_bytes = html.len() as u64;
    if html_bytes > GMAIL_CLIP_BYTES {
        out.push(Finding::new(
            "gmail-clip",
            Severity::Error,
            None,
            format!(
                "the HTML is {html_bytes} bytes, over Gmail's clipping threshold of about \
                 {GMAIL_CLIP_BYTES} bytes (102 KB): Gmail shows only the start and hides the rest \
                 (often the unsubscribe link) behind \"[Message clipped]\"; remove unused CSS, \
                 comments and whitespace, or shorten the email"
            ),
        ));
    }
    match text_part {
        Some(true) => {}
        Some(false) => out.push(Finding::new(
            "plain-text",
            Severity::Warning,
            None,
            "the message has no text/plain part: some clients, watches and screen readers show \
             the plain-text version, and spam filters score HTML-only mail higher; send \
             multipart/alternative with a plain-text part"
                .to_owned(),
        )),
        None => out.push(Finding::new(
            "plain-text",
            Severity::Info,
            None,
            "not judged: this test was made from HTML alone (not from a message sent to the \
             auto-inbox), so there is no message whose text/plain part could be looked at; send \
             multipart/alternative with a plain-text part"
                .to_owned(),
        )),
    }

    for image in extract(html)?.iter().filter(|l| l.kind == LinkKind::Image) {
        if image.alt.is_none() {
            out.push(Finding::new(
                "img-alt",
                Severity::Error,
                Some(image.line),
                format!(
                    "the image {} has no alt attribute: readers with images off or a screen \
                     reader get nothing, or the file name; add alt text (alt=\"\" for decoration)",
                    shorten(&image.url, 80)
                ),
            ));
        }
    }
    for (line, text, label) in &w.links {
        let name = label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or(text);
        let name = normalised(name);
        if name.is_empty() {
            out.push(Finding::new(
                "link-text",
                Severity::Error,
                Some(*line),
                "the link has no text (nor alt text on its image): a screen reader announces only \
                 \"link\"; give it text that says where it goes"
                    .to_owned(),
            ));
        } else if VAGUE_LINK_TEXT.contains(&name.as_str()) {
            out.push(Finding::new(
                "link-text",
                Severity::Warning,
                Some(*line),
                format!(
                    "the link text \"{name}\" says nothing about where it goes, and screen reader \
                     users often list links out of context; say what it opens, e.g. \"View your \
                     order\""
                ),
            ));
        }
    }
    let mut previous: Option<u8> = None;
    for &(level, line) in &w.headings {
        if let Some(prev) = previous {
            if level > prev + 1 {
                out.push(Finding::new(
                    "heading-order",
                    Severity::Warning,
                    Some(line),
                    format!(
                        "the heading <h{level}> follows <h{prev}>, skipping a level: screen reader \
                         users navigate by headings and miss the structure; use <h{}> or style a \
                         heading of the right level",
                        prev + 1
                    ),
                ));
            }
        }
        previous = Some(level);
    }
    for (line, role, has_th) in &w.tables {
        let role = role.as_deref().map(|r| r.trim().to_ascii_lowercase());
        let presentational = matches!(role.as_deref(), Some("presentation" | "none"));
        if !presentational && !has_th {
            out.push(Finding::new(
                "table-role",
                Severity::Warning,
                Some(*line),
                "the table has no role=\"presentation\": screen readers announce a layout table's \
                 rows and columns as data; add role=\"presentation\" (or <th> headers if it \
                 really holds data)"
                    .to_owned(),
            ));
        }
    }
    out.sort_by_key(|f| f.line);
    Ok(out)
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(max).collect();
    format!("{head:?}…")
}

/// Measures every image of `html` (at most [`MAX_IMAGES`], a few at a time): `data:` images by
/// their decoded size, web images by downloading them under `policy` (size and time bounded).
pub async fn measure_images(html: &str, policy: &NetPolicy) -> Result<Vec<ImageWeight>, String> {
    let mut images: Vec<FoundLink> = extract(html)?
        .into_iter()
        .filter(|l| l.kind == LinkKind::Image)
        .collect();
    let beyond = images.split_off(images.len().min(MAX_IMAGES));
    // Owned items: a stream over borrowed ones makes the future not `Send` for every lifetime.
    let mut measured: Vec<ImageWeight> = stream::iter(images)
        .map(|image| async move {
            let (bytes, error) = match measure_image(&image.url, policy).await {
                Ok(bytes) => (Some(bytes), None),
                Err(e) => (None, Some(e)),
            };
            ImageWeight {
                url: image.url,
                line: image.line,
                bytes,
                error,
            }
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    measured.extend(beyond.into_iter().map(|image| ImageWeight {
        url: image.url,
        line: image.line,
        bytes: None,
        error: Some(format!(
            "not measured: only the first {MAX_IMAGES} images of an email are"
        )),
    }));
    Ok(measured)
}

/// The size of one image, or why it is unknown.
async fn measure_image(url: &str, policy: &NetPolicy) -> Result<u64, String> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("data:") {
        return data_url_size(url);
    }
    if lower.starts_with("cid:") {
        return Err(
            "not measured: an embedded (cid:) image is an attachment of the message, \
                    and mailproof keeps only its HTML"
                .to_owned(),
        );
    }
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(match url::Url::parse(url) {
            Ok(u) => format!(
                "not measured: a {}: image cannot be loaded from an email; use an https:// URL",
                u.scheme()
            ),
            Err(_) => "not measured: a relative URL has no base in an email, so the image shows \
                       as broken; give an absolute https:// URL"
                .to_owned(),
        });
    }
    match tokio::time::timeout(policy.timeout, download_size(url, policy)).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "not measured: downloading it took longer than the {} second limit",
            policy.timeout.as_secs_f64()
        )),
    }
}

fn data_url_size(url: &str) -> Result<u64, String> {
    let (meta, data) = url
        .split_once(',')
        .ok_or_else(|| "the data: URL has no ',' before its data".to_owned())?;
    if meta.to_ascii_lowercase().ends_with(";base64") {
        let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(compact.as_bytes())
            .map(|b| b.len() as u64)
            .map_err(|e| format!("the data: URL is not valid base64 ({e})"))
    } else {
        Ok(url::form_urlencoded::parse(format!("x={data}").as_bytes())
            .next()
            .map_or(data.len(), |(_, v)| v.len()) as u64)
    }
}

/// Downloads `url` through its redirects, counting the body's bytes without keeping them.
async fn download_size(url: &str, policy: &NetPolicy) -> Result<u64, String> {
    let refused = |e: FetchError| format!("not measured: {e}");
    let mut current = checked_url(url, policy).map_err(refused)?;
    let client = client(policy, &current).map_err(refused)?;
    let mut followed = 0;
    loop {
        let mut response = client
            .get(current.clone())
            .send()
            .await
            .map_err(|e| refused(request_error(&current, &e, policy)))?;
        if let Some(next) = next_hop(url, &current, &response, followed, policy).map_err(refused)? {
            followed += 1;
            current = next;
            continue;
        }
        let status = response.status();
        if !status.is_success() {
            return Err(format!(
                "not measured: {current} answered HTTP {status}; the image is broken"
            ));
        }
        let mut total: u64 = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| refused(request_error(&current, &e, policy)))?
        {
            total += chunk.len() as u64;
            if total > policy.max_bytes {
                return Err(format!(
                    "not measured: the image is larger than the {} byte download limit; it is \
                     far too heavy for an email",
                    policy.max_bytes
                ));
            }
        }
        return Ok(total);
    }
}

/// The summary of `html` and its measured images (`None`: not measured yet), and the findings
/// about weight.
pub fn weigh(html: &str, images: Option<Vec<ImageWeight>>) -> (Summary, Vec<Finding>) {
    let html_bytes = html.len() as u64;
    let mut findings = Vec::new();
    let (image_bytes, not_measured) = images.as_deref().map_or((0, 0), |images| {
        (
            images.iter().filter_map(|i| i.bytes).sum(),
            images.iter().filter(|i| i.bytes.is_none()).count(),
        )
    });
    for image in images.iter().flatten() {
        if let Some(bytes) = image.bytes.filter(|&b| b > HEAVY_IMAGE_BYTES) {
            findings.push(Finding::new(
                "image-weight",
                Severity::Warning,
                Some(image.line),
                format!(
                    "the image {} weighs {} KB, over {} KB: it loads slowly on mobile data; \
                     resize it to the displayed size and compress it",
                    shorten(&image.url, 80),
                    bytes / 1024,
                    HEAVY_IMAGE_BYTES / 1024
                ),
            ));
        }
    }
    let total = html_bytes + image_bytes;
    if total > HEAVY_EMAIL_BYTES {
        findings.push(Finding::new(
            "email-weight",
            Severity::Warning,
            None,
            format!(
                "the email weighs {} KB with its images, over {} KB: readers on mobile data wait \
                 and pay for it; compress images and trim the HTML",
                total / 1024,
                HEAVY_EMAIL_BYTES / 1024
            ),
        ));
    }
    (
        Summary {
            html_bytes,
            gmail_clip_bytes: GMAIL_CLIP_BYTES,
            gmail_clipped: html_bytes > GMAIL_CLIP_BYTES,
            images,
            image_bytes,
            total_bytes: total,
            images_not_measured: not_measured,
        },
        findings,
    )
}

/// `html` with a `data-mp-line` attribute on every element (its source line), so that what the
/// engine reports can be placed back in the source.
pub fn tag_lines(html: &str) -> Result<String, String> {
    let line_at = line_index(html);
    let tagged = rewrite_str(
        html,
        RewriteStrSettings::new().append_element_content_handler(element!("*", |el| {
            let line = line_at(el.source_location().bytes().start);
            el.set_attribute("data-mp-line", &line.to_string())?;
            Ok(())
        })),
    )
    .map_err(|e| format!("the email's HTML could not be read: {e}"));
    tagged
}

/// A JavaScript expression for the engine to evaluate on a page made by [`tag_lines`]: walks the
/// visible text, takes its computed colour and effective background and answers the WCAG AA
/// failures as JSON ([`ProbeResult`]).
pub const CONTRAST_PROBE: &str = include_str!("checks/contrast.js");

/// One failure the probe reports.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeFailure {
    pub line: Option<usize>,
    pub text: String,
    pub foreground: String,
    pub background: String,
    pub ratio: f64,
    pub required: f64,
}

/// Text the probe could not judge: a background image lies behind it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeUnjudged {
    pub line: Option<usize>,
    pub text: String,
}

/// What [`CONTRAST_PROBE`] answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeResult {
    /// Text runs judged.
    pub judged: u64,
    pub failures: Vec<ProbeFailure>,
    pub unjudged: Vec<ProbeUnjudged>,
}

/// The findings of the probe's JSON answer.
pub fn contrast_findings(probe_json: &str) -> Result<Vec<Finding>, String> {
    let result: ProbeResult = serde_json::from_str(probe_json)
        .map_err(|e| format!("the contrast probe's answer is unreadable: {e}"))?;
    let mut out: Vec<Finding> = result
        .failures
        .into_iter()
        .map(|f| Finding {
            id: "contrast".to_owned(),
            severity: Severity::Error,
            message: format!(
                "the text {} is {} on {}, a contrast of {:.2}:1, below WCAG AA's {}:1 for text \
                 of its size: readers with low vision or in sunlight cannot read it; darken the \
                 text or lighten the background (or the reverse)",
                shorten(&f.text, 60),
                f.foreground,
                f.background,
                f.ratio,
                f.required
            ),
            line: f.line,
            contrast: Some(Contrast {
                text: f.text,
                foreground: f.foreground,
                background: f.background,
                ratio: f.ratio,
                required: f.required,
            }),
        })
        .collect();
    out.extend(result.unjudged.into_iter().map(|u| {
        Finding::new(
            "contrast",
            Severity::Info,
            u.line,
            format!(
                "contrast not judged for the text {}: it lies over a background image, whose \
                 colours the check cannot know; make sure the text stays readable with the image \
                 off too (set a background-color close to the image's)",
                shorten(&u.text, 60)
            ),
        )
    }));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids_at(findings: &[Finding], id: &str) -> Vec<Option<usize>> {
        findings
            .iter()
            .filter(|f| f.id == id)
            .map(|f| f.line)
            .collect()
    }

    const GOOD: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head><title>Hi</title></head>\n<body>\n<div style=\"display:none\">Preview</div>\n<h1>A</h1>\n<h2>B</h2>\n<table role=\"presentation\"><tr><td><a href=\"https://example.com/o\">View your order</a></td></tr></table>\n<img src=\"data:image/png;base64,AAAA\" alt=\"\">\n</body>\n</html>\n";

    #[test]
    fn the_plain_text_part_is_judged_when_the_message_is_known() {
        let ids = |text_part| {
            static_findings(GOOD, text_part)
                .expect("readable")
                .into_iter()
                .map(|f| (f.id, f.severity))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(Some(true)), vec![]);
        assert_eq!(
            ids(Some(false)),
            vec![("plain-text".to_owned(), Severity::Warning)]
        );
        assert_eq!(ids(None), vec![("plain-text".to_owned(), Severity::Info)]);
    }

    #[test]
    fn a_clean_email_has_only_the_plain_text_note() {
        let findings = static_findings(GOOD, None).expect("readable");
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, vec!["plain-text"], "{findings:#?}");
    }

    #[test]
    fn image_without_alt_is_reported_on_its_line() {
        let html = GOOD.replace(
            "<img src=\"data:image/png;base64,AAAA\" alt=\"\">",
            "<p>\n<img src=x>",
        );
        let findings = static_findings(&html, None).expect("readable");
        assert_eq!(ids_at(&findings, "img-alt"), vec![Some(10)]);
    }

    #[test]
    fn missing_and_empty_lang_are_reported() {
        let none = static_findings(&GOOD.replace(" lang=\"en\"", ""), None).expect("readable");
        assert_eq!(ids_at(&none, "lang"), vec![Some(2)]);
        let empty =
            static_findings(&GOOD.replace("lang=\"en\"", "lang=\" \""), None).expect("readable");
        assert!(
            empty
                .iter()
                .any(|f| f.id == "lang" && f.message.contains("an empty lang")),
            "{empty:#?}"
        );
        let fragment = static_findings("<p>hi</p>", None).expect("readable");
        assert_eq!(ids_at(&fragment, "lang"), vec![None]);
    }

    #[test]
    fn skipped_heading_level_is_reported() {
        let html = GOOD.replace("<h2>B</h2>", "<h3>B</h3>\n<h4>C</h4>\n<h2>D</h2>");
        let findings = static_findings(&html, None).expect("readable");
        assert_eq!(ids_at(&findings, "heading-order"), vec![Some(7)]);
    }

    #[test]
    fn vague_and_empty_link_text_is_reported() {
        let html = GOOD.replace(
            "View your order</a>",
            "View your order</a>\n<a href=\"https://e.com\"><span>Click</span> here!</a>\n<a href=\"https://e.com\"><img src=\"a.png\" alt=\"\"></a>\n<a href=\"https://e.com\" aria-label=\"Your invoice\">here</a>\n<a href=\"https://e.com\"><img src=\"b.png\" alt=\"Shop shoes\"></a>",
        );
        let findings = static_findings(&html, None).expect("readable");
        assert_eq!(ids_at(&findings, "link-text"), vec![Some(9), Some(10)]);
        let vague = findings.iter().find(|f| f.id == "link-text").expect("one");
        assert_eq!(vague.severity, Severity::Warning);
        assert!(vague.message.contains("\"click here\""), "{vague:?}");
    }

    #[test]
    fn layout_tables_need_a_role_and_data_tables_do_not() {
        let html = GOOD.replace(
            "</body>",
            "<table>\n<tr><td>x</td></tr></table>\n<table><tr><th>Item</th></tr></table>\n<table role=\"none\"><tr><td>y</td></tr></table>\n</body>",
        );
        let findings = static_findings(&html, None).expect("readable");
        assert_eq!(ids_at(&findings, "table-role"), vec![Some(10)]);
    }

    #[test]
    fn missing_or_empty_title_and_preheader_are_reported() {
        let no_title = static_findings(&GOOD.replace("<title>Hi</title>", ""), None).expect("ok");
        assert!(no_title
            .iter()
            .any(|f| f.id == "title" && f.message.contains("no <title>")));
        let empty = static_findings(&GOOD.replace("<title>Hi</title>", "<title> </title>"), None)
            .expect("ok");
        assert!(empty
            .iter()
            .any(|f| f.id == "title" && f.message.contains("empty")));
        let no_pre =
            static_findings(&GOOD.replace(" style=\"display:none\"", ""), None).expect("ok");
        assert_eq!(ids_at(&no_pre, "preheader"), vec![None]);
    }

    #[test]
    fn an_email_over_102_kb_is_clipped_by_gmail() {
        let big = GOOD.replace(
            "</body>",
            &format!("<p>{}</p></body>", "x".repeat(110 * 1024)),
        );
        let findings = static_findings(&big, None).expect("readable");
        assert_eq!(ids_at(&findings, "gmail-clip"), vec![None]);
        let (summary, _) = weigh(&big, None);
        assert!(summary.gmail_clipped);
        assert!(!weigh(GOOD, None).0.gmail_clipped);
    }

    #[test]
    fn lines_are_tagged_on_every_element() {
        let tagged = tag_lines("<p>a</p>\n<div><span>b</span></div>").expect("ok");
        assert_eq!(
            tagged,
            "<p data-mp-line=\"1\">a</p>\n<div data-mp-line=\"2\"><span data-mp-line=\"2\">b</span></div>"
        );
    }

    #[tokio::test]
    async fn data_images_are_measured_and_cid_and_refused_ones_say_why() {
        let html = "<img src=\"data:image/gif;base64,R0lGODlhAQABAAAAACw=\" alt=\"\">\n<img src=\"cid:logo\" alt=\"\">\n<img src=\"http://127.0.0.1:9/a.png\" alt=\"\">\n<img src=\"images/a.png\" alt=\"\">";
        let images = measure_images(html, &NetPolicy::default())
            .await
            .expect("readable");
        assert_eq!(images[0].bytes, Some(14));
        assert!(images[1]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("cid:")));
        assert!(
            images[2]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("refused")),
            "{images:?}"
        );
        assert!(
            images[3]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("relative URL")),
            "{images:?}"
        );
        let (summary, _) = weigh(html, Some(images));
        assert_eq!(summary.image_bytes, 14);
        assert_eq!(summary.images_not_measured, 3);
        assert_eq!(summary.total_bytes, html.len() as u64 + 14);
    }

    #[test]
    fn heavy_images_are_reported() {
        let images = vec![ImageWeight {
            url: "https://e.com/big.jpg".into(),
            line: 3,
            bytes: Some(3 * 1024 * 1024),
            error: None,
        }];
        let (_, findings) = weigh("<p>x</p>", Some(images));
        assert_eq!(ids_at(&findings, "image-weight"), vec![Some(3)]);
        assert_eq!(ids_at(&findings, "email-weight"), vec![None]);
    }

    #[test]
    fn probe_answers_become_findings() {
        let json = r##"{"judged":3,"failures":[{"line":4,"text":"grey","foreground":"#999999","background":"#ffffff","ratio":2.85,"required":4.5}],"unjudged":[{"line":7,"text":"over a photo"}]}"##;
        let findings = contrast_findings(json).expect("readable");
        assert_eq!(findings.len(), 2);
        assert_eq!(findings[0].line, Some(4));
        assert_eq!(findings[0].severity, Severity::Error);
        assert!(findings[0].message.contains("2.85:1"));
        assert_eq!(findings[1].severity, Severity::Info);
        assert!(contrast_findings("null").is_err());
    }
}
