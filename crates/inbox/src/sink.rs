//! The SMTP listener's view of the service: who may receive mail, and where accepted mail goes.

use std::sync::Arc;

use smtp::{InboundMessage, MailSink, RcptDecision, SinkError};
use store::{NewInbound, Store};
use tokio::sync::Notify;

use crate::address::Recipient;
use crate::InboxConfig;

/// Accepts mail only for seed addresses of known keys and profiles and for auto-inbox addresses of
/// existing accounts; never a relay. Stores accepted mail durably before the 250.
pub struct InboxSink {
    store: Store,
    cfg: InboxConfig,
    /// Slugs of the spam filter profiles, as seed addresses spell them.
    profile_slugs: Vec<String>,
    /// Wakes the inbound processor once a message is committed.
    inbound_ready: Arc<Notify>,
}

impl InboxSink {
    /// `profiles` are the spam filter profile names (`spam::FilterProfile::client`).
    pub fn new(
        store: Store,
        cfg: InboxConfig,
        profiles: &[String],
        inbound_ready: Arc<Notify>,
    ) -> InboxSink {
        InboxSink {
            store,
            cfg,
            profile_slugs: profiles
                .iter()
                .map(|p| domain::seed::profile_slug(p))
                .collect(),
            inbound_ready,
        }
    }

    async fn decide(&self, rcpt: &str) -> Result<RcptDecision, store::StoreError> {
        let known = match Recipient::classify(rcpt, &self.cfg.seed_domain, &self.cfg.inbox_domain) {
            Recipient::Seed { key, slug } => {
                self.profile_slugs.contains(&slug) && self.store.seed_key(&key).await?.is_some()
            }
            Recipient::AutoInbox { local, .. } => {
                self.store.account_by_auto_inbox(&local).await?.is_some()
            }
            Recipient::Other => false,
        };
        Ok(if known {
            RcptDecision::Accept
        } else {
            RcptDecision::unknown_mailbox()
        })
    }
}

#[async_trait::async_trait]
impl MailSink for InboxSink {
    async fn check_recipient(&self, rcpt: &str) -> RcptDecision {
        match self.decide(rcpt).await {
            Ok(decision) => {
                if decision != RcptDecision::Accept {
                    tracing::info!(rcpt, "recipient refused: not a seed or auto-inbox address");
                }
                decision
            }
            Err(e) => {
                tracing::error!(rcpt, error = %e, "cannot check a recipient; asking the sender to retry");
                RcptDecision::Reject {
                    code: 451,
                    message: "4.3.0 Temporary problem looking up the recipient, try again later"
                        .to_owned(),
                }
            }
        }
    }

    async fn store(&self, msg: InboundMessage) -> Result<(), SinkError> {
        let row = NewInbound {
            received_at: msg.received_at.timestamp(),
            mail_from: msg.mail_from,
            rcpt_to: msg.rcpt_to,
            peer: msg.peer.to_string(),
            helo: msg.helo,
            data: msg.data,
        };
        let id = self.store.insert_inbound(&row).await.map_err(|e| {
            tracing::error!(error = %e, "cannot store an inbound message; the sender gets 451");
            SinkError::new(format!("cannot store the message: {e}"))
        })?;
        tracing::info!(
            inbound_id = id,
            bytes = row.data.len(),
            rcpts = row.rcpt_to.len(),
            "inbound message stored"
        );
        self.inbound_ready.notify_one();
        Ok(())
    }
}
