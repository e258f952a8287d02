//! Derivation of the `[derived]` table of each rule file from caniemail's `support.json`: the
//! latest-version support letter of every tested feature, compacted to the lists of unsupported,
//! partial and unknown features. The hand-written part of a rule file is kept as it is.

use serde::Deserialize;

use crate::rules::{Derived, Policy, DERIVED_MARKER};
use crate::EmulateError;

/// Longest `support.json` accepted (the reference copy is about 1 MB).
pub const MAX_SUPPORT_BYTES: usize = 32 * 1024 * 1024;

/// The parsed support facts: `(slug, stats, notes_by_num)` in file order, plus provenance.
pub struct Facts {
    pub source: String,
    pub commit: String,
    features: Vec<(String, serde_json::Value, serde_json::Value)>,
}

impl Facts {
    pub fn parse(text: &str) -> Result<Facts, EmulateError> {
        if text.len() > MAX_SUPPORT_BYTES {
            return Err(EmulateError::Derive(format!(
                "support.json is {} bytes, more than {MAX_SUPPORT_BYTES}",
                text.len()
            )));
        }
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| EmulateError::Derive(format!("support.json is not JSON: {e}")))?;
        let meta_str = |key: &str| {
            json["meta"][key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| EmulateError::Derive(format!("support.json lacks meta.{key}")))
        };
        let source = meta_str("source")?;
        let commit = meta_str("commit")?;
        let list = json["features"]
            .as_array()
            .ok_or_else(|| EmulateError::Derive("support.json lacks a features array".into()))?;
        let mut features = Vec::with_capacity(list.len());
        for f in list {
            let slug = f["slug"]
                .as_str()
                .ok_or_else(|| EmulateError::Derive("a feature has no slug".into()))?;
            features.push((
                slug.to_string(),
                f["stats"].clone(),
                f["notes_by_num"].clone(),
            ));
        }
        Ok(Facts {
            source,
            commit,
            features,
        })
    }

    /// The latest support letter (`y`, `n`, `a`, `u`) of every feature tested for the pair.
    fn letter(stats: &serde_json::Value, family: &str, platform: &str) -> Option<char> {
        let value = stats[family][platform]["latest_version"].as_str()?;
        value.split_whitespace().next()?.chars().next()
    }

    /// The derived table for `family`/`platform`, filling features that pair lacks from
    /// `fallback` (another platform of the same family) when given.
    pub fn derive(&self, family: &str, platform: &str, fallback: Option<&str>) -> Derived {
        let mut d = Derived {
            source: self.source.clone(),
            commit: self.commit.clone(),
            tested: 0,
            unsupported: Vec::new(),
            partial: Vec::new(),
            unknown: Vec::new(),
            from_fallback: Vec::new(),
            notes: Default::default(),
        };
        for (slug, stats, notes) in &self.features {
            let Some((letter, from_fallback)) =
                Self::letter_or_fallback(stats, family, platform, fallback)
            else {
                continue;
            };
            if letter == 'a' {
                let pair = if from_fallback {
                    fallback.unwrap_or(platform)
                } else {
                    platform
                };
                let text = Self::notes(stats, notes, family, pair);
                if !text.is_empty() {
                    d.notes.insert(slug.clone(), text);
                }
            }
            if from_fallback {
                d.from_fallback.push(slug.clone());
            }
            d.tested += 1;
            match letter {
                'n' => d.unsupported.push(slug.clone()),
                'a' => d.partial.push(slug.clone()),
                'u' => d.unknown.push(slug.clone()),
                _ => {}
            }
        }
        d
    }

    /// The public notes (`#n` references of the latest version) of a feature for the pair, joined.
    fn notes(
        stats: &serde_json::Value,
        notes: &serde_json::Value,
        family: &str,
        platform: &str,
    ) -> String {
        let latest = stats[family][platform]["latest_version"]
            .as_str()
            .unwrap_or_default();
        latest
            .split_whitespace()
            .filter_map(|w| w.strip_prefix('#'))
            .filter_map(|n| notes[n].as_str())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// caniemail's latest support letter for one feature and client, with the same fallback
    /// platform `derive` uses; `None` when the feature is unknown or untested for that client.
    pub fn letter_for(
        &self,
        slug: &str,
        family: &str,
        platform: &str,
        fallback: Option<&str>,
    ) -> Option<char> {
        let (_, stats, _) = self.features.iter().find(|(s, _, _)| s == slug)?;
        Self::letter_or_fallback(stats, family, platform, fallback).map(|(l, _)| l)
    }

    /// The pair's own letter, else the fallback platform's (then `true`).
    fn letter_or_fallback(
        stats: &serde_json::Value,
        family: &str,
        platform: &str,
        fallback: Option<&str>,
    ) -> Option<(char, bool)> {
        match Self::letter(stats, family, platform) {
            Some(l) => Some((l, false)),
            None => fallback
                .and_then(|fb| Self::letter(stats, family, fb))
                .map(|l| (l, true)),
        }
    }

    pub fn slugs(&self) -> impl Iterator<Item = &str> {
        self.features.iter().map(|(s, _, _)| s.as_str())
    }
}

/// The hand-written head of a rule file (everything between the generated header comment and the
/// derived marker), with the fields `derive-rules` needs from it.
pub struct HandWritten {
    pub text: String,
    pub family: String,
    pub platform: String,
    pub policy: Policy,
}

#[derive(Deserialize)]
struct Head {
    family: String,
    platform: String,
    policy: Policy,
}

impl HandWritten {
    /// Splits an existing rule file; `name` is only for messages.
    pub fn from_file(name: &str, text: &str) -> Result<HandWritten, EmulateError> {
        let body: String = text
            .lines()
            .skip_while(|l| l.starts_with('#'))
            .take_while(|l| *l != DERIVED_MARKER)
            .map(|l| format!("{l}\n"))
            .collect();
        let body = body.trim().to_string();
        let head: Head = toml::from_str(&body).map_err(|e| EmulateError::RuleSyntax {
            name: name.to_string(),
            message: format!("hand-written part: {e}"),
        })?;
        Ok(HandWritten {
            text: body,
            family: head.family,
            platform: head.platform,
            policy: head.policy,
        })
    }
}

/// The full text of a rule file.
pub fn render_file(
    name: &str,
    hand: &HandWritten,
    derived: &Derived,
) -> Result<String, EmulateError> {
    #[derive(serde::Serialize)]
    struct Wrap<'a> {
        derived: &'a Derived,
    }
    let derived_text = toml::to_string(&Wrap { derived })
        .map_err(|e| EmulateError::Derive(format!("cannot write rule set {name}: {e}")))?;
    Ok(format!(
        "# Rule set `{name}`: what {family} on {platform} does to an email before drawing it.\n\
         # Support facts derived from caniemail ({source}) at commit {commit}.\n\
         # caniemail data is under the MIT License, Copyright (c) 2019 Rémi Parmentier.\n\
         # Regenerate the derived table: cargo run -p emulate --bin derive-rules -- <support.json> data/rules\n\
         \n{hand}\n\n{DERIVED_MARKER}\n{derived_text}",
        family = hand.family,
        platform = hand.platform,
        source = derived.source,
        commit = derived.commit,
        hand = hand.text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUPPORT: &str = r#"{"meta":{"source":"https://example.test/caniemail","commit":"abc"},
      "features":[
        {"slug":"css-position","stats":{"gmail":{"desktop-webmail":{"latest_version":"n"}}}},
        {"slug":"css-at-media","stats":{"gmail":{"desktop-webmail":{"latest_version":"a #7"}},
                                          "thunderbird":{"macos":{"latest_version":"n"}}},
         "notes_by_num":{"7":"Only min-width and max-width."}},
        {"slug":"css-float","stats":{"gmail":{"desktop-webmail":{"latest_version":"y"}}}}
      ]}"#;

    #[test]
    fn latest_letters_become_the_compact_lists() {
        let s = Facts::parse(SUPPORT).expect("parses");
        let d = s.derive("gmail", "desktop-webmail", None);
        assert_eq!(d.tested, 3);
        assert_eq!(d.unsupported, vec!["css-position"]);
        assert_eq!(d.partial, vec!["css-at-media"]);
        assert!(d.unknown.is_empty());
        assert_eq!(
            d.notes.get("css-at-media").map(String::as_str),
            Some("Only min-width and max-width.")
        );
        assert_eq!(d.notes.len(), 1, "notes only for partial features");
    }

    #[test]
    fn a_fallback_platform_fills_only_what_the_pair_lacks() {
        let s = Facts::parse(SUPPORT).expect("parses");
        let d = s.derive("thunderbird", "windows", Some("macos"));
        assert_eq!(d.unsupported, vec!["css-at-media"]);
        assert_eq!(d.from_fallback, vec!["css-at-media"]);
    }

    #[test]
    fn regenerating_keeps_the_hand_written_policy() {
        let file = format!(
            "# old header\nfamily = \"gmail\"\nplatform = \"desktop-webmail\"\n# why\n[policy]\n\
             dark_mode = \"none\"\ndark_mode_source = \"https://example.test\"\n\n{DERIVED_MARKER}\n[derived]\nstale = 1\n"
        );
        let hand = HandWritten::from_file("x", &file).expect("hand part parses");
        let s = Facts::parse(SUPPORT).expect("parses");
        let out =
            render_file("x", &hand, &s.derive("gmail", "desktop-webmail", None)).expect("renders");
        assert!(out.contains("# why\n[policy]"), "{out}");
        assert!(!out.contains("stale"), "{out}");
        assert!(out.contains("MIT License"), "{out}");
        crate::rules::RuleSet::parse("x", &out).expect("the result loads");
    }
}
