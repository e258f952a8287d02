//! Fair queues: account A queues many jobs first, account B one job after them. B's job is
//! claimed by the second claim whether or not A's first job is still running, and A never holds
//! more live leases than its cap. Counted in claims, not timed.

use domain::{TestKind, Variant};
use store::testing::TestDb;
use store::{AccountCaps, Backend, CallbackOutcome, NewTest, NewTestClient, Store};

use crate::done;

struct Two {
    _db: TestDb,
    store: Store,
    a: i64,
    b: i64,
}

async fn two_accounts(backend: Backend, caps: AccountCaps) -> Two {
    let (db, store) = store::testing::store(backend).await;
    let store = store.with_account_caps(caps);
    let mut ids = Vec::new();
    for key in ["a", "b"] {
        ids.push(store::testing::add_account(&store, key).await.id);
    }
    Two {
        _db: db,
        store,
        a: ids[0],
        b: ids[1],
    }
}

impl Two {
    /// A test of `account` with `clients` clients of one variant each.
    async fn test(&self, account: i64, clients: usize, created_at: i64) -> String {
        let test = NewTest {
            created_at,
            clients: (0..clients)
                .map(|c| NewTestClient {
                    client_id: format!("c{c}"),
                    variants: vec![Variant::Default],
                })
                .collect(),
            callback_url: Some("https://hooks.example/done".into()),
            ..store::testing::new_test(account, TestKind::Email)
        };
        self.store.create_test(&test).await.expect("test");
        test.id
    }

    /// Tests of A (`many` of them, older) and one of B, each with one client, all rendered, so
    /// that each has its callback queued (A's completed first).
    async fn completed_tests(&self, many: usize) -> (Vec<String>, String) {
        let mut a = Vec::new();
        for n in 0..many {
            a.push(self.test(self.a, 1, 1_000 + n as i64).await);
        }
        let b = self.test(self.b, 1, 1_100).await;
        let mut now = 2_000;
        while let Some(job) = self.store.claim_job("r", now, 60).await.expect("claim") {
            self.store
                .finish_job(&job, "r", now, &done())
                .await
                .expect("finish");
            now += 1;
        }
        (a, b)
    }
}

fn caps(cap: Option<u32>) -> AccountCaps {
    AccountCaps {
        render: cap,
        link_checks: cap,
        content_checks: cap,
        callbacks: cap,
    }
}

async fn render_jobs_take_turns_between_accounts(backend: Backend) {
    let t = two_accounts(backend, AccountCaps::default()).await;
    let a = t.test(t.a, 6, 1_000).await;
    let b = t.test(t.b, 1, 1_001).await;
    // One worker, one job at a time: A's six jobs are older, B's waits for one of them.
    let mut order = Vec::new();
    while let Some(job) = t.store.claim_job("w", 2_000, 60).await.expect("claim") {
        order.push(job.test_id.clone());
        t.store
            .finish_job(&job, "w", 2_000, &done())
            .await
            .expect("finish");
    }
    assert_eq!(order.len(), 7);
    let b_at = order.iter().position(|id| *id == b);
    assert_eq!(b_at, Some(1), "B's job is the second claimed: {order:?}");
    assert_eq!(order[0], a);
}

async fn a_capped_account_holds_no_more_leases_than_its_cap(backend: Backend) {
    let t = two_accounts(backend, caps(Some(2))).await;
    let a = t.test(t.a, 6, 1_000).await;
    let b = t.test(t.b, 1, 1_001).await;
    // Claims without finishing, as concurrent workers would.
    let mut leased = Vec::new();
    while let Some(job) = t.store.claim_job("w", 2_000, 60).await.expect("claim") {
        leased.push(job);
    }
    let of = |id: &str| leased.iter().filter(|j| j.test_id == id).count();
    assert_eq!((of(&a), of(&b)), (2, 1), "{leased:?}");
    assert_eq!(leased[1].test_id, b, "B's job is the second claimed");
    // A lease given back frees one place for A, and only one.
    t.store
        .finish_job(&leased[0], "w", 2_001, &done())
        .await
        .expect("finish");
    let next = t.store.claim_job("w", 2_001, 60).await.expect("claim");
    assert_eq!(next.map(|j| j.test_id), Some(a.clone()));
    assert!(t
        .store
        .claim_job("w", 2_001, 60)
        .await
        .expect("claim")
        .is_none());
    // An expired lease no longer counts against the cap (B's job done, so only A's are left).
    t.store
        .finish_job(&leased[1], "w", 2_002, &done())
        .await
        .expect("finish");
    assert!(t
        .store
        .claim_job("w", 2_061, 60)
        .await
        .expect("claim")
        .is_some_and(|j| j.test_id == a));
}

/// Link checks and content checks share one claim; both are tested through their own methods.
async fn per_test_checks_take_turns_and_respect_the_cap(backend: Backend) {
    for content in [false, true] {
        let t = two_accounts(backend, AccountCaps::default()).await;
        let mut a = Vec::new();
        for n in 0..5 {
            a.push(t.test(t.a, 0, 1_000 + n).await);
        }
        let b = t.test(t.b, 0, 1_100).await;
        for (n, id) in a.iter().chain([&b]).enumerate() {
            let at = 1_000 + n as i64;
            if content {
                t.store
                    .request_content_check(id, at)
                    .await
                    .expect("request");
            } else {
                t.store.request_link_check(id, at).await.expect("request");
            }
        }
        let claim = |worker: &'static str, now: i64| {
            let store = t.store.clone();
            async move {
                if content {
                    store.claim_content_check(worker, now, 60).await
                } else {
                    store.claim_link_check(worker, now, 60).await
                }
                .expect("claim")
                .map(|(id, _)| id)
            }
        };
        // A's first (slow) check is running: B's is claimed next, and A gets no second worker
        // (the default cap is one per account).
        let first = claim("w1", 2_000).await.expect("A's first check");
        assert_eq!(first, a[0]);
        assert_eq!(
            claim("w2", 2_000).await,
            Some(b.clone()),
            "content {content}"
        );
        assert_eq!(
            claim("w3", 2_000).await,
            None,
            "content {content}: A is at its cap"
        );
        // A's check done, its next one is claimed.
        let finished = if content {
            t.store
                .finish_content_check(&first, "w1", "{}", 2_001)
                .await
        } else {
            t.store.finish_link_check(&first, "w1", "{}", 2_001).await
        };
        assert!(finished.expect("finish"));
        assert_eq!(claim("w1", 2_001).await, Some(a[1].clone()));
    }
}

async fn one_worker_serves_the_other_account_after_one_check(backend: Backend) {
    let t = two_accounts(backend, AccountCaps::default()).await;
    let mut a = Vec::new();
    for n in 0..5 {
        let id = t.test(t.a, 0, 1_000 + n).await;
        t.store
            .request_link_check(&id, 1_000 + n)
            .await
            .expect("request");
        a.push(id);
    }
    let b = t.test(t.b, 0, 1_100).await;
    t.store
        .request_link_check(&b, 1_100)
        .await
        .expect("request");
    let mut order = Vec::new();
    while let Some((id, _)) = t
        .store
        .claim_link_check("w", 2_000, 60)
        .await
        .expect("claim")
    {
        assert!(t
            .store
            .finish_link_check(&id, "w", "{}", 2_000)
            .await
            .expect("finish"));
        order.push(id);
    }
    assert_eq!(order.len(), 6);
    assert_eq!(order[1], b, "B's check is the second claimed: {order:?}");
}

async fn callbacks_take_turns_and_respect_the_cap(backend: Backend) {
    let t = two_accounts(backend, AccountCaps::default()).await;
    let (a, b) = t.completed_tests(4).await;
    let first = t
        .store
        .claim_callback("w1", 3_000, 60)
        .await
        .expect("claim")
        .expect("A's first callback");
    assert_eq!(first.test_id, a[0]);
    let second = t
        .store
        .claim_callback("w2", 3_000, 60)
        .await
        .expect("claim");
    assert_eq!(second.map(|c| c.test_id), Some(b));
    assert_eq!(
        t.store
            .claim_callback("w3", 3_000, 60)
            .await
            .expect("claim"),
        None,
        "A is at its cap of one"
    );
    assert!(t
        .store
        .finish_callback(
            &first,
            "w1",
            3_001,
            &CallbackOutcome::Delivered { status: 200 }
        )
        .await
        .expect("finish"));
    let next = t
        .store
        .claim_callback("w1", 3_001, 60)
        .await
        .expect("claim");
    assert_eq!(next.map(|c| c.test_id), Some(a[1].clone()));
}

/// Without a cap an account may take every worker, but the fair order still puts the other
/// account's job first at the next claim.
async fn without_a_cap_the_fewest_leases_go_first(backend: Backend) {
    let t = two_accounts(backend, caps(None)).await;
    let a = t.test(t.a, 6, 1_000).await;
    for _ in 0..3 {
        let job = t.store.claim_job("w", 2_000, 60).await.expect("claim");
        assert_eq!(job.map(|j| j.test_id), Some(a.clone()));
    }
    let b = t.test(t.b, 1, 1_500).await;
    let job = t.store.claim_job("w", 2_000, 60).await.expect("claim");
    assert_eq!(job.map(|j| j.test_id), Some(b));
}

on_both!(
    render_jobs_take_turns_between_accounts,
    a_capped_account_holds_no_more_leases_than_its_cap,
    per_test_checks_take_turns_and_respect_the_cap,
    one_worker_serves_the_other_account_after_one_check,
    callbacks_take_turns_and_respect_the_cap,
    without_a_cap_the_fewest_leases_go_first,
);
