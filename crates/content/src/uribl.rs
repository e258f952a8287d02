//! URI blocklists: which of an email's link domains a DNS blocklist of domains (Spamhaus DBL,
//! URIBL, SURBL) lists. The built-in spam filter scores the answers and the link check reports
//! them, so both consult the same zones, read from `data/spam-filters.toml`.
//!
//! A zone is consulted only while it answers its own test point: a zone that does not (offline,
//! or refusing the resolver, as the lists do for public resolvers) is reported as not consulted,
//! never read as "nothing listed".

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::{Resolver, TokioResolver};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::dns::DnsMode;

/// At most this many distinct domains of one email are looked up; the rest are counted.
pub const MAX_DOMAINS: usize = 50;
/// Lookups in flight at once for one email.
const CONCURRENCY: usize = 8;
/// How long a zone's answer to its test point is trusted.
const HEALTH_TTL: Duration = Duration::from_secs(300);

/// One blocklist, as the data file describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    /// Short name, used in rule names (`MP_URIBL_<NAME>`) and reports.
    pub name: String,
    /// The DNS zone queried as `<domain>.<zone>`.
    pub zone: String,
    /// A domain the list always lists: the zone is consulted only while it lists this one.
    pub test_domain: String,
    /// Answers that mean "listed".
    pub listed: Vec<Ipv4Net>,
    /// Answers that mean "query refused" (e.g. from public resolvers), not "listed".
    #[serde(default)]
    pub refused: Vec<Ipv4Net>,
    /// Score the built-in filter adds when a link domain is listed.
    pub score: f64,
}

impl Zone {
    /// Problems with this zone's description, for start-up validation.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let label = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
        };
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric()) {
            problems.push(format!(
                "uribl zone {:?}: `name` must be ASCII letters and digits",
                self.name
            ));
        }
        if !label(&self.zone) {
            problems.push(format!(
                "uribl zone {:?}: `zone` {:?} is not a DNS name",
                self.name, self.zone
            ));
        }
        if !label(&self.test_domain) {
            problems.push(format!(
                "uribl zone {:?}: `test_domain` {:?} is not a DNS name",
                self.name, self.test_domain
            ));
        }
        if self.listed.is_empty() {
            problems.push(format!(
                "uribl zone {:?}: `listed` names no answer",
                self.name
            ));
        }
        if !self.score.is_finite() {
            problems.push(format!(
                "uribl zone {:?}: `score` must be a finite number",
                self.name
            ));
        }
        problems
    }

    fn classify(&self, answers: &[Ipv4Addr]) -> Answer {
        if answers
            .iter()
            .any(|a| self.refused.iter().any(|n| n.contains(a)))
        {
            Answer::Refused
        } else if let Some(a) = answers
            .iter()
            .find(|a| self.listed.iter().any(|n| n.contains(*a)))
        {
            Answer::Listed(*a)
        } else {
            Answer::NotListed
        }
    }
}

/// A link domain a zone lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UriblHit {
    pub domain: String,
    /// The zone's short name.
    pub list: String,
    pub zone: String,
    /// The address the zone answered (its code says which sub-list).
    pub answer: String,
}

/// What the lookups of one email found, and how far they could be trusted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UriblReport {
    pub hits: Vec<UriblHit>,
    /// Zones that answered their test point and were asked about every domain.
    pub consulted: Vec<String>,
    /// Zones not consulted, each with why.
    pub unreachable: Vec<String>,
    /// Distinct registrable domains looked up.
    pub domains: usize,
    /// Domains beyond [`MAX_DOMAINS`], not looked up.
    pub skipped: usize,
    /// Lookups that failed for a domain in a consulted zone (timeouts, server errors).
    pub failed: usize,
    /// One sentence a person can read.
    pub status: String,
}

/// When a zone was last tried on its test point, and whether it answered (or why not).
type ZoneHealth = (Instant, Result<(), String>);

enum Answer {
    Listed(Ipv4Addr),
    NotListed,
    Refused,
}

/// The zones with a resolver. Cheap to clone: the resolver and its cache are shared.
#[derive(Clone)]
pub struct UriblLookup {
    inner: Arc<Inner>,
}

struct Inner {
    zones: Vec<Zone>,
    resolver: Result<TokioResolver, String>,
    /// Per zone: when it was last tried on its test point, and the outcome.
    health: Mutex<HashMap<String, ZoneHealth>>,
}

impl UriblLookup {
    pub fn new(zones: Vec<Zone>, dns: &DnsMode) -> UriblLookup {
        let resolver = dns.resolver_parts().map(|(config, opts)| {
            Resolver::builder_with_config(config, TokioRuntimeProvider::default())
                .with_options(opts)
                .build()
        });
        let resolver =
            resolver.and_then(|r| r.map_err(|e| format!("cannot build the resolver: {e}")));
        UriblLookup {
            inner: Arc::new(Inner {
                zones,
                resolver,
                health: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn zones(&self) -> &[Zone] {
        &self.inner.zones
    }

    /// Looks up the registrable domains of `hosts` (URL hosts; IP literals are passed over) in
    /// every zone that answers.
    pub async fn check(&self, hosts: Vec<String>) -> UriblReport {
        let all: BTreeSet<String> = hosts.iter().filter_map(|h| registrable_domain(h)).collect();
        let skipped = all.len().saturating_sub(MAX_DOMAINS);
        let domains: Vec<String> = all.into_iter().take(MAX_DOMAINS).collect();
        let mut report = UriblReport {
            domains: domains.len(),
            skipped,
            ..UriblReport::default()
        };
        if self.inner.zones.is_empty() {
            report.status = "not checked: no URI blocklist is configured (data/spam-filters.toml has no [[uribl]] zone)".into();
            return report;
        }
        report.status = match self.look_up(domains, &mut report).await {
            Err(why) => format!("not checked: {why}"),
            Ok(()) => status_line(&report),
        };
        report
    }

    /// Looks up `ip` in every zone that answers, as an address blocklist (RFC 5782) is asked:
    /// `4.3.2.1.<zone>` for 1.2.3.4, nibbles for IPv6. The hits name the address.
    pub async fn check_address(&self, ip: IpAddr) -> UriblReport {
        let mut report = UriblReport {
            domains: 1,
            ..UriblReport::default()
        };
        if self.inner.zones.is_empty() {
            report.status = "not checked: no address blocklist is configured".into();
            return report;
        }
        let looked_up = self.look_up(vec![reversed(ip)], &mut report).await;
        for hit in &mut report.hits {
            hit.domain = ip.to_string();
        }
        report.status = if let Err(why) = looked_up {
            format!("not checked: {why}")
        } else if report.consulted.is_empty() {
            format!(
                "not checked: no address blocklist answered ({})",
                report.unreachable.join("; ")
            )
        } else {
            let mut line = format!(
                "{ip} looked up in {}: {}",
                report.consulted.join(", "),
                if report.hits.is_empty() {
                    "not listed"
                } else {
                    "listed"
                }
            );
            if report.failed > 0 {
                line.push_str(&format!("; {} lookup(s) failed", report.failed));
            }
            if !report.unreachable.is_empty() {
                line.push_str(&format!(
                    "; not consulted: {}",
                    report.unreachable.join("; ")
                ));
            }
            line
        };
        report
    }

    /// Asks every zone that answers its test point about each of `names`, into `report`; why
    /// nothing could be asked when there is no resolver.
    async fn look_up(&self, names: Vec<String>, report: &mut UriblReport) -> Result<(), String> {
        let resolver = match &self.inner.resolver {
            Ok(r) => r,
            Err(why) => {
                report.unreachable = self
                    .inner
                    .zones
                    .iter()
                    .map(|z| format!("{}: {why}", z.zone))
                    .collect();
                return Err(why.clone());
            }
        };
        // All zones at once: offline, each costs a full timeout.
        let health = futures::future::join_all(
            self.inner
                .zones
                .iter()
                .map(|zone| self.zone_health(resolver, zone)),
        )
        .await;
        let mut live: Vec<Zone> = Vec::new();
        for (zone, health) in self.inner.zones.iter().zip(health) {
            match health {
                Ok(()) => live.push(zone.clone()),
                Err(why) => report.unreachable.push(format!("{}: {why}", zone.zone)),
            }
        }
        report.consulted = live.iter().map(|z| z.zone.clone()).collect();
        // Owned values in each lookup: the futures stay `Send` for any caller.
        let queries: Vec<(Zone, String)> = live
            .iter()
            .flat_map(|z| names.iter().map(move |d| (z.clone(), d.clone())))
            .collect();
        let answers: Vec<(Zone, String, Result<Answer, String>)> = stream::iter(queries)
            .map(|(zone, domain)| {
                let resolver = resolver.clone();
                async move {
                    let answer = query(&resolver, &zone, &domain).await;
                    (zone, domain, answer)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for (zone, domain, answer) in answers {
            match answer {
                Ok(Answer::Listed(a)) => report.hits.push(UriblHit {
                    domain,
                    list: zone.name.clone(),
                    zone: zone.zone.clone(),
                    answer: a.to_string(),
                }),
                Ok(Answer::NotListed) => {}
                Ok(Answer::Refused) | Err(_) => report.failed += 1,
            }
        }
        report
            .hits
            .sort_by(|a, b| (&a.domain, &a.zone).cmp(&(&b.domain, &b.zone)));
        Ok(())
    }

    async fn zone_health(&self, resolver: &TokioResolver, zone: &Zone) -> Result<(), String> {
        let cached = self
            .inner
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&zone.zone)
            .filter(|(at, _)| at.elapsed() < HEALTH_TTL)
            .map(|(_, outcome)| outcome.clone());
        if let Some(outcome) = cached {
            return outcome;
        }
        let outcome = match query(resolver, zone, &zone.test_domain).await {
            Ok(Answer::Listed(_)) => Ok(()),
            Ok(Answer::NotListed) => Err(format!(
                "its test point {} is not listed (the zone does not answer as documented)",
                zone.test_domain
            )),
            Ok(Answer::Refused) => Err(
                "the list refused the query (lists refuse public resolvers: set [dns] nameserver to your own resolver)"
                    .into(),
            ),
            Err(e) => Err(format!("no answer ({e}); offline?")),
        };
        self.inner
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(zone.zone.clone(), (Instant::now(), outcome.clone()));
        outcome
    }
}

async fn query(resolver: &TokioResolver, zone: &Zone, domain: &str) -> Result<Answer, String> {
    // The trailing dot keeps the resolver from trying search domains first.
    let name = format!("{domain}.{}.", zone.zone);
    match resolver.lookup(name.as_str(), RecordType::A).await {
        Ok(lookup) => {
            let answers: Vec<Ipv4Addr> = lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => Some(a.0),
                    _ => None,
                })
                .collect();
            Ok(zone.classify(&answers))
        }
        Err(e) if e.is_nx_domain() || e.is_no_records_found() => Ok(Answer::NotListed),
        Err(e) => Err(e.to_string()),
    }
}

fn status_line(r: &UriblReport) -> String {
    if r.consulted.is_empty() {
        return format!(
            "not checked: no URI blocklist answered ({})",
            r.unreachable.join("; ")
        );
    }
    let mut line = format!(
        "{} link domain(s) looked up in {}: {} listed",
        r.domains,
        r.consulted.join(", "),
        r.hits.len()
    );
    if r.failed > 0 {
        line.push_str(&format!("; {} lookup(s) failed", r.failed));
    }
    if r.skipped > 0 {
        line.push_str(&format!(
            "; {} domain(s) beyond the first {MAX_DOMAINS} not looked up",
            r.skipped
        ));
    }
    if !r.unreachable.is_empty() {
        line.push_str(&format!("; not consulted: {}", r.unreachable.join("; ")));
    }
    line
}

/// The name an address blocklist lists `ip` under (RFC 5782 2.1 and 2.4), without the zone.
pub fn reversed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}")
        }
        IpAddr::V6(v6) => v6
            .octets()
            .iter()
            .rev()
            .flat_map(|b| [b & 0x0f, b >> 4])
            .map(|n| format!("{n:x}"))
            .collect::<Vec<_>>()
            .join("."),
    }
}

/// The domain a URI blocklist lists for `host`: its registrable domain (`www.mail.example.co.uk`
/// is listed as `example.co.uk`). None for IP literals and names without a public suffix.
pub fn registrable_domain(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() || host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok() {
        return None;
    }
    let domain = psl::domain_str(&host)?;
    Some(domain.to_string())
}

#[cfg(any(test, feature = "test-dns"))]
pub mod test_dns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrable_domains_are_what_the_lists_key_on() {
        assert_eq!(
            registrable_domain("www.mail.example.co.uk").as_deref(),
            Some("example.co.uk")
        );
        assert_eq!(
            registrable_domain("Click.Example.COM.").as_deref(),
            Some("example.com")
        );
        assert_eq!(registrable_domain("192.0.2.1"), None);
        assert_eq!(registrable_domain("[2001:db8::1]"), None);
        assert_eq!(registrable_domain(""), None);
    }

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn zone() -> Zone {
        Zone {
            name: "DBL".into(),
            zone: "dbl.example".into(),
            test_domain: "dbltest.com".into(),
            listed: vec!["127.0.1.0/24".parse().expect("net")],
            refused: vec!["127.255.255.0/24".parse().expect("net")],
            score: 2.5,
        }
    }

    #[test]
    fn answers_are_read_by_the_zone_s_codes() {
        let z = zone();
        assert!(matches!(
            z.classify(&[Ipv4Addr::new(127, 0, 1, 2)]),
            Answer::Listed(_)
        ));
        assert!(matches!(
            z.classify(&[Ipv4Addr::new(127, 255, 255, 254)]),
            Answer::Refused
        ));
        assert!(matches!(
            z.classify(&[Ipv4Addr::new(127, 0, 0, 2)]),
            Answer::NotListed
        ));
        assert!(z.problems().is_empty());
        let bad = Zone {
            zone: "not a zone".into(),
            listed: vec![],
            ..zone()
        };
        assert_eq!(bad.problems().len(), 2);
    }

    #[tokio::test]
    async fn listed_domains_are_found_in_zones_that_answer_their_test_point() {
        let dns = test_dns::BlocklistDns::start([
            ("dbltest.com.dbl.example", Ipv4Addr::new(127, 0, 1, 2)),
            ("spammy.example.dbl.example", Ipv4Addr::new(127, 0, 1, 2)),
        ])
        .await;
        let dead = Zone {
            name: "DEAD".into(),
            zone: "dead.example".into(),
            ..zone()
        };
        let lookup = UriblLookup::new(vec![zone(), dead], &dns.mode());
        let report = lookup
            .check(hosts(&["www.spammy.example", "clean.example", "127.0.0.1"]))
            .await;
        assert_eq!(
            report.hits,
            vec![UriblHit {
                domain: "spammy.example".into(),
                list: "DBL".into(),
                zone: "dbl.example".into(),
                answer: "127.0.1.2".into(),
            }]
        );
        assert_eq!(report.consulted, vec!["dbl.example".to_string()]);
        assert_eq!(report.unreachable.len(), 1, "{:?}", report.unreachable);
        assert!(report.unreachable[0].starts_with("dead.example: its test point"));
        assert_eq!(report.domains, 2);
        assert!(
            report
                .status
                .starts_with("2 link domain(s) looked up in dbl.example: 1 listed"),
            "{}",
            report.status
        );
    }

    #[test]
    fn addresses_are_asked_reversed() {
        assert_eq!(reversed("192.0.2.10".parse().expect("ip")), "10.2.0.192");
        // RFC 5782 2.4's example: 2001:db8:1:2:3:4:567:89ab.
        assert_eq!(
            reversed("2001:db8:1:2:3:4:567:89ab".parse().expect("ip")),
            "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2"
        );
    }

    #[tokio::test]
    async fn a_listed_address_is_found_in_address_zones_that_answer_their_test_point() {
        let dns = test_dns::BlocklistDns::start([
            ("2.0.0.127.zen.example", Ipv4Addr::new(127, 0, 0, 2)),
            ("10.2.0.192.zen.example", Ipv4Addr::new(127, 0, 0, 4)),
        ])
        .await;
        let zen = Zone {
            name: "ZEN".into(),
            zone: "zen.example".into(),
            test_domain: "2.0.0.127".into(),
            listed: vec![
                "127.0.0.2/31".parse().expect("net"),
                "127.0.0.4/30".parse().expect("net"),
            ],
            refused: vec!["127.255.255.0/24".parse().expect("net")],
            score: 0.0,
        };
        let lookup = UriblLookup::new(vec![zen], &dns.mode());
        let listed = lookup
            .check_address("192.0.2.10".parse().expect("ip"))
            .await;
        assert_eq!(
            listed.hits,
            vec![UriblHit {
                domain: "192.0.2.10".into(),
                list: "ZEN".into(),
                zone: "zen.example".into(),
                answer: "127.0.0.4".into(),
            }]
        );
        assert_eq!(listed.status, "192.0.2.10 looked up in zen.example: listed");
        let clean = lookup
            .check_address("192.0.2.11".parse().expect("ip"))
            .await;
        assert!(clean.hits.is_empty());
        assert_eq!(
            clean.status,
            "192.0.2.11 looked up in zen.example: not listed"
        );
        let offline = UriblLookup::new(lookup.zones().to_vec(), &DnsMode::Disabled)
            .check_address("192.0.2.10".parse().expect("ip"))
            .await;
        assert!(
            offline
                .status
                .starts_with("not checked: DNS lookups are disabled"),
            "{}",
            offline.status
        );
    }

    #[tokio::test]
    async fn a_silent_server_is_reported_as_offline_not_as_clean() {
        // A bound socket that never answers: every query times out.
        let silent = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mode = DnsMode::Server {
            addr: silent.local_addr().expect("addr"),
            timeout: Duration::from_millis(100),
        };
        let report = UriblLookup::new(vec![zone()], &mode)
            .check(hosts(&["listed.example"]))
            .await;
        assert!(report.hits.is_empty() && report.consulted.is_empty());
        assert!(
            report
                .status
                .starts_with("not checked: no URI blocklist answered (dbl.example: no answer"),
            "{}",
            report.status
        );
    }

    #[tokio::test]
    async fn disabled_dns_says_so_instead_of_answering_clean() {
        let lookup = UriblLookup::new(vec![zone()], &DnsMode::Disabled);
        let report = lookup.check(hosts(&["www.example.com"])).await;
        assert!(report.hits.is_empty());
        assert!(report.consulted.is_empty());
        assert_eq!(report.domains, 1);
        assert!(
            report
                .status
                .starts_with("not checked: DNS lookups are disabled"),
            "{}",
            report.status
        );
    }
}
