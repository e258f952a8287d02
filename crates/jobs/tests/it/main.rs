//! The render worker in process, on a real store (SQLite and PostgreSQL), the real client catalog
//! and rules, and local blobs: with engines that draw, die or refuse ([`engines`]), once with
//! the real Chromium ([`chromium`]), and the zoom-out of a wide page through the real Chromium
//! and WebKit ([`fit`]); real emails checked whole in every engine ([`corpus`]); inbox rows cut
//! and drawn in the engines ([`inbox`]).

mod chromium;
mod corpus;
mod engines;
mod fit;
mod inbox;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use domain::{Catalog, TestKind, Variant};
use emulate::RuleBook;
use jobs::{RenderEngine, RenderWorker, RenderWorkerConfig};
use store::testing::TestDb;
use store::{Backend, Blobs, BlobsConfig, ClientRow, NewTest, NewTestClient, Store};

/// A store with one account, local blobs, and the repository's catalog and rules.
pub struct Fixture {
    _db: TestDb,
    /// Holds the blob store's directory, `blobs`.
    pub blob_dir: tempfile::TempDir,
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub rules: Arc<RuleBook>,
    account_id: i64,
}

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

impl Fixture {
    pub async fn new(backend: Backend) -> Fixture {
        let (db, store) = store::testing::store(backend).await;
        let account = store::testing::add_account(&store, "k").await;
        let blob_dir = tempfile::tempdir().expect("a directory for the blobs");
        let blobs = Blobs::open(&BlobsConfig::Local, blob_dir.path()).expect("local blobs");
        let catalog =
            std::fs::read_to_string(repo().join("data/clients.toml")).expect("data/clients.toml");
        let catalog = Catalog::parse(&catalog).expect("the catalog parses");
        let rules = RuleBook::load(&repo().join("data/rules")).expect("data/rules loads");
        Fixture {
            _db: db,
            blob_dir,
            store,
            blobs,
            catalog: Arc::new(catalog),
            rules: Arc::new(rules),
            account_id: account.id,
        }
    }

    /// A worker of this store drawing with `engine`; `config` as [`config`] gives it unless
    /// changed.
    pub fn worker(
        &self,
        engine: Arc<dyn RenderEngine>,
        config: RenderWorkerConfig,
    ) -> RenderWorker {
        RenderWorker::new(
            self.store.clone(),
            self.blobs.clone(),
            self.catalog.clone(),
            self.rules.clone(),
            engine,
            config,
        )
    }

    /// Queues an email test of `clients`, each with its variants; returns its id.
    pub async fn queue(&self, clients: &[(&str, &[Variant])]) -> String {
        let test = NewTest {
            html: "<html><body><p style=\"color:#222\">Hello</p></body></html>".into(),
            clients: clients
                .iter()
                .map(|(id, variants)| NewTestClient {
                    client_id: id.to_string(),
                    variants: variants.to_vec(),
                })
                .collect(),
            ..store::testing::new_test(self.account_id, TestKind::Email)
        };
        self.store.create_test(&test).await.expect("test created");
        test.id
    }

    /// Queues a test of one default screenshot of a light Blink client; returns the client's id
    /// and the test's.
    pub async fn queue_one(&self) -> (String, String) {
        let client = self
            .client_of(domain::Engine::Blink, domain::ColorScheme::Light, false)
            .id
            .clone();
        let test = self.queue(&[(&client, &[Variant::Default])]).await;
        (client, test)
    }

    /// `client`'s row of test `id`: its screenshot status as the results show it.
    pub async fn client(&self, id: &str, client: &str) -> ClientRow {
        self.store
            .test_clients(id)
            .await
            .expect("read the test's clients")
            .into_iter()
            .find(|c| c.client_id == client)
            .unwrap_or_else(|| panic!("{client} is not a client of {id}"))
    }

    /// A client of the catalog drawn by `engine` in `scheme`, with or without a dark-mode pass.
    pub fn client_of(
        &self,
        engine: domain::Engine,
        scheme: domain::ColorScheme,
        dark_pass: bool,
    ) -> &domain::Client {
        self.catalog
            .clients()
            .iter()
            .find(|c| {
                c.engine == engine
                    && c.color_scheme == scheme
                    && self.rules.behaviours().of(c).dark_pass().is_some() == dark_pass
            })
            .unwrap_or_else(|| {
                panic!("the catalog has no {engine} client in {scheme:?} (dark pass: {dark_pass})")
            })
    }
}

/// A worker configuration for tests: one loop, leases as the service's, three attempts.
pub fn config() -> RenderWorkerConfig {
    RenderWorkerConfig {
        worker_id: "test-worker".into(),
        concurrency: 1,
        max_attempts: 3,
        rescan: Duration::from_millis(100),
        max_fault_backoff: Duration::from_secs(15),
        engines: domain::Engine::ALL.to_vec(),
    }
}

/// Runs `worker` until nothing is due; returns how many jobs it took.
pub async fn drain(worker: &RenderWorker) -> usize {
    let mut n = 0;
    while worker.run_one().await.expect("the store answers") {
        n += 1;
    }
    n
}
