//! Processing stored inbound mail: seed mail is scanned by the profile its address names and the
//! verdict recorded on the test bound to its key; auto-inbox mail becomes an email test.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use background::{Held, Loops, Slot};
use domain::Catalog;
use spam::requirements::{Arrival, HopTls};
use spam::{Envelope, SpamError, SpamFilters};
use store::{InboundRow, Key, Outcome, SpamUpdate, Store, StoreError, INBOUND};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::address::Recipient;
use crate::auto_inbox;
use crate::{InboxConfig, InboxError};

/// How long mail for a reserved seed key waits for the test that binds it.
const UNBOUND_KEY_WAIT: Duration = Duration::from_secs(3600);
/// A message waiting for its seed key to be bound is looked at again this often.
const KEY_WAIT_RETRY: Duration = Duration::from_secs(2);
/// Rescan even without a wake-up, so that a missed notification only delays work; short, because
/// a test created by an api process in another process (which binds the seed key that stored mail
/// waits for) wakes nobody here.
const RESCAN: Duration = Duration::from_secs(2);

/// What became of one recipient of a message.
enum Step {
    Done,
    /// The seed key is reserved but no test is bound to it yet.
    WaitForTest,
    /// A filter failed; the reason is logged and the recipient is tried again later.
    Retry(String),
    /// The message was taken over (this processor's renewals failed): its holder does the rest.
    LeaseLost,
}

/// Works through the inbound queue (`Store::claim_inbound`). See the crate docs for the flow.
/// Any number of processors, in any number of processes, can share one database: each message is
/// claimed by one of them under a lease, and its retry time and finished recipients are stored
/// with it.
pub struct InboundProcessor {
    store: Store,
    cfg: InboxConfig,
    catalog: Arc<Catalog>,
    filters: Arc<SpamFilters>,
    /// Woken when an email test was created, for the render workers.
    work_ready: Arc<Notify>,
    /// This processor's name on its leases: unique across processes and restarts.
    worker: String,
}

impl InboundProcessor {
    pub fn new(
        store: Store,
        cfg: InboxConfig,
        catalog: Arc<Catalog>,
        filters: Arc<SpamFilters>,
        work_ready: Arc<Notify>,
    ) -> InboundProcessor {
        InboundProcessor {
            store,
            cfg,
            catalog,
            filters,
            work_ready,
            worker: crate::lease_owner(&INBOUND),
        }
    }

    fn loops(&self, wake: Option<Arc<Notify>>) -> Loops {
        Loops::new(&self.store, &INBOUND, 1, wake, RESCAN)
    }

    /// Processes the oldest message that is due (under the heartbeat, as the loops do); `false`
    /// when there is none.
    pub async fn run_one(&self) -> Result<bool, InboxError> {
        self.loops(None)
            .turn_as(
                &self.worker,
                |slot| self.claim(slot),
                |slot, held, row| self.pass(slot, held, row),
            )
            .await
    }

    /// Processes mail until `cancel`, woken by `wake` (the SMTP sink) or by a periodic rescan.
    pub async fn run(self, wake: Arc<Notify>, cancel: CancellationToken) {
        tracing::info!("inbound processor started");
        let this = &self;
        this.loops(Some(wake))
            .run(
                cancel,
                |slot| this.claim(slot),
                |slot, held, row| this.pass(slot, held, row),
            )
            .await;
        tracing::info!("inbound processor stopped");
    }

    async fn claim(&self, slot: Slot) -> Result<Option<(Key, InboundRow)>, InboxError> {
        let claimed = self
            .store
            .claim_inbound(&slot.owner, unix_now(), slot.lease_secs())
            .await?;
        Ok(claimed.map(|row| (Key::Int(row.id), row)))
    }

    /// One pass over a claimed message, its outcome recorded.
    async fn pass(&self, slot: Slot, held: Held, row: InboundRow) -> Result<(), InboxError> {
        let mut done = row.done_rcpts.clone();
        if let Err(e) = self.process(&row, &slot.owner, &held, &mut done).await {
            // Keep what is done and look again shortly. If even this fails (the database is
            // gone), the lease expires and the message is taken up again then.
            let outcome = INBOUND.failed(row.attempts, unix_now(), e.to_string());
            match self
                .store
                .finish_inbound(row.id, &slot.owner, &outcome, &done)
                .await
            {
                Ok(true) => {}
                Ok(false) => held.refused(),
                Err(e2) => {
                    tracing::warn!(inbound_id = row.id, error = %e2, "could not record the failed pass; the message is taken up again when its lease expires");
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// One pass over a claimed message. `done` holds the recipients that have their outcome (from
    /// earlier passes too) and grows as this pass finishes more.
    async fn process(
        &self,
        row: &InboundRow,
        worker: &str,
        held: &Held,
        done: &mut Vec<String>,
    ) -> Result<(), InboxError> {
        let mut retry = Vec::new();
        let mut waiting = false;
        let mut seen = HashSet::new();
        for rcpt in &row.rcpt_to {
            let rcpt = rcpt.to_ascii_lowercase();
            if done.contains(&rcpt) || !seen.insert(rcpt.clone()) {
                continue;
            }
            let step =
                match Recipient::classify(&rcpt, &self.cfg.seed_domain, &self.cfg.inbox_domain) {
                    Recipient::Seed { key, slug } => {
                        self.scan_seed(row, held, &rcpt, &key, &slug).await?
                    }
                    Recipient::AutoInbox { local, customer_id } => {
                        self.auto_inbox(row, held, &rcpt, &local, customer_id.as_deref())
                            .await?
                    }
                    Recipient::Other => {
                        tracing::warn!(
                            inbound_id = row.id,
                            rcpt,
                            "stored mail for an address that is not ours; ignored"
                        );
                        Step::Done
                    }
                };
            match step {
                Step::Done => done.push(rcpt),
                Step::WaitForTest => waiting = true,
                Step::Retry(reason) => retry.push(format!("{rcpt}: {reason}")),
                Step::LeaseLost => {
                    held.refused();
                    tracing::warn!(inbound_id = row.id, rcpt, "inbound message taken over mid-pass; this pass stops (its holder processes the rest)");
                    return Ok(());
                }
            }
        }
        let now = unix_now();
        let done_rcpts = std::mem::take(done);
        let outcome = if !retry.is_empty() {
            let error = retry.join("; ");
            let attempts = row.attempts;
            let outcome = INBOUND.failed(attempts, now, error.clone());
            match &outcome {
                Outcome::Retry { not_before, .. } => tracing::warn!(
                    inbound_id = row.id,
                    attempts,
                    retry_in_s = not_before - now,
                    error,
                    "inbound message kept for a later scan"
                ),
                _ => tracing::error!(
                    inbound_id = row.id,
                    attempts,
                    error,
                    "giving up on an inbound message; it stays stored as failed"
                ),
            }
            outcome
        } else if waiting {
            // Waiting is not a failure: the pass gives its attempt back.
            Outcome::Retry {
                error: None,
                not_before: now + KEY_WAIT_RETRY.as_secs() as i64,
                counted: false,
            }
        } else {
            Outcome::Done
        };
        if !self
            .store
            .finish_inbound(row.id, worker, &outcome, &done_rcpts)
            .await?
        {
            held.refused();
            tracing::warn!(
                inbound_id = row.id,
                "inbound pass not recorded (a message is finished once): its lease was taken over, another processor has it now"
            );
        } else if matches!(outcome, Outcome::Done) {
            tracing::info!(inbound_id = row.id, "inbound message processed");
        }
        Ok(())
    }

    async fn scan_seed(
        &self,
        row: &InboundRow,
        held: &Held,
        rcpt: &str,
        key: &str,
        slug: &str,
    ) -> Result<Step, InboxError> {
        let Some(profile) = self
            .filters
            .clients()
            .iter()
            .find(|p| domain::seed::profile_slug(&p.client) == slug)
        else {
            tracing::warn!(
                inbound_id = row.id,
                rcpt,
                "no spam filter profile has this seed address's name any more; ignored"
            );
            return Ok(Step::Done);
        };
        let test_id = match self.store.seed_key(key).await? {
            None => {
                tracing::warn!(
                    inbound_id = row.id,
                    rcpt,
                    "seed key unknown (test deleted?); ignored"
                );
                return Ok(Step::Done);
            }
            Some((_, Some(test_id))) => test_id,
            Some((_, None)) => {
                let age = chrono::Utc::now().timestamp() - row.received_at;
                if age > UNBOUND_KEY_WAIT.as_secs() as i64 {
                    tracing::error!(inbound_id = row.id, rcpt, age_s = age, "no test was created with this reserved seed key within an hour; the message is not scanned");
                    return Ok(Step::Done);
                }
                return Ok(Step::WaitForTest);
            }
        };
        self.check_requirements(row, rcpt, &test_id).await?;
        let unanswered = self.store.unanswered_spam_clients(&test_id).await?;
        if !unanswered.contains(&profile.client) {
            tracing::debug!(
                inbound_id = row.id,
                test_id,
                client = profile.client,
                "already answered; not scanned again"
            );
            return Ok(Step::Done);
        }
        let env = envelope(row, rcpt);
        let update = match self
            .filters
            .scan_one(&profile.client, &row.data, &env)
            .await
        {
            Ok(v) => SpamUpdate {
                client: v.client,
                spam: v.spam,
                details: v.details,
            },
            Err(SpamError::UnparsableMessage(reason)) => SpamUpdate {
                client: profile.client.clone(),
                spam: domain::SpamVerdict::Neutral,
                details: format!("not judged: the message could not be parsed as email ({reason})"),
            },
            Err(e) => {
                tracing::warn!(inbound_id = row.id, test_id, client = profile.client, error = %e, "spam filter did not answer; its result stays empty and is retried");
                // The caller sees why the verdict is missing instead of an unexplained empty one.
                self.store
                    .note_spam_pending(
                        &test_id,
                        &profile.client,
                        &format!("no verdict yet: {e}"),
                        chrono::Utc::now().timestamp(),
                    )
                    .await?;
                return Ok(Step::Retry(e.to_string()));
            }
        };
        // A verdict is not taken back by a refused finish: only the message's holder records it.
        if !held.confirm().await? {
            return Ok(Step::LeaseLost);
        }
        self.store
            .record_spam_result(&test_id, &update, chrono::Utc::now().timestamp())
            .await?;
        tracing::info!(
            inbound_id = row.id,
            test_id,
            client = update.client,
            spam = update.spam.as_str(),
            "spam verdict recorded"
        );
        Ok(Step::Done)
    }

    /// The providers' sender requirements on the first message processed for `test_id`; the
    /// others are copies of the same mail to other seed addresses and change nothing.
    async fn check_requirements(
        &self,
        row: &InboundRow,
        rcpt: &str,
        test_id: &str,
    ) -> Result<(), InboxError> {
        if self.store.has_sender_requirements(test_id).await? {
            return Ok(());
        }
        let Some(method) = self
            .store
            .test_any_account(test_id)
            .await?
            .and_then(|t| t.spam_method)
        else {
            return Ok(());
        };
        let arrival = Arrival {
            method,
            envelope: envelope(row, rcpt),
            tls: match (smtp::received_with_tls(&row.data), self.cfg.starttls) {
                (Some(true), _) => HopTls::Used,
                (Some(false), true) => HopTls::NotUsed,
                (Some(false), false) => HopTls::NotOffered,
                (None, _) => HopTls::Unknown,
            },
        };
        let Some(report) = self.filters.sender_requirements(&row.data, &arrival).await else {
            return Ok(());
        };
        if self
            .store
            .record_sender_requirements(test_id, &report, unix_now())
            .await?
        {
            let verdicts: Vec<String> = report
                .providers
                .iter()
                .map(|p| format!("{}={:?}", p.provider, p.verdict))
                .collect();
            tracing::info!(
                inbound_id = row.id,
                test_id,
                verdicts = verdicts.join(" "),
                "sender requirements checked"
            );
        }
        Ok(())
    }

    async fn auto_inbox(
        &self,
        row: &InboundRow,
        held: &Held,
        rcpt: &str,
        local: &str,
        customer_id: Option<&str>,
    ) -> Result<Step, InboxError> {
        let Some(account) = self.store.account_by_auto_inbox(local).await? else {
            tracing::warn!(
                inbound_id = row.id,
                rcpt,
                "the auto-inbox's account no longer exists; ignored"
            );
            return Ok(Step::Done);
        };
        let now = chrono::Utc::now().timestamp();
        let test = match auto_inbox::build_test(
            &row.data,
            &account,
            customer_id,
            &self.catalog,
            self.cfg.reprocess_quota,
            now,
        ) {
            Ok(test) => test,
            Err(reason) => {
                tracing::warn!(
                    inbound_id = row.id,
                    rcpt,
                    account_id = account.id,
                    reason,
                    "auto-inbox mail not made into a test"
                );
                return Ok(Step::Done);
            }
        };
        // A test made from the mail is not taken back by a refused finish: only the message's
        // holder makes it, so a message taken over after an outage makes one test.
        if !held.confirm().await? {
            return Ok(Step::LeaseLost);
        }
        match self.store.create_test(&test).await {
            Ok(()) => {
                self.work_ready.notify_waiters();
                tracing::info!(
                    inbound_id = row.id,
                    test_id = test.id,
                    account_id = account.id,
                    clients = test.clients.len(),
                    "email test created from auto-inbox mail"
                );
                Ok(Step::Done)
            }
            Err(e @ StoreError::TestLimitReached { .. }) => {
                tracing::warn!(inbound_id = row.id, account_id = account.id, error = %e, "auto-inbox mail not made into a test");
                Ok(Step::Done)
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The SMTP envelope the message really arrived with, for the filters.
fn envelope(row: &InboundRow, rcpt: &str) -> Envelope {
    let client_ip = row
        .peer
        .parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| row.peer.parse::<IpAddr>())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    // No reverse DNS here (lookups may stall offline); loopback's name is fixed.
    let hostname = if client_ip.is_loopback() {
        "localhost".to_owned()
    } else {
        String::new()
    };
    Envelope {
        client_ip,
        helo: row.helo.clone(),
        hostname,
        mail_from: row.mail_from.clone(),
        rcpt_to: vec![rcpt.to_owned()],
    }
}
