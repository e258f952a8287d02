//! `/metrics` and retention cover the schema by construction: every table with a lease column is a
//! queue of `store::QUEUES` (which `/metrics` reports), and every table with a `test_id` is either
//! purged by retention or listed as kept. A new queue or content table fails here until listed.

use domain::Variant;
use store::{Backend, CONTENT_TABLES, KEPT_PER_TEST, QUEUES};

use crate::store_with_test;

async fn every_leased_table_is_a_queue_that_metrics_reports(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let leased = store
        .tables_with_column("%lease_owner")
        .await
        .expect("schema");
    assert!(leased.contains(&"render_jobs".to_string()), "{leased:?}");
    for table in &leased {
        assert!(
            QUEUES.iter().any(|q| q.table == table),
            "table {table} has a lease column but is no queue of store::QUEUES: describe it there \
             (store/src/queue.rs), so that /metrics reports it"
        );
    }
    let reported: Vec<&str> = store
        .queue_stats(2_000)
        .await
        .expect("stats")
        .iter()
        .map(|s| s.queue)
        .collect();
    let queues: Vec<&str> = QUEUES.iter().map(|q| q.name).collect();
    assert_eq!(reported, queues, "/metrics reports every queue");
    for queue in [
        "render",
        "link_checks",
        "content_checks",
        "callbacks",
        "inbound",
        "svc_sends",
    ] {
        assert!(queues.contains(&queue), "{queue} missing from {queues:?}");
    }
}

async fn every_table_of_a_test_is_purged_or_kept_on_purpose(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let per_test = store.tables_with_column("test_id").await.expect("schema");
    for table in &per_test {
        assert!(
            CONTENT_TABLES.contains(&table.as_str()) || KEPT_PER_TEST.contains(&table.as_str()),
            "table {table} has a test_id but retention neither purges it (store::CONTENT_TABLES) \
             nor keeps it on purpose (store::KEPT_PER_TEST)"
        );
    }
    for table in CONTENT_TABLES.iter().chain(KEPT_PER_TEST) {
        assert!(
            per_test.iter().any(|t| t == table),
            "{table} is listed but the schema has no such table with a test_id"
        );
    }
}

async fn retention_purges_a_test_link_check(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    store.request_link_check(&id, 1_500).await.expect("request");
    let (worker, now) = ("w", 1_500);
    let (test_id, _) = store
        .claim_link_check(worker, now, 60)
        .await
        .expect("claim")
        .expect("the check");
    assert!(store
        .finish_link_check(
            &test_id,
            worker,
            r#"{"links":["https://private.example/"]}"#,
            now
        )
        .await
        .expect("finish"));
    assert_eq!(
        store.purge_before(1_001, 5_000, 10).await.expect("purge"),
        vec![id.clone()]
    );
    assert!(
        store.link_check(&id).await.expect("read").is_none(),
        "the email's links are gone with its content"
    );
}

on_both!(
    every_leased_table_is_a_queue_that_metrics_reports,
    every_table_of_a_test_is_purged_or_kept_on_purpose,
    retention_purges_a_test_link_check,
);
