//! Spec §2.8's "empty until the filter has returned", and mail that arrives before its test.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::{Catalog, SpamMethod, TestKind};
use inbox::{InboundProcessor, InboxConfig};
use spam::{
    DaemonConfig, DaemonSource, DnsMode, FilterAddresses, FilterDaemons, FilterProfiles,
    SpamFilters,
};
use store::{NewInbound, NewTest, Store};
use tokio::sync::Notify;

pub(crate) const SA: &str = "SpamAssassin (test)";
pub(crate) const OWN: &str = "Built-in (test)";
pub(crate) const PROFILES: &str = r#"
[[filter]]
client = "SpamAssassin (test)"
type = "b2b"
description = "spamd at its default threshold"
engine = "spamassassin"
spam_at = 5.0
ham_below = 2.0

[[filter]]
client = "Built-in (test)"
type = "b2c"
description = "mailproof's own checks"
engine = "builtin"
spam_at = 5.0
ham_below = 2.0
"#;
pub(crate) const SEEDS: &str = "seeds.test";
const MESSAGE: &[u8] = b"Received: from client.test (localhost [127.0.0.1]) by seeds.test; Sun, 22 Nov 2026 10:00:00 +0000\r\nFrom: news@acme.example\r\nTo: jane@example.org\r\nSubject: Our November news\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\nMessage-ID: <n1@mail.acme.example>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello Jane, here is what we shipped this month.</p>\r\n";

pub(crate) struct Fixture {
    /// The database, on the backend `MAILPROOF_TEST_DB` names (SQLite by default).
    _db: store::testing::TestDb,
    pub(crate) store: Store,
    account_id: i64,
}

impl Fixture {
    pub(crate) async fn new() -> Fixture {
        let (db, store) = store::testing::store(store::Backend::from_env()).await;
        let account = store::testing::add_account(&store, "k").await;
        Fixture {
            _db: db,
            store,
            account_id: account.id,
        }
    }

    async fn create_spam_test(&self, key: &str) -> String {
        self.create_spam_test_by(
            key,
            SpamMethod::Seed,
            &[
                (SA, domain::FilterType::B2b),
                (OWN, domain::FilterType::B2c),
            ],
        )
        .await
    }

    /// A spam test by `method` whose filters are `clients`, in that order.
    pub(crate) async fn create_spam_test_by(
        &self,
        key: &str,
        method: SpamMethod,
        clients: &[(&str, domain::FilterType)],
    ) -> String {
        let test = NewTest {
            subject: "Our November news".into(),
            html: "<p>Hello</p>".into(),
            created_at: chrono::Utc::now().timestamp(),
            spam_method: Some(method),
            seed_key: Some(key.to_owned()),
            spam_filters: clients
                .iter()
                .map(|(client, kind)| ((*client).to_owned(), *kind))
                .collect(),
            ..store::testing::new_test(self.account_id, TestKind::Spam)
        };
        self.store
            .create_test(&test)
            .await
            .expect("create the test");
        test.id
    }

    async fn receive(&self, key: &str) {
        let rcpt_to = [SA, OWN]
            .iter()
            .map(|p| domain::seed::seed_address(key, p, SEEDS))
            .collect();
        self.store
            .insert_inbound(&NewInbound {
                received_at: chrono::Utc::now().timestamp(),
                mail_from: "news@acme.example".into(),
                rcpt_to,
                peer: "127.0.0.1:40000".into(),
                helo: "client.test".into(),
                data: MESSAGE.to_vec(),
            })
            .await
            .expect("store the message");
    }

    fn processor(&self, addresses: FilterAddresses) -> InboundProcessor {
        let profiles = FilterProfiles::parse(PROFILES).expect("valid profiles");
        let filters = SpamFilters::with_dns(profiles, &addresses, DnsMode::Disabled);
        let catalog_text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/clients.toml"
        ))
        .expect("the client catalog");
        InboundProcessor::new(
            self.store.clone(),
            InboxConfig {
                seed_domain: SEEDS.into(),
                inbox_domain: "inbox.test".into(),
                reprocess_quota: 0,
                starttls: false,
            },
            Arc::new(Catalog::parse(&catalog_text).expect("valid catalog")),
            Arc::new(filters),
            Arc::new(Notify::new()),
        )
    }

    /// Inbound messages not yet done.
    async fn pending(&self) -> usize {
        self.store.pending_inbound().await.expect("inbound") as usize
    }

    async fn verdict(&self, test_id: &str, client: &str) -> Option<domain::SpamVerdict> {
        self.store
            .spam_results(test_id)
            .await
            .expect("spam results")
            .into_iter()
            .find(|r| r.client == client)
            .and_then(|r| r.spam)
    }
}

/// Keeps running the processor for `wait`, as its loop would, polling when nothing is due.
async fn drain(p: &InboundProcessor, wait: Duration) {
    let started = Instant::now();
    while started.elapsed() < wait {
        if !p.run_one().await.expect("processing works") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A loopback address nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address")
}

#[tokio::test]
async fn a_filter_that_is_down_leaves_its_entry_empty_until_it_returns() {
    let f = Fixture::new().await;
    let key = "down-filter-key";
    let test_id = f.create_spam_test(key).await;
    f.receive(key).await;

    let down = f.processor(FilterAddresses {
        spamd: Some(closed_port()),
        rspamd: None,
    });
    assert!(down.run_one().await.expect("processing works"));
    assert_eq!(f.verdict(&test_id, SA).await, None, "spamd is down: empty");
    assert!(
        f.verdict(&test_id, OWN).await.is_some(),
        "the built-in filter answers regardless"
    );
    assert_eq!(f.pending().await, 1, "the message is kept for a later scan");
    assert!(
        !down.run_one().await.expect("processing works"),
        "not retried at once"
    );

    // spamd comes up (a restarted service: a new processor, the same database).
    let work = tempfile::tempdir().expect("temp dir");
    let daemons = FilterDaemons::start(DaemonConfig {
        rspamd: DaemonSource::Off,
        ..DaemonConfig::new(work.path())
    })
    .await
    .expect("spamd starts (install it with scripts/setup.sh)");
    // The retry time is stored with the message, so the new processor, like any other process
    // sharing the database, waits for it (the first retry comes after 5 s) instead of at once.
    let up = f.processor(daemons.addresses());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !up.run_one().await.expect("processing works") {
        assert!(
            Instant::now() < deadline,
            "the message was not retried within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        f.verdict(&test_id, SA).await,
        Some(domain::SpamVerdict::NotSpam),
        "spamd's verdict on the clean message is filled in"
    );
    assert_eq!(f.pending().await, 0);
    daemons.shutdown().await;
}

#[tokio::test]
async fn mail_for_a_reserved_key_waits_for_the_test_that_binds_it() {
    let f = Fixture::new().await;
    let key = "reserved-key";
    f.store
        .reserve_seed_key(f.account_id, key, 0)
        .await
        .expect("reserve");
    f.receive(key).await;
    let p = f.processor(FilterAddresses::default());
    assert!(p.run_one().await.expect("processing works"));
    assert_eq!(f.pending().await, 1, "kept until a test uses the key");
    let test_id = f.create_spam_test(key).await;
    drain(&p, Duration::from_secs(4)).await;
    assert!(
        f.verdict(&test_id, OWN).await.is_some(),
        "scanned once the test exists"
    );
}
