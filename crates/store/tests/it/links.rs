//! Link checks: queued by a request, leased to one worker, taken over after a crash.

use store::Backend;

use crate::store_with_test;

async fn a_link_check_is_leased_once_taken_over_after_expiry_and_requeued_by_a_new_request(
    backend: Backend,
) {
    let (_dir, store, id) = store_with_test(backend, Vec::new()).await;
    assert_eq!(store.link_check(&id).await.expect("read"), None);
    store.request_link_check(&id, 1_000).await.expect("request");
    assert_eq!(
        store
            .claim_link_check("w1", 1_000, 60)
            .await
            .expect("claim"),
        Some((id.clone(), 1))
    );
    assert_eq!(
        store
            .claim_link_check("w2", 1_030, 60)
            .await
            .expect("claim"),
        None,
        "lease still valid"
    );
    // w1 died: after its lease w2 takes the check, and w1's late result is ignored.
    assert_eq!(
        store
            .claim_link_check("w2", 1_061, 60)
            .await
            .expect("claim"),
        Some((id.clone(), 2))
    );
    assert!(!store
        .finish_link_check(&id, "w1", "{\"old\":1}", 1_070)
        .await
        .expect("finish"));
    assert!(store
        .finish_link_check(&id, "w2", "{\"links\":[]}", 1_080)
        .await
        .expect("finish"));
    let row = store.link_check(&id).await.expect("read").expect("row");
    assert_eq!(
        (row.state.as_str(), row.result.as_deref(), row.completed_at),
        ("done", Some("{\"links\":[]}"), Some(1_080))
    );
    assert_eq!(
        store
            .claim_link_check("w3", 5_000, 60)
            .await
            .expect("claim"),
        None
    );
    store.request_link_check(&id, 6_000).await.expect("again");
    let row = store.link_check(&id).await.expect("read").expect("row");
    assert_eq!((row.state.as_str(), row.result), ("queued", None));
}

on_both!(a_link_check_is_leased_once_taken_over_after_expiry_and_requeued_by_a_new_request,);
