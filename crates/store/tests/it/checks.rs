//! Content checks: started once however often they are asked for, leased to one worker, retried
//! after a failed attempt, taken over after a crash, removed by retention.

use store::Backend;

use crate::store_with_test;

async fn a_content_check_is_requested_once_leased_retried_and_finished(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, Vec::new()).await;
    assert_eq!(store.content_check(&id).await.expect("read"), None);
    assert!(store
        .request_content_check(&id, 1_000)
        .await
        .expect("request"));
    assert!(!store
        .request_content_check(&id, 1_001)
        .await
        .expect("again"));
    let claimed = store
        .claim_content_check("w1", 1_000, 60)
        .await
        .expect("claim");
    assert_eq!(claimed, Some((id.clone(), 1)));
    assert_eq!(
        store
            .claim_content_check("w2", 1_030, 60)
            .await
            .expect("claim"),
        None
    );
    // A failed attempt waits for its not_before, then goes to whoever claims it.
    assert!(store
        .retry_content_check(&id, "w1", "engine restarting", 1_100)
        .await
        .expect("retry"));
    let row = store.content_check(&id).await.expect("read").expect("row");
    assert_eq!(
        (row.state.as_str(), row.last_error.as_deref()),
        ("queued", Some("engine restarting"))
    );
    assert_eq!(
        store
            .claim_content_check("w2", 1_099, 60)
            .await
            .expect("claim"),
        None
    );
    assert_eq!(
        store
            .claim_content_check("w2", 1_100, 60)
            .await
            .expect("claim"),
        Some((id.clone(), 2))
    );
    // w2 dies; its lease expires and w3 takes over. w2's late result is dropped.
    assert_eq!(
        store
            .claim_content_check("w3", 1_161, 60)
            .await
            .expect("claim"),
        Some((id.clone(), 3))
    );
    assert!(!store
        .finish_content_check(&id, "w2", "{\"old\":1}", 1_170)
        .await
        .expect("finish"));
    assert!(store
        .finish_content_check(&id, "w3", "{\"findings\":[]}", 1_180)
        .await
        .expect("finish"));
    let row = store.content_check(&id).await.expect("read").expect("row");
    assert_eq!(row.state, domain::QueueState::Done);
    assert_eq!(row.result.as_deref(), Some("{\"findings\":[]}"));
    assert_eq!((row.completed_at, row.last_error), (Some(1_180), None));
    // A later request does not start it again.
    assert!(!store
        .request_content_check(&id, 2_000)
        .await
        .expect("again"));
    assert_eq!(
        store
            .claim_content_check("w4", 5_000, 60)
            .await
            .expect("claim"),
        None
    );
    // Retention removes the report with the content.
    store
        .purge_before(i64::MAX, 6_000, 10)
        .await
        .expect("purge");
    assert_eq!(store.content_check(&id).await.expect("read"), None);
}

on_both!(a_content_check_is_requested_once_leased_retried_and_finished,);
