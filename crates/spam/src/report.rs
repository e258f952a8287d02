//! What one engine said about one message, before any profile turns it into a verdict.

use std::fmt::Write;

/// One rule (symbol, test) that fired, with the points it added.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub score: f64,
}

/// An engine's raw judgement: total score, the engine's own threshold if it has one, the rules.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineReport {
    pub score: f64,
    /// The engine's own spam threshold (spamd's `required`, rspamd's reject/add-header score).
    pub engine_threshold: Option<f64>,
    pub rules: Vec<Rule>,
    /// Facts worth showing the user that are not rules, e.g. "message truncated to 30 MB".
    pub notes: Vec<String>,
}

/// Longest `details` string: the spec gives no limit, but a result row should stay small.
const MAX_DETAILS_CHARS: usize = 1500;

impl EngineReport {
    /// A compact one-line summary: `score 7.20 / spam at 5.0; rules: RULE_A 2.80, RULE_B 1.00;
    /// also: INFO_RULE`. Scored rules come heaviest first so a truncated string keeps the ones
    /// that matter; rules worth 0 points (informational, temperror) are listed by name only.
    pub fn details(&self, spam_at: f64) -> String {
        // `+ 0.0` turns an engine's "-0.0" into a plain 0.
        let mut out = format!("score {:.2} / spam at {:.1}", self.score + 0.0, spam_at);
        if let Some(t) = self.engine_threshold {
            let _ = write!(out, " (engine threshold {t:.1})");
        }
        let (mut scored, unscored): (Vec<&Rule>, Vec<&Rule>) =
            self.rules.iter().partition(|r| r.score != 0.0);
        scored.sort_by(|a, b| {
            b.score
                .abs()
                .total_cmp(&a.score.abs())
                .then_with(|| a.name.cmp(&b.name))
        });
        if !scored.is_empty() {
            let listed: Vec<String> = scored
                .iter()
                .map(|r| format!("{} {:.2}", r.name, r.score))
                .collect();
            let _ = write!(out, "; rules: {}", listed.join(", "));
        }
        if !unscored.is_empty() {
            let mut names: Vec<&str> = unscored.iter().map(|r| r.name.as_str()).collect();
            names.sort_unstable();
            let _ = write!(out, "; also: {}", names.join(", "));
        }
        for note in &self.notes {
            let _ = write!(out, "; {note}");
        }
        if out.chars().count() > MAX_DETAILS_CHARS {
            out = out.chars().take(MAX_DETAILS_CHARS - 3).collect();
            out.push_str("...");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_list_heaviest_rules_first_with_score_and_threshold() {
        let report = EngineReport {
            score: 4.25,
            engine_threshold: Some(5.0),
            rules: vec![
                Rule {
                    name: "SMALL".into(),
                    score: 0.25,
                },
                Rule {
                    name: "INFO".into(),
                    score: -0.0,
                },
                Rule {
                    name: "BIG".into(),
                    score: 4.0,
                },
            ],
            notes: vec!["message truncated".into()],
        };
        assert_eq!(
            report.details(6.0),
            "score 4.25 / spam at 6.0 (engine threshold 5.0); rules: BIG 4.00, SMALL 0.25; also: INFO; message truncated"
        );
    }

    #[test]
    fn details_are_capped_in_length() {
        let report = EngineReport {
            rules: (0..500)
                .map(|i| Rule {
                    name: format!("RULE_{i}"),
                    score: 1.0,
                })
                .collect(),
            ..EngineReport::default()
        };
        let details = report.details(5.0);
        assert_eq!(details.chars().count(), MAX_DETAILS_CHARS);
        assert!(details.ends_with("..."));
    }
}
