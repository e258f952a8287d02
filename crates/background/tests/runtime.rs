//! The runtime against a real store, on SQLite and PostgreSQL: loops drain a queue and stop on
//! shutdown, a wake-up cuts an idle loop's wait short, a heartbeat keeps a lease a handler holds
//! past its first expiry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use background::{Heartbeat, Loops, Runtime, Slot};
use domain::{TestKind, Variant};
use store::{Backend, Claim, Key, Store, RENDER};
use tokio::sync::Notify;

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(store::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(store::Backend::Postgres).await
            }
        }
    )*};
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A store with `n` email tests, each with one render job and a requested link check.
async fn store_with_tests(
    backend: Backend,
    n: usize,
) -> (store::testing::TestDb, Store, Vec<String>) {
    let (db, store) = store::testing::store(backend).await;
    let account = store::testing::add_account(&store, "k").await;
    let mut ids = Vec::new();
    for _ in 0..n {
        let test = store::NewTest {
            clients: vec![store::NewTestClient {
                client_id: "c1".into(),
                variants: vec![Variant::Default],
            }],
            ..store::testing::new_test(account.id, TestKind::Email)
        };
        store.create_test(&test).await.expect("test");
        store
            .request_link_check(&test.id, now())
            .await
            .expect("request");
        ids.push(test.id);
    }
    (db, store, ids)
}

/// Claims and finishes one link check; false when none is due.
async fn check_one(
    store: &Store,
    slot: &Slot,
    seen: &AtomicUsize,
) -> Result<bool, store::StoreError> {
    let Some((test_id, _)) = store.claim_link_check(&slot.owner, now(), 60).await? else {
        return Ok(false);
    };
    seen.fetch_add(1, Ordering::SeqCst);
    store
        .finish_link_check(&test_id, &slot.owner, "{}", now())
        .await?;
    Ok(true)
}

async fn loops_drain_a_queue_and_stop_at_shutdown(backend: Backend) {
    let (_db, store, ids) = store_with_tests(backend, 12).await;
    let runtime = Runtime::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let (s, n, cancel) = (store.clone(), seen.clone(), runtime.cancel_token());
    runtime.spawn(async move {
        Loops::new("link_checks", 3, None, Duration::from_millis(100))
            .run(cancel, |slot| {
                let (s, n) = (s.clone(), n.clone());
                async move { check_one(&s, &slot, &n).await }
            })
            .await
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.load(Ordering::SeqCst) < ids.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the loops did not drain the queue"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in &ids {
        let row = store.link_check(id).await.expect("read").expect("row");
        assert_eq!(row.state, domain::QueueState::Done, "{id}");
    }
    tokio::time::timeout(Duration::from_secs(5), runtime.shutdown())
        .await
        .expect("shutdown waits for the loops, which stop at once when idle");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        ids.len(),
        "each check handled once"
    );
}

async fn a_wake_up_cuts_an_idle_wait_short(backend: Backend) {
    let (_db, store, _) = store_with_tests(backend, 0).await;
    let runtime = Runtime::new();
    let wake = Arc::new(Notify::new());
    let seen = Arc::new(AtomicUsize::new(0));
    let (s, n, cancel) = (store.clone(), seen.clone(), runtime.cancel_token());
    // Polling once an hour: only the wake-up can make the loop look again in time.
    runtime.spawn(
        Loops::new(
            "link_checks",
            1,
            Some(wake.clone()),
            Duration::from_secs(3600),
        )
        .run(cancel, move |slot| {
            let (s, n) = (s.clone(), n.clone());
            async move { check_one(&s, &slot, &n).await }
        }),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    let test = store::testing::new_test(account.id, TestKind::Email);
    store.create_test(&test).await.expect("test");
    store
        .request_link_check(&test.id, now())
        .await
        .expect("request");
    wake.notify_one();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the wake-up was not heard"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runtime.shutdown().await;
}

async fn a_heartbeat_keeps_a_lease_past_its_first_expiry(backend: Backend) {
    static QUEUE: store::Queue = RENDER;
    let (_db, store, _) = store_with_tests(backend, 1).await;
    let claimed = store
        .claim(&QUEUE, &Claim::new("holder", now(), 2))
        .await
        .expect("claim")
        .expect("a job");
    let beat = Heartbeat::start(
        &store,
        &QUEUE,
        claimed.key.clone(),
        "holder",
        Duration::from_secs(2),
        Duration::from_millis(300),
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        store
            .claim(&QUEUE, &Claim::new("other", now(), 2))
            .await
            .expect("claim")
            .is_none(),
        "the heartbeat kept the lease"
    );
    drop(beat);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let taken = store
        .claim(&QUEUE, &Claim::new("other", now(), 2))
        .await
        .expect("claim")
        .expect("taken over once the heartbeat stopped");
    assert_eq!(taken.key, claimed.key);
    assert!(matches!(taken.key, Key::Int(_)));
}

on_both!(
    loops_drain_a_queue_and_stop_at_shutdown,
    a_wake_up_cuts_an_idle_wait_short,
    a_heartbeat_keeps_a_lease_past_its_first_expiry,
);
