//! Spam filter profiles: the named "clients" of `GET /v5/spam/clients`, loaded from TOML.
//!
//! A profile is an engine plus a pair of thresholds; several profiles can share one engine
//! (a strict corporate gateway and a lenient consumer mailbox judge the same score differently).

use std::collections::HashSet;
use std::path::Path;

use content::uribl::Zone;
pub use domain::FilterType;
use domain::SpamVerdict;
use serde::Deserialize;

use crate::SpamError;

/// Which engine computes the score a profile judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Spamassassin,
    Rspamd,
    Builtin,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [
        EngineKind::Spamassassin,
        EngineKind::Rspamd,
        EngineKind::Builtin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Spamassassin => "spamassassin",
            EngineKind::Rspamd => "rspamd",
            EngineKind::Builtin => "builtin",
        }
    }
}

/// One spam client as users see it, with the thresholds that turn a score into `spam`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterProfile {
    pub client: String,
    #[serde(rename = "type")]
    pub kind: FilterType,
    pub description: String,
    pub engine: EngineKind,
    /// Score at or above which the message is spam.
    pub spam_at: f64,
    /// Score below which the message is not spam; in between is neutral.
    pub ham_below: f64,
}

impl FilterProfile {
    /// Maps an engine score to the spec's `spam` value: 1 spam, 0 neutral, -1 not spam.
    pub fn classify(&self, score: f64) -> SpamVerdict {
        if score >= self.spam_at {
            SpamVerdict::Spam
        } else if score < self.ham_below {
            SpamVerdict::NotSpam
        } else {
            SpamVerdict::Neutral
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfilesFile {
    #[serde(default)]
    filter: Vec<FilterProfile>,
    /// The URI blocklists the built-in filter consults (and the link check reports).
    #[serde(default)]
    uribl: Vec<Zone>,
}

/// The validated, ordered list of profiles. Order is the order of the file (and of the API list).
#[derive(Debug, Clone, PartialEq)]
pub struct FilterProfiles {
    profiles: Vec<FilterProfile>,
    uribl: Vec<Zone>,
}

/// Names and descriptions end up in API responses and `X-` headers: keep them short and printable.
const MAX_NAME_CHARS: usize = 80;
const MAX_DESCRIPTION_CHARS: usize = 300;
const MAX_PROFILES: usize = 64;

impl FilterProfiles {
    /// Reads and validates a profiles file (usually `data/spam-filters.toml`).
    pub fn load(path: &Path) -> Result<FilterProfiles, SpamError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpamError::ProfilesRead {
            path: path.to_path_buf(),
            source,
        })?;
        FilterProfiles::parse(&text)
    }

    /// Parses and validates profiles; every problem found is reported at once.
    pub fn parse(text: &str) -> Result<FilterProfiles, SpamError> {
        let file: ProfilesFile =
            toml::from_str(text).map_err(|e| SpamError::ProfilesInvalid(e.to_string()))?;
        let mut problems = Vec::new();
        if file.filter.is_empty() {
            problems.push("no [[filter]] profile is defined".to_string());
        }
        if file.filter.len() > MAX_PROFILES {
            problems.push(format!(
                "{} profiles defined, at most {MAX_PROFILES} are allowed",
                file.filter.len()
            ));
        }
        let mut seen = HashSet::new();
        for p in &file.filter {
            let name = p.client.trim();
            if name.is_empty() {
                problems.push("a profile has an empty `client` name".to_string());
            } else if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
                problems.push(format!(
                    "profile `{name}`: `client` must be printable and at most {MAX_NAME_CHARS} characters"
                ));
            }
            if name != p.client {
                problems.push(format!(
                    "profile `{name}`: `client` has leading or trailing spaces"
                ));
            }
            let local = domain::seed::generated_local_part_len(name);
            if local > domain::seed::MAX_LOCAL_PART {
                problems.push(format!(
                    "profile {name:?}: its seed addresses would have {local} octets before the @, more than the {} SMTP allows; shorten the name",
                    domain::seed::MAX_LOCAL_PART
                ));
            }
            if !seen.insert(name.to_lowercase()) {
                problems.push(format!(
                    "profile `{name}` is defined twice (names are compared case-insensitively)"
                ));
            }
            if p.description.chars().count() > MAX_DESCRIPTION_CHARS {
                problems.push(format!(
                    "profile `{name}`: `description` is longer than {MAX_DESCRIPTION_CHARS} characters"
                ));
            }
            if !p.spam_at.is_finite() || !p.ham_below.is_finite() {
                problems.push(format!(
                    "profile `{name}`: thresholds must be finite numbers"
                ));
            } else if p.ham_below > p.spam_at {
                problems.push(format!(
                    "profile `{name}`: ham_below ({}) must not be above spam_at ({})",
                    p.ham_below, p.spam_at
                ));
            }
        }
        let mut zones = HashSet::new();
        for zone in &file.uribl {
            problems.extend(zone.problems());
            if !zones.insert(zone.name.to_ascii_uppercase()) {
                problems.push(format!(
                    "uribl zone {:?} is defined twice (names are compared case-insensitively)",
                    zone.name
                ));
            }
        }
        if problems.is_empty() {
            Ok(FilterProfiles {
                profiles: file.filter,
                uribl: file.uribl,
            })
        } else {
            Err(SpamError::ProfilesInvalid(problems.join("; ")))
        }
    }

    /// The URI blocklists of the `[[uribl]]` tables, in file order.
    pub fn uribl_zones(&self) -> &[Zone] {
        &self.uribl
    }

    pub fn all(&self) -> &[FilterProfile] {
        &self.profiles
    }

    pub fn get(&self, client: &str) -> Option<&FilterProfile> {
        self.profiles.iter().find(|p| p.client == client)
    }

    /// The engines at least one profile uses, each once.
    pub fn engines(&self) -> Vec<EngineKind> {
        EngineKind::ALL
            .into_iter()
            .filter(|e| self.profiles.iter().any(|p| p.engine == *e))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(spam_at: f64, ham_below: f64) -> FilterProfile {
        FilterProfile {
            client: "x".into(),
            kind: FilterType::B2b,
            description: String::new(),
            engine: EngineKind::Builtin,
            spam_at,
            ham_below,
        }
    }

    #[test]
    fn scores_map_to_spam_neutral_and_ham_at_the_thresholds() {
        let p = profile(5.0, 2.0);
        assert_eq!(p.classify(5.0), SpamVerdict::Spam);
        assert_eq!(p.classify(4.99), SpamVerdict::Neutral);
        assert_eq!(p.classify(2.0), SpamVerdict::Neutral);
        assert_eq!(p.classify(1.99), SpamVerdict::NotSpam);
        assert_eq!(p.classify(-3.0), SpamVerdict::NotSpam);
    }

    #[test]
    fn equal_thresholds_leave_no_neutral_band() {
        let p = profile(3.0, 3.0);
        assert_eq!(p.classify(3.0), SpamVerdict::Spam);
        assert_eq!(p.classify(2.9), SpamVerdict::NotSpam);
    }
}
