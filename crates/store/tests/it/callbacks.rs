//! Completion callbacks: queued with the outcome that completes a test, once per test, leased
//! to one worker and taken over after a crash.

use domain::{TestKind, Variant};
use store::testing::TestDb;
use store::{Backend, CallbackOutcome, JobOutcome, NewTest, NewTestClient, Store};

use crate::done;

struct Fixture {
    _db: TestDb,
    store: Store,
    account_id: i64,
}

async fn fixture(backend: Backend) -> Fixture {
    let (db, store) = store::testing::store(backend).await;
    let account = store::testing::add_account(&store, "k").await;
    Fixture {
        _db: db,
        store,
        account_id: account.id,
    }
}

impl Fixture {
    /// A test with one client of two variants and, when `spam`, two spam filters.
    async fn test(&self, callback_url: Option<&str>, clients: bool, spam: bool) -> String {
        let kind = if clients {
            TestKind::Email
        } else {
            TestKind::Spam
        };
        let test = NewTest {
            image_blocking: true,
            clients: if clients {
                vec![NewTestClient {
                    client_id: "c1".into(),
                    variants: vec![Variant::Default, Variant::NoImages],
                }]
            } else {
                Vec::new()
            },
            spam_filters: if spam {
                vec![
                    ("f1".into(), domain::FilterType::B2b),
                    ("f2".into(), domain::FilterType::B2c),
                ]
            } else {
                Vec::new()
            },
            reprocesses: 2,
            callback_url: callback_url.map(str::to_owned),
            ..store::testing::new_test(self.account_id, kind)
        };
        self.store.create_test(&test).await.expect("test");
        test.id
    }

    /// Renders every queued job of the store with `outcome`.
    async fn finish_all(&self, outcome: &JobOutcome, now: i64) {
        while let Some(job) = self.store.claim_job("r", now, 60).await.expect("claim") {
            self.store
                .finish_job(&job, "r", now, outcome)
                .await
                .expect("finish");
        }
    }

    async fn verdict(&self, id: &str, client: &str, now: i64) {
        self.store
            .record_spam_result(
                id,
                &store::SpamUpdate {
                    client: client.into(),
                    spam: domain::SpamVerdict::NotSpam,
                    details: "ok".into(),
                },
                now,
            )
            .await
            .expect("verdict");
    }
}

async fn a_callback_is_queued_with_the_last_outcome_and_only_once(backend: Backend) {
    let f = fixture(backend).await;
    let id = f.test(Some("https://hooks.example/a"), true, false).await;
    let first = f.store.claim_job("r", 2_000, 60).await.expect("claim");
    let first = first.expect("a job");
    f.store
        .finish_job(&first, "r", 2_000, &done())
        .await
        .expect("finish");
    assert_eq!(
        f.store.claim_callback("w", 2_000, 30).await.expect("claim"),
        None,
        "one variant is still to render"
    );
    f.finish_all(&done(), 2_001).await;
    let claimed = f
        .store
        .claim_callback("w", 2_001, 10_000)
        .await
        .expect("claim")
        .expect("the completed test's callback");
    assert_eq!(claimed.test_id, id);
    assert_eq!(claimed.url, "https://hooks.example/a");
    assert_eq!(claimed.completed_at, 2_001);
    assert_eq!(claimed.account_id, f.account_id);
    assert_eq!(claimed.attempts, 1);
    assert_eq!(claimed.delivery_id.len(), 32);

    // Reprocessing completes the test again, but its callback was already queued.
    f.store
        .reprocess(&id, &["c1".to_string()], 3_000)
        .await
        .expect("reprocess");
    f.finish_all(&done(), 3_001).await;
    let (_, row) = f.store.test_callback(&id).await.expect("read");
    let row = row.expect("row");
    assert_eq!(row.delivery_id, claimed.delivery_id);
    assert_eq!(row.state, domain::QueueState::Leased);
    assert_eq!(
        f.store.claim_callback("w", 3_001, 30).await.expect("claim"),
        None
    );
}

async fn a_bounced_client_completes_a_test_and_the_account_default_applies(backend: Backend) {
    let f = fixture(backend).await;
    let none = f.test(None, true, false).await;
    f.finish_all(
        &JobOutcome::Bounce {
            code: "x".into(),
            message: "y".into(),
        },
        2_000,
    )
    .await;
    assert_eq!(
        f.store.claim_callback("w", 2_000, 30).await.expect("claim"),
        None,
        "no URL anywhere: no callback"
    );
    assert_eq!(
        f.store.test_callback(&none).await.expect("read"),
        (None, None)
    );

    f.store
        .set_webhook_url(f.account_id, Some("https://hooks.example/default"))
        .await
        .expect("set default");
    let id = f.test(None, true, false).await;
    f.finish_all(
        &JobOutcome::Bounce {
            code: "x".into(),
            message: "y".into(),
        },
        2_100,
    )
    .await;
    let claimed = f
        .store
        .claim_callback("w", 2_100, 30)
        .await
        .expect("claim")
        .expect("callback at the account's default URL");
    assert_eq!(claimed.test_id, id);
    assert_eq!(claimed.url, "https://hooks.example/default");
}

async fn the_last_spam_verdict_queues_the_callback_of_a_spam_test_and_of_an_email_test(
    backend: Backend,
) {
    let f = fixture(backend).await;
    let spam = f.test(Some("https://hooks.example/s"), false, true).await;
    f.verdict(&spam, "f1", 2_000).await;
    assert_eq!(
        f.store.claim_callback("w", 2_000, 30).await.expect("claim"),
        None
    );
    f.verdict(&spam, "f2", 2_001).await;
    let claimed = f.store.claim_callback("w", 2_001, 10_000).await;
    let claimed = claimed.expect("claim").expect("the spam test's callback");
    assert_eq!(claimed.test_id, spam);
    // Delivered, so the account (at most one callback at a time) may have its next one.
    let delivered = CallbackOutcome::Delivered { status: 200 };
    f.store
        .finish_callback(&claimed, "w", 2_002, &delivered)
        .await
        .expect("finish");

    // An email test with spam: screenshots done, verdicts pending, then the last verdict.
    let both = f.test(Some("https://hooks.example/b"), true, true).await;
    f.finish_all(&done(), 2_100).await;
    f.verdict(&both, "f1", 2_101).await;
    assert_eq!(
        f.store.claim_callback("w", 2_101, 30).await.expect("claim"),
        None,
        "a filter has not answered"
    );
    f.verdict(&both, "f2", 2_102).await;
    let claimed = f.store.claim_callback("w", 2_102, 30).await.expect("claim");
    assert_eq!(claimed.map(|c| c.test_id), Some(both));
}

async fn a_lost_lease_is_taken_over_and_retries_wait_for_their_time(backend: Backend) {
    let f = fixture(backend).await;
    let id = f.test(Some("https://hooks.example/a"), true, false).await;
    f.finish_all(&done(), 2_000).await;
    let dead = f
        .store
        .claim_callback("dead", 2_000, 30)
        .await
        .expect("claim")
        .expect("callback");
    assert_eq!(
        f.store.claim_callback("w", 2_030, 30).await.expect("claim"),
        None,
        "the lease still holds"
    );
    let taken = f
        .store
        .claim_callback("w", 2_031, 30)
        .await
        .expect("claim")
        .expect("taken over after the lease expired");
    assert_eq!(taken.attempts, 2);
    assert_eq!(taken.delivery_id, dead.delivery_id);
    assert!(
        !f.store
            .finish_callback(
                &dead,
                "dead",
                2_032,
                &CallbackOutcome::Delivered { status: 200 }
            )
            .await
            .expect("finish"),
        "the old worker's result is ignored"
    );
    let retry = CallbackOutcome::Retry {
        error: "HTTP 500".into(),
        status: Some(500),
        retry_at: 2_100,
    };
    assert!(f
        .store
        .finish_callback(&taken, "w", 2_032, &retry)
        .await
        .expect("finish"));
    assert_eq!(
        f.store.claim_callback("w", 2_099, 30).await.expect("claim"),
        None
    );
    let again = f
        .store
        .claim_callback("w", 2_100, 30)
        .await
        .expect("claim")
        .expect("due again");
    assert!(f
        .store
        .finish_callback(
            &again,
            "w",
            2_101,
            &CallbackOutcome::Delivered { status: 204 }
        )
        .await
        .expect("finish"));
    let (url, row) = f.store.test_callback(&id).await.expect("read");
    let row = row.expect("row");
    assert_eq!(url.as_deref(), Some("https://hooks.example/a"));
    assert_eq!(
        (
            row.state.as_str(),
            row.attempts,
            row.last_status,
            row.finished_at
        ),
        ("delivered", 3, Some(204), Some(2_101))
    );
    assert_eq!(
        f.store.claim_callback("w", 9_999, 30).await.expect("claim"),
        None,
        "a delivered callback is never sent again"
    );
}

async fn the_webhook_secret_is_made_once(backend: Backend) {
    let f = fixture(backend).await;
    let first = f
        .store
        .webhook_secret(f.account_id, "one")
        .await
        .expect("secret");
    let second = f
        .store
        .webhook_secret(f.account_id, "two")
        .await
        .expect("secret");
    assert_eq!(first.as_deref(), Some("one"));
    assert_eq!(second.as_deref(), Some("one"));
    assert_eq!(
        f.store.webhook_secret(9_999, "x").await.expect("secret"),
        None
    );
}

on_both!(
    a_callback_is_queued_with_the_last_outcome_and_only_once,
    a_bounced_client_completes_a_test_and_the_account_default_applies,
    the_last_spam_verdict_queues_the_callback_of_a_spam_test_and_of_an_email_test,
    a_lost_lease_is_taken_over_and_retries_wait_for_their_time,
    the_webhook_secret_is_made_once,
);
