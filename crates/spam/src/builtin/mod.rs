//! mailproof's own analyzer: SPF/DKIM/DMARC with mail-auth, header and MIME sanity and content
//! heuristics with mail-parser. Every check that fires adds a named rule with a score.

pub(crate) mod auth;
mod content;
mod headers;
mod html;

use mail_parser::MessageParser;

use ::content::uribl::UriblLookup;

use crate::filters::Envelope;
use crate::report::{EngineReport, Rule};
use crate::SpamError;

pub use ::content::dns::DnsMode;

/// The built-in engine. Cheap to clone: the DNS resolver inside is shared.
#[derive(Clone)]
pub struct BuiltinAnalyzer {
    auth: auth::AuthChecker,
    uribl: UriblLookup,
}

/// Rules and scores are additive; a fixed sum stands in for the engine's own threshold in details.
pub(crate) fn rule(name: &str, score: f64) -> Rule {
    Rule {
        name: name.to_string(),
        score,
    }
}

impl BuiltinAnalyzer {
    /// Builds the analyzer; DNS problems never fail this, they show as `temperror` rules later
    /// (and URI blocklists that do not answer are left out, as the link check reports).
    pub fn new(dns: DnsMode, uribl: UriblLookup) -> BuiltinAnalyzer {
        BuiltinAnalyzer {
            auth: auth::AuthChecker::new(dns),
            uribl,
        }
    }

    /// Verifies DKIM signatures by `record`'s key from the key itself, with or without DNS: the
    /// service's own sends are judged by their content, not by whether DNS publishes our key.
    pub fn answer_own_dkim(&self, record: &domain::DkimTxtRecord) -> Result<(), SpamError> {
        self.auth
            .answer_for(record)
            .map_err(SpamError::OwnDkimRecord)
    }

    pub(crate) fn auth(&self) -> &auth::AuthChecker {
        &self.auth
    }

    /// Runs every check on `message` as received from `env`.
    pub async fn analyze(&self, message: &[u8], env: &Envelope) -> Result<EngineReport, SpamError> {
        let parsed = MessageParser::default().parse(message).ok_or_else(|| {
            SpamError::UnparsableMessage("mail-parser found no header or body".into())
        })?;
        let mut rules = self.auth.check(message, env).await;
        rules.extend(headers::check(message, &parsed));
        let (content_rules, link_hosts) = content::check(&parsed);
        rules.extend(content_rules);
        rules.extend(self.uribl_rules(&link_hosts).await);
        let score = rules.iter().map(|r| r.score).sum::<f64>();
        Ok(EngineReport {
            score: (score * 100.0).round() / 100.0,
            engine_threshold: None,
            rules,
            notes: Vec::new(),
        })
    }
}

impl BuiltinAnalyzer {
    /// One rule per blocklist that lists a link domain: `MP_URIBL_<NAME>` with the zone's score.
    async fn uribl_rules(&self, hosts: &[String]) -> Vec<Rule> {
        if hosts.is_empty() || self.uribl.zones().is_empty() {
            return Vec::new();
        }
        let report = self.uribl.check(hosts.to_vec()).await;
        if report.consulted.is_empty() {
            tracing::debug!(status = %report.status, "URI blocklists not consulted");
        }
        self.uribl
            .zones()
            .iter()
            .filter(|z| report.hits.iter().any(|h| h.zone == z.zone))
            .map(|z| {
                rule(
                    &format!("MP_URIBL_{}", z.name.to_ascii_uppercase()),
                    z.score,
                )
            })
            .collect()
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

#[cfg(test)]
mod uribl_tests {
    use std::net::Ipv4Addr;

    use ::content::uribl::test_dns::BlocklistDns;

    use super::*;
    use crate::FilterProfiles;

    fn envelope() -> Envelope {
        Envelope {
            client_ip: "192.0.2.10".parse().expect("ip"),
            helo: "mail.example.com".into(),
            hostname: String::new(),
            mail_from: "sender@example.com".into(),
            rcpt_to: vec!["seed@mailproof.test".into()],
        }
    }

    const MAIL: &str = "From: Sender <sender@example.com>\r\nTo: seed@mailproof.test\r\n\
        Subject: Our offer\r\nMessage-ID: <1@example.com>\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\n\
        MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
        <p>Read <a href=\"https://www.listed-domain.example/offer\">the offer</a>.</p>\r\n";

    #[tokio::test]
    async fn a_link_domain_on_a_uri_blocklist_fires_that_list_s_rule() {
        let profiles = FilterProfiles::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/spam-filters.toml"
        )))
        .expect("the shipped profiles load");
        let zones = profiles.uribl_zones().to_vec();
        let dbl = zones
            .iter()
            .find(|z| z.name == "DBL")
            .expect("DBL is shipped");
        let test_point = format!("{}.{}", dbl.test_domain, dbl.zone);
        let listed = format!("listed-domain.example.{}", dbl.zone);
        let dns = BlocklistDns::start([
            (test_point.as_str(), Ipv4Addr::new(127, 0, 1, 2)),
            (listed.as_str(), Ipv4Addr::new(127, 0, 1, 2)),
        ])
        .await;
        let analyzer =
            BuiltinAnalyzer::new(DnsMode::Disabled, UriblLookup::new(zones, &dns.mode()));
        let report = analyzer
            .analyze(MAIL.as_bytes(), &envelope())
            .await
            .expect("analyzed");
        let names: Vec<&str> = report.rules.iter().map(|r| r.name.as_str()).collect();
        assert!(names.contains(&"MP_URIBL_DBL"), "{names:?}");
        // The other shipped zones do not answer their test points here: not consulted, no rule.
        assert!(!names
            .iter()
            .any(|n| *n == "MP_URIBL_URIBL" || *n == "MP_URIBL_SURBL"));

        let offline = BuiltinAnalyzer::new(
            DnsMode::Disabled,
            UriblLookup::new(profiles.uribl_zones().to_vec(), &DnsMode::Disabled),
        );
        let report = offline
            .analyze(MAIL.as_bytes(), &envelope())
            .await
            .expect("analyzed");
        assert!(!report.rules.iter().any(|r| r.name.starts_with("MP_URIBL_")));
    }
}
