//! Rule sets: one TOML file per (client family, platform) under `data/rules/`, each a hand-written
//! `[policy]` (how the client handles `<style>`, class names, wrapper markup, dark mode, the Word
//! engine) plus a `[derived]` table of caniemail support facts written by `derive-rules`.
//! Loaded and validated once at start-up into a [`RuleBook`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::behaviours::Behaviours;
use crate::features::{self, Effect};
use crate::EmulateError;

/// Largest rule file accepted: they are a few KB; anything bigger is not one of ours.
const MAX_RULE_FILE_BYTES: u64 = 256 * 1024;
/// Most rule files in one directory.
const MAX_RULE_FILES: usize = 500;

/// The line separating the hand-written part of a rule file from the part `derive-rules` writes.
pub const DERIVED_MARKER: &str =
    "# ---- Everything below is written by derive-rules: do not edit by hand. ----";

/// How a client treats colours when the reader uses a dark theme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DarkMode {
    /// The email is shown as sent: no colour change, no `prefers-color-scheme` either.
    None,
    /// Only `@media (prefers-color-scheme: dark)` rules apply; colours are left alone.
    Media,
    /// Light backgrounds are darkened and dark text lightened; dark areas stay.
    PartialInvert,
    /// Every background and text colour is inverted, dark designs included.
    FullInvert,
}

/// What happens to a whole `<style>` element whose CSS does not parse cleanly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnCssError {
    /// Like a browser: the broken rule is skipped, the rest applies.
    #[default]
    SkipRule,
    /// The whole `<style>` element is dropped (Gmail's behaviour).
    DropBlock,
}

/// What the client does with the email's `<body>` element (from caniemail's `html-body`: partial
/// means "replaced by a `<div>` with supported attributes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyHandling {
    Keep,
    /// The body becomes a `<div>` inside the client's page (its attributes kept).
    Div,
    /// The body becomes a `<div>` and loses its attributes (`bgcolor`, `style`...).
    DivWithoutAttributes,
}

/// The hand-written part of a rule set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// `false`: every `<style>` element is removed even where caniemail's table says otherwise.
    #[serde(default = "yes")]
    pub style_blocks: bool,
    /// `false`: `<style>` elements inside `<body>` are removed.
    #[serde(default = "yes")]
    pub style_in_body: bool,
    /// Total bytes of CSS kept: the `<style>` element that passes this total, and every later
    /// one, is removed whole.
    #[serde(default)]
    pub style_max_bytes: Option<usize>,
    #[serde(default)]
    pub on_css_error: OnCssError,
    /// Prefix the client puts before every class name, in the HTML and in selectors.
    #[serde(default)]
    pub class_prefix: String,
    /// Prefix the client puts before every id, in the HTML and in selectors.
    #[serde(default)]
    pub id_prefix: String,
    /// Width in CSS pixels of the reading pane the email is shown in (webmails); `None`: the
    /// email gets the whole viewport.
    #[serde(default)]
    pub pane_width: Option<u32>,
    /// Padding of the reading pane around the email, CSS pixels.
    #[serde(default)]
    pub pane_padding: u32,
    /// Classic Outlook for Windows: conditional comments, VML and the Word engine's CSS.
    #[serde(default)]
    pub word_engine: bool,
    pub dark_mode: DarkMode,
    /// In forced dark mode, recoloured elements get `data-ogsc` (text), `data-ogsb` (background),
    /// `data-ogac`/`data-ogab` (colour attributes), as Outlook.com does, so that the email's
    /// `[data-ogsc] .x` rules apply.
    #[serde(default)]
    pub dark_mode_attributes: bool,
    /// Public source for the dark-mode behaviour.
    pub dark_mode_source: String,
    /// Partially supported features this client is emulated as not supporting.
    #[serde(default)]
    pub partial_as_unsupported: Vec<String>,
    /// Unsupported features deliberately not emulated (each with its reason in a comment).
    #[serde(default)]
    pub not_emulated: Vec<String>,
    /// Properties the client ignores on some elements only (applied to `style` attributes, where
    /// the element is known).
    #[serde(default)]
    pub scoped_drops: Vec<ScopedDrop>,
    /// For `derive-rules` only: features this platform's table lacks are taken from this platform
    /// of the same family.
    #[serde(default)]
    pub fallback_platform: Option<String>,
}

/// Properties dropped on some elements: on the elements of `on`, or on every element except those
/// of `except_on`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopedDrop {
    pub properties: Vec<String>,
    #[serde(default)]
    pub on: Vec<String>,
    #[serde(default)]
    pub except_on: Vec<String>,
    /// Public source of the limitation.
    pub source: String,
}

impl ScopedDrop {
    pub fn drops(&self, property: &str, element: &str) -> bool {
        self.properties.iter().any(|p| p == property)
            && if self.on.is_empty() {
                !self.except_on.iter().any(|e| e == element)
            } else {
                self.on.iter().any(|e| e == element)
            }
    }
}

fn yes() -> bool {
    true
}

/// The part `derive-rules` writes: latest-version support letters, compacted to the lists
/// that matter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Derived {
    pub source: String,
    pub commit: String,
    /// How many features caniemail has tested for this (family, platform).
    pub tested: usize,
    /// Features marked `n` at their latest version.
    pub unsupported: Vec<String>,
    /// Features marked `a` (partial) at their latest version.
    pub partial: Vec<String>,
    /// Features marked `u` (unknown) at their latest version.
    pub unknown: Vec<String>,
    /// Features taken from `fallback_platform` because this platform lacks them.
    #[serde(default)]
    pub from_fallback: Vec<String>,
    /// caniemail's public notes for the partially supported features (what "partial" means for
    /// this client), by slug.
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    family: String,
    platform: String,
    policy: Policy,
    derived: Derived,
}

/// One validated rule set.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub name: String,
    pub family: String,
    pub platform: String,
    pub policy: Policy,
    pub derived: Derived,
    /// What the client removes: the effects of every unsupported feature that is emulated.
    pub effects: Vec<(String, Effect)>,
}

/// What caniemail says about one feature for one rule set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Yes,
    No,
    Partial,
    /// Tested, result unknown; or not tested for this client at all.
    Unknown,
}

impl RuleSet {
    /// Parses and validates one rule file's text; `name` is the file stem.
    pub fn parse(name: &str, text: &str) -> Result<RuleSet, EmulateError> {
        let file: RuleFile = toml::from_str(text).map_err(|e| EmulateError::RuleSyntax {
            name: name.to_string(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| EmulateError::RuleInvalid {
            name: name.to_string(),
            message,
        };
        if file.policy.dark_mode_source.trim().is_empty() {
            return Err(invalid(
                "policy.dark_mode_source must name a public source".into(),
            ));
        }
        for prefix in [&file.policy.class_prefix, &file.policy.id_prefix] {
            let ok = prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok || prefix.starts_with(|c: char| c.is_ascii_digit()) {
                return Err(invalid(format!(
                    "prefix {prefix:?} must be letters, digits, '_' or '-' and not start with a digit"
                )));
            }
        }
        for d in &file.policy.scoped_drops {
            if d.on.is_empty() == d.except_on.is_empty() || d.source.trim().is_empty() {
                return Err(invalid(format!(
                    "scoped drop of {:?} needs exactly one of `on`/`except_on` and a source",
                    d.properties
                )));
            }
        }
        let lists = [
            &file.derived.unsupported,
            &file.derived.partial,
            &file.derived.unknown,
            &file.policy.partial_as_unsupported,
            &file.policy.not_emulated,
        ];
        for slug in lists.into_iter().flatten() {
            if features::effect(slug).is_none() {
                return Err(invalid(format!(
                    "unknown caniemail feature {slug:?}: add it to emulate::features or fix the name"
                )));
            }
        }
        for slug in &file.policy.partial_as_unsupported {
            if !file.derived.partial.contains(slug) {
                return Err(invalid(format!(
                    "policy.partial_as_unsupported names {slug:?}, which [derived] does not list as partial"
                )));
            }
        }
        if let Some(slug) = file
            .derived
            .notes
            .keys()
            .find(|s| !file.derived.partial.contains(s))
        {
            return Err(invalid(format!(
                "[derived] notes has {slug:?}, which it does not list as partial (regenerate with derive-rules)"
            )));
        }
        let effects = file
            .derived
            .unsupported
            .iter()
            .chain(&file.policy.partial_as_unsupported)
            .filter(|s| !file.policy.not_emulated.contains(s))
            .filter_map(|s| features::effect(s).map(|e| (s.clone(), e)))
            .filter(|(_, e)| *e != Effect::NotEmulated)
            .collect();
        Ok(RuleSet {
            name: name.to_string(),
            family: file.family,
            platform: file.platform,
            policy: file.policy,
            derived: file.derived,
            effects,
        })
    }

    /// The support letter for `slug` (latest version), as derived.
    pub fn support(&self, slug: &str) -> Support {
        let has = |list: &[String]| list.iter().any(|s| s == slug);
        if has(&self.derived.unsupported) {
            Support::No
        } else if has(&self.derived.partial) {
            Support::Partial
        } else if has(&self.derived.unknown) {
            Support::Unknown
        } else {
            // The derived lists are complete for tested features, so anything else tested is `y`;
            // untested features are not distinguishable here and count as supported, which is
            // also how the transformation treats them (nothing removed).
            Support::Yes
        }
    }

    pub fn body_handling(&self) -> BodyHandling {
        match self.support("html-body") {
            Support::Partial => BodyHandling::Div,
            Support::No => BodyHandling::DivWithoutAttributes,
            Support::Yes | Support::Unknown => BodyHandling::Keep,
        }
    }

    /// Whether the transformation removes what `slug` covers.
    pub fn removes(&self, slug: &str) -> bool {
        self.effects.iter().any(|(s, _)| s == slug)
    }
}

/// Every rule set, by name, and the behaviours of `behaviours.toml`.
#[derive(Clone, Debug, Default)]
pub struct RuleBook {
    sets: BTreeMap<String, RuleSet>,
    behaviours: Behaviours,
}

/// The behaviours file, beside the rules directory.
pub const BEHAVIOURS_FILE: &str = "behaviours.toml";

impl RuleBook {
    /// Loads every `*.toml` in `dir`, and the behaviours from [`BEHAVIOURS_FILE`] in `dir`'s
    /// parent (`data/behaviours.toml` beside `data/rules/`); one bad file fails the whole load
    /// with its name.
    pub fn load(dir: &Path) -> Result<RuleBook, EmulateError> {
        let mut book = RuleBook::load_rules(dir)?;
        let path = dir
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(BEHAVIOURS_FILE);
        book.behaviours = Behaviours::load(&path)?;
        Ok(book)
    }

    /// The rule sets of `dir` only, without behaviours.
    pub fn load_rules(dir: &Path) -> Result<RuleBook, EmulateError> {
        let io = |e: std::io::Error, path: &Path| EmulateError::RuleIo {
            path: path.display().to_string(),
            source: e,
        };
        let mut sets = BTreeMap::new();
        let entries = std::fs::read_dir(dir).map_err(|e| io(e, dir))?;
        for entry in entries {
            let path = entry.map_err(|e| io(e, dir))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            if sets.len() >= MAX_RULE_FILES {
                return Err(EmulateError::RuleInvalid {
                    name: dir.display().to_string(),
                    message: format!("more than {MAX_RULE_FILES} rule files"),
                });
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let len = std::fs::metadata(&path).map_err(|e| io(e, &path))?.len();
            if len > MAX_RULE_FILE_BYTES {
                return Err(EmulateError::RuleInvalid {
                    name,
                    message: format!("{len} bytes, more than {MAX_RULE_FILE_BYTES}"),
                });
            }
            let text = std::fs::read_to_string(&path).map_err(|e| io(e, &path))?;
            let set = RuleSet::parse(&name, &text)?;
            sets.insert(name, set);
        }
        tracing::debug!(dir = %dir.display(), rule_sets = sets.len(), "rule book loaded");
        Ok(RuleBook {
            sets,
            behaviours: Behaviours::default(),
        })
    }

    /// Checks that every rule set the catalog names exists and matches the client's
    /// family/platform, that Word-engine rule sets are only used with a version, and that the
    /// behaviours name catalog clients and agree with the rule sets' policies.
    pub fn check_catalog(&self, catalog: &domain::Catalog) -> Result<(), EmulateError> {
        let mut problems = self.behaviours.check(catalog, &|name| self.sets.get(name));
        for c in catalog.clients() {
            match self.sets.get(&c.rules) {
                None => problems.push(format!(
                    "client {:?} names rule set {:?}, which is not in data/rules/",
                    c.id, c.rules
                )),
                Some(set) => {
                    if set.family != c.family {
                        problems.push(format!(
                            "client {:?} is family {:?} but rule set {:?} is for {:?}",
                            c.id, c.family, c.rules, set.family
                        ));
                    }
                    if set.policy.word_engine && c.version.is_none() {
                        problems.push(format!(
                            "client {:?} uses the Word engine rule set {:?} and needs a version",
                            c.id, c.rules
                        ));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(EmulateError::Catalog(problems.join("; ")))
        }
    }

    pub fn get(&self, name: &str) -> Option<&RuleSet> {
        self.sets.get(name)
    }

    /// The rule set `client` names. Start-up checks the catalog against the book
    /// (`check_catalog`), so a miss means a catalog and a book that do not belong together.
    pub fn rule_set_for(&self, client: &domain::Client) -> Result<&RuleSet, EmulateError> {
        self.get(&client.rules)
            .ok_or_else(|| EmulateError::UnknownRuleSet {
                client: client.id.clone(),
                rules: client.rules.clone(),
            })
    }

    pub fn sets(&self) -> impl Iterator<Item = &RuleSet> {
        self.sets.values()
    }

    pub fn behaviours(&self) -> &Behaviours {
        &self.behaviours
    }

    /// Replaces the behaviours (tests build books by hand).
    pub fn with_behaviours(mut self, behaviours: Behaviours) -> RuleBook {
        self.behaviours = behaviours;
        self
    }
}
