//! The service on PostgreSQL, whatever `MAILPROOF_TEST_DB` says: `database_url` is honoured by
//! `serve` and by the accounts CLI, and what was acknowledged survives a killed process.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn serve_and_the_accounts_cli_use_the_configured_postgres_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = store::testing::database(store::Backend::Postgres).await;
    std::fs::write(dir.path().join("database_url"), &db.url).expect("write the database URL");
    let s = Server::start_in(dir, Options::default()).await;
    assert!(
        !s.data_dir().join("mailproof.sqlite").exists(),
        "no SQLite file when a database URL is configured"
    );
    s.add_account("pg-key", "enterprise", &[]);
    let created = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(("pg-key", "password-1")),
            Some(&json!({"subject": "On PostgreSQL", "html": "<p>x</p>"})),
        )
        .await;
    let id = created.ok()["id"].as_str().expect("an id").to_owned();

    // Killed at once and started again on the same database: the account and the test are there.
    let dir = s.kill();
    let s = Server::start_in(dir, Options::default()).await;
    let got = s
        .call(
            "GET",
            &format!("/v5/email/tests/{id}"),
            Some(("pg-key", "password-1")),
            None,
        )
        .await;
    assert_eq!(got.ok()["subject"], "On PostgreSQL");
    let store = store::Store::connect(&db.url).await.expect("connect");
    assert!(
        store
            .account_by_key("pg-key")
            .await
            .expect("read")
            .is_some(),
        "the CLI wrote the account to PostgreSQL"
    );
}
