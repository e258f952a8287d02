//! The transformation: an email's HTML in, the HTML a given client would draw out (conditional
//! comments, removed elements/attributes/CSS, class prefixes, Word-engine VML, forced dark-mode
//! colours, the client's wrapper and base styles).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use domain::{Category, Client, ColorScheme, Variant};
use lol_html::html_content::{ContentType, Element, TextType};
use lol_html::{doc_text, element, rewrite_str, text, RewriteStrSettings};

use crate::behaviours::{Applied, Implementation};
use crate::color::{self, Role};
use crate::conditional::{self, Mso};
use crate::css::{self, CssContext, Quirks, Removed};
use crate::detect;
use crate::document::Document;
use crate::features::Effect;
use crate::rules::{BodyHandling, DarkMode, OnCssError, RuleBook, RuleSet, Support};
use crate::{vml, EmulateError};

/// Largest email HTML the emulation accepts: the limit tests are checked against when created.
pub const MAX_HTML_BYTES: usize = domain::MAX_HTML_BYTES;

/// Where Gmail clips a message: bytes of the HTML as received (data/behaviours.toml,
/// gmail-clipping).
pub const CLIP_BYTES: usize = 102_400;

/// Gmail's line under a clipped message.
pub const CLIP_LINE: &str = "<div data-mailproof-clipped=\"\" style=\"font-family:Arial,Helvetica,sans-serif;font-size:13px;line-height:20px;color:#222222;padding:12px 0;\">[Message clipped]&nbsp;&nbsp;<a href=\"#\" style=\"color:#1a0dab;text-decoration:underline;\">View entire message</a></div>";

/// The layout width Samsung Email's "auto fit" gives an email wider than the screen: it injects
/// `<meta name="viewport" content="width=686">` (data/behaviours.toml, samsung-auto-fit).
pub const AUTO_FIT_LAYOUT_WIDTH: u32 = 686;

/// Background and text colour of a client's page when it forces a dark theme.
const DARK_PAGE: (&str, &str) = ("#121212", "#e6e6e6");

/// What a client would draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformed {
    pub html: String,
    /// What the engine must emulate for `prefers-color-scheme`: `Dark` only for a dark-mode
    /// profile whose client honours the media query.
    pub color_scheme: ColorScheme,
    /// The rule set's name, followed by the behaviours (data/behaviours.toml) that changed this
    /// email: `gmail-desktop-webmail + gmail-clipping + gmail-style-in-body`.
    pub rule_set: String,
    /// The ids of the behaviours [`Transformed::rule_set`] names, in file order: what the code
    /// analysis must name too ([`crate::Analysis::behaviours`]).
    pub behaviours: Vec<String>,
    /// Short notes of what was removed or rewritten, for logs: `"<slug or reason> x<count>"`.
    pub removed: Vec<String>,
    /// CSS width the client lays the email out at when it is not the profile's viewport width:
    /// the page is drawn that wide and zoomed out to the screen. Set only by a [`ZoomToFit`],
    /// once the page is measured ([`Transformed::measured`]): no client's zoom is decided from the
    /// source.
    pub layout_width: Option<u32>,
    /// The zoom-out the client decides on the laid-out page, for the renderer to measure before
    /// drawing; `None` when the client has none or the email turns it off.
    pub zoom_to_fit: Option<ZoomToFit>,
    /// The dark-mode recolouring the client applies to the loaded page (computed colours), for
    /// the renderer to run before the screenshot; `None` for light profiles and clients that
    /// leave colours to the email.
    pub dark_pass: Option<color::DarkPass>,
}

/// A client's zoom-out of a page wider than its screen (Gmail Android's "Auto-fit messages", iOS
/// Mail's scaling). The clients shrink what is wider than the screen once laid out, so whether it
/// applies is not read from the source: the renderer lays the page out at the screen width,
/// measures it, and hands the width to [`Transformed::measured`].
#[derive(Clone, Debug, PartialEq)]
pub struct ZoomToFit {
    pub implementation: Implementation,
    /// [`Transformed::rule_set`] once the zoom-out applies: the behaviour named in file order.
    rule_set: String,
    /// [`Transformed::behaviours`] once the zoom-out applies.
    behaviours: Vec<String>,
    /// The zoom-out's own behaviour id.
    id: String,
}

impl ZoomToFit {
    /// The id of the behaviour that applies if the page turns out wider than the screen.
    pub fn behaviour(&self) -> Option<&str> {
        self.behaviours
            .iter()
            .find(|b| b.as_str() == self.id)
            .map(String::as_str)
    }
}

impl Transformed {
    /// Takes the page's measured width, laid out at a screen `screen` CSS px wide: a page wider
    /// than the screen is laid out at its own width (Samsung's auto fit: at
    /// [`AUTO_FIT_LAYOUT_WIDTH`]) and zoomed out to the screen, and the rule set names the
    /// behaviour. Nothing changes when it fits or no zoom-out is pending.
    pub fn measured(&mut self, page_width: u32, screen: u32) {
        let Some(zoom) = self.zoom_to_fit.take() else {
            return;
        };
        if page_width > screen {
            self.layout_width = Some(match zoom.implementation {
                Implementation::AutoFitWideLayout => AUTO_FIT_LAYOUT_WIDTH,
                _ => page_width,
            });
            self.rule_set = zoom.rule_set;
            self.behaviours = zoom.behaviours;
            self.removed
                .push(format!("{} x1", zoom.implementation.note_key()));
        }
    }
}

/// Turns `html` into what `client` would draw, following its rule set in `book`, with images
/// shown (the `default` variant).
pub fn transform(
    html: &str,
    client: &Client,
    book: &RuleBook,
) -> Result<Transformed, EmulateError> {
    transform_variant(html, client, book, Variant::Default)
}

/// Turns `html` into what `client` would draw in the screenshot `variant`: with images blocked,
/// each image is drawn as the client draws a blocked one (data/behaviours.toml).
pub fn transform_variant(
    html: &str,
    client: &Client,
    book: &RuleBook,
    variant: Variant,
) -> Result<Transformed, EmulateError> {
    if html.len() > MAX_HTML_BYTES {
        return Err(EmulateError::TooLarge {
            len: html.len(),
            max: MAX_HTML_BYTES,
        });
    }
    let set = book.rule_set_for(client)?;
    let rewrite_err = |e: lol_html::errors::RewritingError| EmulateError::Rewrite {
        client: client.id.clone(),
        message: e.to_string(),
    };
    let dark_profile = client.color_scheme == ColorScheme::Dark;
    let honours_media = matches!(
        set.support("css-at-media-prefers-color-scheme"),
        Support::Yes | Support::Partial
    ) && !set.removes("css-at-media")
        && !set.removes("html-style");
    let mut removed = Removed::default();
    let applied = book.behaviours().of(client);
    let dark_pass = applied
        .dark_pass()
        .filter(|_| dark_profile)
        .map(|(pass, b)| {
            removed.note(b.implementation.note_key());
            pass
        });
    let apple_opt_in = dark_profile && applied.has(Implementation::DarkAppleOptIn);
    // Apple Mail: prefers-color-scheme only once the CSS opts in; an unstyled email is darkened
    // by Mail itself (the engine's dark defaults, turned on below with a color-scheme rule).
    let unstyled_dark = apple_opt_in && !color::apple_opts_in(html) && color::is_unstyled(html);
    let color_scheme = if dark_profile
        && honours_media
        && (!apple_opt_in || color::apple_opts_in(html) || unstyled_dark)
    {
        ColorScheme::Dark
    } else {
        ColorScheme::Light
    };
    if apple_opt_in && color_scheme == ColorScheme::Dark {
        removed.note(Implementation::DarkAppleOptIn.note_key());
    }
    // Clients with a recolouring after load are recoloured there, on the computed colours; the
    // source-level rewrite stays for rule sets no behaviour covers.
    let forced = match (dark_profile && dark_pass.is_none(), set.policy.dark_mode) {
        (true, m @ (DarkMode::PartialInvert | DarkMode::FullInvert)) => m,
        _ => DarkMode::None,
    };
    let zoom = zoom_out(html, &applied);

    let clipped = if applied.has(Implementation::ClipLongMessage) {
        clip(html).map_err(|e| serialize_err(client, e))?
    } else {
        None
    };
    let mut work = match clipped {
        Some(clipped) => {
            removed.note(Implementation::ClipLongMessage.note_key());
            clipped
        }
        None => html.to_string(),
    };
    if applied.has(Implementation::MsoConditionalsAsComments)
        && !conditional::openings(&work).is_empty()
    {
        // Nothing to rewrite: the engine reads them as comments too. Noted so that the rule set
        // shown with the screenshot names the behaviour.
        removed.note(Implementation::MsoConditionalsAsComments.note_key());
    }
    if set.policy.word_engine {
        let (activated, n) = conditional::activate(&work, Mso::of(client));
        work = activated;
        if n > 0 {
            removed.0.insert("mso-conditionals-evaluated".into(), n);
        }
    }

    let main = MainPass {
        set,
        client,
        forced,
        word_engine: set.policy.word_engine,
        applied: &applied,
    };
    let (mut out, body_seen) = main.run(&work, &mut removed).map_err(rewrite_err)?;

    if set.policy.word_engine {
        out = vml::convert(&out, &mut removed).map_err(rewrite_err)?;
        let mut doc = Document::parse(&out);
        vml::hide_office_islands(&mut doc, &mut removed);
        out = doc.serialize().map_err(|e| serialize_err(client, e))?;
    }
    if !body_seen {
        if let Some((open, close)) = pane_markup(set, client) {
            out = format!("{open}{out}{close}");
        }
    }
    if variant.blocks_images() {
        out = crate::images_off::apply(&out, &applied, &mut removed).map_err(rewrite_err)?;
    }
    if unstyled_dark {
        // Appended: anything before a doctype would put the page in quirks mode.
        out.push_str("<style data-mailproof-dark>:root { color-scheme: light dark; }</style>");
    }
    let notes: Vec<String> = removed.0.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    let named = |notes: &std::collections::BTreeMap<String, usize>| {
        let ids = applied.triggered(notes);
        let rule_set = std::iter::once(set.name.as_str())
            .chain(ids.iter().copied())
            .collect::<Vec<_>>()
            .join(" + ");
        (rule_set, ids.into_iter().map(String::from).collect())
    };
    let (rule_set, behaviours) = named(&removed.0);
    let zoom_to_fit = zoom.map(|implementation| {
        let mut zoomed = removed.0.clone();
        zoomed.insert(implementation.note_key().into(), 1);
        let (rule_set, behaviours) = named(&zoomed);
        ZoomToFit {
            implementation,
            rule_set,
            behaviours,
            id: applied
                .find(implementation)
                .map(|b| b.id.clone())
                .unwrap_or_default(),
        }
    });
    tracing::debug!(client = %client.id, rules = %rule_set, changes = notes.len(), "email transformed");
    Ok(Transformed {
        html: out,
        color_scheme,
        rule_set,
        behaviours,
        removed: notes,
        layout_width: None,
        zoom_to_fit,
        dark_pass,
    })
}

fn serialize_err(client: &Client, e: std::io::Error) -> EmulateError {
    EmulateError::Rewrite {
        client: client.id.clone(),
        message: format!("serialising the document: {e}"),
    }
}

/// The zoom-out to the screen `applied` has, unless the email turns it off
/// (`x-apple-disable-message-reformatting`, for iOS Mail). Whether the page is wider than the
/// screen is measured on the laid-out page ([`ZoomToFit`]).
pub(crate) fn zoom_out(html: &str, applied: &Applied<'_>) -> Option<Implementation> {
    let imp = applied.zoom_out()?;
    let turned_off = imp == Implementation::ZoomOutWideEmailUnlessReformattingDisabled
        && html
            .to_ascii_lowercase()
            .contains("x-apple-disable-message-reformatting");
    (!turned_off).then_some(imp)
}

/// The widest fixed width the email sets, in CSS pixels: `width` attributes and `width: Npx`
/// declarations (not `max-width`/`min-width`).
pub(crate) fn widest_width(html: &str) -> u32 {
    static WIDTH: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?i)(?:^|[^-\w])width\s*(?:=\s*["']?\s*(\d+)(?:px)?["'\s>/]|:\s*(\d+)px)"#,
        )
        .unwrap_or_else(|e| panic!("width pattern does not compile: {e}"))
    });
    WIDTH
        .captures_iter(html)
        .filter_map(|c| c.get(1).or_else(|| c.get(2)))
        .filter_map(|m| m.as_str().parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

/// The widest width that stays fixed on a narrow screen: as [`widest_width`], except that an
/// element whose style also makes it fluid (`width:100%`, `max-width:100%`: the fluid-hybrid
/// `<img width="600" style="width:100%">`) does not count.
pub(crate) fn rigid_width(html: &str) -> u32 {
    static TAG: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"<[A-Za-z][^>]*>")
            .unwrap_or_else(|e| panic!("tag pattern does not compile: {e}"))
    });
    let mut widest = 0;
    let mut text_from = 0;
    for tag in TAG.find_iter(html) {
        // Between tags: text, and the CSS of <style> elements.
        widest = widest.max(widest_width(&html[text_from..tag.start()]));
        text_from = tag.end();
        let flat: String = tag
            .as_str()
            .to_ascii_lowercase()
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        if !flat.contains("width:100%") {
            widest = widest.max(widest_width(tag.as_str()));
        }
    }
    widest.max(widest_width(&html[text_from..]))
}

/// The HTML as Gmail shows a message longer than [`CLIP_BYTES`]: cut there, the cut closed as an
/// HTML parser closes a document that ends there (open elements, comments, `<style>`; a tag cut
/// in half is dropped), and Gmail's clip line after all of it, outside its tables. `None` when
/// the message is short enough.
pub(crate) fn clip(html: &str) -> Result<Option<String>, std::io::Error> {
    if html.len() <= CLIP_BYTES {
        return Ok(None);
    }
    let mut cut = CLIP_BYTES;
    while !html.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut doc = Document::parse(&html[..cut]);
    doc.append_to_body(CLIP_LINE);
    doc.serialize().map(Some)
}

/// The reading-pane wrapper of webmails: opening and closing markup.
fn pane_markup(set: &RuleSet, client: &Client) -> Option<(String, String)> {
    let width = set.policy.pane_width?;
    Some((
        format!(
            "<div data-mailproof-pane=\"{}\" style=\"width:{width}px;max-width:100%;box-sizing:border-box;padding:{pad}px;font-family:{font};\">",
            set.name,
            pad = set.policy.pane_padding,
            font = escape_attr(&client.default_font),
        ),
        "</div>".to_string(),
    ))
}

/// What an element-level effect matches on one element (the transformation removes it, the code
/// analysis reports it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ElementHit {
    /// The element itself.
    Element { keep_content: bool },
    /// An `<input>` of this type.
    Input(String),
    /// These attributes of the element.
    Attributes(Vec<&'static str>),
    /// An `<img>` whose source has this file extension.
    Image(String),
    /// An `<img>` with a `data:` source.
    DataImage,
}

impl ElementHit {
    /// What matched, as the code analysis shows it.
    pub(crate) fn label(&self, element: &str) -> String {
        match self {
            ElementHit::Element { .. } => format!("<{element}>"),
            ElementHit::Input(t) => format!("<input type={t}>"),
            ElementHit::Attributes(a) => format!("{} attribute", a.join("/")),
            ElementHit::Image(ext) => format!("{ext} image"),
            ElementHit::DataImage => "data: image".into(),
        }
    }
}

/// Whether `effect` applies to the element `name` whose attributes `attr` reads.
pub(crate) fn element_hit(
    effect: &Effect,
    name: &str,
    attr: &dyn Fn(&str) -> Option<String>,
) -> Option<ElementHit> {
    match effect {
        Effect::Element {
            name: n,
            keep_content,
        } if *n == name => Some(ElementHit::Element {
            keep_content: *keep_content,
        }),
        Effect::InputTypes(types) if name == "input" => {
            let t = attr("type")
                .unwrap_or_else(|| "text".into())
                .to_ascii_lowercase();
            types.contains(&t.as_str()).then_some(ElementHit::Input(t))
        }
        Effect::Attributes(attrs) => {
            let present: Vec<&'static str> = attrs
                .iter()
                .copied()
                .filter(|a| attr(a).is_some())
                .collect();
            (!present.is_empty()).then_some(ElementHit::Attributes(present))
        }
        Effect::ImageFormat(exts) if name == "img" => {
            let src = attr("src").unwrap_or_default();
            let path = src.split(['?', '#']).next().unwrap_or_default();
            let ext = path
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            (path.contains('.') && exts.contains(&ext.as_str())).then_some(ElementHit::Image(ext))
        }
        Effect::DataImages if name == "img" => {
            let src = attr("src").unwrap_or_default();
            src.trim_start()
                .to_ascii_lowercase()
                .starts_with("data:")
                .then_some(ElementHit::DataImage)
        }
        _ => None,
    }
}

/// Whether `html` has a start tag named exactly `name` (so `<header>` is not `<head>`).
fn has_tag(html: &str, name: &str) -> bool {
    let lower = html.to_ascii_lowercase();
    let open = format!("<{name}");
    lower.match_indices(&open).any(|(i, _)| {
        matches!(
            lower.as_bytes().get(i + open.len()),
            Some(b'>' | b' ' | b'\t' | b'\n' | b'\r' | b'/')
        )
    })
}

/// Decodes the character references that appear in attribute values (named ones emails use,
/// numeric ones in full); unknown references stay as written.
pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let tail = &rest[amp..];
        let semi = tail.find(';').filter(|&i| i <= 12);
        let decoded = semi.and_then(|i| {
            let name = &tail[1..i];
            let c = match name {
                "quot" => Some('"'),
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => {
                    let num = name.strip_prefix('#')?;
                    let code = match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => num.parse().ok(),
                    };
                    code.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, i))
        });
        match decoded {
            Some((c, i)) => {
                out.push(c);
                rest = &tail[i + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;")
}

/// The client's own styles, put before the email's so that the email's rules win.
fn base_style(set: &RuleSet, client: &Client, forced: DarkMode) -> String {
    let mut css = format!(
        "body {{ margin: 0; font-family: {}; }}",
        client.default_font.replace('<', "")
    );
    if forced != DarkMode::None {
        css.push_str(&format!(
            " body {{ background-color: {}; color: {}; }}",
            DARK_PAGE.0, DARK_PAGE.1
        ));
    }
    format!(
        "<style data-mailproof-client=\"{}\">{css}</style>",
        set.name
    )
}

struct MainPass<'a> {
    set: &'a RuleSet,
    client: &'a Client,
    forced: DarkMode,
    word_engine: bool,
    applied: &'a Applied<'a>,
}

impl MainPass<'_> {
    /// Rewrites elements, attributes and `<style>` contents; returns the HTML and whether a
    /// `<body>` element was found.
    fn run(
        &self,
        html: &str,
        removed: &mut Removed,
    ) -> Result<(String, bool), lol_html::errors::RewritingError> {
        let set = self.set;
        let policy = &set.policy;
        let cx = CssContext {
            effects: &set.effects,
            class_prefix: &policy.class_prefix,
            id_prefix: &policy.id_prefix,
            dark: self.forced,
            scoped: &policy.scoped_drops,
            element: None,
            quirks: Quirks::of(self.applied),
        };
        let notes = RefCell::new(std::mem::take(removed));
        // Empty-cell flags of the open table cells (innermost last), for Word's spacer cells.
        let cells: Rc<RefCell<Vec<bool>>> = Rc::default();
        let spacer_cells = self.applied.has(Implementation::SpacerCellOneLine);
        let filled_cells = Rc::new(Cell::new(0usize));
        // Open elements whose text data detectors leave alone (links, the head).
        let no_detect = Rc::new(Cell::new(0usize));
        let in_head = Rc::new(Cell::new(false));
        let detectors = self.applied.has(Implementation::DataDetectors);
        let phones_off = Cell::new(false);
        let detect_text = RefCell::new(String::new());
        // CSS kept so far, against the client's total limit.
        let css_total = Cell::new(0usize);
        let in_body = Cell::new(false);
        let skip_style = Cell::new(false);
        let style_text = RefCell::new(String::new());
        let styles_unsupported =
            !policy.style_blocks || set.effects.iter().any(|(_, e)| *e == Effect::StyleElement);
        let inject_into = if has_tag(html, "head") {
            "head"
        } else if has_tag(html, "html") {
            "html"
        } else {
            ""
        };
        let base = base_style(set, self.client, self.forced);
        let pane = pane_markup(set, self.client);
        let web = self.client.category == Category::Web;
        let body_handling = set.body_handling();

        let elements = element!("*", |el| {
            let name = el.tag_name();
            if name == inject_into {
                el.prepend(&base, ContentType::Html);
            }
            if name == "body" {
                in_body.set(true);
                self.body(el, body_handling, pane.as_ref(), &mut notes.borrow_mut());
            }
            if name == "style" {
                let reason = if styles_unsupported {
                    Some("html-style")
                } else if in_body.get() && !policy.style_in_body {
                    Some("html-style-in-body")
                } else {
                    None
                };
                skip_style.set(reason.is_some());
                if let Some(r) = reason {
                    notes.borrow_mut().note(r);
                    el.remove();
                    return Ok(());
                }
            }
            if web && name == "meta" {
                // A webmail page has its own viewport; the email's does not apply.
                let is_viewport = el
                    .get_attribute("name")
                    .is_some_and(|n| n.eq_ignore_ascii_case("viewport"));
                if is_viewport {
                    el.remove();
                    return Ok(());
                }
            }
            if let Some(top) = cells.borrow_mut().last_mut() {
                *top = false;
            }
            if detectors
                && name == "meta"
                && detect::stops_phone_links(el.get_attribute("name"), el.get_attribute("content"))
            {
                phones_off.set(true);
            }
            let cell_style = el.get_attribute("style").map(|s| decode_entities(&s));
            self.element(el, &name, &cx, &mut notes.borrow_mut());
            if spacer_cells && name == "td" && el.can_have_content() && !el.removed() {
                // Word gives an empty cell one line of text unless the cell sizes its text.
                let sized = cell_style.as_deref().is_some_and(css::sets_text_size);
                cells.borrow_mut().push(!sized);
                let cells = Rc::clone(&cells);
                let filled = Rc::clone(&filled_cells);
                if let Some(handlers) = el.end_tag_handlers() {
                    handlers.push(Box::new(move |end| {
                        if cells.borrow_mut().pop() == Some(true) {
                            end.before("&nbsp;", ContentType::Html);
                            filled.set(filled.get() + 1);
                        }
                        Ok(())
                    }));
                }
            }
            if detectors && name == "body" {
                in_head.set(false);
            }
            if detectors && name == "head" {
                in_head.set(true);
                let flag = Rc::clone(&in_head);
                if let Some(handlers) = el.end_tag_handlers() {
                    handlers.push(Box::new(move |_| {
                        flag.set(false);
                        Ok(())
                    }));
                }
            }
            if detectors && !el.removed() && matches!(name.as_str(), "a" | "button" | "select") {
                if let Some(handlers) = el.end_tag_handlers() {
                    no_detect.set(no_detect.get() + 1);
                    let depth = Rc::clone(&no_detect);
                    handlers.push(Box::new(move |_| {
                        depth.set(depth.get().saturating_sub(1));
                        Ok(())
                    }));
                }
            }
            Ok(())
        });
        let texts = doc_text!(|t| {
            if !t.as_str().trim().is_empty() {
                if let Some(top) = cells.borrow_mut().last_mut() {
                    *top = false;
                }
            }
            if !detectors || t.text_type() != TextType::Data || no_detect.get() > 0 || in_head.get()
            {
                return Ok(());
            }
            detect_text.borrow_mut().push_str(t.as_str());
            if !t.last_in_text_node() {
                t.remove();
                return Ok(());
            }
            let whole = std::mem::take(&mut *detect_text.borrow_mut());
            let (linked, n) = detect::link(&whole, phones_off.get());
            if n > 0 {
                notes
                    .borrow_mut()
                    .note(Implementation::DataDetectors.note_key());
            }
            t.replace(&linked, ContentType::Html);
            Ok(())
        });
        let styles = text!("style", |t| {
            if skip_style.get() {
                t.remove();
                return Ok(());
            }
            style_text.borrow_mut().push_str(t.as_str());
            if !t.last_in_text_node() {
                t.remove();
                return Ok(());
            }
            let sheet = std::mem::take(&mut *style_text.borrow_mut());
            let mut n = notes.borrow_mut();
            // The limit counts every <style> so far: once passed, this one and the rest go.
            css_total.set(css_total.get() + sheet.len());
            let kept = match policy.style_max_bytes {
                Some(max) if css_total.get() > max => {
                    n.note(Implementation::StyleSizeLimit.note_key());
                    String::new()
                }
                _ => {
                    let drop_on_error = policy.on_css_error == OnCssError::DropBlock;
                    match css::filter_sheet(&sheet, &cx, drop_on_error, &mut n) {
                        Ok(css) => css,
                        Err(css::SheetDropped::SyntaxError) => {
                            n.note(Implementation::StyleSyntaxErrorDropsBlock.note_key());
                            String::new()
                        }
                        Err(css::SheetDropped::NestedAtRule(..)) => {
                            n.note(Implementation::StyleNestedAtRuleDropsBlock.note_key());
                            String::new()
                        }
                    }
                }
            };
            t.replace(&kept, ContentType::Html);
            Ok(())
        });
        let out = rewrite_str(
            html,
            RewriteStrSettings::new()
                .append_element_content_handler(elements)
                .append_element_content_handler(styles)
                .append_document_content_handler(texts),
        )?;
        let mut out = out;
        if inject_into.is_empty() {
            out.insert_str(0, &base);
        }
        *removed = notes.into_inner();
        if filled_cells.get() > 0 {
            removed.0.insert(
                Implementation::SpacerCellOneLine.note_key().into(),
                filled_cells.get(),
            );
        }
        Ok((out, in_body.get()))
    }

    fn body(
        &self,
        el: &mut Element<'_, '_>,
        handling: BodyHandling,
        pane: Option<&(String, String)>,
        notes: &mut Removed,
    ) {
        // A webmail always shows the email inside its own page.
        let handling = match (handling, pane.is_some()) {
            (BodyHandling::Keep, true) => BodyHandling::Div,
            (h, _) => h,
        };
        match handling {
            BodyHandling::Keep => {}
            BodyHandling::Div | BodyHandling::DivWithoutAttributes => {
                if el.set_tag_name("div").is_ok() {
                    notes.note("html-body-replaced-by-div");
                }
                if handling == BodyHandling::DivWithoutAttributes {
                    let names: Vec<String> = el.attributes().iter().map(|a| a.name()).collect();
                    for n in names {
                        el.remove_attribute(&n);
                    }
                    notes.note("html-body-attributes");
                }
            }
        }
        if let Some((open, close)) = pane {
            el.before(open, ContentType::Html);
            el.after(close, ContentType::Html);
        }
    }

    fn element(
        &self,
        el: &mut Element<'_, '_>,
        name: &str,
        cx: &CssContext<'_>,
        notes: &mut Removed,
    ) {
        if matches!(
            name,
            "script" | "iframe" | "embed" | "frame" | "frameset" | "applet"
        ) {
            notes.note("active-content");
            el.remove();
            return;
        }
        // VML shapes are drawn by Word's VML renderer, not its CSS engine: their styles (sizes,
        // absolute positioning) are read by the VML conversion as written.
        if self.word_engine && name.contains(':') {
            return;
        }
        // lol_html hands attribute values over with their entities; CSS needs the text.
        let style = el.get_attribute("style").map(|s| decode_entities(&s));
        if self.word_engine && style.as_deref().is_some_and(css::hides_from_word) {
            notes.note("mso-hide-all");
            el.remove();
            return;
        }
        for (slug, effect) in &self.set.effects {
            let Some(hit) = element_hit(effect, name, &|a| el.get_attribute(a)) else {
                continue;
            };
            match hit {
                ElementHit::Element { keep_content } => {
                    notes.note(slug);
                    if keep_content {
                        el.remove_and_keep_content();
                    } else {
                        el.remove();
                        return;
                    }
                }
                ElementHit::Input(_) => {
                    notes.note(slug);
                    el.remove();
                    return;
                }
                ElementHit::Attributes(attrs) => {
                    for a in attrs {
                        el.remove_attribute(a);
                        notes.note(slug);
                    }
                }
                ElementHit::Image(_) => {
                    el.remove_attribute("src");
                    el.remove_attribute("srcset");
                    notes.note(slug);
                }
                ElementHit::DataImage => {
                    el.remove_attribute("src");
                    notes.note(slug);
                }
            }
        }
        let handlers: Vec<String> = el
            .attributes()
            .iter()
            .map(|a| a.name())
            .filter(|n| n.starts_with("on"))
            .collect();
        for h in handlers {
            el.remove_attribute(&h);
            notes.note("event-handler-attributes");
        }
        if let (Some(style), true) = (&style, self.marks_dark_changes()) {
            let (text, background) = css::recoloured_roles(style, self.forced);
            if text {
                let _ = el.set_attribute("data-ogsc", "");
            }
            if background {
                let _ = el.set_attribute("data-ogsb", "");
            }
        }
        // Gmail strips a whole style attribute that uses the space-separated rgb() syntax.
        let strict_rgb = self.set.policy.on_css_error == OnCssError::DropBlock;
        let style = match style {
            Some(s) if strict_rgb && css::space_separated_rgb(&s).is_some() => {
                el.remove_attribute("style");
                notes.note(Implementation::StyleSyntaxErrorDropsBlock.note_key());
                None
            }
            other => other,
        };
        if let Some(style) = style {
            let scoped = CssContext {
                element: Some(name),
                ..*cx
            };
            let kept = css::filter_inline(&style, &scoped, notes);
            if kept.is_empty() {
                el.remove_attribute("style");
            } else {
                let _ = el.set_attribute("style", &kept.replace('&', "&amp;"));
            }
        }
        let policy = &self.set.policy;
        if self.applied.has(Implementation::FirstClassOnly) {
            if let Some(class) = el.get_attribute("class") {
                let mut names = class.split_ascii_whitespace();
                if let (Some(first), Some(_)) = (names.next(), names.next()) {
                    let _ = el.set_attribute("class", first);
                    notes.note(Implementation::FirstClassOnly.note_key());
                }
            }
        }
        {
            let named = |attr: &str| el.get_attribute(attr).is_some_and(|v| !v.trim().is_empty());
            let renamed = (!policy.class_prefix.is_empty() && named("class"))
                || (!policy.id_prefix.is_empty() && named("id"));
            if renamed {
                notes.note(Implementation::ClassIdPrefix.note_key());
            }
        }
        if !policy.class_prefix.is_empty() {
            if let Some(class) = el.get_attribute("class") {
                let prefixed: Vec<String> = class
                    .split_ascii_whitespace()
                    .map(|c| format!("{}{c}", policy.class_prefix))
                    .collect();
                let _ = el.set_attribute("class", &prefixed.join(" "));
            }
        }
        if !policy.id_prefix.is_empty() {
            if let Some(id) = el.get_attribute("id").filter(|i| !i.is_empty()) {
                let _ = el.set_attribute("id", &format!("{}{id}", policy.id_prefix));
            }
        }
        if self.forced != DarkMode::None {
            if self.recolour_attribute(el, "bgcolor", Role::Background) && self.marks_dark_changes()
            {
                let _ = el.set_attribute("data-ogab", "");
            }
            if name == "font"
                && self.recolour_attribute(el, "color", Role::Foreground)
                && self.marks_dark_changes()
            {
                let _ = el.set_attribute("data-ogac", "");
            }
        }
    }

    /// Outlook.com-style marking of recoloured elements, which `[data-ogsc]` selectors target.
    fn marks_dark_changes(&self) -> bool {
        self.forced != DarkMode::None && self.set.policy.dark_mode_attributes
    }

    /// Recolours a colour attribute; `true` when it changed.
    fn recolour_attribute(&self, el: &mut Element<'_, '_>, attr: &str, role: Role) -> bool {
        let Some(value) = el.get_attribute(attr) else {
            return false;
        };
        let Some(c) = color::parse(&value) else {
            return false;
        };
        match color::darken(c, role, self.forced) {
            Some(new) => el.set_attribute(attr, &new.to_css()).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_entities, has_tag};

    #[test]
    fn the_rigid_width_leaves_out_elements_made_fluid_by_their_style() {
        use super::rigid_width;
        assert_eq!(
            rigid_width(
                "<img width=\"600\" style=\"width: 100%; max-width:600px\"><table width=\"480\">"
            ),
            480
        );
        assert_eq!(
            rigid_width(
                "<style>.w { width: 640px }</style><img width=\"600\" style=\"max-width:100%\">"
            ),
            640
        );
        assert_eq!(
            rigid_width("<table width=\"600\"><tr><td>x</td></tr></table>"),
            600
        );
    }

    #[test]
    fn the_widest_width_reads_attributes_and_pixel_declarations_only() {
        use super::widest_width;
        assert_eq!(
            widest_width("<table width=\"600\"><td style=\"max-width:900px;width:320px\">"),
            600
        );
        assert_eq!(
            widest_width("<div style=\"min-width:800px; width:100%\">"),
            0
        );
        assert_eq!(widest_width("<img width=640 src=a>"), 640);
    }

    #[test]
    fn a_cut_inside_a_comment_a_style_a_tag_or_a_cell_ends_with_the_clip_line() {
        use super::{clip, CLIP_BYTES};
        use crate::document::visible_text;
        for open in [
            "<!-- note ",
            "<style>p { color: red; ",
            "<a href=\"https://example.test/",
            "<table><tr><td>cell ",
        ] {
            let mut html = format!("<body><p>start</p>{open}");
            while html.len() <= CLIP_BYTES {
                html.push_str("xxxxxxxxxx");
            }
            let out = clip(&html)
                .expect("serialises")
                .expect("long enough to clip");
            let texts = visible_text(&out);
            assert_eq!(texts.first().map(String::as_str), Some("start"), "{open}");
            let last_two: Vec<&str> = texts.iter().rev().take(2).map(String::as_str).collect();
            assert_eq!(
                last_two,
                vec!["View entire message", "[Message clipped]"],
                "{open}"
            );
        }
        assert_eq!(clip("<p>short</p>").expect("serialises"), None);
    }

    #[test]
    fn a_header_element_is_not_a_head() {
        assert!(!has_tag("<header>x</header>", "head"));
        assert!(has_tag("<HEAD>\n<title>", "head"));
        assert!(has_tag("<html lang=en>", "html"));
    }

    #[test]
    fn attribute_entities_are_decoded_for_css() {
        assert_eq!(
            decode_entities(
                "font-family: &quot;Nunito Sans&quot;, Arial; content: &#39;a&#x27; &bogus; &"
            ),
            "font-family: \"Nunito Sans\", Arial; content: 'a' &bogus; &"
        );
    }
}
