//! The corpus suite: real emails drawn through the service's own path (the client's
//! transformation, [`prepared_request`], a real engine), each drawing checked against the email
//! itself, so that a screenshot that is not this email, whole, as the client shows it, is found
//! on the emails people send rather than on probes made for one behaviour.
//!
//! The invariants ([`Invariant`]) read the engine's DOM of the drawn page (its `innerText` and
//! layout, in Chromium: only Chromium evaluates a probe, so a WebKit or Gecko profile's page is
//! read as Blink lays out the same document) and compare it with the source's text for the
//! client's conditional branch ([`emulate::branch::branch_text`]), never with OCR.
//!
//! Run by `corpus-report` over whole corpora and by the `jobs` integration tests on a sample.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use domain::{Client, Variant};
use emulate::{Implementation, RuleBook};
use render::{RenderError, Renderer};

use crate::{prepared_request, Prepared};

/// What is checked of every drawing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// The engine drew the page, and not a blank picture of a page with text (the renderer
    /// refuses those as `blank_render`).
    Drawn,
    /// Every word the drawn page shows is text of the source's branch for the client (or the
    /// client's own line, such as Gmail's clip line): no settings printed, no other document.
    NoForeignText,
    /// Gmail's "[Message clipped]" line is below everything else the page shows.
    ClipLineLast,
    /// In the images-off screenshot of a client documented to show alt text (or Outlook's
    /// placeholder with it), each shown remote image's alt text is drawn.
    AltTextShown,
    /// The code analysis names exactly the behaviours the screenshots apply (the zoom-out as
    /// measured on the page).
    AnalysisAgrees,
}

impl Invariant {
    pub const ALL: [Invariant; 5] = [
        Invariant::Drawn,
        Invariant::NoForeignText,
        Invariant::ClipLineLast,
        Invariant::AltTextShown,
        Invariant::AnalysisAgrees,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::Drawn => "drawn, not blank",
            Invariant::NoForeignText => "no text the source lacks",
            Invariant::ClipLineLast => "clip line after all content",
            Invariant::AltTextShown => "alt text shown with images off",
            Invariant::AnalysisAgrees => "analysis names what is applied",
        }
    }
}

/// One email of a corpus.
#[derive(Clone, Debug)]
pub struct Email {
    /// The file name.
    pub name: String,
    pub html: String,
}

/// Every `.html` file of `dir`, sorted by name.
pub fn load(dir: &Path) -> Result<Vec<Email>, std::io::Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path: PathBuf = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("html") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let html = std::fs::read_to_string(&path).map_err(|e| {
            std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display()))
        })?;
        out.push(Email { name, html });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The verdict of one invariant on one email in one client.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub email: String,
    pub client: String,
    pub family: String,
    pub invariant: Invariant,
    /// What is wrong; `None` when the invariant holds.
    pub failure: Option<String>,
}

/// What the drawn page says about itself, read in Chromium.
#[derive(Debug, Default, PartialEq)]
pub struct Reading {
    /// `document.body.innerText`: the text a reader sees (CSS-hidden text left out).
    pub text: String,
    /// Where Gmail's clip line is, when the page has one.
    pub clip: Option<ClipPosition>,
    /// The alt text of each remote image the page shows (not hidden by CSS).
    pub alts: Vec<String>,
}

/// Gmail's clip line and the content above it, in CSS px from the page's top.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClipPosition {
    pub top: f64,
    /// The bottom of the lowest line of text that is not the clip line's.
    pub content_bottom: f64,
}

/// Evaluated on the drawn page: its text, the clip line's place, the shown images' alt texts.
const READ_PAGE: &str = r#"(() => {
  const remote = s => !/^\s*(cid|data):/i.test(s || '');
  const shown = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const clip = document.querySelector('[data-mailproof-clipped]');
  let position = null;
  if (clip && document.body) {
    let bottom = 0;
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    while (walk.nextNode()) {
      const node = walk.currentNode;
      if (clip.contains(node) || !node.textContent.trim()) continue;
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) {
        if (r.height > 0 && r.width > 0) bottom = Math.max(bottom, r.bottom + window.scrollY);
      }
    }
    position = { top: clip.getBoundingClientRect().top + window.scrollY, content_bottom: bottom };
  }
  const alts = [...document.images]
    .filter(i => remote(i.getAttribute('src')) && (i.getAttribute('alt') || '').trim() && shown(i))
    .map(i => i.getAttribute('alt').trim());
  return { text: document.body ? document.body.innerText : '', clip: position, alts };
})()"#;

impl Reading {
    fn parse(json: &str) -> Result<Reading, String> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("the page reading is not JSON: {e}"))?;
        let text = v["text"].as_str().unwrap_or_default().to_string();
        let clip = match &v["clip"] {
            serde_json::Value::Null => None,
            c => Some(ClipPosition {
                top: c["top"].as_f64().ok_or("the clip line has no top")?,
                content_bottom: c["content_bottom"].as_f64().unwrap_or(0.0),
            }),
        };
        let alts = v["alts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Reading { text, clip, alts })
    }
}

/// Lowercased runs of letters and digits.
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The words of `drawn` that are not in `source` (nor in `extras`, the client's own lines), in
/// the order first seen. A word counts as present when its letters occur in the source's text with
/// the spaces taken out: a word the source splits over elements (`Hel<b>lo</b>`) is drawn whole.
pub fn foreign_words(drawn: &str, source: &[String], extras: &[&str]) -> Vec<String> {
    let hay: String = source
        .iter()
        .map(String::as_str)
        .chain(extras.iter().copied())
        .flat_map(words)
        .collect();
    let mut seen = BTreeSet::new();
    words(drawn)
        .filter(|w| !hay.contains(w.as_str()) && seen.insert(w.clone()))
        .collect()
}

/// Whether the clip line is below every other line of text (1 px of rounding allowed).
pub fn clip_line_last(clip: &ClipPosition) -> bool {
    clip.top + 1.0 >= clip.content_bottom
}

/// The alt texts of `alts` that `drawn` does not show; with Outlook's placeholder, only the first
/// `cut` characters of each are drawn.
pub fn missing_alts(drawn: &str, alts: &[String], cut: Option<usize>) -> Vec<String> {
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = squeeze(drawn).to_lowercase();
    alts.iter()
        .filter(|alt| {
            let alt = squeeze(alt).to_lowercase();
            let alt: String = match cut {
                Some(n) => alt.chars().take(n).collect(),
                None => alt,
            };
            !text.contains(alt.trim())
        })
        .cloned()
        .collect()
}

/// The behaviours one side names and the other does not: `(applied only, named only)`.
pub fn disagreement(
    applied: &BTreeSet<String>,
    named: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    (
        applied.difference(named).cloned().collect(),
        named.difference(applied).cloned().collect(),
    )
}

/// A drawn and read variant of an email.
struct Drawing {
    reading: Reading,
    behaviours: Vec<String>,
}

/// Draws `variant` as the service does and reads the drawn page back.
async fn draw(
    renderer: &Renderer,
    client: &Client,
    book: &RuleBook,
    html: &str,
    variant: Variant,
) -> Result<Drawing, String> {
    let transformed = emulate::transform_variant(html, client, book, variant)
        .map_err(|e| format!("the transformation failed: {e}"))?;
    let Prepared {
        request,
        behaviours,
        ..
    } = prepared_request(renderer, client, variant, transformed)
        .await
        .map_err(|e| format!("preparing the page failed: {e}"))?;
    let read = render::RenderRequest {
        engine: domain::Engine::Blink,
        ..request.clone()
    };
    renderer.render(request).await.map_err(|e| match e {
        RenderError::BlankRender { .. } => format!("blank picture of a page with text: {e}"),
        e => format!("not drawn: {e}"),
    })?;
    let json = renderer
        .evaluate(read, READ_PAGE)
        .await
        .map_err(|e| format!("reading the drawn page failed: {e}"))?;
    Ok(Drawing {
        reading: Reading::parse(&json)?,
        behaviours,
    })
}

/// Checks every invariant that applies to `email` in `client`.
pub async fn check(
    renderer: &Renderer,
    book: &RuleBook,
    client: &Client,
    email: &Email,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut verdict = |invariant: Invariant, failure: Option<String>| {
        out.push(Outcome {
            email: email.name.clone(),
            client: client.id.clone(),
            family: client.family.clone(),
            invariant,
            failure,
        })
    };
    let applied = book.behaviours().of(client);
    let alt_drawing = [
        Implementation::BlockedImageAltText,
        Implementation::BlockedImagePlaceholder,
    ]
    .into_iter()
    .find(|imp| applied.has(*imp));

    let default = draw(renderer, client, book, &email.html, Variant::Default).await;
    let default = match default {
        Ok(d) => {
            verdict(Invariant::Drawn, None);
            d
        }
        Err(e) => {
            verdict(Invariant::Drawn, Some(e));
            return out;
        }
    };
    match emulate::branch::branch_text(&email.html, client, book) {
        Ok(source) => {
            let clip_text = emulate::document::visible_text(emulate::transform::CLIP_LINE);
            let extras: Vec<&str> = clip_text.iter().map(String::as_str).collect();
            let foreign = foreign_words(&default.reading.text, &source, &extras);
            verdict(
                Invariant::NoForeignText,
                (!foreign.is_empty()).then(|| format!("draws {foreign:?}")),
            );
        }
        Err(e) => verdict(
            Invariant::NoForeignText,
            Some(format!("the source's branch could not be read: {e}")),
        ),
    }
    let clips = applied.has(Implementation::ClipLongMessage)
        && email.html.len() > emulate::transform::CLIP_BYTES;
    if clips {
        let failure = match &default.reading.clip {
            None => Some("the page has no clip line".to_string()),
            Some(c) if !clip_line_last(c) => Some(format!(
                "the clip line is at {:.0} px, text goes on to {:.0} px",
                c.top, c.content_bottom
            )),
            Some(_) => None,
        };
        verdict(Invariant::ClipLineLast, failure);
    }

    let mut behaviours: BTreeSet<String> = default.behaviours.iter().cloned().collect();
    // Why the behaviours applied could not all be known, when they could not.
    let mut unknown = None;
    match alt_drawing {
        Some(imp) => match draw(renderer, client, book, &email.html, Variant::NoImages).await {
            Ok(off) => {
                verdict(Invariant::Drawn, None);
                let cut = (imp == Implementation::BlockedImagePlaceholder)
                    .then_some(emulate::images_off::PLACEHOLDER_ALT_CHARS);
                let missing = missing_alts(&off.reading.text, &default.reading.alts, cut);
                verdict(
                    Invariant::AltTextShown,
                    (!missing.is_empty()).then(|| format!("alt text not drawn: {missing:?}")),
                );
                behaviours.extend(off.behaviours);
            }
            Err(e) => verdict(Invariant::Drawn, Some(format!("images off: {e}"))),
        },
        None => {
            // Not drawn: only what the transformation applies in that variant is needed.
            match emulate::transform_variant(&email.html, client, book, Variant::NoImages) {
                Ok(t) => behaviours.extend(t.behaviours),
                Err(e) => unknown = Some(format!("images off not transformed: {e}")),
            }
        }
    }
    match emulate::analyze(&email.html, client, book) {
        _ if unknown.is_some() => verdict(Invariant::AnalysisAgrees, unknown),
        Ok(mut analysis) => {
            // Each drawn variant is measured on its own (blocked images change the page's
            // width): the analysis names the zoom-out if any screenshot applied it.
            if let Some(zoom) = analysis.zoom_out().map(String::from) {
                analysis.measured(behaviours.contains(&zoom));
            }
            let named: BTreeSet<String> = analysis.behaviours.into_iter().collect();
            let (applied_only, named_only) = disagreement(&behaviours, &named);
            let failure = (!applied_only.is_empty() || !named_only.is_empty()).then(|| {
                format!(
                    "applied but not named {applied_only:?}, named but not applied {named_only:?}"
                )
            });
            verdict(Invariant::AnalysisAgrees, failure);
        }
        Err(e) => verdict(
            Invariant::AnalysisAgrees,
            Some(format!("the analysis failed: {e}")),
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &[&str]) -> Vec<String> {
        s.iter().map(|t| t.to_string()).collect()
    }

    // The stray "96" of Outlook's settings block, as it was drawn before the conditional
    // comments were read whole.
    #[test]
    fn printed_settings_are_foreign_text() {
        let source = texts(&["Confirm your email address", "The Mailgunners"]);
        assert_eq!(
            foreign_words(
                "96\nConfirm your email address\nThe Mailgunners",
                &source,
                &[]
            ),
            vec!["96"]
        );
        assert!(foreign_words("CONFIRM your email\naddress", &source, &[]).is_empty());
    }

    #[test]
    fn a_word_split_over_elements_is_the_source_s_and_the_client_s_own_line_is_allowed() {
        let source = texts(&["Hel", "lo world"]);
        assert!(foreign_words("Hello world", &source, &[]).is_empty());
        assert_eq!(
            foreign_words("Hello world [Message clipped]", &source, &[]),
            vec!["message", "clipped"]
        );
        assert!(foreign_words(
            "Hello world [Message clipped]",
            &source,
            &["[Message clipped]"]
        )
        .is_empty());
    }

    // Where a string cut used to put it: in front of the table it was appended to.
    #[test]
    fn a_clip_line_above_the_content_fails() {
        assert!(!clip_line_last(&ClipPosition {
            top: 8.0,
            content_bottom: 2400.0
        }));
        assert!(clip_line_last(&ClipPosition {
            top: 2412.0,
            content_bottom: 2400.0
        }));
    }

    #[test]
    fn an_alt_text_not_drawn_is_missing_and_the_placeholder_s_cut_is_allowed() {
        let alts = texts(&["Company logo", &"a".repeat(300)]);
        assert_eq!(
            missing_alts("Welcome\nCompany  logo", &alts, None),
            vec!["a".repeat(300)]
        );
        assert!(missing_alts(
            &format!("Company logo {}", "a".repeat(200)),
            &alts,
            Some(200)
        )
        .is_empty());
        assert_eq!(missing_alts("Welcome", &alts, Some(200)).len(), 2);
    }

    #[test]
    fn a_behaviour_one_side_names_alone_is_a_disagreement() {
        let set = |s: &[&str]| s.iter().map(|t| t.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            disagreement(&set(&["a", "b"]), &set(&["b", "c"])),
            (vec!["a".to_string()], vec!["c".to_string()])
        );
        let same = set(&["a"]);
        assert_eq!(disagreement(&same, &same), (vec![], vec![]));
    }

    #[test]
    fn a_page_reading_parses_with_and_without_a_clip_line() {
        let r = Reading::parse(r#"{"text":"Hi","clip":null,"alts":["Logo"]}"#).expect("parses");
        assert_eq!(r.text, "Hi");
        assert_eq!(r.clip, None);
        assert_eq!(r.alts, vec!["Logo"]);
        let r = Reading::parse(r#"{"text":"","clip":{"top":5,"content_bottom":9},"alts":[]}"#)
            .expect("parses");
        assert_eq!(
            r.clip,
            Some(ClipPosition {
                top: 5.0,
                content_bottom: 9.0
            })
        );
    }
}
