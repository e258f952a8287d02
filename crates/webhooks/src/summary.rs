//! Completion webhooks on the wire: the JSON summary POSTed when a test completes, its signature
//! header, and the per-account signing secret. The delivery worker (`delivery`) builds the
//! summary from stored rows with [`Summary::build`], signs the exact bytes with [`signature`] and
//! posts them through the network policy.

use serde::Serialize;
use store::{ClaimedCallback, ClientRow, SpamRow, TestRow};

/// The header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub const SIGNATURE_HEADER: &str = "X-Mailproof-Signature";
/// The header carrying the delivery id (also in the body): the same in every attempt.
pub const DELIVERY_HEADER: &str = "X-Mailproof-Delivery";
/// The header naming the event.
pub const EVENT_HEADER: &str = "X-Mailproof-Event";
/// The only event so far.
pub const EVENT_COMPLETED: &str = "test.completed";

/// A new signing secret: `whsec_` and 32 random characters (about 190 bits).
pub fn new_secret() -> String {
    format!("whsec_{}", domain::signing::random_secret(32))
}

/// The value of [`SIGNATURE_HEADER`] for `body` sent at `timestamp`. The timestamp is signed with
/// the body so that a captured request cannot be replayed later under a fresh time.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let t = timestamp.to_string();
    let mac = domain::signing::hmac_sha256_hex(secret.as_bytes(), &[t.as_bytes(), b".", body]);
    format!("t={timestamp},v1={mac}")
}

/// The body of a completion callback.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub event: &'static str,
    /// The same in every attempt of this callback: receivers dedupe on it.
    pub delivery_id: String,
    pub test_id: String,
    /// `email` or `spam`.
    pub kind: &'static str,
    /// UNIX seconds.
    pub completed_at: i64,
    pub counts: Counts,
    /// Per client of an email test (empty for spam tests).
    pub clients: Vec<ClientStatus>,
    /// Per spam filter (empty for an email test without spam testing).
    pub spam: Vec<FilterVerdict>,
    /// Per mailbox provider, its sender-requirements verdict (empty without spam testing, or
    /// before the first message arrived).
    pub requirements: Vec<ProviderVerdict>,
}

/// One provider's card in a line: its verdict (`meets`, `would_reject`, `not_checked`) and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProviderVerdict {
    pub provider: String,
    pub verdict: domain::requirements::ProviderVerdict,
    pub summary: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    pub clients: usize,
    pub complete: usize,
    pub bounced: usize,
    pub filters: usize,
    /// Filters that marked the message as spam (`spam` = 1).
    pub spam: usize,
    /// Filters that passed it (`spam` = -1).
    pub not_spam: usize,
    /// Filters without a decision (`spam` = 0).
    pub undecided: usize,
}

impl Counts {
    /// Counted through the one reading of §2.8's integers, the one the pages show; a filter that
    /// has not returned is undecided.
    fn tally_spam(&mut self, spam: &[SpamRow]) {
        for row in spam {
            match row.spam {
                Some(domain::SpamVerdict::Spam) => self.spam += 1,
                Some(domain::SpamVerdict::NotSpam) => self.not_spam += 1,
                Some(domain::SpamVerdict::Neutral) | None => self.undecided += 1,
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientStatus {
    pub client: String,
    /// `Complete` or `Bounced` (as in `GET /v5/email/tests/{id}/results`).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounce_code: Option<String>,
}

/// One filter's answer as the receiver gets it: the §2.8 integer, or null while the filter has
/// not returned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilterVerdict {
    pub client: String,
    #[serde(rename = "type")]
    pub kind: domain::FilterType,
    /// Serialised as the §2.8 integer: 1 spam, 0 undecided, -1 not spam.
    pub spam: Option<domain::SpamVerdict>,
}

impl Summary {
    pub fn build(
        callback: &ClaimedCallback,
        test: &TestRow,
        clients: &[ClientRow],
        spam: &[SpamRow],
        requirements: Option<&domain::requirements::Report>,
    ) -> Summary {
        let mut counts = Counts {
            clients: clients.len(),
            filters: spam.len(),
            ..Counts::default()
        };
        let clients = clients
            .iter()
            .map(|c| {
                match c.status {
                    domain::ScreenshotStatus::Complete => counts.complete += 1,
                    domain::ScreenshotStatus::Bounced => counts.bounced += 1,
                    _ => {}
                }
                ClientStatus {
                    client: c.client_id.clone(),
                    status: c.status.as_str(),
                    bounce_code: c.bounce_code.clone(),
                }
            })
            .collect();
        counts.tally_spam(spam);
        Summary {
            event: EVENT_COMPLETED,
            delivery_id: callback.delivery_id.clone(),
            test_id: test.id.clone(),
            kind: match test.kind {
                domain::TestKind::Email => "email",
                domain::TestKind::Spam => "spam",
            },
            completed_at: callback.completed_at,
            counts,
            clients,
            spam: spam
                .iter()
                .map(|s| FilterVerdict {
                    client: s.client.clone(),
                    kind: s.kind,
                    spam: s.spam,
                })
                .collect(),
            requirements: requirements
                .map(|r| {
                    r.providers
                        .iter()
                        .map(|p| ProviderVerdict {
                            provider: p.provider.clone(),
                            verdict: p.verdict,
                            summary: p.summary.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The exact bytes to sign and send.
    pub fn to_body(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // Computed independently: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
        assert_eq!(
            signature("whsec_test", 1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }

    #[test]
    fn the_signature_changes_with_body_time_and_secret() {
        let base = signature("s1", 10, b"body");
        assert_ne!(base, signature("s1", 10, b"bodY"));
        assert_ne!(base, signature("s1", 11, b"body"));
        assert_ne!(base, signature("s2", 10, b"body"));
        assert!(base.starts_with("t=10,v1="));
        assert_eq!(base.len(), "t=10,v1=".len() + 64);
    }

    #[test]
    fn spam_counts_read_the_verdicts_as_the_pages_do() {
        let row = |spam| SpamRow {
            client: "f".into(),
            kind: domain::FilterType::B2c,
            spam,
            details: String::new(),
        };
        let mut counts = Counts::default();
        counts.tally_spam(&[
            row(Some(domain::SpamVerdict::Spam)),
            row(Some(domain::SpamVerdict::NotSpam)),
            row(Some(domain::SpamVerdict::NotSpam)),
            row(Some(domain::SpamVerdict::Neutral)),
            row(None),
        ]);
        assert_eq!(
            (counts.spam, counts.not_spam, counts.undecided),
            (1, 2, 2),
            "a clean verdict (-1) is never counted as spam"
        );
    }

    #[test]
    fn secrets_are_long_and_different() {
        let a = new_secret();
        assert!(a.starts_with("whsec_") && a.len() == 38, "{a}");
        assert_ne!(a, new_secret());
    }
}
