//! Which analytics work in which client profile: the per-client matrix, measured by
//! `analytics-matrix` (crates/jobs/src/bin) in real engines through each profile's own
//! emulation, and stored in `data/analytics-matrix.toml`.
//!
//! What the engines cannot show (an image proxy that fetches each URL once, Apple's prefetching)
//! is not measured: it comes from [`proxy_fact`], with the public sources that say it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The data file, beside `clients.toml`.
pub const MATRIX_FILE: &str = "analytics-matrix.toml";

/// Whether the open image reaches the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenSignal {
    /// Fetched as the profile shows the email by default.
    Counted,
    /// Fetched only once the reader shows images (the profile blocks them by default).
    BlockedByDefault,
    /// Not fetched even with images shown.
    Never,
}

/// Whether the dark-mode beacon reaches the service from a reader in dark mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DarkSignal {
    /// Fetched for any email.
    Always,
    /// Fetched only when the email's CSS declares `color-scheme: light dark`: the client applies
    /// `prefers-color-scheme` rules to emails that opt in (Apple Mail).
    WhenOptedIn,
    /// Not fetched.
    Never,
}

impl DarkSignal {
    /// The file's spelling, also the pages' `data-dark`.
    pub fn as_str(self) -> &'static str {
        match self {
            DarkSignal::Always => "always",
            DarkSignal::WhenOptedIn => "when-opted-in",
            DarkSignal::Never => "never",
        }
    }
}

/// One profile's measured signals. Every signal but `open` is measured with images shown: with
/// images blocked no beacon can be fetched at all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSignals {
    /// The catalog id.
    pub id: String,
    /// The engine that drew it (`blink`, `gecko`, `webkit`).
    pub engine: String,
    pub open: OpenSignal,
    /// Reading-time steps were fetched while the email stayed open.
    pub read: bool,
    /// The print beacon applies under print media.
    pub print: bool,
    /// The forward beacon was fetched with the email inside the client's forward wrapper.
    pub forward: bool,
    /// Whether the dark-mode beacon was fetched in the profile's dark mode (its dark twin's
    /// emulation where it has one).
    pub dark: DarkSignal,
    /// When this row was measured, `YYYY-MM-DD HH:MM:SS` UTC.
    pub measured_at: String,
}

impl ClientSignals {
    /// The signals compared by a re-measurement (everything but the time).
    pub fn same_signals(&self, other: &ClientSignals) -> bool {
        ClientSignals {
            measured_at: String::new(),
            ..self.clone()
        } == ClientSignals {
            measured_at: String::new(),
            ..other.clone()
        }
    }
}

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// How the rows were measured, in words a reader of the file can check.
    pub method: String,
    #[serde(rename = "client")]
    pub clients: Vec<ClientSignals>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MatrixError {
    #[error("{MATRIX_FILE}: {0}")]
    Parse(String),
    #[error(
        "{MATRIX_FILE} has no row for the catalog's client(s) {0:?}: run `analytics-matrix write`"
    )]
    Missing(Vec<String>),
    #[error("{MATRIX_FILE} has rows for clients the catalog does not have: {0:?}")]
    Unknown(Vec<String>),
    #[error("{MATRIX_FILE} has two rows for {0}")]
    Twice(String),
}

impl Matrix {
    pub fn parse(text: &str) -> Result<Matrix, MatrixError> {
        toml::from_str(text).map_err(|e| MatrixError::Parse(e.to_string()))
    }

    pub fn to_toml(&self) -> Result<String, MatrixError> {
        toml::to_string(self).map_err(|e| MatrixError::Parse(e.to_string()))
    }

    /// Exactly one row per catalog id: a profile added to the catalog without being measured,
    /// or a stale row, stops the service at start-up.
    pub fn check_ids<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Result<(), MatrixError> {
        let mut seen = BTreeSet::new();
        for c in &self.clients {
            if !seen.insert(c.id.as_str()) {
                return Err(MatrixError::Twice(c.id.clone()));
            }
        }
        let wanted: BTreeSet<&str> = ids.into_iter().collect();
        let missing: Vec<String> = wanted.difference(&seen).map(|s| s.to_string()).collect();
        if !missing.is_empty() {
            return Err(MatrixError::Missing(missing));
        }
        let unknown: Vec<String> = seen.difference(&wanted).map(|s| s.to_string()).collect();
        if !unknown.is_empty() {
            return Err(MatrixError::Unknown(unknown));
        }
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<&ClientSignals> {
        self.clients.iter().find(|c| c.id == id)
    }
}

/// What a client family's image proxy does to tracking, which no engine shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyFact {
    /// The proxy's name, for the matrix cell.
    pub name: &'static str,
    /// What it does, for the note under the matrix.
    pub summary: &'static str,
    /// Reading time cannot be measured behind it, whatever the engine does.
    pub hides_timing: bool,
    /// Public sources, as `shared/reference/analytics.md` §3.3 and §3.4 name them.
    pub sources: &'static [&'static str],
}

/// The proxy fact of a catalog `family`, if its images go through a proxy.
pub fn proxy_fact(family: &str) -> Option<ProxyFact> {
    match family {
        "gmail" => Some(ProxyFact {
            name: "Google image proxy",
            summary: "Google's image proxy fetches each URL once and hides timing and device",
            hides_timing: true,
            sources: &[
                "https://www.scientiamobile.com/what-is-google-image-proxy/",
                "https://help.litmus.com/article/166",
            ],
        }),
        "yahoo" | "aol" => Some(ProxyFact {
            name: "Yahoo image proxy",
            summary: "Yahoo's image proxy fetches each URL once and hides timing and device",
            hides_timing: true,
            sources: &[
                "https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html",
                "validity.com, on Yahoo image caching (analytics.md §3.3)",
            ],
        }),
        "apple-mail" => Some(ProxyFact {
            name: "Apple Mail Privacy Protection",
            summary: "with Mail Privacy Protection on, Apple prefetches every image: those opens count as machine and say nothing of reading time; with it off, images load directly",
            // Only for readers who turned MPP on: the others' reading time is measured as drawn.
            hides_timing: false,
            sources: &[
                "https://help.litmus.com/article/416",
                "https://mask-api.icloud.com/egress-ip-ranges.csv",
            ],
        }),
        "fastmail" => Some(ProxyFact {
            name: "Fastmail image proxy",
            summary: "Fastmail proxies every remote image: opens only",
            hides_timing: true,
            sources: &["fastmail.help, \"Blocking remote images\" (analytics.md §3.3)"],
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> ClientSignals {
        ClientSignals {
            id: id.into(),
            engine: "blink".into(),
            open: OpenSignal::BlockedByDefault,
            read: true,
            print: false,
            forward: true,
            dark: DarkSignal::WhenOptedIn,
            measured_at: "2026-11-26 07:00:00".into(),
        }
    }

    #[test]
    fn the_file_round_trips_and_names_each_signal() {
        let m = Matrix {
            method: "m".into(),
            clients: vec![row("a"), row("b")],
        };
        let text = m.to_toml().expect("toml");
        assert!(text.contains("open = \"blocked-by-default\""), "{text}");
        assert!(text.contains("dark = \"when-opted-in\""), "{text}");
        assert_eq!(Matrix::parse(&text), Ok(m));
        assert!(Matrix::parse("method = \"m\"\n[[client]]\nid = \"a\"\n").is_err());
    }

    #[test]
    fn every_catalog_id_has_exactly_one_row() {
        let m = Matrix {
            method: "m".into(),
            clients: vec![row("a"), row("b")],
        };
        assert_eq!(m.check_ids(["a", "b"]), Ok(()));
        assert_eq!(
            m.check_ids(["a", "b", "c"]),
            Err(MatrixError::Missing(vec!["c".into()]))
        );
        assert_eq!(
            m.check_ids(["a"]),
            Err(MatrixError::Unknown(vec!["b".into()]))
        );
        let twice = Matrix {
            method: "m".into(),
            clients: vec![row("a"), row("a")],
        };
        assert_eq!(twice.check_ids(["a"]), Err(MatrixError::Twice("a".into())));
    }

    #[test]
    fn a_remeasurement_compares_signals_not_times() {
        let a = row("a");
        let mut b = row("a");
        b.measured_at = "later".into();
        assert!(a.same_signals(&b));
        b.print = true;
        assert!(!a.same_signals(&b));
    }

    #[test]
    fn proxies_that_hide_timing_are_named_with_sources() {
        for family in ["gmail", "yahoo", "aol", "fastmail"] {
            let fact = proxy_fact(family).expect(family);
            assert!(fact.hides_timing && !fact.sources.is_empty(), "{family}");
        }
        let apple = proxy_fact("apple-mail").expect("apple-mail");
        assert!(!apple.hides_timing && apple.summary.contains("machine"));
        assert_eq!(proxy_fact("thunderbird"), None);
    }
}
