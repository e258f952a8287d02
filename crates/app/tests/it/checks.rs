//! Link checks and content checks: requested through the application layer, queued once.

use app::links::LinkState;
use domain::TestKind;

use crate::{email_test, fixture};

#[tokio::test]
async fn a_link_check_requested_twice_is_queued_once() {
    let f = fixture().await;
    let created = email_test(&f, &f.alice, r#"<a href="https://example.org/">x</a>"#).await;
    let test = app::owned_test(&f.state, &f.alice, created.id.as_str(), TestKind::Email)
        .await
        .expect("owned");
    assert!(matches!(
        app::links::link_state(&f.state, &test).await,
        Ok(LinkState::NotStarted)
    ));
    app::links::request_check(&f.state, &test)
        .await
        .expect("queued");
    app::links::request_check(&f.state, &test)
        .await
        .expect("queued again");
    assert!(matches!(
        app::links::link_state(&f.state, &test).await,
        Ok(LinkState::Pending)
    ));
    let store = &f.state.store;
    let first = store
        .claim_link_check("w1", 2_000_000_000, 60)
        .await
        .expect("claim");
    assert_eq!(first.map(|(id, _)| id), Some(test.id.clone()));
    let second = store
        .claim_link_check("w2", 2_000_000_000, 60)
        .await
        .expect("claim");
    assert_eq!(second, None, "one job for the two requests");
}

#[tokio::test]
async fn a_content_check_requested_twice_is_queued_once_and_answers_its_static_findings() {
    let f = fixture().await;
    // An image without alt text: a static finding, known before any worker runs.
    let created = email_test(
        &f,
        &f.alice,
        r#"<html lang="en"><body><img src="https://example.org/a.png"></body></html>"#,
    )
    .await;
    let test = app::owned_test(&f.state, &f.alice, created.id.as_str(), TestKind::Email)
        .await
        .expect("owned");
    for _ in 0..2 {
        match app::checks::check_state(&f.state, &test).await {
            Ok(app::checks::CheckState::Pending { findings, .. }) => {
                assert!(
                    !findings.is_empty(),
                    "the static findings are answered at once"
                );
            }
            other => panic!("expected a pending check, got {other:?}"),
        }
    }
    let store = &f.state.store;
    let first = store
        .claim_content_check("w1", 2_000_000_000, 60)
        .await
        .expect("claim");
    assert_eq!(first.map(|(id, _)| id), Some(test.id.clone()));
    let second = store
        .claim_content_check("w2", 2_000_000_000, 60)
        .await
        .expect("claim");
    assert_eq!(second, None, "one job for the two requests");
}
