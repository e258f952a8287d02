//! The application layer in process, against a real store (SQLite, or PostgreSQL with
//! `MAILPROOF_TEST_DB=postgres`) and local blobs: what the API and the web pages both rely on.

mod campaigns;
mod checks;
mod tests;

use app::{AppState, Caller};
use store::testing::{self, TestDb};

/// A service's application state on a fresh database, with two accounts.
pub struct Fixture {
    pub state: AppState,
    pub alice: Caller,
    pub bob: Caller,
    _db: TestDb,
    _blobs: tempfile::TempDir,
}

pub async fn fixture() -> Fixture {
    let (db, store) = testing::store(store::Backend::from_env()).await;
    let dir = tempfile::tempdir().expect("a directory for the blobs");
    let blobs = store::Blobs::open(&store::BlobsConfig::Local, dir.path()).expect("local blobs");
    let state = AppState::new(
        store.clone(),
        blobs,
        app::testing::catalog(),
        Vec::new(),
        app::testing::settings(),
        Default::default(),
    );
    let alice = Caller::Account(testing::add_account(&store, "alice").await);
    let bob = Caller::Account(testing::add_account(&store, "bob").await);
    Fixture {
        state,
        alice,
        bob,
        _db: db,
        _blobs: dir,
    }
}

/// An email test of `caller`'s with one client, created through the application layer.
pub async fn email_test(f: &Fixture, caller: &Caller, html: &str) -> app::create::Created {
    let client = f.state.catalog.clients()[0].id.clone();
    let req = app::create::TestRequest {
        subject: Some("Spring sale".into()),
        html: Some(html.into()),
        clients: vec![client],
        ..Default::default()
    };
    app::create::create_test(&f.state, caller, domain::TestKind::Email, req)
        .await
        .expect("the test is created")
}
