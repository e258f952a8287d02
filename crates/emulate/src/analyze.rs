//! Per-client code analysis: every construct of an email that a client drops (error), supports only
//! partly (warning, with caniemail's public note) or treats in a known way of its own (info), with
//! its line numbers in the submitted HTML. It judges through the same rule set and the same
//! matching code as [`crate::transform`], so that what it reports and what the screenshot shows
//! agree.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use domain::{Category, Client};
use lol_html::{element, rewrite_str, text, RewriteStrSettings};

use crate::behaviours::{Applied, Implementation};
use crate::color::{self, Role};
use crate::conditional::{self, Mso};
use crate::css::{self, HitKind, Inspect, Quirks};
use crate::features::{self, Effect};
use crate::rules::{BodyHandling, DarkMode, OnCssError, RuleBook, RuleSet};
use crate::transform::{decode_entities, element_hit, ElementHit, CLIP_BYTES, MAX_HTML_BYTES};
use crate::EmulateError;

/// How much a finding matters for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The client does not support it: the screenshot shows it removed.
    Error,
    /// Partly supported (caniemail's "a"), or marked unsupported but deliberately not emulated.
    Warning,
    /// A known behaviour of the client applies (dark-mode recolouring, class rewriting...).
    Info,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One kind of discrepancy and where it occurs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// What was found, as written in CSS/HTML terms: `display:flex`, `<video>`, `@font-face`.
    pub property: String,
    /// The caniemail feature slug, or the behaviour's key (`dark-mode`, `class-prefix`...).
    pub feature: String,
    pub message: String,
    /// 1-based line numbers in the submitted HTML, ascending.
    pub lines: Vec<u32>,
}

/// The analysis of one email for one client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Analysis {
    pub client: String,
    pub rule_set: String,
    /// Ordered by severity, then first line.
    pub findings: Vec<Finding>,
    /// The ids of the client's behaviours (data/behaviours.toml) that some finding names, in file
    /// order: what the transformation applies to this email in some screenshot variant, or may
    /// apply once the page is measured ([`crate::transform::ZoomToFit`]).
    pub behaviours: Vec<String>,
    /// The client's zoom-out of a page wider than its screen, when it has one the email does not
    /// turn off: whether it applies is measured on the drawn page ([`Analysis::measured`]).
    zoom_out: Option<ZoomOut>,
}

/// What the analysis says of a zoom-out the source does not predict.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ZoomOut {
    behaviour: String,
    /// The finding for a page found wider than the screen with no fixed width that explains it.
    unexplained: Finding,
}

impl Analysis {
    /// The id of the zoom-out behaviour whose finding waits for the drawn page's measurement.
    pub fn zoom_out(&self) -> Option<&str> {
        self.zoom_out.as_ref().map(|z| z.behaviour.as_str())
    }

    /// Brings the zoom-out finding into line with the drawn page: `zoomed` says whether the
    /// screenshot's page, laid out at the screen, was wider than it (its rule set names the
    /// zoom-out). The source alone can only guess from fixed widths (media queries may undo
    /// them, a long word may widen a fluid page); the screenshot shows what was measured, and
    /// the analysis must name what the screenshot applied.
    pub fn measured(&mut self, zoomed: bool) {
        let Some(zoom) = self.zoom_out.take() else {
            return;
        };
        let named = self.behaviours.contains(&zoom.behaviour);
        if named && !zoomed {
            self.findings.retain(|f| f.feature != zoom.behaviour);
            self.behaviours.retain(|b| *b != zoom.behaviour);
        } else if zoomed && !named {
            self.findings.push(zoom.unexplained);
            sort_findings(&mut self.findings);
            self.behaviours.push(zoom.behaviour);
        }
    }

    /// [`Analysis::measured`] from the rule set stored with the client's screenshots (`"<rule
    /// set> + <behaviour> + ..."`, as the last variant drawn wrote it); nothing changes until
    /// there is one.
    pub fn measured_by_rule_set(&mut self, rule_set: Option<&str>) {
        let (Some(id), Some(rule_set)) = (self.zoom_out().map(String::from), rule_set) else {
            return;
        };
        self.measured(rule_set.split(" + ").skip(1).any(|b| b == id));
    }

    pub fn of(&self, severity: Severity) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.severity == severity)
    }

    /// The finding of `severity` whose property is `property`.
    pub fn find(&self, severity: Severity, property: &str) -> Option<&Finding> {
        self.of(severity).find(|f| f.property == property)
    }
}

/// The order [`Analysis::findings`] are kept in: by severity, then first line.
fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by_key(|f| (f.severity, f.lines.first().copied(), f.property.clone()));
}

type Key = (Severity, String, String);

/// Findings being collected: (severity, feature, property) → (message, lines).
#[derive(Default)]
struct Collector(BTreeMap<Key, (String, BTreeSet<u32>)>);

impl Collector {
    fn add(&mut self, severity: Severity, feature: &str, property: String, line: u32, msg: String) {
        self.0
            .entry((severity, feature.to_string(), property))
            .or_insert_with(|| (msg, BTreeSet::new()))
            .1
            .insert(line);
    }
}

/// Line numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        Lines(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }

    /// 1-based line of byte `offset`.
    fn at(&self, offset: usize) -> u32 {
        u32::try_from(self.0.partition_point(|&nl| nl < offset) + 1).unwrap_or(u32::MAX)
    }
}

/// What the analysis judges with: the client's rule set split by severity.
struct Judge<'a> {
    set: &'a RuleSet,
    client: &'a Client,
    /// What the transformation removes (the rule set's effects).
    errors: &'a [(String, Effect)],
    /// Partly supported features, and unsupported ones that are not emulated.
    warnings: Vec<(String, Effect)>,
    /// The forced dark mode of the client's dark theme, whatever the profile's colour scheme.
    dark: DarkMode,
    /// The client's documented behaviours (data/behaviours.toml).
    applied: Applied<'a>,
}

impl Judge<'_> {
    fn error_message(&self, slug: &str, label: &str) -> String {
        let who = &self.client.display_name;
        let what = match features::effect(slug) {
            Some(Effect::Element { .. }) | Some(Effect::InputTypes(_)) => "the element is removed",
            Some(Effect::Attributes(_)) => "the attribute is removed",
            Some(Effect::ImageFormat(_)) | Some(Effect::DataImages) => {
                "the image does not load (its alt text shows)"
            }
            Some(Effect::Selector(_)) => "the selector is dropped from its rule",
            Some(Effect::AtRule(_)) | Some(Effect::MediaFeatures(_)) => {
                "the rule and everything in it are dropped"
            }
            Some(Effect::Important) => "the declaration stays without its priority",
            Some(Effect::StyleElement) => "every <style> element is removed",
            _ => "the declaration is dropped",
        };
        let partial = if self
            .set
            .policy
            .partial_as_unsupported
            .iter()
            .any(|s| s == slug)
        {
            match self.set.derived.notes.get(slug) {
                Some(note) => format!(
                    " caniemail marks it partial (\"{note}\"); in practice it is not honoured."
                ),
                None => " caniemail marks it partial; in practice it is not honoured.".into(),
            }
        } else {
            String::new()
        };
        format!("{who} does not support {label} (caniemail: {slug}): {what}.{partial}")
    }

    fn warning_message(&self, slug: &str, label: &str) -> String {
        let who = &self.client.display_name;
        if self.set.policy.not_emulated.iter().any(|s| s == slug)
            && self.set.derived.unsupported.iter().any(|s| s == slug)
        {
            return format!(
                "caniemail marks {label} ({slug}) unsupported in {who}, but common practice relies on it; the screenshot keeps it: check the real client."
            );
        }
        match self.set.derived.notes.get(slug) {
            Some(note) => {
                format!("{who} supports {label} only partly (caniemail: {slug}): {note}")
            }
            None => format!(
                "{who} supports {label} only partly (caniemail: {slug}, no public note): check the real client."
            ),
        }
    }

    /// A behaviour finding: what happens here, then the behaviour's id and first source.
    fn behaviour_message(&self, imp: Implementation, what: &str) -> String {
        match self.applied.find(imp) {
            Some(b) => format!(
                "{what} ({}: {})",
                b.id,
                b.sources.first().map(String::as_str).unwrap_or_default()
            ),
            None => what.to_string(),
        }
    }

    /// The finding's feature for what `imp` implements: the client's behaviour id, as every
    /// behaviour finding is named and the screenshot's rule set names it; `fallback` where no
    /// behaviour of the client implements it (the rule set's policy does).
    fn behaviour_key<'k>(&'k self, imp: Implementation, fallback: &'k str) -> &'k str {
        self.applied.find(imp).map_or(fallback, |b| b.id.as_str())
    }

    /// Records a behaviour finding when the client applies `imp`.
    fn add_behaviour(
        &self,
        f: &mut Collector,
        imp: Implementation,
        severity: Severity,
        property: String,
        lines: &[u32],
        what: &str,
    ) {
        let Some(b) = self.applied.find(imp) else {
            return;
        };
        let msg = self.behaviour_message(imp, what);
        for &line in lines {
            f.add(severity, &b.id, property.clone(), line, msg.clone());
        }
    }

    /// What the client does where a CSS behaviour hit matched.
    fn css_behaviour(&self, imp: Implementation, label: &str) -> (Severity, String) {
        let who = &self.client.display_name;
        let prefix = &self.set.policy.class_prefix;
        match imp {
            Implementation::CompoundSelectorFirstClassOnly => (
                Severity::Error,
                format!("{who} prefixes only the first class of {label} ({prefix}...), while the markup gets {prefix} on every class: this selector never matches; use a single class."),
            ),
            Implementation::AttributeSelectorMangled => (
                Severity::Error,
                format!("{who} never matches {label}: an attribute selector in the same compound as a class is not supported; use the attribute alone ([class~=...]) or with an element (td[class])."),
            ),
            Implementation::LineHeightMinimum => (
                Severity::Warning,
                format!("{who} treats {label} as a minimum: lines grow to fit the text; add mso-line-height-rule: exactly to keep it."),
            ),
            Implementation::WebFontTimesFallback => (
                Severity::Warning,
                format!("{who} does not have {}: it draws Times New Roman, ignoring the rest of the stack; add mso-font-alt or an mso-only font-family with a Windows font.", label.trim_start_matches("font-family: ")),
            ),
            Implementation::HeightToMinHeight => (
                Severity::Warning,
                format!("{who} turns {label} into min-height: content taller than that is not cut, the box grows."),
            ),
            _ => (Severity::Info, format!("{who}: {label}")),
        }
    }

    /// A colour the client's dark mode changes: named as the client's dark behaviour
    /// (data/behaviours.toml) on the dark-mode profiles that have one, as `dark-mode` elsewhere.
    fn add_dark(&self, f: &mut Collector, label: String, line: u32) {
        let msg = self.dark_message(&label);
        match self.applied.dark_pass() {
            Some((_, b)) => {
                self.add_behaviour(f, b.implementation, Severity::Info, label, &[line], &msg)
            }
            None => f.add(Severity::Info, "dark-mode", label, line, msg),
        }
    }

    fn dark_message(&self, label: &str) -> String {
        let how = match self.dark {
            DarkMode::FullInvert => "inverts",
            _ => "darkens light backgrounds and lightens dark text in",
        };
        format!(
            "In dark mode {} {how} the colour of this {label} ({}); give images transparent edges and check the dark-mode screenshot.",
            self.client.display_name, self.set.policy.dark_mode_source
        )
    }
}

/// Analyses `html` as `client` would treat it, by its rule set in `book`.
pub fn analyze(html: &str, client: &Client, book: &RuleBook) -> Result<Analysis, EmulateError> {
    if html.len() > MAX_HTML_BYTES {
        return Err(EmulateError::TooLarge {
            len: html.len(),
            max: MAX_HTML_BYTES,
        });
    }
    let set = book.rule_set_for(client)?;
    let warnings = set
        .derived
        .partial
        .iter()
        .filter(|s| !set.policy.partial_as_unsupported.contains(s))
        .chain(
            set.derived
                .unsupported
                .iter()
                .filter(|s| set.policy.not_emulated.contains(s)),
        )
        .filter_map(|s| features::effect(s).map(|e| (s.clone(), e)))
        .filter(|(_, e)| *e != Effect::NotEmulated)
        .collect();
    let applied = book.behaviours().of(client);
    // Where `height` becomes `min-height`, caniemail's "unsupported" is that rewrite, not a drop.
    // Where a behaviour says what a client really does with a feature caniemail marks
    // unsupported, the behaviour is reported instead of the removal.
    let replaced = |slug: &str| {
        (slug == "css-height" && applied.has(Implementation::HeightToMinHeight))
            || (slug == "css-selector-chaining"
                && applied.has(Implementation::CompoundSelectorFirstClassOnly))
    };
    let errors: Vec<(String, Effect)> = set
        .effects
        .iter()
        .filter(|(s, _)| !replaced(s))
        .cloned()
        .collect();
    let judge = Judge {
        set,
        client,
        errors: &errors,
        warnings,
        dark: set.policy.dark_mode,
        applied,
    };
    let mut found = Collector::default();
    // Line numbers of the source as sent, for the behaviours judged on it whole.
    let original = Lines::new(html);
    if html.len() > CLIP_BYTES {
        let line = original.at(CLIP_BYTES);
        judge.add_behaviour(
            &mut found,
            Implementation::ClipLongMessage,
            Severity::Error,
            "message size".into(),
            &[line],
            &format!(
                "{} clips this email at about {CLIP_BYTES} bytes (line {line}; it is {} bytes): the rest shows only after \"View entire message\"; trim the HTML (inline CSS repeats, comments, whitespace).",
                client.display_name,
                html.len()
            ),
        );
    }
    let widest = crate::transform::widest_width(html);
    if judge.applied.has(Implementation::AutoFitWideLayout) && widest > client.viewport.width {
        let at = html.find(&widest.to_string()).map_or(1, |i| original.at(i));
        judge.add_behaviour(
            &mut found,
            Implementation::AutoFitWideLayout,
            Severity::Warning,
            format!("width {widest}"),
            &[at],
            &format!(
                "{} lays this email out {} px wide and zooms it out to its {} px screen (its widest element is {widest} px): max-width media queries below {} px do not fire; make the layout fluid.",
                client.display_name,
                crate::transform::AUTO_FIT_LAYOUT_WIDTH,
                client.viewport.width,
                crate::transform::AUTO_FIT_LAYOUT_WIDTH
            ),
        );
    }
    // Whether the page is wider than the screen once laid out is measured by the renderer; the
    // source tells only the widest width that stays fixed, which the page is at least as wide as.
    let rigid = crate::transform::rigid_width(html);
    // Samsung's auto fit has its own finding above.
    if let Some(imp) = crate::transform::zoom_out(html, &judge.applied)
        .filter(|imp| *imp != Implementation::AutoFitWideLayout)
        .filter(|_| rigid > client.viewport.width)
    {
        let at = html.find(&rigid.to_string()).map_or(1, |i| original.at(i));
        judge.add_behaviour(
            &mut found,
            imp,
            Severity::Warning,
            format!("width {rigid}"),
            &[at],
            &format!(
                "{} zooms an email out to its {} px screen when the page is wider than the screen once laid out. This email sets a fixed width of {rigid} px: unless its media queries make everything narrower at {} px, it is zoomed out and its text shows at about {:.0}% of its size (the screenshot shows what the page measured); make the layout fluid.",
                client.display_name,
                client.viewport.width,
                client.viewport.width,
                100.0 * client.viewport.width as f64 / rigid as f64
            ),
        );
    }
    if judge.applied.has(Implementation::MsoConditionalsAsComments) {
        let lines: Vec<u32> = conditional::openings(html)
            .into_iter()
            .map(|at| original.at(at))
            .collect();
        judge.add_behaviour(
            &mut found,
            Implementation::MsoConditionalsAsComments,
            Severity::Warning,
            "<!--[if mso]> conditional comment".into(),
            &lines,
            &format!(
                "{} ignores Outlook conditional comments: <!--[if mso]> content (ghost tables, VML) is not drawn and the <!--[if !mso]><!--> branch is, so the layout must work without them.",
                client.display_name
            ),
        );
    }

    if judge.applied.has(Implementation::DarkAppleOptIn) {
        // ASCII lowercasing keeps byte offsets, so the lines stay the source's.
        let lines: Vec<u32> = html
            .to_ascii_lowercase()
            .match_indices("prefers-color-scheme")
            .map(|(at, _)| original.at(at))
            .collect();
        let (severity, what) = if crate::color::apple_opts_in(html) {
            (
                Severity::Info,
                format!(
                    "{} applies these prefers-color-scheme rules in dark mode because the CSS declares color-scheme with dark.",
                    client.display_name
                ),
            )
        } else {
            (
                Severity::Warning,
                format!(
                    "{} ignores these prefers-color-scheme rules in dark mode: the CSS does not opt in (a <meta name=\"color-scheme\"> tag alone does not); add :root {{ color-scheme: light dark; }} to a <style> block.",
                    client.display_name
                ),
            )
        };
        judge.add_behaviour(
            &mut found,
            Implementation::DarkAppleOptIn,
            severity,
            "@media (prefers-color-scheme: dark)".into(),
            &lines,
            &what,
        );
    }

    let word = set.policy.word_engine;
    let mso = Mso::of(client);
    let version = mso.version;
    let work = if word {
        for at in conditional::openings(html) {
            found.add(
                Severity::Info,
                "mso-conditionals",
                "<!--[if ...]> conditional comment".into(),
                original.at(at),
                format!(
                    "{} evaluates Outlook conditional comments as mso {version}: content whose condition holds is drawn, the rest is hidden.",
                    client.display_name
                ),
            );
        }
        conditional::activate_keeping_lines(html, mso)
    } else {
        html.to_string()
    };
    let lines = Lines::new(&work);
    let found = RefCell::new(found);
    html_pass(&work, &lines, &judge, &found).map_err(|e| EmulateError::Rewrite {
        client: client.id.clone(),
        message: e.to_string(),
    })?;

    let mut findings: Vec<Finding> = found
        .into_inner()
        .0
        .into_iter()
        .map(
            |((severity, feature, property), (message, lines))| Finding {
                severity,
                property,
                feature,
                message,
                lines: lines.into_iter().collect(),
            },
        )
        .collect();
    sort_findings(&mut findings);
    let behaviours = judge
        .applied
        .0
        .iter()
        .filter(|b| findings.iter().any(|f| f.feature == b.id))
        .map(|b| b.id.clone())
        .collect();
    let zoom_out = crate::transform::zoom_out(html, &judge.applied).and_then(|imp| {
        let b = judge.applied.find(imp)?;
        Some(ZoomOut {
            behaviour: b.id.clone(),
            unexplained: Finding {
                severity: Severity::Warning,
                property: "page width".into(),
                feature: b.id.clone(),
                message: judge.behaviour_message(
                    imp,
                    &format!(
                        "{} zoomed this email out to its {} px screen{}: laid out at that width, the page is wider, though no fixed width in the source explains it (look for long words or links, wide images, preformatted text); the screenshot shows it zoomed.",
                        client.display_name,
                        client.viewport.width,
                        if imp == Implementation::AutoFitWideLayout {
                            format!(" (laid out {} px wide first)", crate::transform::AUTO_FIT_LAYOUT_WIDTH)
                        } else {
                            String::new()
                        }
                    ),
                ),
                lines: vec![1],
            },
        })
    });
    Ok(Analysis {
        client: client.id.clone(),
        rule_set: set.name.clone(),
        findings,
        behaviours,
        zoom_out,
    })
}

type EndHandler =
    Box<dyn FnOnce(&mut lol_html::html_content::EndTag<'_>) -> lol_html::HandlerResult>;

/// Where a `<style>` element's text is being collected.
#[derive(Clone, Copy)]
struct StyleAt {
    /// Byte offset of its first text chunk, once seen.
    start: Option<usize>,
    /// The element is inside an element Word hides (`mso-hide: all`).
    hidden: bool,
}

fn html_pass(
    work: &str,
    lines: &Lines,
    judge: &Judge<'_>,
    found: &RefCell<Collector>,
) -> Result<(), lol_html::errors::RewritingError> {
    let set = judge.set;
    let policy = &set.policy;
    let who = &judge.client.display_name;
    let in_body = Cell::new(false);
    let hidden = Rc::new(Cell::new(0usize));
    let style = Cell::new(StyleAt {
        start: None,
        hidden: false,
    });
    let style_text = RefCell::new(String::new());
    let css_total = Cell::new(0usize);
    // Open table cells (innermost last): the line of a cell still empty, for Word's spacer cells.
    let cells: Rc<RefCell<Vec<Option<u32>>>> = Rc::default();
    let empty_cells: Rc<RefCell<Vec<u32>>> = Rc::default();
    let no_detect = Rc::new(Cell::new(0usize));
    let in_head = Rc::new(Cell::new(false));
    let detectors = judge.applied.has(Implementation::DataDetectors);
    let phones_off = Cell::new(false);
    let styles_unsupported =
        !policy.style_blocks || set.effects.iter().any(|(_, e)| *e == Effect::StyleElement);
    let web = judge.client.category == Category::Web;

    let elements = element!("*", |el| {
        let name = el.tag_name();
        let range = el.source_location().bytes();
        let tag = work.get(range.clone()).unwrap_or_default();
        let line = lines.at(range.start);
        let attr_line = |attr: &str| lines.at(range.start + attr_offset(tag, attr).unwrap_or(0));
        let mut f = found.borrow_mut();
        if name == "body" {
            in_body.set(true);
        }
        if hidden.get() > 0 {
            if name == "style" {
                style.set(StyleAt {
                    start: None,
                    hidden: true,
                });
            }
            return Ok(());
        }
        if matches!(
            name.as_str(),
            "script" | "iframe" | "embed" | "frame" | "frameset" | "applet"
        ) {
            f.add(
                Severity::Error,
                "active-content",
                format!("<{name}>"),
                line,
                format!("{who} removes <{name}>: email clients never run active or embedded content; link to it instead."),
            );
            return Ok(());
        }
        if policy.word_engine && name.contains(':') {
            f.add(
                Severity::Info,
                "vml",
                format!("<{name}>"),
                line,
                format!("{who} reads Office elements (VML shapes, Office settings) with Word; other clients ignore them, so keep an HTML fallback outside <!--[if mso]>."),
            );
            return Ok(());
        }
        let style_attr = el.get_attribute("style").map(|s| decode_entities(&s));
        if policy.word_engine && style_attr.as_deref().is_some_and(css::hides_from_word) {
            f.add(
                Severity::Info,
                "mso-hide",
                "mso-hide:all".into(),
                line,
                format!("{who} does not draw this element (mso-hide: all), as intended."),
            );
            if el.can_have_content() {
                hidden.set(hidden.get() + 1);
                let h = Rc::clone(&hidden);
                let on_end: EndHandler = Box::new(move |_end| {
                    h.set(h.get().saturating_sub(1));
                    Ok(())
                });
                if let Some(handlers) = el.end_tag_handlers() {
                    handlers.push(on_end);
                }
            }
            return Ok(());
        }
        if name == "style" {
            style.set(StyleAt {
                start: None,
                hidden: false,
            });
            if styles_unsupported {
                f.add(
                    Severity::Error,
                    "html-style",
                    "<style>".into(),
                    line,
                    format!("{who} removes every <style> element: inline the CSS into style attributes."),
                );
            } else if let Some((slug, _)) = judge
                .warnings
                .iter()
                .find(|(_, e)| *e == Effect::StyleElement)
            {
                f.add(
                    Severity::Warning,
                    slug,
                    "<style>".into(),
                    line,
                    judge.warning_message(slug, "<style>"),
                );
            }
            if !styles_unsupported && in_body.get() && !policy.style_in_body {
                f.add(
                    Severity::Error,
                    judge.behaviour_key(Implementation::StyleInBodyStripped, "html-style-in-body"),
                    "<style> in <body>".into(),
                    line,
                    judge.behaviour_message(
                        Implementation::StyleInBodyStripped,
                        &format!(
                            "{who} removes <style> elements inside <body>: move them into <head>."
                        ),
                    ),
                );
            }
        }
        if web && name == "meta" {
            let viewport = el
                .get_attribute("name")
                .is_some_and(|n| n.eq_ignore_ascii_case("viewport"));
            if viewport {
                f.add(
                    Severity::Info,
                    "meta-viewport",
                    "<meta name=viewport>".into(),
                    line,
                    format!("{who} is a webmail: its page has its own viewport and ignores the email's."),
                );
            }
        }
        let attr = |a: &str| el.get_attribute(a);
        for (list, severity) in [
            (judge.errors, Severity::Error),
            (judge.warnings.as_slice(), Severity::Warning),
        ] {
            for (slug, effect) in list {
                let Some(hit) = element_hit(effect, &name, &attr) else {
                    continue;
                };
                let label = hit.label(&name);
                let at = match &hit {
                    ElementHit::Attributes(a) => attr_line(a[0]),
                    _ => line,
                };
                let msg = match severity {
                    Severity::Error => judge.error_message(slug, &label),
                    _ => judge.warning_message(slug, &label),
                };
                f.add(severity, slug, label, at, msg);
            }
        }
        for a in el.attributes() {
            let n = a.name();
            if n.starts_with("on") {
                f.add(
                    Severity::Error,
                    "event-handler-attributes",
                    format!("{n} attribute"),
                    attr_line(&n),
                    format!("{who} removes event handler attributes: emails cannot run scripts."),
                );
            }
        }
        if name == "body" {
            let handling = match (set.body_handling(), policy.pane_width.is_some()) {
                (BodyHandling::Keep, true) => BodyHandling::Div,
                (h, _) => h,
            };
            match handling {
                BodyHandling::Keep => {}
                BodyHandling::Div => f.add(
                    Severity::Info,
                    "html-body",
                    "<body>".into(),
                    line,
                    format!("{who} shows the email inside its own page: <body> becomes a <div>; put page-wide backgrounds on a full-width wrapper table."),
                ),
                BodyHandling::DivWithoutAttributes => {
                    if !el.attributes().is_empty() {
                        f.add(
                            Severity::Error,
                            "html-body",
                            "<body> attributes".into(),
                            line,
                            format!("{who} replaces <body> with a <div> without its attributes (bgcolor, style...): put them on a full-width wrapper table."),
                        );
                    }
                }
            }
        }
        // Gmail strips a whole style attribute written with the space-separated rgb() syntax
        // (the transformation removes it, so nothing else of it applies).
        let strict_rgb = policy.on_css_error == OnCssError::DropBlock;
        let rgb_dropped = style_attr
            .as_deref()
            .is_some_and(|s| strict_rgb && css::space_separated_rgb(s).is_some());
        if rgb_dropped {
            let base = range.start + attr_value_offset(tag, "style").unwrap_or(0);
            judge.add_behaviour(
                &mut f,
                Implementation::StyleSyntaxErrorDropsBlock,
                Severity::Error,
                "style attribute with rgb(r g b)".into(),
                &[lines.at(base)],
                &format!("{who} removes this whole style attribute: its CSS uses the space-separated rgb() syntax, which its parser rejects; write rgb(r, g, b) or a hex colour."),
            );
        }
        if let Some(style_value) = style_attr.as_ref().filter(|_| !rgb_dropped) {
            let base = range.start + attr_value_offset(tag, "style").unwrap_or(0);
            let base_line = lines.at(base);
            let ins = Inspect {
                effects: judge.errors,
                element: Some(&name),
                scoped: &policy.scoped_drops,
                dark: judge.dark,
                quirks: Quirks::of(&judge.applied),
                prefixes_classes: !policy.class_prefix.is_empty(),
                strict_rgb: policy.on_css_error == OnCssError::DropBlock,
            };
            let errors = css::inspect_inline(style_value, &ins);
            let warnings = css::inspect_inline(
                style_value,
                &Inspect {
                    effects: &judge.warnings,
                    scoped: &[],
                    dark: DarkMode::None,
                    quirks: Quirks::default(),
                    ..ins
                },
            );
            record_css(&mut f, judge, base_line, errors.hits, warnings.hits);
        }
        if judge.dark != DarkMode::None {
            for (a, role) in [("bgcolor", Role::Background), ("color", Role::Foreground)] {
                if a == "color" && name != "font" {
                    continue;
                }
                let changed = el
                    .get_attribute(a)
                    .and_then(|v| color::parse(&v))
                    .is_some_and(|c| color::darken(c, role, judge.dark).is_some());
                if changed {
                    judge.add_dark(&mut f, format!("{a} attribute"), attr_line(a));
                }
            }
        }
        if let Some(class) = el.get_attribute("class") {
            let names: Vec<&str> = class.split_ascii_whitespace().collect();
            if names.len() > 1 {
                judge.add_behaviour(
                    &mut f,
                    Implementation::FirstClassOnly,
                    Severity::Warning,
                    format!("class=\"{}\"", names.join(" ")),
                    &[attr_line("class")],
                    &format!(
                        "{who} applies only the first class of class=\"{}\" ({}): rules for {} are ignored; put everything this element needs in one class or inline.",
                        names.join(" "),
                        names[0],
                        names[1..].join(", ")
                    ),
                );
            }
        }
        if name == "img" && crate::images_off::is_remote(el.get_attribute("src").as_deref()) {
            images_off(&mut f, judge, el.get_attribute("alt"), line);
        }
        if let Some(top) = cells.borrow_mut().last_mut() {
            *top = None;
        }
        if name == "td"
            && judge.applied.has(Implementation::SpacerCellOneLine)
            && el.can_have_content()
        {
            let sized = style_attr.as_deref().is_some_and(css::sets_text_size);
            cells.borrow_mut().push((!sized).then_some(line));
            let cells = Rc::clone(&cells);
            let empty = Rc::clone(&empty_cells);
            if let Some(handlers) = el.end_tag_handlers() {
                let on_end: EndHandler = Box::new(move |_| {
                    if let Some(Some(at)) = cells.borrow_mut().pop() {
                        empty.borrow_mut().push(at);
                    }
                    Ok(())
                });
                handlers.push(on_end);
            }
        }
        if judge.applied.has(Implementation::DataDetectors) {
            if name == "meta"
                && crate::detect::stops_phone_links(
                    el.get_attribute("name"),
                    el.get_attribute("content"),
                )
            {
                phones_off.set(true);
            }
            if name == "body" {
                in_head.set(false);
            }
            if name == "head" {
                in_head.set(true);
                let flag = Rc::clone(&in_head);
                if let Some(handlers) = el.end_tag_handlers() {
                    let on_end: EndHandler = Box::new(move |_| {
                        flag.set(false);
                        Ok(())
                    });
                    handlers.push(on_end);
                }
            }
            if matches!(name.as_str(), "a" | "button" | "select") {
                if let Some(handlers) = el.end_tag_handlers() {
                    no_detect.set(no_detect.get() + 1);
                    let depth = Rc::clone(&no_detect);
                    let on_end: EndHandler = Box::new(move |_| {
                        depth.set(depth.get().saturating_sub(1));
                        Ok(())
                    });
                    handlers.push(on_end);
                }
            }
        }
        for (attr_name, prefix, key) in [
            ("class", &policy.class_prefix, "class-prefix"),
            ("id", &policy.id_prefix, "id-prefix"),
        ] {
            let named = el
                .get_attribute(attr_name)
                .is_some_and(|v| !v.trim().is_empty());
            if !prefix.is_empty() && named {
                f.add(
                    Severity::Info,
                    judge.behaviour_key(Implementation::ClassIdPrefix, key),
                    format!("{attr_name} attribute"),
                    attr_line(attr_name),
                    judge.behaviour_message(
                        Implementation::ClassIdPrefix,
                        &format!("{who} renames every {attr_name} to start with {prefix:?} and rewrites the email's selectors to match; attribute selectors such as [{attr_name}=...] and scripts relying on the name no longer match."),
                    ),
                );
            }
        }
        Ok(())
    });

    let styles = text!("style", |t| {
        let mut at = style.get();
        if at.start.is_none() {
            at.start = Some(t.source_location().bytes().start);
            style.set(at);
        }
        style_text.borrow_mut().push_str(t.as_str());
        if !t.last_in_text_node() {
            return Ok(());
        }
        let sheet = std::mem::take(&mut *style_text.borrow_mut());
        style.set(StyleAt {
            start: None,
            hidden: false,
        });
        if at.hidden {
            return Ok(());
        }
        let base_line = lines.at(at.start.unwrap_or(0));
        let end_line = base_line + u32::try_from(sheet.matches('\n').count()).unwrap_or(0);
        let mut f = found.borrow_mut();
        css_total.set(css_total.get() + sheet.len());
        if let Some(max) = policy.style_max_bytes.filter(|m| css_total.get() > *m) {
            let msg = judge.behaviour_message(
                Implementation::StyleSizeLimit,
                &format!(
                    "{who} keeps {max} bytes of CSS in total; the <style> elements reach {} bytes here, so this whole <style> block (lines {base_line}–{end_line}) and every later one are removed: trim unused rules.",
                    css_total.get()
                ),
            );
            let key = judge
                .applied
                .find(Implementation::StyleSizeLimit)
                .map_or(Implementation::StyleSizeLimit.note_key(), |b| b.id.as_str());
            f.add(Severity::Error, key, "<style> size".into(), base_line, msg);
        }
        if judge
            .applied
            .has(Implementation::StyleNestedAtRuleDropsBlock)
        {
            if let Some((outer, inner, rel)) = css::find_nested_at_rule(&sheet) {
                judge.add_behaviour(
                    &mut f,
                    Implementation::StyleNestedAtRuleDropsBlock,
                    Severity::Error,
                    format!("@{inner} inside @{outer}"),
                    &[base_line, base_line + rel],
                    &format!(
                        "{who} drops this whole <style> block (lines {base_line}–{end_line}): it contains @{inner} inside @{outer} (line {}); move the @{inner} out of the @{outer}, or into a <style> of its own.",
                        base_line + rel
                    ),
                );
            }
        }
        let ins = Inspect {
            effects: judge.errors,
            element: None,
            scoped: &[],
            dark: judge.dark,
            quirks: Quirks::of(&judge.applied),
            prefixes_classes: !policy.class_prefix.is_empty(),
            strict_rgb: policy.on_css_error == OnCssError::DropBlock,
        };
        let errors = css::inspect_sheet(&sheet, &ins);
        if let Some(rel) = errors.first_error_line {
            let (severity, key, msg) = if policy.on_css_error == OnCssError::DropBlock {
                (
                    Severity::Error,
                    judge
                        .applied
                        .find(Implementation::StyleSyntaxErrorDropsBlock)
                        .map_or("html-style-dropped-on-css-error", |b| b.id.as_str()),
                    judge.behaviour_message(
                        Implementation::StyleSyntaxErrorDropsBlock,
                        &format!("{who} drops the whole <style> element when its CSS has a syntax error (space-separated rgb() counts as one); this one has {}: fix it.", errors.syntax_errors),
                    ),
                )
            } else {
                (
                    Severity::Info,
                    "css-syntax-error",
                    format!("{who} skips CSS rules that do not parse, as browsers do; fix the syntax error."),
                )
            };
            f.add(
                severity,
                key,
                "CSS syntax error".into(),
                base_line + rel,
                msg,
            );
        }
        let warnings = css::inspect_sheet(
            &sheet,
            &Inspect {
                effects: &judge.warnings,
                dark: DarkMode::None,
                quirks: Quirks::default(),
                ..ins
            },
        );
        record_css(&mut f, judge, base_line, errors.hits, warnings.hits);
        Ok(())
    });

    let texts = lol_html::doc_text!(|t| {
        if !t.as_str().trim().is_empty() {
            if let Some(top) = cells.borrow_mut().last_mut() {
                *top = None;
            }
        }
        if !detectors
            || t.text_type() != lol_html::html_content::TextType::Data
            || no_detect.get() > 0
            || in_head.get()
        {
            return Ok(());
        }
        let start = t.source_location().bytes().start;
        let text = t.as_str();
        for (range, what) in crate::detect::find(text, !phones_off.get()) {
            let matched = &text[range.clone()];
            let line = lines.at(start + range.start);
            let stop = match what {
                crate::detect::Detected::Phone => "add <meta name=\"format-detection\" content=\"telephone=no\"> to stop phone links, or",
                _ => "this cannot be turned off;",
            };
            judge.add_behaviour(
                &mut found.borrow_mut(),
                Implementation::DataDetectors,
                Severity::Info,
                format!("{} \"{matched}\"", what.name()),
                &[line],
                &format!(
                    "{who} turns this {} into a link (blue, underlined): {stop} style it with a[x-apple-data-detectors] {{ color: inherit !important; text-decoration: none !important; }}.",
                    what.name()
                ),
            );
        }
        Ok(())
    });

    rewrite_str(
        work,
        RewriteStrSettings::new()
            .append_element_content_handler(elements)
            .append_element_content_handler(styles)
            .append_document_content_handler(texts),
    )?;
    let empty = empty_cells.borrow();
    judge.add_behaviour(
        &mut found.borrow_mut(),
        Implementation::SpacerCellOneLine,
        Severity::Warning,
        "empty <td>".into(),
        &empty,
        &format!("{who} makes an empty table cell at least one line of text tall (about 15–20 px): give it font-size and line-height equal to its height (e.g. style=\"font-size:4px;line-height:4px\")."),
    );
    Ok(())
}

/// Records the CSS hits of an inspection whose text starts on `base_line`.
/// Names what the client shows for this remote image in the images-off screenshots.
fn images_off(f: &mut Collector, judge: &Judge<'_>, alt: Option<String>, line: u32) {
    let who = &judge.client.display_name;
    let engine_default = Implementation::BlockedImageEngineDefault;
    let Some(imp) = crate::images_off::implementation(&judge.applied)
        .or_else(|| judge.applied.has(engine_default).then_some(engine_default))
    else {
        return;
    };
    let alt = alt.map(|a| decode_entities(&a)).unwrap_or_default();
    let (severity, what) = match imp {
        Implementation::BlockedImageEngineDefault => (
            Severity::Info,
            format!("What {who} shows for a blocked image is not settled (its sources disagree: alt text, a grey area, or the image loads): the images-off screenshot keeps the engine's own drawing of it, so check the real client."),
        ),
        Implementation::BlockedImagePlaceholder => (
            Severity::Warning,
            format!(
                "{who} blocks this image until the reader downloads pictures and draws its own placeholder instead (a red X, its security message{}): the image's background colour and styled alt text do not show, so the email must read without it.",
                if alt.chars().count() > crate::images_off::PLACEHOLDER_ALT_CHARS {
                    format!(", then the alt text cut at {} characters", crate::images_off::PLACEHOLDER_ALT_CHARS)
                } else if alt.is_empty() {
                    String::new()
                } else {
                    ", then the alt text unstyled".to_string()
                }
            ),
        ),
        _ if alt.trim().is_empty() => (
            Severity::Warning,
            format!("With images off, {who} shows an empty box for this image: it has no alt text; add one, styled with the image's font and colour."),
        ),
        _ => (
            Severity::Info,
            format!("With images off, {who} shows this image's alt text, styled by the image's own CSS (font, colour, background colour)."),
        ),
    };
    judge.add_behaviour(
        f,
        imp,
        severity,
        "<img> with images off".into(),
        &[line],
        &what,
    );
}

fn record_css(
    f: &mut Collector,
    judge: &Judge<'_>,
    base_line: u32,
    errors: Vec<css::Hit>,
    warnings: Vec<css::Hit>,
) {
    for h in errors {
        let line = base_line + h.line;
        match h.kind {
            HitKind::Effect(slug) => {
                let msg = judge.error_message(&slug, &h.label);
                f.add(Severity::Error, &slug, h.label, line, msg);
            }
            HitKind::Scoped(i) => {
                let source = judge
                    .set
                    .policy
                    .scoped_drops
                    .get(i)
                    .map(|d| d.source.as_str())
                    .unwrap_or_default();
                let msg = format!(
                    "{} ignores {} ({source}): the declaration is dropped; put it on a table cell or use the HTML attribute instead.",
                    judge.client.display_name, h.label
                );
                f.add(Severity::Error, "scoped-drop", h.label, line, msg);
            }
            HitKind::Dark => judge.add_dark(f, h.label, line),
            HitKind::Behaviour(imp) => {
                let (severity, what) = judge.css_behaviour(imp, &h.label);
                judge.add_behaviour(f, imp, severity, h.label, &[line], &what);
            }
        }
    }
    for h in warnings {
        if let HitKind::Effect(slug) = h.kind {
            let msg = judge.warning_message(&slug, &h.label);
            f.add(Severity::Warning, &slug, h.label, base_line + h.line, msg);
        }
    }
}

/// Byte offset of attribute `name` in a start tag's text.
fn attr_offset(tag: &str, name: &str) -> Option<usize> {
    let lower = tag.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    lower.match_indices(&name).map(|(i, _)| i).find(|&i| {
        let before_ok = i > 0 && lower.as_bytes()[i - 1].is_ascii_whitespace();
        let after = lower[i + name.len()..].trim_start();
        before_ok
            && (after.starts_with('=')
                || after.starts_with('>')
                || after.starts_with('/')
                || after.is_empty()
                || lower.as_bytes()[i + name.len()].is_ascii_whitespace())
    })
}

/// Byte offset of the start of attribute `name`'s value in a start tag's text.
fn attr_value_offset(tag: &str, name: &str) -> Option<usize> {
    let at = attr_offset(tag, name)? + name.len();
    let rest = &tag[at..];
    let eq = rest.find('=')?;
    let after = &rest[eq + 1..];
    let trimmed = after.trim_start();
    let quote = usize::from(trimmed.starts_with(['"', '\'']));
    Some(at + eq + 1 + (after.len() - trimmed.len()) + quote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based_and_count_newlines_before_the_offset() {
        let l = Lines::new("a\nb\n\nc");
        assert_eq!(l.at(0), 1);
        assert_eq!(l.at(2), 2);
        assert_eq!(l.at(5), 4);
    }

    #[test]
    fn attribute_offsets_skip_lookalike_names() {
        let tag = "<td data-style=\"x\"\n  style = 'color:red'>";
        let at = attr_value_offset(tag, "style").expect("found");
        assert_eq!(&tag[at..at + 9], "color:red");
        assert_eq!(attr_offset("<img src=a>", "src"), Some(5));
    }
}
