//! The `svc` method: the service sends the test message over SMTP to its own listener at the test's
//! seed addresses, so it is judged like outside mail. As a sender does, each seed address gets its
//! own message (its own `To:` and `Message-ID:`), signed with the service's DKIM key: one message
//! to every address at once is scored by the filters for its many similar recipients, which says
//! nothing about the email being tested.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use background::{Held, Loops, Slot};
use smtp::DkimSigner;
use store::{Key, Outcome, PendingSend, Store, SVC_SENDS};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::InboxError;

/// The API wakes us on new tests, but without keeping a permit; rescan to catch missed ones.
const RESCAN: Duration = Duration::from_secs(2);

/// Sends pending `svc` spam tests, each claimed under a lease (`Store::claim_svc_send`), so
/// several senders on one database never send a test twice.
pub struct SvcSender {
    store: Store,
    signer: Arc<DkimSigner>,
    deliver_to: SocketAddr,
    seed_domain: String,
    /// This sender's name on its leases.
    worker: String,
}

impl SvcSender {
    /// `deliver_to` is our own inbound SMTP listener.
    pub fn new(
        store: Store,
        signer: DkimSigner,
        deliver_to: SocketAddr,
        seed_domain: String,
    ) -> SvcSender {
        SvcSender {
            store,
            signer: Arc::new(signer),
            deliver_to,
            seed_domain,
            worker: crate::lease_owner(&SVC_SENDS),
        }
    }

    fn loops(&self, wake: Option<Arc<Notify>>) -> Loops {
        Loops::new(&self.store, &SVC_SENDS, 1, wake, RESCAN)
    }

    /// Sends the oldest due test (under the heartbeat, as the loops do); `false` when none is
    /// due. A failed send is recorded on the test (and retried later) and returned as the error.
    pub async fn run_one(&self) -> Result<bool, InboxError> {
        self.loops(None)
            .turn_as(
                &self.worker,
                |slot| self.claim(slot),
                |slot, held, send| self.send_claimed(slot, held, send),
            )
            .await
    }

    /// Sends until `cancel`, woken by `wake` (new tests) or a short periodic rescan.
    pub async fn run(self, wake: Arc<Notify>, cancel: CancellationToken) {
        tracing::info!(dkim = %self.signer.dns_name(), "svc sender started");
        let this = &self;
        this.loops(Some(wake))
            .run(
                cancel,
                |slot| this.claim(slot),
                |slot, held, send| this.send_claimed(slot, held, send),
            )
            .await;
        tracing::info!("svc sender stopped");
    }

    async fn claim(&self, slot: Slot) -> Result<Option<(Key, PendingSend)>, InboxError> {
        let now = chrono::Utc::now().timestamp();
        let claimed = self
            .store
            .claim_svc_send(&slot.owner, now, slot.lease_secs())
            .await?;
        Ok(claimed.map(|send| (Key::Text(send.test_id.clone()), send)))
    }

    /// Sends a claimed test's messages and records the test sent. A send taken over while this
    /// sender's renewals failed is sent by its holder: the lease is confirmed just before sending,
    /// each delivery is recorded only while the lease is ours, and a record refused for a lost
    /// lease is logged and counted.
    async fn send_claimed(
        &self,
        slot: Slot,
        held: Held,
        send: PendingSend,
    ) -> Result<(), InboxError> {
        if !held.confirm().await? {
            held.refused();
            tracing::warn!(
                test_id = send.test_id,
                "svc send taken over before sending; not sent from here (its holder sends it)"
            );
            return Ok(());
        }
        let result = match self.send(&slot, &send).await {
            Ok(Progress::LeaseLost) => {
                held.refused();
                tracing::warn!(
                    test_id = send.test_id,
                    "svc send lease lost while sending; the sender that took it sends the rest"
                );
                return Ok(());
            }
            Ok(Progress::AllSent) => Ok(()),
            Err(e) => Err(e),
        };
        let now = chrono::Utc::now().timestamp();
        let outcome = match &result {
            Ok(()) => Outcome::Done,
            Err(e) => SVC_SENDS.failed(send.attempts, now, e.to_string()),
        };
        if !self
            .store
            .finish_svc_send(&send.test_id, &slot.owner, now, &outcome)
            .await?
        {
            held.refused();
            tracing::warn!(test_id = send.test_id, "svc send not recorded (a send is finished once): its lease was taken over, and its holder sends what is left");
            return result;
        }
        match (&result, &outcome) {
            (Ok(()), _) => tracing::info!(
                test_id = send.test_id,
                recipients = send.unsent.len(),
                "svc test messages sent"
            ),
            (Err(e), Outcome::GiveUp { .. }) => tracing::error!(
                test_id = send.test_id,
                error = %e,
                "giving up sending the svc test message"
            ),
            _ => {}
        }
        result
    }

    /// Sends each seed address still missing its message, recording each delivery as it lands
    /// (a crash re-sends at most the one in flight). A delivery that fails is noted on its filter's
    /// result and the others are still sent; the error names every address that failed.
    async fn send(&self, slot: &Slot, send: &PendingSend) -> Result<Progress, InboxError> {
        let from = send
            .from_address
            .clone()
            .filter(|f| !f.trim().is_empty())
            .unwrap_or_else(|| format!("mailproof@{}", self.seed_domain));
        let mut failed = Vec::new();
        for client in &send.unsent {
            let rcpt = domain::seed::seed_address(&send.seed_key, client, &self.seed_domain);
            let signed = self.message_for(send, &from, &rcpt)?;
            let delivered = smtp::deliver_local(
                self.deliver_to,
                bare_address(&from),
                std::slice::from_ref(&rcpt),
                &signed,
            )
            .await;
            let now = chrono::Utc::now().timestamp();
            match delivered {
                Ok(()) => {
                    let lease_until = now.saturating_add(slot.lease_secs());
                    if !self
                        .store
                        .record_svc_recipient_sent(
                            &send.test_id,
                            client,
                            &slot.owner,
                            now,
                            lease_until,
                        )
                        .await?
                    {
                        return Ok(Progress::LeaseLost);
                    }
                }
                Err(e) => {
                    let next = if SVC_SENDS.gives_up(send.attempts) {
                        "given up"
                    } else {
                        "it is sent again"
                    };
                    let note = format!(
                        "the svc message to this filter's seed address {rcpt} was not delivered \
                         ({e}); {next}"
                    );
                    self.store
                        .note_spam_pending(&send.test_id, client, &note, now)
                        .await?;
                    failed.push(format!("{client} <{rcpt}>: {e}"));
                }
            }
        }
        if failed.is_empty() {
            return Ok(Progress::AllSent);
        }
        Err(InboxError::Send {
            test_id: send.test_id.clone(),
            reason: format!(
                "{} of {} seed addresses not delivered: {}",
                failed.len(),
                send.unsent.len(),
                failed.join("; ")
            ),
        })
    }

    /// The message for one seed address, as a sender sends it: only that address in `To:`, a
    /// fresh `Message-ID:`, its own DKIM signature.
    fn message_for(
        &self,
        send: &PendingSend,
        from: &str,
        rcpt: &str,
    ) -> Result<Vec<u8>, InboxError> {
        let build_err = |reason: String| InboxError::Build {
            test_id: send.test_id.clone(),
            reason,
        };
        let message = smtp::build_message(
            &send.subject,
            &send.html,
            from,
            &[rcpt.to_owned()],
            &self.seed_domain,
        )
        .map_err(|e| build_err(e.to_string()))?;
        self.signer
            .sign(&message)
            .map_err(|e| build_err(e.to_string()))
    }
}

/// How far a claimed send got without an error.
enum Progress {
    AllSent,
    /// Another sender took the test over (our lease expired): it sends what is left.
    LeaseLost,
}

/// `Name <a@b>` -> `a@b`, for the envelope.
pub fn bare_address(from: &str) -> &str {
    match (from.rfind('<'), from.rfind('>')) {
        (Some(open), Some(close)) if open < close => from[open + 1..close].trim(),
        _ => from.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::bare_address;

    #[test]
    fn envelope_sender_is_the_bare_address() {
        assert_eq!(
            bare_address("Acme News <news@acme.example>"),
            "news@acme.example"
        );
        assert_eq!(bare_address(" news@acme.example "), "news@acme.example");
    }
}
