//! Deciding each rule once for one message: the message's own headers and body, and the DNS
//! answers about its sender (SPF, DKIM, DMARC, reverse DNS) through the built-in filter's
//! resolver and our own DKIM keys.

use std::collections::HashMap;

use base64::Engine as _;
use domain::SpamMethod;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::spf::verify::SpfParameters;
use mail_auth::{
    AuthenticatedMessage, DkimOutput, DkimResult, DmarcResult, IprevResult, MessageAuthenticator,
    Parameters, SpfOutput, SpfResult,
};

use super::{Check, Finding, Net, Status};
use ::content::fetch::{post_answer, FetchError};
use ::content::netpolicy::NetPolicy;
use ::content::uribl::UriblLookup;

use crate::builtin::auth::Lookups;
use crate::filters::Envelope;

/// SPF's `%{r}` macro names the receiving host; mailproof has no public one.
const RECEIVER: &str = "mailproof.invalid";

/// How a message reached the filters: the test's method, the SMTP envelope of the hop into
/// mailproof, and what that hop says about TLS.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub method: SpamMethod,
    pub envelope: Envelope,
    pub tls: HopTls,
}

/// TLS on the hop into mailproof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopTls {
    /// The sender used STARTTLS.
    Used,
    /// It was offered and the sender did not use it.
    NotUsed,
    /// Our listener offers none, so the hop says nothing of the sender.
    NotOffered,
    /// No trace of the hop (the message did not come through our listener).
    Unknown,
}

fn finding(status: Status, seen: impl Into<String>) -> Finding {
    Finding {
        status,
        seen: seen.into(),
    }
}

fn pass(seen: impl Into<String>) -> Finding {
    finding(Status::Pass, seen)
}

fn fail(seen: impl Into<String>) -> Finding {
    finding(Status::Fail, seen)
}

fn not_checked(seen: impl Into<String>) -> Finding {
    finding(Status::NotChecked, seen)
}

/// The checks that ask DNS (or our own keys) something.
const NEEDS_DNS: [Check; 7] = [
    Check::SpfPass,
    Check::DkimPass,
    Check::DkimKeySize,
    Check::DmarcRecord,
    Check::DmarcAligned,
    Check::ReverseDns,
    Check::OneClickUnsubscribe,
];

/// Why `svc` mail says nothing about the sender's own infrastructure.
const SENT_BY_US: &str =
    "mailproof sent this copy itself (svc method); test with the seed or smtp method to check your own sending";

/// Decides every rule but [`Check::MessageSize`] (which depends on the provider).
pub(super) async fn observe(
    net: &Net<'_>,
    message: &[u8],
    arrival: &Arrival,
    provider_domains: &[(String, &str)],
) -> HashMap<Check, Finding> {
    let mut out = HashMap::new();
    let Some(parsed) = AuthenticatedMessage::parse(message) else {
        for check in <Check as strum::IntoEnumIterator>::iter() {
            out.insert(
                check,
                not_checked("the message could not be parsed as email"),
            );
        }
        return out;
    };
    let headers = Headers(&parsed.headers);
    let from = parsed.from.first().cloned().unwrap_or_default();
    let from_domain = domain_of(&from).to_ascii_lowercase();
    out.insert(Check::Rfc5322, rfc5322(&headers));
    out.insert(
        Check::FromOwnDomain,
        from_own_domain(&from, &from_domain, provider_domains),
    );
    out.insert(Check::VisibleUnsubscribe, visible_unsubscribe(message));
    out.insert(
        Check::Tls,
        match (arrival.method, arrival.tls) {
            (SpamMethod::Svc, _) => finding(Status::NotApplicable, SENT_BY_US),
            (_, HopTls::Used) => pass("received over TLS (STARTTLS)"),
            (_, HopTls::NotUsed) => fail(format!(
                "received from {} without TLS, which was offered",
                arrival.envelope.client_ip
            )),
            (_, HopTls::NotOffered) => not_checked(
                "this service's SMTP listener offers no STARTTLS ([keys] smtp_tls_cert_file and smtp_tls_key_file), so whether the sender uses TLS cannot be seen",
            ),
            (_, HopTls::Unknown) => not_checked("the receiving hop left no trace of TLS"),
        },
    );
    // The POST, the blocklists and the DNS checks wait on different servers: at once.
    let svc = arrival.method == SpamMethod::Svc;
    let lookups = net.analyzer.auth().lookups();
    let deadline = lookups.deadline;
    let (tried, blocklisted, dns) = tokio::join!(
        async {
            match svc {
                // The copy mailproof built from the test's HTML carries no headers of the sender's.
                true => finding(Status::NotApplicable, SENT_BY_US),
                false => one_click_works(&headers, net.policy).await,
            }
        },
        async {
            match svc {
                true => finding(Status::NotApplicable, SENT_BY_US),
                false => not_blocklisted(net.blocklists, arrival.envelope.client_ip).await,
            }
        },
        tokio::time::timeout(
            deadline * 2,
            dns_findings(&lookups, &parsed, &headers, arrival, &from_domain),
        )
    );
    out.insert(Check::OneClickWorks, tried);
    out.insert(Check::NotBlocklisted, blocklisted);
    match dns {
        Ok(found) => out.extend(found),
        Err(_) => {
            let why = format!("DNS lookups took longer than {deadline:?}");
            for check in NEEDS_DNS {
                out.insert(check, not_checked(why.clone()));
            }
        }
    }
    if arrival.method == SpamMethod::Svc {
        // Sent and signed by mailproof: its SPF, address, key and signature say nothing of the
        // sender's, and whether the sender's signature covers the unsubscribe headers is unknown.
        for check in [
            Check::SpfPass,
            Check::ReverseDns,
            Check::DkimPass,
            Check::DkimKeySize,
            Check::DmarcAligned,
        ] {
            out.insert(check, finding(Status::NotApplicable, SENT_BY_US));
        }
        out.insert(
            Check::OneClickUnsubscribe,
            one_click(
                &headers,
                &[],
                Some("not checked with the svc method (mailproof signed this copy; test with the seed or smtp method)"),
            ),
        );
    }
    out
}

/// The rules that ask DNS (or our own keys) something.
async fn dns_findings(
    lookups: &Lookups<'_>,
    parsed: &AuthenticatedMessage<'_>,
    headers: &Headers<'_>,
    arrival: &Arrival,
    from_domain: &str,
) -> HashMap<Check, Finding> {
    let mut out = HashMap::new();
    let no_dns = lookups
        .offline
        .map(|why| format!("not checked: no DNS ({why})"))
        .or_else(|| {
            lookups
                .authenticator
                .is_none()
                .then(|| "not checked: no DNS resolver".to_owned())
        });
    let Some(auth) = lookups.authenticator else {
        let why = no_dns.unwrap_or_else(|| "not checked: no DNS resolver".into());
        for check in NEEDS_DNS {
            out.insert(check, not_checked(why.clone()));
        }
        return out;
    };
    let env = &arrival.envelope;
    let dkim = auth
        .verify_dkim(Parameters::new(parsed).with_txt_cache(lookups.own_keys))
        .await;
    // Why no signature could be verified either way, when that is so: then what depends on
    // DKIM is not checked rather than failed.
    let dkim_unknown = (passing(&dkim).next().is_none()
        && dkim
            .iter()
            .any(|o| matches!(o.result(), DkimResult::TempError(_))))
    .then(|| {
        no_dns
            .clone()
            .unwrap_or_else(|| "not checked: the DKIM key lookup did not answer".into())
    });
    out.insert(
        Check::DkimPass,
        dkim_pass(parsed, &dkim, dkim_unknown.as_deref()),
    );
    out.insert(
        Check::DkimKeySize,
        dkim_key_size(
            auth,
            lookups,
            &dkim,
            no_dns.as_deref(),
            dkim_unknown.as_deref(),
        )
        .await,
    );
    out.insert(
        Check::OneClickUnsubscribe,
        one_click(headers, &dkim, dkim_unknown.as_deref()),
    );
    let spf_domain = if env.mail_from.is_empty() {
        env.helo.to_ascii_lowercase()
    } else {
        domain_of(&env.mail_from).to_ascii_lowercase()
    };
    let Some(no_dns) = no_dns else {
        let spf = if env.mail_from.is_empty() {
            auth.verify_spf(SpfParameters::verify_ehlo(
                env.client_ip,
                &env.helo,
                RECEIVER,
            ))
            .await
        } else {
            auth.verify_spf(SpfParameters::verify_mail_from(
                env.client_ip,
                &env.helo,
                RECEIVER,
                &env.mail_from,
            ))
            .await
        };
        out.insert(Check::SpfPass, spf_pass(&spf, &spf_domain, env));
        let dmarc = auth
            .verify_dmarc(
                Parameters::new(DmarcParameters::new(parsed, &dkim, &spf_domain, &spf))
                    .with_txt_cache(lookups.own_keys),
            )
            .await;
        out.insert(
            Check::DmarcRecord,
            match (dmarc.dmarc_record(), dmarc.result()) {
                (Some(_), _) => pass(format!(
                    "_dmarc.{} publishes p={}",
                    dmarc.domain(),
                    policy_name(dmarc.policy())
                )),
                (None, DmarcResult::TempError(e)) => {
                    not_checked(format!("the DMARC lookup did not answer: {e}"))
                }
                (None, _) => fail(format!(
                    "no DMARC record at _dmarc.{from_domain} (nor at its organizational domain)"
                )),
            },
        );
        let unknown = match (spf.result(), &dkim_unknown) {
            (SpfResult::TempError, _) => {
                Some("not checked: the SPF lookup did not answer".to_owned())
            }
            (_, Some(why)) => Some(why.clone()),
            _ => None,
        };
        out.insert(
            Check::DmarcAligned,
            aligned(&dkim, &spf, &spf_domain, from_domain, unknown.as_deref()),
        );
        out.insert(Check::ReverseDns, reverse_dns(auth, env).await);
        return out;
    };
    for check in [Check::SpfPass, Check::DmarcRecord, Check::ReverseDns] {
        out.insert(check, not_checked(no_dns.clone()));
    }
    out.insert(
        Check::DmarcAligned,
        aligned(
            &dkim,
            &SpfOutput::new(spf_domain.clone()),
            &spf_domain,
            from_domain,
            Some(&no_dns),
        ),
    );
    out
}

fn spf_pass(spf: &SpfOutput, domain: &str, env: &Envelope) -> Finding {
    let ip = env.client_ip;
    match spf.result() {
        SpfResult::Pass => pass(format!("spf=pass for {domain} from {ip}")),
        SpfResult::TempError => not_checked(format!("the SPF lookup for {domain} did not answer")),
        SpfResult::None => fail(format!("{domain} publishes no SPF record")),
        SpfResult::Fail => fail(format!("SPF of {domain} does not list {ip} (spf=fail)")),
        SpfResult::SoftFail => fail(format!("SPF of {domain} does not list {ip} (spf=softfail)")),
        SpfResult::Neutral => fail(format!(
            "SPF of {domain} neither lists nor refuses {ip} (spf=neutral)"
        )),
        SpfResult::PermError => fail(format!(
            "the SPF record of {domain} is broken (spf=permerror)"
        )),
    }
}

/// The signatures that verified, with their domain.
fn passing<'a>(dkim: &'a [DkimOutput<'a>]) -> impl Iterator<Item = &'a mail_auth::dkim::Signature> {
    dkim.iter()
        .filter(|o| *o.result() == DkimResult::Pass)
        .filter_map(|o| o.signature())
}

fn dkim_pass(
    parsed: &AuthenticatedMessage<'_>,
    dkim: &[DkimOutput<'_>],
    unknown: Option<&str>,
) -> Finding {
    if parsed.dkim_headers.is_empty() {
        return fail("the message has no DKIM signature");
    }
    if let Some(sig) = passing(dkim).next() {
        return pass(format!("dkim=pass (d={} s={})", sig.d, sig.s));
    }
    if let Some(why) = unknown {
        return not_checked(why);
    }
    let why = dkim
        .iter()
        .map(|o| {
            let who = o
                .signature()
                .map(|s| format!("d={} s={}", s.d, s.s))
                .unwrap_or_else(|| "a signature".into());
            match o.result() {
                DkimResult::Fail(e) | DkimResult::PermError(e) | DkimResult::Neutral(e) => {
                    format!("{who}: {e}")
                }
                other => format!("{who}: {other:?}"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    fail(format!("no DKIM signature verifies ({why})"))
}

async fn dkim_key_size(
    auth: &MessageAuthenticator,
    lookups: &Lookups<'_>,
    dkim: &[DkimOutput<'_>],
    no_dns: Option<&str>,
    unknown: Option<&str>,
) -> Finding {
    let Some(sig) = passing(dkim).next() else {
        if let Some(why) = unknown {
            return not_checked(why);
        }
        return finding(
            Status::NotApplicable,
            "no DKIM signature verified, so there is no key to measure",
        );
    };
    let name = format!("{}._domainkey.{}.", sig.s, sig.d).to_ascii_lowercase();
    let raw = match lookups.own_keys.raw(&name) {
        Some(raw) => raw,
        None if no_dns.is_some() => return not_checked(no_dns.unwrap_or_default()),
        None => match auth.txt_raw_lookup(name.as_str()).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return not_checked(format!("the key of {name} could not be read: {e}")),
        },
    };
    match key_bits(&raw) {
        Ok((bits, kind)) if kind == "ed25519" || bits >= 1024 => pass(format!(
            "{kind} key of {bits} bits (d={} s={})",
            sig.d, sig.s
        )),
        Ok((bits, kind)) => fail(format!(
            "the {kind} key of d={} s={} has {bits} bits",
            sig.d, sig.s
        )),
        Err(e) => not_checked(format!("the key of {name} could not be measured: {e}")),
    }
}

/// The key's size in bits and its kind, from a DKIM TXT record's `k=` and `p=` tags.
pub(crate) fn key_bits(record: &str) -> Result<(usize, &'static str), String> {
    let tag = |name: &str| {
        record.split(';').find_map(|t| {
            let (k, v) = t.split_once('=')?;
            (k.trim() == name).then(|| v.split_whitespace().collect::<String>())
        })
    };
    let p = tag("p").ok_or("the record has no p= tag")?;
    let der = base64::engine::general_purpose::STANDARD
        .decode(p.as_bytes())
        .map_err(|e| format!("p= is not base64: {e}"))?;
    if tag("k").is_some_and(|k| k.eq_ignore_ascii_case("ed25519")) {
        return Ok((der.len() * 8, "ed25519"));
    }
    use rsa::pkcs1::DecodeRsaPublicKey;
    use rsa::pkcs8::DecodePublicKey;
    use rsa::traits::PublicKeyParts;
    let key = rsa::RsaPublicKey::from_public_key_der(&der)
        .or_else(|_| rsa::RsaPublicKey::from_pkcs1_der(&der))
        .map_err(|e| format!("p= is no RSA public key: {e}"))?;
    Ok((key.n().bits(), "RSA"))
}

fn one_click(headers: &Headers<'_>, dkim: &[DkimOutput<'_>], unknown: Option<&str>) -> Finding {
    let Some(list) = headers.value("list-unsubscribe") else {
        return fail("the message has no List-Unsubscribe header");
    };
    let Some(url) = https_uri(&list) else {
        return fail(format!(
            "List-Unsubscribe has no https URL ({})",
            shorten(&list)
        ));
    };
    match headers.value("list-unsubscribe-post") {
        Some(v) if v.trim() == ONE_CLICK_BODY => {}
        Some(v) => {
            return fail(format!(
                "List-Unsubscribe-Post is {:?}, not \"List-Unsubscribe=One-Click\"",
                shorten(&v)
            ))
        }
        None => {
            return fail(
                "List-Unsubscribe has an https URL but there is no List-Unsubscribe-Post header",
            )
        }
    }
    let covers = |sig: &mail_auth::dkim::Signature, name: &str| {
        sig.h.iter().any(|h| h.eq_ignore_ascii_case(name))
    };
    let mut verified = passing(dkim).peekable();
    if verified.peek().is_none() {
        return match unknown {
            Some(why) => not_checked(format!(
                "the headers are there; whether a DKIM signature covers them is {why}"
            )),
            None => fail("List-Unsubscribe and List-Unsubscribe-Post are not covered by a verified DKIM signature (none verifies)"),
        };
    }
    let mut missing = Vec::new();
    for sig in verified {
        let lacks: Vec<&str> = ["List-Unsubscribe", "List-Unsubscribe-Post"]
            .into_iter()
            .filter(|n| !covers(sig, n))
            .collect();
        if lacks.is_empty() {
            return pass(format!(
                "one-click unsubscribe to {}, signed by d={}",
                shorten(url),
                sig.d
            ));
        }
        missing.push(format!("d={} does not cover {}", sig.d, lacks.join(" or ")));
    }
    fail(format!("the DKIM signature {}", missing.join("; ")))
}

/// Whether the sending address is on an address blocklist, asked only of lists that answer their
/// own test point: a list that does not is "not checked", never "not listed".
async fn not_blocklisted(blocklists: &UriblLookup, ip: std::net::IpAddr) -> Finding {
    if !::content::netpolicy::is_public(ip) {
        return finding(
            Status::NotApplicable,
            format!("{ip} is not a public address; blocklists list only public ones"),
        );
    }
    let report = blocklists.check_address(ip).await;
    if let Some(hit) = report.hits.first() {
        let all: Vec<String> = report
            .hits
            .iter()
            .map(|h| format!("{} ({}, answer {})", h.list, h.zone, h.answer))
            .collect();
        return fail(format!("{} is listed by {}", hit.domain, all.join(", ")));
    }
    if report.consulted.is_empty() || report.failed > 0 {
        return not_checked(report.status);
    }
    pass(report.status)
}

/// The first https URI of a `List-Unsubscribe` value (`<https://…>, <mailto:…>`), the one RFC
/// 8058's POST goes to.
fn https_uri(list: &str) -> Option<&str> {
    list.split(',')
        .map(|u| {
            u.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .trim()
        })
        .find(|u| u.to_ascii_lowercase().starts_with("https://"))
}

/// RFC 8058 3.1: what a mailbox provider sends when the reader clicks "Unsubscribe".
const ONE_CLICK_BODY: &str = "List-Unsubscribe=One-Click";

/// Sends the one-click POST a provider sends (the exact body, no cookies or credentials) to the
/// message's https `List-Unsubscribe` URL, under `policy`, and says how it was answered.
async fn one_click_works(headers: &Headers<'_>, policy: &NetPolicy) -> Finding {
    let one_click = headers
        .value("list-unsubscribe-post")
        .is_some_and(|v| v.trim() == ONE_CLICK_BODY);
    let url = headers
        .value("list-unsubscribe")
        .and_then(|list| https_uri(&list).map(str::to_owned));
    let (Some(url), true) = (url, one_click) else {
        return finding(
            Status::NotApplicable,
            "the message offers no one-click unsubscribe to try (see the rule above)",
        );
    };
    let started = std::time::Instant::now();
    let answer = post_answer(
        &url,
        "application/x-www-form-urlencoded",
        &[],
        ONE_CLICK_BODY.as_bytes().to_vec(),
        policy,
    )
    .await;
    let took = format!("{:.2} s", started.elapsed().as_secs_f64());
    let at = shorten(&url);
    match answer {
        Ok(a) if (200..300).contains(&a.status) => {
            pass(format!("POST to {at} answered {} in {took}", a.status))
        }
        Ok(a) if (300..400).contains(&a.status) => fail(format!(
            "POST to {at} answered {} redirecting to {} in {took}: one-click must unsubscribe by the POST alone",
            a.status,
            a.location.as_deref().map_or("nowhere".to_owned(), shorten)
        )),
        Ok(a) => fail(format!("POST to {at} answered {} in {took}", a.status)),
        Err(FetchError::RefusedAddress { host } | FetchError::RefusedHost { host }) => {
            not_checked(format!(
                "not tried: the network policy does not let mailproof reach {host} ([fetch] allow)"
            ))
        }
        Err(FetchError::Timeout { seconds, .. }) => fail(format!(
            "POST to {at} had no answer within {seconds:.0} s"
        )),
        Err(e) => fail(format!("POST to {at} failed: {e}")),
    }
}

fn aligned(
    dkim: &[DkimOutput<'_>],
    spf: &SpfOutput,
    spf_domain: &str,
    from_domain: &str,
    unknown: Option<&str>,
) -> Finding {
    if from_domain.is_empty() {
        return fail("the message has no From address to align with");
    }
    let org =
        |d: &str| ::content::uribl::registrable_domain(d).unwrap_or_else(|| d.to_ascii_lowercase());
    let from_org = org(from_domain);
    if let Some(sig) = passing(dkim).find(|s| org(&s.d) == from_org) {
        return pass(format!("DKIM d={} aligns with From {from_domain}", sig.d));
    }
    if spf.result() == SpfResult::Pass && org(spf_domain) == from_org {
        return pass(format!("SPF {spf_domain} aligns with From {from_domain}"));
    }
    if let Some(why) = unknown {
        return not_checked(format!("no aligned signature verified; {why}"));
    }
    let signers: Vec<String> = passing(dkim).map(|s| format!("DKIM d={}", s.d)).collect();
    let spf_part = if spf.result() == SpfResult::Pass {
        format!("SPF {spf_domain}")
    } else {
        format!("SPF of {spf_domain} does not pass")
    };
    let mut seen = signers;
    seen.push(spf_part);
    fail(format!(
        "neither SPF nor DKIM passes for From {from_domain} ({})",
        seen.join(", ")
    ))
}

async fn reverse_dns(auth: &MessageAuthenticator, env: &Envelope) -> Finding {
    let ip = env.client_ip;
    let out = auth.verify_iprev(ip).await;
    let names = out
        .ptr
        .as_ref()
        .map(|p| {
            p.iter()
                .map(|n| n.trim_end_matches('.').to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    match out.result() {
        IprevResult::Pass => pass(format!("{ip} → {names} → {ip}")),
        IprevResult::TempError(e) => {
            not_checked(format!("the reverse lookup of {ip} did not answer: {e}"))
        }
        IprevResult::None => fail(format!("{ip} has no reverse DNS (PTR) record")),
        IprevResult::Fail(_) | IprevResult::PermError(_) if names.is_empty() => {
            fail(format!("{ip} has no reverse DNS (PTR) record"))
        }
        IprevResult::Fail(_) | IprevResult::PermError(_) => fail(format!(
            "{ip} → {names}, which does not resolve back to {ip}"
        )),
    }
}

fn rfc5322(headers: &Headers<'_>) -> Finding {
    let count = |n: &str| headers.count(n);
    let (from, date, id) = (count("from"), count("date"), count("message-id"));
    let mut wrong = Vec::new();
    for (name, n) in [("From", from), ("Date", date), ("Message-ID", id)] {
        match n {
            1 => {}
            0 => wrong.push(format!("no {name}")),
            n => wrong.push(format!("{n} {name} headers")),
        }
    }
    if wrong.is_empty() {
        pass("one From, one Date and one Message-ID")
    } else {
        fail(format!("the message has {}", wrong.join(", ")))
    }
}

fn from_own_domain(from: &str, from_domain: &str, provider_domains: &[(String, &str)]) -> Finding {
    if from_domain.is_empty() {
        return fail("the message has no From address");
    }
    match provider_domains.iter().find(|(d, _)| d == from_domain) {
        Some((_, provider)) => fail(format!(
            "From is {from}, an address at {provider}'s own domain {from_domain}"
        )),
        None => pass(format!("From is {from}")),
    }
}

/// Words a link to unsubscribe says, in the languages email is most often sent in.
const UNSUBSCRIBE_WORDS: &[&str] = &[
    "unsubscribe",
    "opt out",
    "opt-out",
    "optout",
    "abmelden",
    "abbestellen",
    "désabonner",
    "désinscrire",
    "desinscri",
    "darse de baja",
    "darte de baja",
    "cancelar suscripción",
    "afmelden",
    "disiscriviti",
    "cancelar inscrição",
    "descadastrar",
];

fn visible_unsubscribe(message: &[u8]) -> Finding {
    let Some(parsed) = mail_parser::MessageParser::default().parse(message) else {
        return not_checked("the message could not be parsed as email");
    };
    let says = |text: &str| {
        let lower = text.to_lowercase();
        UNSUBSCRIBE_WORDS.iter().any(|w| lower.contains(w))
    };
    if let Some(html) = parsed.body_html(0) {
        match ::content::links::anchors(&html) {
            Ok(anchors) => {
                if let Some(a) = anchors.iter().find(|a| says(&a.text)) {
                    return pass(format!(
                        "link \"{}\" to {}",
                        shorten(&a.text),
                        shorten(&a.href)
                    ));
                }
                if let Some(a) = anchors.iter().find(|a| says(&a.href)) {
                    return pass(format!("a link to {}", shorten(&a.href)));
                }
                return fail(format!(
                    "none of the {} links in the HTML body says unsubscribe or opt out",
                    anchors.len()
                ));
            }
            Err(e) => return not_checked(e),
        }
    }
    match parsed.body_text(0) {
        Some(text) => match text.lines().find(|l| says(l) && l.contains("://")) {
            Some(line) => pass(format!("text body: {}", shorten(line.trim()))),
            None => fail("the text body has no unsubscribe link"),
        },
        None => fail("the message has no body to put an unsubscribe link in"),
    }
}

/// Header lookups on the raw (name, value) pairs, unfolded.
struct Headers<'a>(&'a [(&'a [u8], &'a [u8])]);

impl Headers<'_> {
    fn count(&self, name: &str) -> usize {
        self.0
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .count()
    }

    fn value(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    }
}

fn domain_of(address: &str) -> &str {
    address
        .rsplit_once('@')
        .map_or("", |(_, d)| d.trim_end_matches('>').trim())
}

fn policy_name(p: mail_auth::dmarc::Policy) -> &'static str {
    match p {
        mail_auth::dmarc::Policy::None => "none",
        mail_auth::dmarc::Policy::Quarantine => "quarantine",
        mail_auth::dmarc::Policy::Reject => "reject",
        mail_auth::dmarc::Policy::Unspecified => "(unspecified)",
    }
}

/// Long header values and URLs cut for one line of a card.
fn shorten(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        return s.to_owned();
    }
    let cut: String = s.chars().take(MAX - 1).collect();
    format!("{cut}…")
}
