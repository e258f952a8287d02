//! SPF, DKIM and DMARC verification with mail-auth, built to fail fast when DNS is missing.
//!
//! Results are recorded as they are: a lookup that times out is `temperror`, a domain without a
//! record is `none`; nothing is ever counted as a pass that was not verified.
//!
//! The one name answered without DNS is the service's own DKIM selector ([`OwnKeys`]): the key the
//! `svc` sender signs with is held here too, so its sends verify offline and do not depend on the
//! operator having published the record.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use domain::DkimTxtRecord;
use mail_auth::common::parse::TxtRecordParser;
use mail_auth::common::verify::DomainKey;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::dmarc::Policy;
use mail_auth::hickory_resolver::config::{ResolverConfig, ResolverOpts};
use mail_auth::spf::verify::SpfParameters;
use mail_auth::{
    AuthenticatedMessage, DkimResult, DmarcResult, MessageAuthenticator, Parameters, ResolverCache,
    SpfResult, Txt,
};

use super::rule;
use crate::filters::Envelope;
use crate::report::Rule;

use ::content::dns::{DnsMode, ATTEMPTS};

/// SPF's `%{r}` macro names the receiving host; mailproof has no public one.
const RECEIVER: &str = "mailproof.invalid";

/// Offline, only signatures by our own keys are verified: no lookup waits, so a short deadline.
const OFFLINE_DEADLINE: Duration = Duration::from_secs(5);

/// The DKIM records this service answers for itself, by lowercase rooted name, shared by every
/// clone of the checker. Given to mail-auth as its TXT cache: a name found here is never looked
/// up; every other lookup goes to the resolver, which keeps its own cache.
#[derive(Clone, Default)]
pub(crate) struct OwnKeys(Arc<RwLock<HashMap<Box<str>, OwnKey>>>);

/// One of our keys: parsed for mail-auth, and as published (to measure it).
type OwnKey = (Txt, String);

impl OwnKeys {
    pub(crate) fn answer(&self, record: &DkimTxtRecord) -> Result<(), String> {
        let key = DomainKey::parse(record.value.as_bytes())
            .map_err(|e| format!("the DKIM record of {} does not parse: {e}", record.name))?;
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.fqdn().into(), (Txt::from(key), record.value.clone()));
        Ok(())
    }

    /// The record's text as published, for `name` (rooted, lowercase) when it is ours.
    pub(crate) fn raw(&self, name: &str) -> Option<String> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .map(|(_, raw)| raw.clone())
    }
}

impl ResolverCache<Box<str>, Txt> for OwnKeys {
    fn get<Q>(&self, name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .map(|(txt, _)| txt.clone())
    }

    // Our keys stay for the process's life; answers from DNS are not kept here.
    fn remove<Q>(&self, _name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        None
    }

    fn insert(&self, _key: Box<str>, _value: Txt, _valid_until: Instant) {}
}

pub(crate) struct Lookups<'a> {
    pub authenticator: Option<&'a MessageAuthenticator>,
    pub offline: Option<&'static str>,
    pub own_keys: &'a OwnKeys,
    pub deadline: Duration,
}

#[derive(Clone)]
pub(crate) struct AuthChecker {
    authenticator: Option<MessageAuthenticator>,
    /// No DNS: SPF and DMARC are `temperror` without a lookup, and DKIM verifies only what
    /// [`OwnKeys`] answers (any other signature is `temperror`: its resolver has no server).
    offline: bool,
    own_keys: OwnKeys,
    /// Whole-check deadline: many lookups each within `timeout` must still end promptly.
    deadline: Duration,
    /// Why there is no DNS, shown with the temperror rules.
    unavailable: &'static str,
}

impl AuthChecker {
    pub(crate) fn new(dns: DnsMode) -> AuthChecker {
        if dns == DnsMode::Disabled {
            return AuthChecker::offline("DNS disabled");
        }
        let built = dns.resolver_parts().and_then(|(config, opts)| {
            MessageAuthenticator::new(config, opts)
                .map_err(|e| format!("cannot build the resolver: {e}"))
        });
        match built {
            Ok(authenticator) => AuthChecker {
                authenticator: Some(authenticator),
                offline: false,
                own_keys: OwnKeys::default(),
                // A deadline of three queries' worth for the whole SPF/DKIM/DMARC check.
                deadline: dns.timeout() * ATTEMPTS as u32 * 3,
                unavailable: "",
            },
            Err(reason) => {
                tracing::warn!(%reason, "no DNS resolver for SPF/DKIM/DMARC; they will report temperror");
                AuthChecker::offline("no DNS resolver configured")
            }
        }
    }

    /// A checker that asks no name server: a resolver without servers fails every lookup at once.
    fn offline(unavailable: &'static str) -> AuthChecker {
        let authenticator = MessageAuthenticator::new(
            ResolverConfig::from_name_servers(vec![]),
            ResolverOpts::default(),
        )
        .map_err(|e| tracing::warn!(error = %e, "cannot build an offline DKIM verifier"))
        .ok();
        AuthChecker {
            authenticator,
            offline: true,
            own_keys: OwnKeys::default(),
            deadline: OFFLINE_DEADLINE,
            unavailable,
        }
    }

    /// What the sender-requirements check looks names up with: the resolver (`None` when it
    /// could not be built), why there is no DNS (`Some` offline), our own keys and the deadline.
    pub(crate) fn lookups(&self) -> Lookups<'_> {
        Lookups {
            authenticator: self.authenticator.as_ref(),
            offline: self.offline.then_some(self.unavailable),
            own_keys: &self.own_keys,
            deadline: self.deadline,
        }
    }

    /// Verifies signatures by `record`'s key from the key itself, never from DNS.
    pub(crate) fn answer_for(&self, record: &DkimTxtRecord) -> Result<(), String> {
        self.own_keys.answer(record)
    }

    pub(crate) async fn check(&self, message: &[u8], env: &Envelope) -> Vec<Rule> {
        let has_dkim_signature = AuthenticatedMessage::parse(message)
            .map(|m| !m.dkim_headers.is_empty())
            .unwrap_or(false);
        let Some(authenticator) = &self.authenticator else {
            tracing::debug!(reason = self.unavailable, "authentication checks skipped");
            return all_temperror(has_dkim_signature);
        };
        let checked = if self.offline {
            tracing::debug!(
                reason = self.unavailable,
                "SPF and DMARC skipped; DKIM verified for our own keys only"
            );
            tokio::time::timeout(
                self.deadline,
                verify_own_dkim(authenticator, &self.own_keys, message),
            )
            .await
        } else {
            tokio::time::timeout(
                self.deadline,
                verify(authenticator, &self.own_keys, message, env),
            )
            .await
        };
        match checked {
            Ok(rules) => rules,
            Err(_) => {
                tracing::warn!(
                    deadline_ms = self.deadline.as_millis(),
                    "SPF/DKIM/DMARC lookups timed out"
                );
                all_temperror(has_dkim_signature)
            }
        }
    }
}

/// Without DNS: the DKIM rule from our own keys, SPF and DMARC not known.
async fn verify_own_dkim(
    authenticator: &MessageAuthenticator,
    own_keys: &OwnKeys,
    message: &[u8],
) -> Vec<Rule> {
    let Some(parsed) = AuthenticatedMessage::parse(message) else {
        return all_temperror(false);
    };
    let dkim = authenticator
        .verify_dkim(Parameters::new(&parsed).with_txt_cache(own_keys))
        .await;
    vec![
        rule("MP_SPF_TEMPERROR", 0.0),
        dkim_rule(dkim.iter().map(|o| o.result())),
        rule("MP_DMARC_TEMPERROR", 0.0),
    ]
}

fn all_temperror(has_dkim_signature: bool) -> Vec<Rule> {
    vec![
        rule("MP_SPF_TEMPERROR", 0.0),
        if has_dkim_signature {
            rule("MP_DKIM_TEMPERROR", 0.0)
        } else {
            rule("MP_DKIM_NONE", 0.5)
        },
        rule("MP_DMARC_TEMPERROR", 0.0),
    ]
}

async fn verify(
    authenticator: &MessageAuthenticator,
    own_keys: &OwnKeys,
    message: &[u8],
    env: &Envelope,
) -> Vec<Rule> {
    let helo = env.helo.as_str();
    let mail_from = env.mail_from.as_str();
    let spf = if mail_from.is_empty() {
        authenticator
            .verify_spf(SpfParameters::verify_ehlo(env.client_ip, helo, RECEIVER))
            .await
    } else {
        authenticator
            .verify_spf(SpfParameters::verify_mail_from(
                env.client_ip,
                helo,
                RECEIVER,
                mail_from,
            ))
            .await
    };
    let mut rules = vec![spf_rule(&spf.result())];
    let Some(parsed) = AuthenticatedMessage::parse(message) else {
        // mail-auth cannot split headers from body: nothing to verify, which is itself suspicious.
        rules.push(rule("MP_DKIM_PERMERROR", 1.0));
        rules.push(rule("MP_DMARC_PERMERROR", 0.5));
        return rules;
    };
    let dkim = authenticator
        .verify_dkim(Parameters::new(&parsed).with_txt_cache(own_keys))
        .await;
    rules.push(dkim_rule(dkim.iter().map(|o| o.result())));
    let mail_from_domain = mail_from
        .rsplit_once('@')
        .map_or(helo, |(_, domain)| domain);
    let dmarc = authenticator
        .verify_dmarc(DmarcParameters::new(&parsed, &dkim, mail_from_domain, &spf))
        .await;
    rules.push(dmarc_rule(&dmarc.result(), dmarc.policy()));
    rules
}

fn spf_rule(result: &SpfResult) -> Rule {
    match result {
        SpfResult::Pass => rule("MP_SPF_PASS", -0.5),
        SpfResult::Fail => rule("MP_SPF_FAIL", 3.0),
        SpfResult::SoftFail => rule("MP_SPF_SOFTFAIL", 1.5),
        SpfResult::Neutral => rule("MP_SPF_NEUTRAL", 0.3),
        SpfResult::TempError => rule("MP_SPF_TEMPERROR", 0.0),
        SpfResult::PermError => rule("MP_SPF_PERMERROR", 1.0),
        SpfResult::None => rule("MP_SPF_NONE", 0.5),
    }
}

/// One DKIM rule for all signatures: the best outcome wins, as receivers do.
fn dkim_rule<'a>(results: impl Iterator<Item = &'a DkimResult>) -> Rule {
    let mut best: Option<(u8, Rule)> = None;
    for result in results {
        let candidate = match result {
            DkimResult::Pass => (0, rule("MP_DKIM_PASS", -0.5)),
            DkimResult::TempError(_) => (1, rule("MP_DKIM_TEMPERROR", 0.0)),
            DkimResult::Neutral(_) => (2, rule("MP_DKIM_NEUTRAL", 0.2)),
            DkimResult::PermError(_) => (3, rule("MP_DKIM_PERMERROR", 1.0)),
            DkimResult::Fail(_) => (4, rule("MP_DKIM_FAIL", 2.0)),
            DkimResult::None => (5, rule("MP_DKIM_NONE", 0.5)),
        };
        if best.as_ref().is_none_or(|(rank, _)| candidate.0 < *rank) {
            best = Some(candidate);
        }
    }
    best.map_or_else(|| rule("MP_DKIM_NONE", 0.5), |(_, r)| r)
}

fn dmarc_rule(result: &DmarcResult, policy: Policy) -> Rule {
    match result {
        DmarcResult::Pass => rule("MP_DMARC_PASS", -0.5),
        DmarcResult::Fail(_) => match policy {
            Policy::Reject => rule("MP_DMARC_FAIL_REJECT", 3.5),
            Policy::Quarantine => rule("MP_DMARC_FAIL_QUARANTINE", 2.5),
            Policy::None | Policy::Unspecified => rule("MP_DMARC_FAIL_NONE", 1.0),
        },
        DmarcResult::TempError(_) => rule("MP_DMARC_TEMPERROR", 0.0),
        DmarcResult::PermError(_) => rule("MP_DMARC_PERMERROR", 0.5),
        DmarcResult::None => rule("MP_DMARC_NONE", 0.3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> Envelope {
        Envelope {
            client_ip: "192.0.2.10".parse().expect("literal ip"),
            helo: "mail.example.com".into(),
            hostname: "mail.example.com".into(),
            mail_from: "news@example.com".into(),
            rcpt_to: vec!["jane@example.org".into()],
        }
    }

    #[tokio::test]
    async fn without_dns_authentication_is_temperror_never_pass() {
        let checker = AuthChecker::new(DnsMode::Disabled);
        // The body hash is right (SHA-256 of the simple body "hi\r\n"), so what is left to
        // verify is the signature, which needs the key from DNS.
        let signed = b"DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=s1; h=from; bh=RHI91NDg1Go8f6isolS2HCe2tXiflhd+gsgHAECfFTU=; b=AAAA\r\nFrom: a@example.com\r\n\r\nhi\r\n";
        let names: Vec<String> = checker
            .check(signed, &envelope())
            .await
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            names,
            [
                "MP_SPF_TEMPERROR",
                "MP_DKIM_TEMPERROR",
                "MP_DMARC_TEMPERROR"
            ]
        );
    }

    #[tokio::test]
    async fn unsigned_mail_without_dns_has_no_dkim_rather_than_an_error() {
        let checker = AuthChecker::new(DnsMode::Disabled);
        let rules = checker
            .check(b"From: a@example.com\r\n\r\nhi\r\n", &envelope())
            .await;
        assert!(rules.iter().any(|r| r.name == "MP_DKIM_NONE"));
        assert!(rules.iter().all(|r| !r.name.ends_with("_PASS")));
    }

    #[test]
    fn a_record_that_is_not_a_dkim_key_is_refused_not_held() {
        let keys = OwnKeys::default();
        let bad = DkimTxtRecord {
            name: "mailproof._domainkey.seeds.example".into(),
            value: "v=DKIM1; k=rsa; p=not base64!".into(),
        };
        let err = keys.answer(&bad).expect_err("a damaged record");
        assert!(err.contains("mailproof._domainkey.seeds.example"), "{err}");
        assert!(keys.get("mailproof._domainkey.seeds.example.").is_none());
    }

    #[test]
    fn the_best_dkim_signature_decides() {
        let results = [DkimResult::None, DkimResult::Pass];
        assert_eq!(dkim_rule(results.iter()).name, "MP_DKIM_PASS");
        assert_eq!(dkim_rule([].iter()).name, "MP_DKIM_NONE");
    }
}
