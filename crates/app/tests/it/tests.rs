//! Creating tests and reading them back; ownership.

use app::ErrorName;
use domain::TestKind;

use crate::{email_test, fixture};

#[tokio::test]
async fn a_created_test_reads_back_with_its_content_and_clients() {
    let f = fixture().await;
    let created = email_test(&f, &f.alice, "<p>Hello</p>").await;
    assert!(created.stored);
    let test = app::owned_test(&f.state, &f.alice, created.id.as_str(), TestKind::Email)
        .await
        .expect("the owner reads the test");
    assert_eq!(test.subject, "Spring sale");
    let html = app::results::stored_content(&f.state, &test)
        .await
        .expect("content");
    assert_eq!(html, "<p>Hello</p>");
    let client = &f.state.catalog.clients()[0].id;
    let row = app::results::test_client(&f.state, &test, &client.to_uppercase())
        .await
        .expect("the client is found whatever its case");
    assert_eq!(&row.client_id, client);
    let missing = app::results::test_client(&f.state, &test, "no-such-client").await;
    assert_eq!(
        missing.map(|_| ()).map_err(|e| e.name),
        Err(ErrorName::ClientNotFound)
    );
}

#[tokio::test]
async fn another_accounts_test_is_an_invalid_test_id() {
    let f = fixture().await;
    let created = email_test(&f, &f.alice, "<p>Hello</p>").await;
    let id = created.id.as_str();
    for (caller, kind) in [
        (&f.bob, TestKind::Email),
        (&app::Caller::Sandbox, TestKind::Email),
        // The owner asking for the other kind hears the same as a stranger.
        (&f.alice, TestKind::Spam),
    ] {
        let err = app::owned_test(&f.state, caller, id, kind)
            .await
            .expect_err("not reachable");
        assert_eq!(err.name, ErrorName::InvalidTestId, "{caller:?} {kind:?}");
    }
    let err = app::owned_test_of_any_kind(&f.state, &f.bob, id)
        .await
        .expect_err("not bob's");
    assert_eq!(err.name, ErrorName::InvalidTestId);
    let err = app::owned_test_of_any_kind(&f.state, &f.alice, "not-an-id")
        .await
        .expect_err("malformed");
    assert_eq!(err.name, ErrorName::InvalidTestId);
}

#[tokio::test]
async fn the_sandbox_checks_and_stores_nothing() {
    let f = fixture().await;
    let created = email_test(&f, &app::Caller::Sandbox, "<p>Hello</p>").await;
    assert!(!created.stored);
    let err = app::owned_test(&f.state, &f.alice, created.id.as_str(), TestKind::Email)
        .await
        .expect_err("nothing was stored");
    assert_eq!(err.name, ErrorName::InvalidTestId);
}

#[tokio::test]
async fn creation_refusals_carry_the_spec_error_names() {
    let f = fixture().await;
    let create = |req: app::create::TestRequest| {
        let state = f.state.clone();
        let alice = f.alice.clone();
        async move { app::create::create_test(&state, &alice, TestKind::Email, req).await }
    };
    let no_subject = create(app::create::TestRequest {
        html: Some("<p>x</p>".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(
        no_subject.map_err(|e| e.name).err(),
        Some(ErrorName::NoSubject)
    );
    let no_source = create(app::create::TestRequest {
        subject: Some("s".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(
        no_source.map_err(|e| e.name).err(),
        Some(ErrorName::NoSource)
    );
    let bad_client = create(app::create::TestRequest {
        subject: Some("s".into()),
        html: Some("<p>x</p>".into()),
        clients: vec!["no-such-client".into()],
        ..Default::default()
    })
    .await;
    assert_eq!(
        bad_client.map_err(|e| e.name).err(),
        Some(ErrorName::InvalidClient)
    );
}
