//! The outcome of a check: per client its status, screenshots and comparison with the baseline;
//! the spam verdicts; which of these fail the check. Serialised as the JSON report (`--format
//! json`, `<out>/report.json`), which a later run reads back as its `--baseline-file`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::threshold::{percent, MaxDiff};

/// Version of the report's shape, checked when a report is read back as a baseline.
pub const REPORT_VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub server: String,
    pub test_id: String,
    pub subject: String,
    /// `--max-diff` as a fraction of the pixels.
    pub max_diff: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    pub clients: Vec<ClientOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spam: Option<SpamOutcome>,
    #[serde(default)]
    pub timings: Timings,
    /// With `--require-approval`: whether a version of this email with the same content is
    /// approved on the server (mailproof's `…/versions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalOutcome>,
}

/// What `--require-approval` found.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ApprovalOutcome {
    /// This test's version number among the versions of its email.
    pub version: Option<i64>,
    /// The approved version with this test's content, if any: its test id and number.
    pub approved_test: Option<String>,
    pub approved_version: Option<i64>,
    /// Why it could not be told (a server without versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Baseline {
    /// The baseline's test id.
    pub test_id: String,
    /// The baseline report, when compared locally (`--baseline-file`); none when the server
    /// compared (`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientOutcome {
    pub id: String,
    /// The v5 status: `Complete` or `Bounced`.
    pub status: String,
    /// Bounce code and message, for `Bounced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce: Option<String>,
    /// Variant (`default`, `no_images`, ...) → PNG path relative to the report's directory.
    #[serde(default)]
    pub screenshots: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Comparison {
    Compared {
        variants: Vec<VariantChange>,
    },
    /// Nothing to compare with (the client is new, or was not Complete in the baseline): not a
    /// failure, but said in the report.
    NotCompared {
        reason: String,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantChange {
    pub variant: String,
    pub changed_share: f64,
    #[serde(default)]
    pub extra_width: i64,
    #[serde(default)]
    pub extra_height: i64,
    /// The highlight image: a path beside the screenshots, or the server's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highlight: Option<String>,
    /// Why this variant could not be compared (counts as a failure: the change is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpamOutcome {
    pub method: String,
    pub filters: Vec<SpamVerdict>,
    /// The mailbox providers' sender requirements (mailproof's `…/spam/requirements`); `None`
    /// when not asked (`--requirements off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Requirements>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Requirements {
    /// Whether a provider that would reject the email fails the check (`--requirements fail`).
    pub fail: bool,
    /// One card per provider, as the server answered.
    #[serde(default)]
    pub providers: Vec<ProviderCheck>,
    /// Why there are no cards (the server does not check them, or they did not come in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One provider's card (the wire shape of `…/spam/requirements`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProviderCheck {
    pub provider: String,
    pub name: String,
    /// `meets`, `would_reject` or `not_checked`.
    pub verdict: String,
    pub summary: String,
    #[serde(default)]
    pub rules: Vec<RuleCheck>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RuleCheck {
    pub rule: String,
    pub title: String,
    /// `required` or `recommended`.
    pub need: String,
    /// `pass`, `fail`, `not_applicable` or `not_checked`.
    pub status: String,
    #[serde(default)]
    pub seen: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpamVerdict {
    pub client: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    /// 1 spam, 0 no decision, -1 not spam (spec §2.8).
    pub spam: Option<i64>,
    #[serde(default)]
    pub details: String,
}

/// Seconds spent per phase (JUnit's `time`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timings {
    pub submit: f64,
    pub screenshots: f64,
    pub spam: f64,
    pub compare: f64,
}

impl Report {
    pub fn limit(&self) -> MaxDiff {
        MaxDiff::saturating(self.max_diff)
    }

    /// Why this client fails the check; empty when it passes.
    pub fn client_failures(&self, c: &ClientOutcome) -> Vec<String> {
        if c.status == "Bounced" {
            let detail = c.bounce.as_deref().unwrap_or("no bounce details");
            return vec![format!("{}: bounced ({detail})", c.id)];
        }
        if c.status != "Complete" {
            return vec![format!("{}: ended as {}, not Complete", c.id, c.status)];
        }
        let Some(Comparison::Compared { variants }) = &c.comparison else {
            return Vec::new();
        };
        let limit = self.limit();
        variants
            .iter()
            .filter_map(|v| {
                if let Some(e) = &v.error {
                    return Some(format!(
                        "{}: {} could not be compared: {e}",
                        c.id, v.variant
                    ));
                }
                let over = limit.exceeded_by(v.changed_share);
                if !over && v.extra_height == 0 && v.extra_width == 0 {
                    return None;
                }
                let mut msg = format!(
                    "{}: {} changed {} of its pixels (limit {limit})",
                    c.id,
                    v.variant,
                    percent(v.changed_share)
                );
                for (n, longer, shorter) in [
                    (v.extra_height, "taller", "shorter"),
                    (v.extra_width, "wider", "narrower"),
                ] {
                    if n != 0 {
                        let word = if n > 0 { longer } else { shorter };
                        let _ = write!(msg, ", and is {} px {word}", n.unsigned_abs());
                    }
                }
                Some(msg)
            })
            .collect()
    }

    /// Why this filter fails the check: it said spam.
    pub fn spam_failure(&self, v: &SpamVerdict) -> Option<String> {
        (v.spam == Some(1)).then(|| {
            let details = if v.details.is_empty() {
                String::new()
            } else {
                format!(": {}", v.details)
            };
            format!("spam filter {} marked the email as spam{details}", v.client)
        })
    }

    /// Why this provider's card fails the check: it would reject the email, and
    /// `--requirements fail`. Each failed required rule with what was seen and its fix.
    pub fn requirement_failures(&self, p: &ProviderCheck) -> Vec<String> {
        let fails = self
            .spam
            .as_ref()
            .and_then(|s| s.requirements.as_ref())
            .is_some_and(|r| r.fail);
        if !fails || p.verdict != "would_reject" {
            return Vec::new();
        }
        p.rules
            .iter()
            .filter(|r| r.need == "required" && r.status == "fail")
            .map(|r| {
                let fix = r
                    .fix
                    .as_deref()
                    .map(|f| format!(" Fix: {f}"))
                    .unwrap_or_default();
                format!("{} would reject it: {}: {}.{fix}", p.name, r.title, r.seen)
            })
            .collect()
    }

    /// Every reason the check fails, clients first.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .clients
            .iter()
            .flat_map(|c| self.client_failures(c))
            .collect();
        if let Some(a) = self.approval.as_ref().filter(|a| a.approved_test.is_none()) {
            out.push(match &a.note {
                Some(note) => format!("approval required: {note}"),
                None => format!(
                    "approval required: no version of this email with this content is approved \
                     (this test is version {}); approve test {} on its page, or run again once an \
                     approved version's HTML is the one checked",
                    a.version.map_or("?".into(), |v| v.to_string()),
                    self.test_id
                ),
            });
        }
        if let Some(spam) = &self.spam {
            out.extend(spam.filters.iter().filter_map(|v| self.spam_failure(v)));
            if let Some(r) = &spam.requirements {
                out.extend(
                    r.providers
                        .iter()
                        .flat_map(|p| self.requirement_failures(p)),
                );
            }
        }
        out
    }

    /// The human report (`--format text`).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "mailproof check: test {} ({:?}) on {}",
            self.test_id, self.subject, self.server
        );
        match &self.baseline {
            Some(b) => {
                let how = match &b.file {
                    Some(f) => format!("from {f}, compared here"),
                    None => "compared by the server".into(),
                };
                let _ = writeln!(
                    s,
                    "baseline: test {} ({how}); limit {} changed pixels",
                    b.test_id,
                    self.limit()
                );
            }
            None => {
                let _ = writeln!(s, "baseline: none (only bounces and spam are checked)");
            }
        }
        let width = self.clients.iter().map(|c| c.id.len()).max().unwrap_or(0);
        let _ = writeln!(s, "screenshots:");
        for c in &self.clients {
            let failures = self.client_failures(c);
            let tag = if c.status == "Bounced" {
                "BOUNCED"
            } else if !failures.is_empty() {
                "CHANGED"
            } else {
                "ok"
            };
            let detail = match (&c.comparison, c.bounce.as_deref()) {
                (_, Some(b)) => b.to_string(),
                (Some(Comparison::Compared { variants }), _) => variants
                    .iter()
                    .map(|v| match &v.error {
                        Some(e) => format!("{} not compared: {e}", v.variant),
                        None => format!("{} {}", v.variant, percent(v.changed_share)),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                (Some(Comparison::NotCompared { reason }), _) => format!("not compared: {reason}"),
                (None, _) => String::new(),
            };
            let line = format!("  {tag:<8} {:<width$}  {detail}", c.id);
            let _ = writeln!(s, "{}", line.trim_end());
        }
        if let Some(spam) = &self.spam {
            let _ = writeln!(s, "spam ({}):", spam.method);
            for v in &spam.filters {
                let tag = match v.spam {
                    Some(1) => "SPAM",
                    Some(_) => "ok",
                    None => "no answer",
                };
                let verdict = match v.spam {
                    Some(1) => "spam",
                    Some(0) => "no decision",
                    Some(_) => "not spam",
                    None => "",
                };
                let _ = writeln!(
                    s,
                    "  {tag:<8} {} ({}): {verdict} {}",
                    v.client, v.kind, v.details
                );
            }
        }
        if let Some(r) = self.spam.as_ref().and_then(|s| s.requirements.as_ref()) {
            let how = if r.fail {
                "a rejection fails the check"
            } else {
                "warnings only"
            };
            let _ = writeln!(s, "sender requirements ({how}):");
            if let Some(note) = &r.note {
                let _ = writeln!(s, "  {note}");
            }
            for p in &r.providers {
                let tag = match p.verdict.as_str() {
                    "meets" => "ok",
                    "would_reject" => "REJECT",
                    _ => "UNCHECKED",
                };
                let _ = writeln!(s, "  {tag:<9} {}", p.summary);
            }
        }
        if let Some(a) = &self.approval {
            match (&a.approved_test, a.approved_version) {
                (Some(t), Some(v)) => {
                    let _ = writeln!(
                        s,
                        "approval: version {v} (test {t}) with this content is approved"
                    );
                }
                _ => {
                    let _ = writeln!(s, "approval: NOT APPROVED");
                }
            }
        }
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(s, "result: passed");
        } else {
            let _ = writeln!(s, "result: FAILED ({} problems)", failures.len());
            for f in failures {
                let _ = writeln!(s, "  - {f}");
            }
        }
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample() -> Report {
        let variant = |share: f64, extra_height: i64| VariantChange {
            variant: "default".into(),
            changed_share: share,
            extra_width: 0,
            extra_height,
            highlight: None,
            error: None,
        };
        let client = |id: &str, status: &str, comparison: Option<Comparison>| ClientOutcome {
            id: id.into(),
            status: status.into(),
            bounce: (status == "Bounced").then(|| "550 <mailbox> & unavailable".into()),
            screenshots: BTreeMap::new(),
            comparison,
        };
        Report {
            approval: None,
            version: REPORT_VERSION,
            server: "http://127.0.0.1:8080".into(),
            test_id: "T2".into(),
            subject: "Spring \"sale\"".into(),
            max_diff: 0.005,
            baseline: Some(Baseline {
                test_id: "T1".into(),
                file: None,
            }),
            clients: vec![
                client(
                    "same_client",
                    "Complete",
                    Some(Comparison::Compared {
                        variants: vec![variant(0.005, 0)],
                    }),
                ),
                client(
                    "changed_client",
                    "Complete",
                    Some(Comparison::Compared {
                        variants: vec![variant(0.0193, 0)],
                    }),
                ),
                client(
                    "taller_client",
                    "Complete",
                    Some(Comparison::Compared {
                        variants: vec![variant(0.0, 40)],
                    }),
                ),
                client(
                    "new_client",
                    "Complete",
                    Some(Comparison::NotCompared {
                        reason: "not in the baseline".into(),
                    }),
                ),
                client("bounced_client", "Bounced", None),
            ],
            spam: Some(SpamOutcome {
                method: "seed".into(),
                filters: vec![
                    SpamVerdict {
                        client: "SpamAssassin".into(),
                        kind: "b2b".into(),
                        spam: Some(-1),
                        details: "score 0.1".into(),
                    },
                    SpamVerdict {
                        client: "rspamd".into(),
                        kind: "b2c".into(),
                        spam: Some(1),
                        details: "score 16 > 15".into(),
                    },
                ],
                requirements: Some(Requirements {
                    fail: true,
                    providers: vec![
                        ProviderCheck {
                            provider: "gmail".into(),
                            name: "Gmail".into(),
                            verdict: "would_reject".into(),
                            summary: "Gmail: would reject — received without TLS".into(),
                            rules: vec![
                                RuleCheck {
                                    rule: "tls".into(),
                                    title: "The message was sent over TLS".into(),
                                    need: "required".into(),
                                    status: "fail".into(),
                                    seen: "received from 192.0.2.1 without TLS".into(),
                                    fix: Some("Enable STARTTLS.".into()),
                                },
                                RuleCheck {
                                    rule: "spf-pass".into(),
                                    title: "SPF passes".into(),
                                    need: "required".into(),
                                    status: "pass".into(),
                                    seen: "spf=pass".into(),
                                    fix: None,
                                },
                            ],
                        },
                        ProviderCheck {
                            provider: "microsoft".into(),
                            name: "Outlook.com".into(),
                            verdict: "meets".into(),
                            summary: "Outlook.com: meets the sender requirements".into(),
                            rules: Vec::new(),
                        },
                    ],
                    note: None,
                }),
            }),
            timings: Timings::default(),
        }
    }

    #[test]
    fn failures_name_each_changed_bounced_client_and_spam_filter_with_the_figures() {
        let f = sample().failures();
        assert_eq!(
            f,
            vec![
                "changed_client: default changed 1.93% of its pixels (limit 0.5%)",
                "taller_client: default changed 0% of its pixels (limit 0.5%), and is 40 px taller",
                "bounced_client: bounced (550 <mailbox> & unavailable)",
                "spam filter rspamd marked the email as spam: score 16 > 15",
                "Gmail would reject it: The message was sent over TLS: received from 192.0.2.1 without TLS. Fix: Enable STARTTLS.",
            ]
        );
    }

    #[test]
    fn a_rejecting_provider_only_warns_with_requirements_warn() {
        let mut r = sample();
        if let Some(req) = r.spam.as_mut().and_then(|s| s.requirements.as_mut()) {
            req.fail = false;
        }
        assert!(r.failures().iter().all(|f| !f.contains("would reject")));
        let t = r.to_text();
        assert!(t.contains("sender requirements (warnings only):"), "{t}");
        assert!(
            t.contains("  REJECT    Gmail: would reject — received without TLS"),
            "{t}"
        );
    }

    #[test]
    fn a_report_without_changes_passes() {
        let mut r = sample();
        r.clients
            .retain(|c| matches!(c.id.as_str(), "same_client" | "new_client"));
        r.spam = None;
        assert!(r.failures().is_empty());
        assert!(r.to_text().ends_with("result: passed\n"), "{}", r.to_text());
    }

    #[test]
    fn the_text_report_tags_each_client() {
        let t = sample().to_text();
        for line in [
            "  ok       same_client     default 0.5%",
            "  CHANGED  changed_client  default 1.93%",
            "  BOUNCED  bounced_client  550 <mailbox> & unavailable",
            "  ok       new_client      not compared: not in the baseline",
            "  SPAM     rspamd (b2c): spam score 16 > 15",
            "  REJECT    Gmail: would reject — received without TLS",
            "  ok        Outlook.com: meets the sender requirements",
            "result: FAILED (5 problems)",
        ] {
            assert!(t.contains(line), "missing {line:?} in:\n{t}");
        }
    }

    #[test]
    fn the_json_report_reads_back() {
        let r = sample();
        let json = serde_json::to_string(&r).expect("json");
        let back: Report = serde_json::from_str(&json).expect("read back");
        assert_eq!(back.failures(), r.failures());
        assert_eq!(back.test_id, "T2");
    }
}
