//! Store behaviour that the HTTP tests cannot reach directly: the leased render queue and
//! retention.

use domain::{ScreenshotStatus, TestKind, Variant};
use store::testing::TestDb;
use store::{Backend, JobOutcome, NewTest, NewTestClient, ShotFacts, Store};

/// Runs each named `async fn(Backend)` as two tests, `NAME::sqlite` and `NAME::postgres`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(store::Backend::Sqlite).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name(store::Backend::Postgres).await
            }
        }
    )*};
}

async fn store_with_test(backend: Backend, variants: Vec<Variant>) -> (TestDb, Store, String) {
    store_with_clients(backend, &[("c1", variants)]).await
}

/// A store with one email test of `clients`, each with its variants.
async fn store_with_clients(
    backend: Backend,
    clients: &[(&str, Vec<Variant>)],
) -> (TestDb, Store, String) {
    let (dir, store) = store::testing::store(backend).await;
    let account = store::testing::add_account(&store, "k").await;
    let test = NewTest {
        image_blocking: true,
        clients: clients
            .iter()
            .map(|(client_id, variants)| NewTestClient {
                client_id: client_id.to_string(),
                variants: variants.clone(),
            })
            .collect(),
        reprocesses: 2,
        ..store::testing::new_test(account.id, TestKind::Email)
    };
    store.create_test(&test).await.expect("test");
    (dir, store, test.id)
}

fn done() -> JobOutcome {
    JobOutcome::Done {
        engine: "blink".into(),
        shot: Default::default(),
    }
}

async fn a_client_completes_when_all_its_variants_are_done(backend: Backend) {
    let (_dir, store, id) =
        store_with_test(backend, vec![Variant::Default, Variant::NoImages]).await;
    let a = store
        .claim_job("w1", 2_000, 60)
        .await
        .expect("claim")
        .expect("a job");
    let b = store
        .claim_job("w1", 2_000, 60)
        .await
        .expect("claim")
        .expect("a second job");
    assert!(
        store
            .claim_job("w1", 2_000, 60)
            .await
            .expect("claim")
            .is_none(),
        "both are leased"
    );
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Processing
    );
    assert!(store
        .finish_job(&a, "w1", 2_001, &done())
        .await
        .expect("finish"));
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Processing
    );
    assert!(store
        .finish_job(&b, "w1", 2_002, &done())
        .await
        .expect("finish"));
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(c.status, ScreenshotStatus::Complete);
    assert_eq!(c.completed_at, Some(2_002));
    assert_eq!(c.engine.as_deref(), Some("blink"));
}

async fn each_screenshot_keeps_what_its_page_could_not_load_until_it_is_drawn_again(
    backend: Backend,
) {
    use domain::{FailedResource, FetchFailure, ResourceKind};
    let (_dir, store, id) =
        store_with_test(backend, vec![Variant::Default, Variant::NoImages]).await;
    let image = FailedResource::new(
        "http://x.test/a.png",
        ResourceKind::Image,
        FetchFailure::HttpStatus,
        Some(404),
    );
    let sheet = FailedResource::new(
        "http://10.0.0.1/s.css",
        ResourceKind::Stylesheet,
        FetchFailure::RefusedByPolicy,
        None,
    );
    for _ in 0..2 {
        let job = store
            .claim_job("w1", 2_000, 60)
            .await
            .expect("claim")
            .expect("a job");
        let shot = match job.variant {
            Variant::Default => ShotFacts {
                failed: vec![image.clone(), sheet.clone()],
                overflow_width: Some(640),
                rule_set: Some("r".into()),
            },
            _ => ShotFacts {
                failed: vec![sheet.clone()],
                overflow_width: None,
                rule_set: Some("r + zoom".into()),
            },
        };
        let outcome = JobOutcome::Done {
            engine: "blink".into(),
            shot,
        };
        assert!(store
            .finish_job(&job, "w1", 2_001, &outcome)
            .await
            .expect("finish"));
    }
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(
        c.shots,
        vec![
            (
                Variant::Default,
                ShotFacts {
                    failed: vec![image.clone(), sheet.clone()],
                    overflow_width: Some(640),
                    rule_set: Some("r".into()),
                }
            ),
            (
                Variant::NoImages,
                ShotFacts {
                    failed: vec![sheet.clone()],
                    overflow_width: None,
                    rule_set: Some("r + zoom".into()),
                }
            ),
        ]
    );
    assert_eq!(c.failed_once(), vec![&image, &sheet]);
    // The client's rule set is its default screenshot's, whichever finished last.
    assert_eq!(c.rule_set.as_deref(), Some("r"));
    // A reprocess draws it again: until then nothing is claimed about the new pictures.
    store
        .reprocess(&id, &["c1".to_string()], 3_000)
        .await
        .expect("reprocess");
    assert!(store.test_clients(&id).await.expect("clients")[0]
        .shots
        .is_empty());
}

async fn an_expired_lease_is_taken_over_and_the_old_worker_result_is_ignored(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let first = store
        .claim_job("dead-worker", 2_000, 60)
        .await
        .expect("claim")
        .expect("job");
    assert!(
        store
            .claim_job("w2", 2_030, 60)
            .await
            .expect("claim")
            .is_none(),
        "lease still valid"
    );
    let second = store
        .claim_job("w2", 2_061, 60)
        .await
        .expect("claim")
        .expect("taken over after expiry");
    assert_eq!(second.id, first.id);
    assert_eq!(second.attempts, 2);
    assert!(!store
        .finish_job(&first, "dead-worker", 2_070, &done())
        .await
        .expect("finish"));
    assert!(store
        .finish_job(&second, "w2", 2_071, &done())
        .await
        .expect("finish"));
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Complete
    );
}

async fn a_retry_waits_and_a_bounce_is_final(backend: Backend) {
    let (_dir, store, id) =
        store_with_test(backend, vec![Variant::Default, Variant::NoImages]).await;
    let job = store
        .claim_job("w", 2_000, 60)
        .await
        .expect("claim")
        .expect("job");
    let retry = JobOutcome::Retry {
        error: "engine crashed".into(),
        retry_at: 2_100,
    };
    assert!(store
        .finish_job(&job, "w", 2_001, &retry)
        .await
        .expect("finish"));
    let other = store
        .claim_job("w", 2_002, 60)
        .await
        .expect("claim")
        .expect("the other variant");
    assert_ne!(other.id, job.id);
    assert!(
        store
            .claim_job("w", 2_050, 60)
            .await
            .expect("claim")
            .is_none(),
        "retry not yet due"
    );
    let again = store
        .claim_job("w", 2_100, 60)
        .await
        .expect("claim")
        .expect("retry due");
    let bounce = JobOutcome::Bounce {
        code: "render_failed".into(),
        message: "cannot draw".into(),
    };
    assert!(store
        .finish_job(&again, "w", 2_101, &bounce)
        .await
        .expect("finish"));
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(c.status, ScreenshotStatus::Bounced);
    assert_eq!(c.bounce_code.as_deref(), Some("render_failed"));
    // The still-leased sibling finishing later does not un-bounce the client.
    store
        .finish_job(&other, "w", 2_102, &done())
        .await
        .expect("finish");
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Bounced
    );
    assert_eq!(store.pending_jobs().await.expect("count"), 0);
}

async fn stalled_processing_is_requeued(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    store
        .claim_job("w", 2_000, 600)
        .await
        .expect("claim")
        .expect("job");
    assert_eq!(
        store
            .requeue_stale(&id, 1_999, 2_001)
            .await
            .expect("requeue"),
        0
    );
    assert_eq!(
        store
            .requeue_stale(&id, 2_181, 2_181)
            .await
            .expect("requeue"),
        1
    );
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Pending
    );
    assert!(store
        .claim_job("w2", 2_182, 60)
        .await
        .expect("claim")
        .is_some());
}

async fn retention_removes_content_and_results_but_keeps_metadata(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    assert!(
        store
            .purge_before(1_000, 5_000, 10)
            .await
            .expect("purge")
            .is_empty(),
        "not old enough"
    );
    assert_eq!(
        store.purge_before(1_001, 5_000, 10).await.expect("purge"),
        vec![id.clone()]
    );
    assert!(store.test_content(&id).await.expect("content").is_none());
    assert!(store.test_clients(&id).await.expect("clients").is_empty());
    let t = store
        .test_any_account(&id)
        .await
        .expect("test")
        .expect("metadata kept");
    assert_eq!(t.subject, "S");
    assert_eq!(t.purged_at, Some(5_000));
    assert!(
        store
            .purge_before(9_999, 6_000, 10)
            .await
            .expect("purge")
            .is_empty(),
        "purged once"
    );
}

async fn retention_removes_mail_received_before_the_cutoff(backend: Backend) {
    let (_dir, store, _id) = store_with_test(backend, vec![Variant::Default]).await;
    let message = |received_at: i64| store::NewInbound {
        received_at,
        mail_from: "a@example.org".into(),
        rcpt_to: vec!["k.sa@seed.example".into()],
        peer: "127.0.0.1".into(),
        helo: "h".into(),
        data: b"Subject: s\r\n\r\nsecret body\r\n".to_vec(),
    };
    let old = store.insert_inbound(&message(500)).await.expect("old mail");
    let recent = store
        .insert_inbound(&message(2_000))
        .await
        .expect("new mail");
    store.purge_before(1_001, 5_000, 10).await.expect("purge");
    assert!(store.inbound(old).await.expect("read").is_none());
    assert!(store.inbound(recent).await.expect("read").is_some());
    assert_eq!(store.pending_inbound().await.expect("count"), 1);
}

async fn a_client_named_twice_in_one_reprocess_is_queued_and_paid_for_once(backend: Backend) {
    use store::ReprocessOutcome::Queued;
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let named = ["c1".to_owned(), "c1".to_owned(), "c1".to_owned()];
    let outcomes = store
        .reprocess(&id, &named, 2_000)
        .await
        .expect("reprocess");
    assert_eq!(outcomes, vec![("c1".to_owned(), Queued { remaining: 1 })]);
    // The second reprocess of the quota of 2 is still there.
    let outcomes = store
        .reprocess(&id, &["c1".to_owned()], 2_001)
        .await
        .expect("reprocess");
    assert_eq!(outcomes, vec![("c1".to_owned(), Queued { remaining: 0 })]);
}

mod analytics;
mod callbacks;
mod checks;
mod coverage;
mod fair;
mod faults;
mod links;
mod queue;
mod queue_stats;
mod queues;
mod review;
mod web;

/// The per-customer monthly count is an upsert; the test over the limit is refused and not written.
async fn the_monthly_limit_counts_per_customer_and_refuses_the_test_over_it(backend: Backend) {
    let (_dir, store, first) = store_with_test(backend, vec![Variant::Default]).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    let test = |n: i64, customer: &str| NewTest {
        subject: format!("S{n}"),
        created_at: 2_000 + n,
        customer_id: Some(customer.into()),
        monthly_limit: Some((2, "2026-11".into())),
        ..store::testing::new_test(account.id, TestKind::Email)
    };
    store.create_test(&test(1, "c1")).await.expect("first");
    store.create_test(&test(2, "c1")).await.expect("second");
    let over = test(3, "c1");
    assert!(matches!(
        store.create_test(&over).await,
        Err(store::StoreError::TestLimitReached { limit: 2, .. })
    ));
    assert!(store
        .test(account.id, &over.id)
        .await
        .expect("read")
        .is_none());
    store
        .create_test(&test(4, "c2"))
        .await
        .expect("another customer");
    assert!(store
        .test(account.id, &first)
        .await
        .expect("read")
        .is_some());
}

/// Each SQLite migration has its PostgreSQL twin with the same number (0001 stands for 0001-0005,
/// which PostgreSQL's schema was written from at once), so neither backend lags behind.
#[test]
fn every_sqlite_migration_has_a_postgres_twin() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let versions = |d: &std::path::Path| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(d)
            .expect("migrations directory")
            .flatten()
            .filter(|e| e.path().is_file())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.split_once('_').map(|(v, _)| v.to_string())
            })
            .collect()
    };
    let pg = versions(&dir.join("postgres"));
    let missing: Vec<String> = versions(&dir)
        .into_iter()
        .filter(|v| v.as_str() > "0005" && !pg.contains(v))
        .collect();
    assert!(
        missing.is_empty(),
        "SQLite migrations {missing:?} have no twin in migrations/postgres; write the same change \
         in PostgreSQL's dialect there with the same number"
    );
    assert!(
        pg.contains("0001"),
        "migrations/postgres/0001_schema.sql is missing"
    );
}

on_both!(
    the_monthly_limit_counts_per_customer_and_refuses_the_test_over_it,
    a_client_completes_when_all_its_variants_are_done,
    each_screenshot_keeps_what_its_page_could_not_load_until_it_is_drawn_again,
    an_expired_lease_is_taken_over_and_the_old_worker_result_is_ignored,
    a_retry_waits_and_a_bounce_is_final,
    stalled_processing_is_requeued,
    retention_removes_content_and_results_but_keeps_metadata,
    retention_removes_mail_received_before_the_cutoff,
    a_client_named_twice_in_one_reprocess_is_queued_and_paid_for_once,
);
