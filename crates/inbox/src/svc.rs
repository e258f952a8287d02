//! The `svc` method: the service sends the test message over SMTP to its own listener at the test's
//! seed addresses, so it is judged like outside mail. As a sender does, each seed address gets its
//! own message (its own `To:` and `Message-ID:`), signed with the service's DKIM key: one message
//! to every address at once is scored by the filters for its many similar recipients, which says
//! nothing about the email being tested.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use background::Loops;
use smtp::DkimSigner;
use store::{Outcome, PendingSend, Store, SVC_SENDS};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::InboxError;

/// How long a claimed send is ours: far longer than one SMTP delivery to our own listener, and
/// renewed by each delivery recorded. A process that dies after delivering to one seed address but
/// before recording it makes the next claimer send that one again (at least once, never lost); the
/// addresses recorded are not sent again.
const LEASE: Duration = Duration::from_secs(120);
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

    /// Sends the oldest due test; `false` when none is due. A failed send is recorded on the test
    /// (and retried later) and returned as the error.
    pub async fn run_one(&self) -> Result<bool, InboxError> {
        let Some(send) = self
            .store
            .claim_svc_send(
                &self.worker,
                chrono::Utc::now().timestamp(),
                LEASE.as_secs() as i64,
            )
            .await?
        else {
            return Ok(false);
        };
        let result = self.send(&send).await;
        let now = chrono::Utc::now().timestamp();
        match result {
            Ok(Progress::LeaseLost) => {
                tracing::warn!(
                    test_id = send.test_id,
                    "svc send lease lost while sending; the sender that took it sends the rest"
                );
                Ok(true)
            }
            Ok(Progress::AllSent) => {
                if !self
                    .store
                    .finish_svc_send(&send.test_id, &self.worker, now, &Outcome::Done)
                    .await?
                {
                    tracing::warn!(test_id = send.test_id, "svc send lease lost before it was recorded; another sender may send it again");
                }
                tracing::info!(
                    test_id = send.test_id,
                    recipients = send.unsent.len(),
                    "svc test messages sent"
                );
                Ok(true)
            }
            Err(e) => {
                let message = e.to_string();
                let outcome = SVC_SENDS.failed(send.attempts, now, message.clone());
                self.store
                    .finish_svc_send(&send.test_id, &self.worker, now, &outcome)
                    .await?;
                if matches!(outcome, Outcome::GiveUp { .. }) {
                    tracing::error!(
                        test_id = send.test_id,
                        error = message,
                        "giving up sending the svc test message"
                    );
                }
                Err(e)
            }
        }
    }

    /// Sends until `cancel`, woken by `wake` (new tests) or a short periodic rescan.
    pub async fn run(self, wake: Arc<Notify>, cancel: CancellationToken) {
        tracing::info!(dkim = %self.signer.dns_name(), "svc sender started");
        Loops::new(SVC_SENDS.name, 1, Some(wake), RESCAN)
            .run(cancel, |_| self.run_one())
            .await;
        tracing::info!("svc sender stopped");
    }

    /// Sends each seed address still missing its message, recording each delivery as it lands
    /// (a crash re-sends at most the one in flight). A delivery that fails is noted on its filter's
    /// result and the others are still sent; the error names every address that failed.
    async fn send(&self, send: &PendingSend) -> Result<Progress, InboxError> {
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
                    let lease_until = now + LEASE.as_secs() as i64;
                    if !self
                        .store
                        .record_svc_recipient_sent(
                            &send.test_id,
                            client,
                            &self.worker,
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
