//! mailproof's own analyzer: SPF/DKIM/DMARC with mail-auth, header and MIME sanity and content
//! heuristics with mail-parser. Every check that fires adds a named rule with a score.

mod auth;
mod content;
mod headers;
mod html;

use std::time::Duration;

use mail_parser::MessageParser;

use crate::filters::Envelope;
use crate::report::{EngineReport, Rule};
use crate::SpamError;

pub use auth::DnsMode;

/// The built-in engine. Cheap to clone: the DNS resolver inside is shared.
#[derive(Clone)]
pub struct BuiltinAnalyzer {
    auth: auth::AuthChecker,
}

/// Rules and scores are additive; a fixed sum stands in for the engine's own threshold in details.
pub(crate) fn rule(name: &str, score: f64) -> Rule {
    Rule {
        name: name.to_string(),
        score,
    }
}

impl BuiltinAnalyzer {
    /// Builds the analyzer; DNS problems never fail this, they show as `temperror` rules later.
    pub fn new(dns: DnsMode) -> BuiltinAnalyzer {
        BuiltinAnalyzer {
            auth: auth::AuthChecker::new(dns),
        }
    }

    /// Runs every check on `message` as received from `env`.
    pub async fn analyze(&self, message: &[u8], env: &Envelope) -> Result<EngineReport, SpamError> {
        let parsed = MessageParser::default().parse(message).ok_or_else(|| {
            SpamError::UnparsableMessage("mail-parser found no header or body".into())
        })?;
        let mut rules = self.auth.check(message, env).await;
        rules.extend(headers::check(message, &parsed));
        rules.extend(content::check(&parsed));
        let score = rules.iter().map(|r| r.score).sum::<f64>();
        Ok(EngineReport {
            score: (score * 100.0).round() / 100.0,
            engine_threshold: None,
            rules,
            notes: Vec::new(),
        })
    }
}

/// Test helper: the names of the rules a check fires on a raw message.
#[cfg(test)]
pub(crate) fn fired_rules(
    raw: &str,
    check: impl Fn(&[u8], &mail_parser::Message<'_>) -> Vec<Rule>,
) -> Vec<String> {
    let message = MessageParser::default()
        .parse(raw.as_bytes())
        .expect("parsable test message");
    check(raw.as_bytes(), &message)
        .into_iter()
        .map(|r| r.name)
        .collect()
}

impl Default for DnsMode {
    fn default() -> DnsMode {
        DnsMode::System {
            timeout: Duration::from_millis(500),
        }
    }
}
