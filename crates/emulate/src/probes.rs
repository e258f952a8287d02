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
}

impl ProbeColour {
    pub fn rgb(self) -> [u8; 3] {
        match self {
            ProbeColour::Green => [0, 255, 0],
            ProbeColour::Red => [255, 0, 0],
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
