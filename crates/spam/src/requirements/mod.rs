//! Will it arrive: the large mailbox providers' published sender requirements (Gmail, Yahoo/AOL,
//! Microsoft's consumer domains), checked on the mail a spam test received. The rules, which
//! provider asks for which and where it says so live in `data/sender-requirements.toml`
//! ([`SenderRequirements::load`]); this module decides each rule once per message
//! ([`observe`](facts::observe)) and turns the findings into one card per provider ([`Report`]).
//!
//! A rule is `pass` only when it was verified: without DNS, or when a lookup does not answer,
//! it is `not_checked` with the reason, never a pass. Rules about the sending infrastructure
//! (SPF, reverse DNS, TLS, the DKIM key) are `not_applicable` to the `svc` method, where mailproof
//! itself sent the copy the filters saw.

mod facts;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;

pub use domain::requirements::{Need, ProviderReport, ProviderVerdict, Report, RuleReport, Status};
pub use facts::{Arrival, HopTls};

use crate::builtin::BuiltinAnalyzer;
use crate::SpamError;
use ::content::netpolicy::NetPolicy;
use ::content::uribl::{UriblLookup, Zone};

/// The code that decides a rule; the data file names it in `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, strum::EnumIter)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    SpfPass,
    DkimPass,
    DkimKeySize,
    DmarcRecord,
    DmarcAligned,
    FromOwnDomain,
    ReverseDns,
    Tls,
    Rfc5322,
    OneClickUnsubscribe,
    /// RFC 8058's POST, really sent (through the network policy).
    OneClickWorks,
    /// The sending address on no address blocklist (`[[blocklist]]`).
    NotBlocklisted,
    VisibleUnsubscribe,
    MessageSize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub id: String,
    pub name: String,
    /// The provider's own mail domains: a From address there is not the sender's to use.
    pub domains: Vec<String>,
    pub enforcement: String,
    pub source: String,
    pub max_message_bytes: u64,
    pub max_message_source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    pub check: Check,
    pub title: String,
    pub fix: String,
    /// Provider id → how firmly it asks.
    pub applies: BTreeMap<String, Need>,
    /// Provider id → where it says so.
    pub sources: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    provider: Vec<Provider>,
    rule: Vec<RuleSpec>,
    #[serde(default)]
    blocklist: Vec<Zone>,
}

/// The providers and rules of `data/sender-requirements.toml`, validated.
#[derive(Debug, Clone)]
pub struct SenderRequirements {
    providers: Vec<Provider>,
    rules: Vec<RuleSpec>,
    blocklists: Vec<Zone>,
}

/// How the check reaches outside: DNS through the built-in analyzer's resolver (the service's
/// one `[dns]` setting) and its own DKIM keys, the one-click POST through `policy` (`[fetch]`),
/// address blocklists through `blocklists` (asked through the same `[dns]`).
pub struct Net<'a> {
    pub analyzer: &'a BuiltinAnalyzer,
    pub policy: &'a NetPolicy,
    pub blocklists: &'a UriblLookup,
}

impl SenderRequirements {
    pub fn load(path: &Path) -> Result<SenderRequirements, SpamError> {
        let bad = |why: String| {
            SpamError::Requirements(format!("{}: {why}; fix the file", path.display()))
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        SenderRequirements::parse(&text).map_err(bad)
    }

    /// Parses and validates the file's text: unique ids, every rule asked for by a known provider
    /// with a source for each, https sources, a size limit per provider.
    pub fn parse(text: &str) -> Result<SenderRequirements, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut ids = HashSet::new();
        for p in &file.provider {
            if !ids.insert(p.id.as_str()) {
                return Err(format!("provider {:?} is listed twice", p.id));
            }
            if p.max_message_bytes == 0 || p.domains.is_empty() {
                return Err(format!(
                    "provider {:?} needs its mail domains and a size limit",
                    p.id
                ));
            }
            https(&p.source, &p.id)?;
            https(&p.max_message_source, &p.id)?;
        }
        let mut rule_ids = HashSet::new();
        for r in &file.rule {
            if !rule_ids.insert(r.id.as_str()) {
                return Err(format!("rule {:?} is listed twice", r.id));
            }
            if r.applies.is_empty() {
                return Err(format!("rule {:?} is asked for by no provider", r.id));
            }
            for provider in r.applies.keys() {
                if !ids.contains(provider.as_str()) {
                    return Err(format!(
                        "rule {:?} names provider {provider:?}, which is not listed",
                        r.id
                    ));
                }
                let source = r
                    .sources
                    .get(provider)
                    .ok_or_else(|| format!("rule {:?} gives no source for {provider:?}", r.id))?;
                https(source, &r.id)?;
            }
            if let Some(extra) = r.sources.keys().find(|p| !r.applies.contains_key(*p)) {
                return Err(format!(
                    "rule {:?} has a source for {extra:?}, which does not ask for it",
                    r.id
                ));
            }
        }
        let mut names = HashSet::new();
        for zone in &file.blocklist {
            if let Some(problem) = zone.problems().into_iter().next() {
                return Err(format!("[[blocklist]] {problem}"));
            }
            if !names.insert(zone.name.to_ascii_uppercase()) {
                return Err(format!("blocklist {:?} is listed twice", zone.name));
            }
        }
        Ok(SenderRequirements {
            providers: file.provider,
            rules: file.rule,
            blocklists: file.blocklist,
        })
    }

    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    pub fn rules(&self) -> &[RuleSpec] {
        &self.rules
    }

    /// Every provider's mail domains, lowercase.
    fn provider_domains(&self) -> Vec<(String, &str)> {
        self.providers
            .iter()
            .flat_map(|p| {
                p.domains
                    .iter()
                    .map(move |d| (d.to_ascii_lowercase(), p.name.as_str()))
            })
            .collect()
    }

    /// The address blocklists of the `[[blocklist]]` tables, in file order.
    pub fn blocklists(&self) -> &[Zone] {
        &self.blocklists
    }

    /// Checks `message` as it arrived and gives one card per provider, reaching out only as
    /// `net` says.
    pub async fn check(&self, net: &Net<'_>, message: &[u8], arrival: &Arrival) -> Report {
        let findings = facts::observe(net, message, arrival, &self.provider_domains()).await;
        self.report(&findings, message.len() as u64, arrival)
    }

    fn report(&self, findings: &HashMap<Check, Finding>, size: u64, arrival: &Arrival) -> Report {
        let providers = self
            .providers
            .iter()
            .map(|p| {
                let rules: Vec<RuleReport> = self
                    .rules
                    .iter()
                    .filter_map(|r| {
                        let need = *r.applies.get(&p.id)?;
                        let finding = if r.check == Check::MessageSize {
                            size_finding(size, p)
                        } else {
                            findings.get(&r.check).cloned().unwrap_or_else(|| Finding {
                                status: Status::NotChecked,
                                seen: "not decided for this message".into(),
                            })
                        };
                        Some(RuleReport {
                            rule: r.id.clone(),
                            title: r.title.clone(),
                            need,
                            status: finding.status,
                            seen: finding.seen,
                            fix: (finding.status == Status::Fail).then(|| r.fix.clone()),
                            source: r.sources.get(&p.id).cloned().unwrap_or_default(),
                        })
                    })
                    .collect();
                provider_report(p, rules)
            })
            .collect();
        Report {
            method: arrival.method,
            providers,
        }
    }
}

fn https(url: &str, what: &str) -> Result<(), String> {
    if url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "{what:?} has a source that is not an https URL: {url:?}"
        ))
    }
}

fn size_finding(size: u64, p: &Provider) -> Finding {
    let human = |b: u64| match b {
        0..1_048_576 => format!("{:.0} KB", (b as f64 / 1024.0).ceil()),
        _ => format!("{:.1} MB", b as f64 / 1_048_576.0),
    };
    let seen = format!("{} of at most {}", human(size), human(p.max_message_bytes));
    Finding {
        status: if size <= p.max_message_bytes {
            Status::Pass
        } else {
            Status::Fail
        },
        seen,
    }
}

/// What was seen for one rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub status: Status,
    pub seen: String,
}

/// A provider's card from its rules' outcomes: the verdict and its one-line summary.
fn provider_report(p: &Provider, rules: Vec<RuleReport>) -> ProviderReport {
    let required = |s: Status| {
        rules
            .iter()
            .filter(move |r| r.need == Need::Required && r.status == s)
    };
    let failed: Vec<&RuleReport> = required(Status::Fail).collect();
    let unchecked: Vec<&RuleReport> = required(Status::NotChecked).collect();
    let advice = rules
        .iter()
        .filter(|r| r.need == Need::Recommended && r.status == Status::Fail)
        .count();
    let (verdict, summary) = if let Some(first) = failed.first() {
        let more = match failed.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        (
            ProviderVerdict::WouldReject,
            format!("{}: would reject — {}{more}", p.name, first.seen),
        )
    } else if let Some(first) = unchecked.first() {
        (
            ProviderVerdict::NotChecked,
            format!(
                "{}: not fully checked — {} rule(s) could not be verified ({})",
                p.name,
                unchecked.len(),
                first.seen
            ),
        )
    } else {
        let tail = match advice {
            0 => String::new(),
            n => format!("; {n} recommendation(s) not met"),
        };
        (
            ProviderVerdict::Meets,
            format!("{}: meets the sender requirements{tail}", p.name),
        )
    };
    ProviderReport {
        provider: p.id.clone(),
        name: p.name.clone(),
        verdict,
        summary,
        enforcement: p.enforcement.clone(),
        source: p.source.clone(),
        rules,
    }
}

#[cfg(test)]
mod tests;
