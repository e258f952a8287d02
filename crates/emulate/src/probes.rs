//! Fidelity probes: tiny emails that each decide one caniemail feature visually (the sample point
//! is green when the client supports the feature, red when it does not), and the colour each
//! client is expected to show according to its derived rules.

use crate::rules::{RuleSet, Support};

/// One probe email.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The caniemail feature the probe decides.
    pub slug: &'static str,
    /// Other features the probe's markup depends on: if any is missing the probe shows red too.
    pub requires: &'static [&'static str],
    /// Where to read the colour, in CSS pixels from the top-left corner of the element carrying
    /// `data-probe="<slug>"` (an attribute no client rewrites, unlike ids and classes).
    pub sample: (u32, u32),
    pub html: &'static str,
}

macro_rules! probe {
    ($slug:literal, [$($req:literal),*], $x:literal, $y:literal) => {
        Probe {
            slug: $slug,
            requires: &[$($req),*],
            sample: ($x, $y),
            html: include_str!(concat!("../probes/", $slug, ".html")),
        }
    };
}

/// Every probe, in a stable order.
pub const PROBES: &[Probe] = &[
    probe!("html-style", ["css-selector-class"], 100, 20),
    probe!(
        "css-at-media",
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    probe!("css-selector-attribute", ["html-style"], 100, 20),
    probe!(
        "css-pseudo-class-first-child",
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    probe!("css-position", ["css-left-right-top-bottom"], 100, 20),
    probe!("css-display-flex", [], 150, 20),
    probe!("css-float", [], 150, 20),
    probe!("css-max-width", [], 150, 20),
    probe!("css-border-radius", [], 1, 1),
    probe!("css-box-shadow", [], 100, 60),
    probe!("css-opacity", [], 100, 20),
    probe!("css-linear-gradient", ["css-background-image"], 100, 20),
];

/// The colour a probe's sample point should show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeColour {
    /// `#00ff00`: the feature works.
    Green,
    /// `#ff0000`: the feature (or one it requires) is missing.
    Red,
    /// Dark-mode probes are decided by lightness, not hue: CIELAB L* under 40...
    Dark,
    /// ...or over 70.
    Light,
}

impl ProbeColour {
    pub fn rgb(self) -> [u8; 3] {
        match self {
            ProbeColour::Green => [0, 255, 0],
            ProbeColour::Red => [255, 0, 0],
            ProbeColour::Dark => [0x33, 0x33, 0x33],
            ProbeColour::Light => [255, 255, 255],
        }
    }
}

/// What a client is expected to show for a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub colour: ProbeColour,
    /// `false` when a feature involved is only partially supported or untested-unknown, so the
    /// real client may differ from the emulation either way.
    pub certain: bool,
    /// The features that make it red (empty when green).
    pub because: Vec<&'static str>,
}

/// The expected colour of `probe` for a client using `set`, from the derived rules as the
/// transformation applies them.
pub fn expected(probe: &Probe, set: &RuleSet) -> Expectation {
    let involved = std::iter::once(probe.slug).chain(probe.requires.iter().copied());
    let mut because = Vec::new();
    let mut certain = true;
    for slug in involved {
        if set.removes(slug) || (slug == "html-style" && !set.policy.style_blocks) {
            because.push(slug);
        }
        if matches!(set.support(slug), Support::Partial | Support::Unknown) {
            certain = false;
        }
    }
    Expectation {
        colour: if because.is_empty() {
            ProbeColour::Green
        } else {
            ProbeColour::Red
        },
        certain,
        because,
    }
}

// ---------------------------------------------------------------------------------------------
// Behaviour probes: one email per documented behaviour (data/behaviours.toml), whose sample point
// shows one colour where the client does it and the other where it does not.

use crate::behaviours::{Behaviours, Implementation};
use crate::rules::RuleBook;

/// One behaviour probe email.
#[derive(Clone, Copy, Debug)]
pub struct BehaviourProbe {
    /// The probe's name: its file stem and the value of its `data-probe` attribute.
    pub name: &'static str,
    pub implementation: Implementation,
    /// The colour at the sample point where the client applies the behaviour.
    pub applied: ProbeColour,
    /// Other behaviours that show the same colour in this probe.
    pub same_as: &'static [Implementation],
    /// Every engine except the Word engine does this by itself (HTML comments): clients without
    /// the behaviour entry show `applied` too, Word-engine clients the other colour.
    pub native: bool,
    /// Only a narrow screen (at most [`NARROW`] CSS px) shows the other colour: wider clients
    /// show `applied` whether or not they have the behaviour.
    pub narrow_only: bool,
    /// Drawn in the `no_images` variant: what a client shows for a blocked image. Only clients
    /// whose images-off drawing data/behaviours.toml describes are scored; no caniemail feature
    /// speaks for the others.
    pub images_off: bool,
    /// A `prefers-color-scheme: dark` rule turns the sample green (red without it): a client
    /// without the behaviour shows green only if it is a dark-mode profile that firmly supports
    /// the media query (caniemail), red if it is a light profile or does not support it, and is
    /// not scored where support is partial or unknown.
    pub dark_media: bool,
    /// caniemail features a client without the behaviour must support for the probe to decide;
    /// where one is not firmly supported the point is not scored.
    pub requires: &'static [&'static str],
    /// Where to read the colour, in CSS pixels from the probe element's top-left corner.
    pub sample: (u32, u32),
    template: &'static str,
}

impl BehaviourProbe {
    /// The probe's HTML: its template with each `@@FILL:<bytes>@@` replaced by that many bytes of
    /// filler (the size probes need large sources, which are not kept in the repository), and
    /// `@@NAME@@` by the probe's name (the two implementations of one behaviour share an email).
    pub fn html(&self) -> String {
        let mut out = String::with_capacity(self.template.len());
        let mut rest = self.template;
        while let Some(at) = rest.find("@@FILL:") {
            out.push_str(&rest[..at]);
            let tail = &rest[at + 7..];
            let Some(end) = tail.find("@@") else {
                break;
            };
            let n: usize = tail[..end].parse().unwrap_or(0);
            out.extend(std::iter::repeat_n('x', n));
            rest = &tail[end + 2..];
        }
        out.push_str(rest);
        out.replace("@@NAME@@", self.name)
    }
}

macro_rules! behaviour_probe {
    ($name:literal, $imp:ident, $applied:ident, [$($same:ident),*], $native:literal, [$($req:literal),*], $x:literal, $y:literal) => {
        behaviour_probe!($name, $imp, $applied, [$($same),*], $native, false, [$($req),*], $x, $y)
    };
    ($name:literal, $imp:ident, $applied:ident, [$($same:ident),*], $native:literal, $narrow:literal, [$($req:literal),*], $x:literal, $y:literal) => {
        BehaviourProbe {
            name: $name,
            implementation: Implementation::$imp,
            applied: ProbeColour::$applied,
            same_as: &[$(Implementation::$same),*],
            native: $native,
            narrow_only: $narrow,
            images_off: false,
            dark_media: false,
            requires: &[$($req),*],
            sample: ($x, $y),
            template: include_str!(concat!("../probes/", $name, ".html")),
        }
    };
}

/// A behaviour probe drawn with images blocked (see [`BehaviourProbe::images_off`]).
macro_rules! images_off_probe {
    ($name:literal, $imp:ident, $applied:ident, $x:literal, $y:literal) => {
        BehaviourProbe {
            images_off: true,
            ..behaviour_probe!($name, $imp, $applied, [], false, [], $x, $y)
        }
    };
}

/// A behaviour probe decided by a `prefers-color-scheme: dark` rule (see
/// [`BehaviourProbe::dark_media`]).
macro_rules! dark_media_probe {
    ($name:literal, $imp:ident, $applied:ident, $x:literal, $y:literal) => {
        BehaviourProbe {
            dark_media: true,
            ..behaviour_probe!($name, $imp, $applied, [], false, [], $x, $y)
        }
    };
}

/// The widest screen, in CSS pixels, that the auto-fit probe's `max-width` media query fires on.
pub const NARROW: u32 = 480;

/// Gmail Android's zoom-out; its email (whose `data-probe` is the probe's name) is iOS Mail's too.
const ZOOM_OUT: BehaviourProbe = behaviour_probe!(
    "behaviour-zoom-out",
    ZoomOutWideEmail,
    Red,
    [
        ZoomOutWideEmailUnlessReformattingDisabled,
        AutoFitWideLayout
    ],
    false,
    true,
    [],
    300,
    20
);

/// Every behaviour probe, in a stable order.
pub const BEHAVIOUR_PROBES: &[BehaviourProbe] = &[
    behaviour_probe!(
        "behaviour-style-nested-at-rule",
        StyleNestedAtRuleDropsBlock,
        Red,
        [],
        false,
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-style-syntax-error",
        StyleSyntaxErrorDropsBlock,
        Red,
        [],
        false,
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-style-size-limit",
        StyleSizeLimit,
        Red,
        [],
        false,
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-style-in-body",
        StyleInBodyStripped,
        Red,
        [],
        false,
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-clip",
        ClipLongMessage,
        Red,
        [],
        false,
        [],
        150,
        50
    ),
    behaviour_probe!(
        "behaviour-class-prefix",
        ClassIdPrefix,
        Red,
        [],
        false,
        ["html-style", "css-selector-attribute"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-compound-selector",
        CompoundSelectorFirstClassOnly,
        Red,
        [FirstClassOnly],
        false,
        ["html-style", "css-selector-chaining"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-attribute-selector",
        AttributeSelectorMangled,
        Red,
        [],
        false,
        ["html-style", "css-selector-attribute"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-mso-comments",
        MsoConditionalsAsComments,
        Green,
        [],
        true,
        [],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-first-class",
        FirstClassOnly,
        Red,
        [],
        false,
        ["html-style", "css-selector-class"],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-line-height",
        LineHeightMinimum,
        Green,
        [],
        false,
        ["css-line-height"],
        150,
        20
    ),
    behaviour_probe!(
        "behaviour-spacer-cell",
        SpacerCellOneLine,
        Green,
        [],
        false,
        [],
        100,
        10
    ),
    behaviour_probe!(
        "behaviour-web-font",
        WebFontTimesFallback,
        Red,
        [],
        false,
        [],
        322,
        24
    ),
    behaviour_probe!(
        "behaviour-height",
        HeightToMinHeight,
        Green,
        [],
        false,
        ["css-height", "css-overflow"],
        100,
        40
    ),
    behaviour_probe!(
        "behaviour-data-detectors",
        DataDetectors,
        Green,
        [],
        false,
        [],
        60,
        24
    ),
    // Its 600 px table stays wider than a phone whatever its query does, so the clients that
    // zoom out a page wider than the screen lay it out wider too and the query stops firing.
    behaviour_probe!(
        "behaviour-auto-fit",
        AutoFitWideLayout,
        Red,
        [ZoomOutWideEmail, ZoomOutWideEmailUnlessReformattingDisabled],
        false,
        true,
        ["html-style", "css-at-media", "css-selector-class"],
        50,
        10
    ),
    // A 600 px table above a fluid one whose last 200 px are green: laid out at the screen
    // width the sample (300 px in) is green; laid out 600 px wide and zoomed out, it is red.
    ZOOM_OUT,
    BehaviourProbe {
        name: "behaviour-zoom-out-ios",
        implementation: Implementation::ZoomOutWideEmailUnlessReformattingDisabled,
        same_as: &[
            Implementation::ZoomOutWideEmail,
            Implementation::AutoFitWideLayout,
        ],
        ..ZOOM_OUT
    },
    // Green where the alt text is drawn styled by the image's CSS, red where Outlook's
    // placeholder puts its red X at the sample point.
    images_off_probe!("behaviour-images-off", BlockedImageAltText, Green, 11, 11),
    behaviour_probe!(
        "behaviour-dark-light-background",
        DarkOutlookPartial,
        Dark,
        [DarkBlinkForceDark, DarkFullInvert],
        false,
        [],
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-dark-designed",
        DarkFullInvert,
        Light,
        [],
        false,
        [],
        100,
        20
    ),
    // Apple Mail's opt-in: the CSS declares color-scheme, so its dark rule turns the cell green.
    dark_media_probe!(
        "behaviour-dark-apple-opt-in",
        DarkAppleOptIn,
        Green,
        100,
        20
    ),
    // The <meta> tag alone: Apple Mail ignores the dark rule (red); clients that need no opt-in
    // apply it.
    dark_media_probe!(
        "behaviour-dark-apple-meta-only",
        DarkAppleOptIn,
        Red,
        100,
        20
    ),
    behaviour_probe!(
        "behaviour-dark-hook",
        DarkOutlookPartial,
        Green,
        [],
        false,
        [],
        100,
        20
    ),
];

/// What a behaviour probe should show for one client, by the behaviours file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BehaviourExpectation {
    /// The colour, and why (the behaviour ids, or "none applies").
    Firm(ProbeColour, String),
    /// Not scored, and why.
    Open(String),
}

impl ProbeColour {
    fn other(self) -> ProbeColour {
        match self {
            ProbeColour::Green => ProbeColour::Red,
            ProbeColour::Red => ProbeColour::Green,
            ProbeColour::Dark => ProbeColour::Light,
            ProbeColour::Light => ProbeColour::Dark,
        }
    }
}

/// The colour `probe` should show for `client`: the behaviour's colour where data/behaviours.toml
/// applies it (or one of `same_as`) to the client, the other colour elsewhere. Unscored where the
/// behaviour is unverified or disputed for the client, and, for clients without it, where a
/// required feature is not firmly supported.
pub fn expected_behaviour(
    probe: &BehaviourProbe,
    client: &domain::Client,
    book: &RuleBook,
) -> BehaviourExpectation {
    let behaviours: &Behaviours = book.behaviours();
    let applied = behaviours.of(client);
    let id = client.alias_of.as_deref().unwrap_or(&client.id);
    let doing: Vec<_> = std::iter::once(probe.implementation)
        .chain(probe.same_as.iter().copied())
        .filter_map(|imp| applied.find(imp))
        .collect();
    if !doing.is_empty() {
        if let Some(b) = doing.iter().find(|b| !b.scored_for(id)) {
            return BehaviourExpectation::Open(format!(
                "{} is {} for this client",
                b.id,
                if b.disputed.iter().any(|c| c == id) {
                    "disputed by the sources"
                } else {
                    "unverified"
                }
            ));
        }
        let ids: Vec<&str> = doing.iter().map(|b| b.id.as_str()).collect();
        return BehaviourExpectation::Firm(probe.applied, ids.join(", "));
    }
    if probe.images_off {
        let other = applied
            .0
            .iter()
            .find(|b| b.implementation.is_images_off() && b.implementation != probe.implementation);
        return match other {
            Some(b) if !b.scored_for(id) => {
                BehaviourExpectation::Open(format!("{} is unverified for this client", b.id))
            }
            Some(b) => BehaviourExpectation::Firm(probe.applied.other(), b.id.clone()),
            None => BehaviourExpectation::Open(
                "no source describes what this client shows for a blocked image".into(),
            ),
        };
    }
    let Some(set) = book.get(&client.rules) else {
        return BehaviourExpectation::Open(format!("rule set {} missing", client.rules));
    };
    if probe.narrow_only && client.viewport.width > NARROW {
        return BehaviourExpectation::Firm(probe.applied, "screen wider than the query".into());
    }
    if probe.dark_media {
        const MEDIA: &str = "css-at-media-prefers-color-scheme";
        if client.color_scheme != domain::ColorScheme::Dark {
            return BehaviourExpectation::Firm(ProbeColour::Red, "a light profile".into());
        }
        return match set.support(MEDIA) {
            Support::Yes if !set.removes(MEDIA) => BehaviourExpectation::Firm(
                ProbeColour::Green,
                format!("{MEDIA} supported, no opt-in needed"),
            ),
            Support::No => {
                BehaviourExpectation::Firm(ProbeColour::Red, format!("{MEDIA} not supported"))
            }
            _ if set.removes(MEDIA) => BehaviourExpectation::Firm(
                ProbeColour::Red,
                format!("{MEDIA} removed by the rule set"),
            ),
            _ => BehaviourExpectation::Open(format!("{MEDIA} not firmly supported")),
        };
    }
    if probe.native {
        return if set.policy.word_engine {
            BehaviourExpectation::Firm(probe.applied.other(), "Word engine".into())
        } else {
            BehaviourExpectation::Firm(probe.applied, "what every HTML engine does".into())
        };
    }
    let weak: Vec<String> = probe
        .requires
        .iter()
        .filter(|s| set.support(s) != Support::Yes || set.removes(s))
        .map(|s| format!("{s} not firmly supported"))
        .collect();
    if !weak.is_empty() {
        return BehaviourExpectation::Open(weak.join(", "));
    }
    BehaviourExpectation::Firm(probe.applied.other(), "none applies".into())
}
