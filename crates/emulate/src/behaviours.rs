//! Client behaviours beyond caniemail's tables (Gmail's `<style>` limits and clipping, Outlook.com's
//! `x_` prefixing, the Word engine's quirks, Yahoo's `min-height`, iOS data detectors, zooming wide
//! emails out, what each client shows for a blocked image), as data:
//! `data/behaviours.toml` names, for each behaviour, the client profiles it applies to, its public
//! sources and their confidence, and the transform that implements it. Loaded with the rule book
//! and checked against the catalog at start-up.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use crate::color::DarkPass;
use crate::rules::{DarkMode, OnCssError, RuleSet};
use crate::EmulateError;

/// Largest behaviours file accepted.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The code that makes a behaviour happen. Some are switched by a rule set's `[policy]` (the
/// behaviour entry then documents them and start-up checks that both say the same); the others
/// are switched by the behaviour entry alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    /// A `<style>` element with an at-rule inside an at-rule (`@media { @font-face {} }`) is
    /// removed whole.
    StyleNestedAtRuleDropsBlock,
    /// A `<style>` element whose CSS does not parse is removed whole (policy `on_css_error`).
    StyleSyntaxErrorDropsBlock,
    /// `<style>` elements past a total CSS size are removed whole (policy `style_max_bytes`).
    StyleSizeLimit,
    /// `<style>` elements inside `<body>` are removed (policy `style_in_body = false`).
    StyleInBodyStripped,
    /// The HTML source is cut at the clipping size, followed by the "[Message clipped]" line.
    ClipLongMessage,
    /// Classes and ids are prefixed in the markup and the CSS (policy `class_prefix`).
    ClassIdPrefix,
    /// In a compound selector (`.a.b`) only the first class gets the prefix, so it never matches.
    CompoundSelectorFirstClassOnly,
    /// Attribute selectors are mangled: a leading `[attr]` compound is dropped (the rule then
    /// applies everywhere), `type[attr]` gets the prefix glued to the type.
    AttributeSelectorMangled,
    /// Outlook conditional comments are plain comments: `<!--[if mso]>` content is hidden and
    /// the `<!--[if !mso]><!-->` branch shows. This is what every HTML engine does with them, so
    /// nothing is rewritten; the entry documents it and the code analysis names it.
    MsoConditionalsAsComments,
    /// Only the first class of `class="a b"` applies.
    FirstClassOnly,
    /// `line-height` is a minimum unless `mso-line-height-rule: exactly`.
    LineHeightMinimum,
    /// An empty table cell is at least one line of text tall unless it sets `font-size` or
    /// `line-height`.
    SpacerCellOneLine,
    /// A font stack whose first family is not installed falls back to Times New Roman (or to
    /// `mso-font-alt`), ignoring the rest of the stack.
    WebFontTimesFallback,
    /// `height` is turned into `min-height`.
    HeightToMinHeight,
    /// Phone numbers, dates and addresses become links; `format-detection` stops phone links.
    DataDetectors,
    /// An email wider than the screen is laid out at a wider viewport and zoomed out to fit, so
    /// `max-width` media queries below that width do not fire.
    AutoFitWideLayout,
    /// An email whose page, laid out at the screen width, is still wider than the screen is laid
    /// out at the page's width and zoomed out to fit, instead of scrolling sideways. Decided on
    /// the laid-out page by the renderer ([`crate::transform::ZoomToFit`]), not from the source.
    ZoomOutWideEmail,
    /// [`Implementation::ZoomOutWideEmail`], unless the email carries
    /// `<meta name="x-apple-disable-message-reformatting">`.
    ZoomOutWideEmailUnlessReformattingDisabled,
    /// With images blocked, each `<img>` becomes the client's own placeholder box (a red X, its
    /// security message and the alt text unstyled, cut at [`crate::images_off::PLACEHOLDER_ALT_CHARS`]
    /// characters), not the image's background or styled alt text.
    BlockedImagePlaceholder,
    /// With images blocked, each `<img>` shows its alt text in a box of the image's size, styled
    /// by the image's own CSS (font, colour, background), with no broken-image icon.
    BlockedImageAltText,
    /// With images blocked, the engine's own drawing of a blocked image is kept: nothing is
    /// rewritten. For clients whose sources disagree on what they show.
    BlockedImageEngineDefault,
    /// Remote images are not loaded until the reader asks. Screenshots still show the email with
    /// images (the `default` variant, as the services our users compare with draw it; the
    /// `no_images` variant shows the blocked state); what it changes is what a tracking image
    /// meets: the analytics matrix draws these profiles with images blocked for "opened as
    /// delivered".
    RemoteImagesBlockedByDefault,
    /// Dark mode, Apple opt-in: `prefers-color-scheme` rules apply only when the CSS declares
    /// `color-scheme` (or `supported-color-schemes`) with `dark`; otherwise styled HTML is shown
    /// as sent and unstyled HTML gets the engine's dark default colours.
    DarkAppleOptIn,
    /// Dark mode, partial (Outlook family): the page-side pass [`DarkPass::OutlookPartial`].
    DarkOutlookPartial,
    /// Dark mode, partial (Gmail Android): the page-side pass [`DarkPass::BlinkForceDark`].
    DarkBlinkForceDark,
    /// Dark mode, full: the page-side pass [`DarkPass::FullInvert`].
    DarkFullInvert,
}

impl Implementation {
    /// The key the transformation notes (in [`crate::Transformed::removed`]) when this
    /// implementation changed something in an email.
    pub fn note_key(self) -> &'static str {
        match self {
            Implementation::StyleNestedAtRuleDropsBlock => "html-style-dropped-nested-at-rule",
            Implementation::StyleSyntaxErrorDropsBlock => "html-style-dropped-on-css-error",
            Implementation::StyleSizeLimit => "html-style-over-size-limit",
            Implementation::StyleInBodyStripped => "html-style-in-body",
            Implementation::ClipLongMessage => "message-clipped",
            Implementation::ClassIdPrefix => "class-id-prefixed",
            Implementation::CompoundSelectorFirstClassOnly => "compound-selector-first-class-only",
            Implementation::AttributeSelectorMangled => "attribute-selector-mangled",
            Implementation::MsoConditionalsAsComments => "mso-conditionals-as-comments",
            Implementation::FirstClassOnly => "first-class-only",
            Implementation::LineHeightMinimum => "line-height-minimum",
            Implementation::SpacerCellOneLine => "spacer-cell-one-line",
            Implementation::WebFontTimesFallback => "web-font-times-fallback",
            Implementation::HeightToMinHeight => "height-to-min-height",
            Implementation::DataDetectors => "data-detectors",
            Implementation::AutoFitWideLayout => "auto-fit-wide-layout",
            Implementation::ZoomOutWideEmail => "zoom-out-wide-email",
            Implementation::ZoomOutWideEmailUnlessReformattingDisabled => {
                "zoom-out-wide-email-unless-reformatting-disabled"
            }
            Implementation::BlockedImagePlaceholder => "blocked-image-placeholder",
            Implementation::BlockedImageAltText => "blocked-image-alt-text",
            Implementation::BlockedImageEngineDefault => "blocked-image-engine-default",
            Implementation::RemoteImagesBlockedByDefault => "remote-images-blocked-by-default",
            Implementation::DarkAppleOptIn => "dark-apple-opt-in",
            Implementation::DarkOutlookPartial => "dark-outlook-partial",
            Implementation::DarkBlinkForceDark => "dark-blink-force-dark",
            Implementation::DarkFullInvert => "dark-full-invert",
        }
    }

    /// The recolouring after load this implementation stands for, if it is one.
    pub fn dark_pass(self) -> Option<DarkPass> {
        match self {
            Implementation::DarkOutlookPartial => Some(DarkPass::OutlookPartial),
            Implementation::DarkBlinkForceDark => Some(DarkPass::BlinkForceDark),
            Implementation::DarkFullInvert => Some(DarkPass::FullInvert),
            _ => None,
        }
    }

    /// For dark-mode implementations: the forced dark mode a rule set must predict (its
    /// `dark_mode`, which the code analysis reads) for the two to tell the same story.
    fn dark_mode(self) -> Option<DarkMode> {
        match self {
            Implementation::DarkAppleOptIn => Some(DarkMode::Media),
            Implementation::DarkOutlookPartial | Implementation::DarkBlinkForceDark => {
                Some(DarkMode::PartialInvert)
            }
            Implementation::DarkFullInvert => Some(DarkMode::FullInvert),
            _ => None,
        }
    }

    /// Whether this implementation says what a client shows for a blocked image (the `no_images`
    /// variants).
    pub fn is_images_off(self) -> bool {
        matches!(
            self,
            Implementation::BlockedImagePlaceholder
                | Implementation::BlockedImageAltText
                | Implementation::BlockedImageEngineDefault
        )
    }

    /// For implementations switched by the rule set's policy: whether `set` switches it on.
    fn policy_says(self, set: &RuleSet) -> Option<bool> {
        let p = &set.policy;
        match self {
            Implementation::StyleSyntaxErrorDropsBlock => {
                Some(p.on_css_error == OnCssError::DropBlock)
            }
            Implementation::StyleSizeLimit => Some(p.style_max_bytes.is_some()),
            Implementation::StyleInBodyStripped => Some(p.style_blocks && !p.style_in_body),
            Implementation::ClassIdPrefix => {
                Some(!p.class_prefix.is_empty() || !p.id_prefix.is_empty())
            }
            _ => None,
        }
    }
}

/// How firm the public sources are (the labels of `shared/reference/client-behaviours.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    /// Two or more independent sources agree.
    Firm,
    /// One source.
    Single,
    /// A third party that shows no test of its own.
    ThirdParty,
    /// No source found, or sources conflict.
    Unverified,
}

/// One documented behaviour.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behaviour {
    /// Short kebab-case name, shown with the rule set of each screenshot it changed.
    pub id: String,
    /// What the client does, in one sentence.
    pub summary: String,
    /// Client profile ids (data/clients.toml) that do it.
    pub clients: Vec<String>,
    pub implementation: Implementation,
    /// Public sources: URLs.
    pub sources: Vec<String>,
    pub confidence: Confidence,
    /// Clients of `clients` for which the sources disagree: the behaviour is applied (following
    /// the cited source) but the fidelity report leaves them unscored.
    #[serde(default)]
    pub disputed: Vec<String>,
    /// Limits of the emulation or of the evidence.
    #[serde(default)]
    pub note: String,
}

impl Behaviour {
    /// Whether the fidelity report scores this behaviour for `client`.
    pub fn scored_for(&self, client: &str) -> bool {
        self.confidence != Confidence::Unverified && !self.disputed.iter().any(|c| c == client)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    behaviour: Vec<Behaviour>,
}

/// Every behaviour, validated.
#[derive(Clone, Debug, Default)]
pub struct Behaviours {
    all: Vec<Behaviour>,
}

impl Behaviours {
    /// Parses and validates the file's text; `name` is for messages.
    pub fn parse(name: &str, text: &str) -> Result<Behaviours, EmulateError> {
        let invalid = |message: String| EmulateError::RuleInvalid {
            name: name.to_string(),
            message,
        };
        let file: File = toml::from_str(text).map_err(|e| EmulateError::RuleSyntax {
            name: name.to_string(),
            message: e.to_string(),
        })?;
        let mut ids = BTreeSet::new();
        for b in &file.behaviour {
            let well_formed = !b.id.is_empty()
                && b.id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !well_formed {
                return Err(invalid(format!(
                    "behaviour id {:?} must be lowercase letters, digits and '-'",
                    b.id
                )));
            }
            if !ids.insert(b.id.as_str()) {
                return Err(invalid(format!("behaviour {:?} is listed twice", b.id)));
            }
            if b.clients.is_empty() {
                return Err(invalid(format!("behaviour {:?} names no client", b.id)));
            }
            if b.sources.is_empty() || b.sources.iter().any(|s| !s.starts_with("https://")) {
                return Err(invalid(format!(
                    "behaviour {:?} needs at least one source, each an https:// URL",
                    b.id
                )));
            }
            if let Some(d) = b.disputed.iter().find(|d| !b.clients.contains(d)) {
                return Err(invalid(format!(
                    "behaviour {:?} marks {d:?} disputed but does not apply to it",
                    b.id
                )));
            }
        }
        Ok(Behaviours {
            all: file.behaviour,
        })
    }

    /// Loads `path`.
    pub fn load(path: &Path) -> Result<Behaviours, EmulateError> {
        let io = |e: std::io::Error| EmulateError::RuleIo {
            path: path.display().to_string(),
            source: e,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_BYTES {
            return Err(EmulateError::RuleInvalid {
                name: path.display().to_string(),
                message: format!("{len} bytes, more than {MAX_FILE_BYTES}"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Behaviours::parse(&path.display().to_string(), &text)
    }

    pub fn all(&self) -> &[Behaviour] {
        &self.all
    }

    pub fn get(&self, id: &str) -> Option<&Behaviour> {
        self.all.iter().find(|b| b.id == id)
    }

    /// The behaviours of one client (aliases answer with their profile's).
    pub fn of(&self, client: &domain::Client) -> Applied<'_> {
        let id = client.alias_of.as_deref().unwrap_or(&client.id);
        Applied(
            self.all
                .iter()
                .filter(|b| b.clients.iter().any(|c| c == id))
                .collect(),
        )
    }

    /// Problems between these behaviours and the catalog with its rule sets: unknown client ids,
    /// and policy-switched behaviours whose client list and rule sets disagree.
    pub fn check<'s>(
        &self,
        catalog: &domain::Catalog,
        set_of: &dyn Fn(&str) -> Option<&'s RuleSet>,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        for b in &self.all {
            for c in &b.clients {
                match catalog.get(c) {
                    Some(client) if client.alias_of.is_none() => {
                        let Some(mode) = b.implementation.dark_mode() else {
                            continue;
                        };
                        if client.color_scheme != domain::ColorScheme::Dark {
                            problems.push(format!(
                                "behaviour {:?} is a dark-mode behaviour but names {c:?}, which is not a dark-mode profile",
                                b.id
                            ));
                        }
                        let predicted = set_of(&client.rules).map(|s| s.policy.dark_mode);
                        if predicted.is_some_and(|p| p != mode) {
                            problems.push(format!(
                                "behaviour {:?} draws {c:?} as {mode:?}, but its rule set {:?} says dark_mode = {predicted:?} (make them agree)",
                                b.id, client.rules
                            ));
                        }
                    }
                    Some(_) => problems.push(format!(
                        "behaviour {:?} names the alias {c:?}: name its profile instead",
                        b.id
                    )),
                    None => problems.push(format!(
                        "behaviour {:?} names client {c:?}, which data/clients.toml does not have",
                        b.id
                    )),
                }
            }
        }
        for client in catalog.clients() {
            let Some(set) = set_of(&client.rules) else {
                continue;
            };
            let applied = self.of(client);
            let mut seen = BTreeSet::new();
            for b in &self.all {
                let imp = b.implementation;
                let Some(on) = imp.policy_says(set) else {
                    continue;
                };
                if !seen.insert(imp) {
                    continue;
                }
                let listed = applied.find(imp).is_some();
                if on != listed {
                    problems.push(format!(
                        "client {:?}: rule set {:?} {} {:?}, but data/behaviours.toml {} (make them agree)",
                        client.id,
                        set.name,
                        if on { "switches on" } else { "does not switch on" },
                        imp.note_key(),
                        if listed { "applies it" } else { "does not list the client for it" },
                    ));
                }
            }
        }
        problems
    }
}

/// The behaviours one client applies.
#[derive(Clone, Debug, Default)]
pub struct Applied<'a>(pub Vec<&'a Behaviour>);

impl<'a> Applied<'a> {
    /// The behaviour implemented by `imp`, if the client applies one.
    pub fn find(&self, imp: Implementation) -> Option<&'a Behaviour> {
        self.0.iter().copied().find(|b| b.implementation == imp)
    }

    pub fn has(&self, imp: Implementation) -> bool {
        self.find(imp).is_some()
    }

    /// The dark-mode recolouring after load of this client, if it has one.
    pub fn dark_pass(&self) -> Option<(DarkPass, &'a Behaviour)> {
        self.0
            .iter()
            .find_map(|b| b.implementation.dark_pass().map(|p| (p, *b)))
    }

    /// The zoom-out to the screen this client applies to a page wider than the screen once laid
    /// out, if it has one (Samsung's auto fit among them: it lays such a page out at a fixed
    /// wider width first).
    pub fn zoom_out(&self) -> Option<Implementation> {
        [
            Implementation::ZoomOutWideEmail,
            Implementation::ZoomOutWideEmailUnlessReformattingDisabled,
            Implementation::AutoFitWideLayout,
        ]
        .into_iter()
        .find(|imp| self.has(*imp))
    }

    /// The ids of the behaviours whose implementation noted a change, in file order.
    pub fn triggered(&self, notes: &std::collections::BTreeMap<String, usize>) -> Vec<&'a str> {
        self.0
            .iter()
            .filter(|b| notes.contains_key(b.implementation.note_key()))
            .map(|b| b.id.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[behaviour]]
id = "x-clip"
summary = "s"
clients = ["gmail_chrome_web"]
implementation = "clip-long-message"
sources = ["https://example.test/a"]
confidence = "firm"
"#;

    #[test]
    fn a_valid_file_parses() {
        let b = Behaviours::parse("t", ONE).expect("valid");
        assert_eq!(b.all().len(), 1);
        assert_eq!(b.all()[0].implementation, Implementation::ClipLongMessage);
    }

    #[test]
    fn an_unknown_implementation_is_refused_by_name() {
        let err = Behaviours::parse("t", &ONE.replace("clip-long-message", "teleport"))
            .expect_err("unknown implementation")
            .to_string();
        assert!(
            err.contains("teleport") && err.contains("clip-long-message"),
            "{err}"
        );
    }

    #[test]
    fn sources_must_be_urls_and_disputed_clients_must_be_listed() {
        let err = Behaviours::parse("t", &ONE.replace("https://example.test/a", "email-bugs #1"))
            .expect_err("not a URL")
            .to_string();
        assert!(err.contains("https://"), "{err}");
        let text = ONE.replace("confidence", "disputed = [\"yahoo_ios\"]\nconfidence");
        let err = Behaviours::parse("t", &text)
            .expect_err("disputed client not listed")
            .to_string();
        assert!(err.contains("yahoo_ios"), "{err}");
    }
}
