//! The runtime against a real store, on SQLite and PostgreSQL: loops drain a queue and stop on
//! shutdown, a row in flight at shutdown is finished and nothing is claimed after it, a wake-up
//! cuts an idle loop's wait short, a failing handler backs off and its loop goes on, a heartbeat
//! keeps a lease a handler holds past its first expiry, a failed periodic run is tried again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use background::{Heartbeat, Loops, Runtime, Slot};
use domain::{QueueState, TestKind, Variant};
use store::{Backend, Claim, Key, Store, RENDER};
use tokio::sync::Notify;

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

/// Queues a link check of a new test of account `k`.
async fn request_another_check(store: &Store) {
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
    store
        .finish_link_check(&test_id, &slot.owner, "{}", now())
        .await?;
    // Counted once finished, so that a test waiting for the count sees the row done.
    seen.fetch_add(1, Ordering::SeqCst);
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
    testkit::wait::until(
        "the loops did not drain the queue",
        Duration::from_secs(20),
        || seen.load(Ordering::SeqCst) >= ids.len(),
    )
    .await;
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
    request_another_check(&store).await;
    wake.notify_one();
    testkit::wait::until("the wake-up was not heard", Duration::from_secs(10), || {
        seen.load(Ordering::SeqCst) > 0
    })
    .await;
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

async fn shutdown_finishes_the_row_in_flight_and_claims_nothing_after(backend: Backend) {
    let (_db, store, ids) = store_with_tests(backend, 4).await;
    let runtime = Runtime::new();
    let started = Arc::new(AtomicUsize::new(0));
    let (s, n, cancel) = (store.clone(), started.clone(), runtime.cancel_token());
    runtime.spawn(
        Loops::new("link_checks", 1, None, Duration::from_millis(50)).run(cancel, move |slot| {
            let (s, n) = (s.clone(), n.clone());
            async move {
                let Some((test_id, _)) = s.claim_link_check(&slot.owner, now(), 60).await? else {
                    return Ok(false);
                };
                n.fetch_add(1, Ordering::SeqCst);
                // Long enough for the stop to come while the row is held.
                tokio::time::sleep(Duration::from_secs(1)).await;
                s.finish_link_check(&test_id, &slot.owner, "{}", now())
                    .await
                    .map(|_| true)
            }
        }),
    );
    testkit::wait::until("nothing was claimed", Duration::from_secs(10), || {
        started.load(Ordering::SeqCst) > 0
    })
    .await;
    tokio::time::timeout(Duration::from_secs(5), runtime.shutdown())
        .await
        .expect("shutdown returns once the row in flight is finished");
    assert_eq!(started.load(Ordering::SeqCst), 1, "no claim after the stop");
    let mut states = Vec::new();
    for id in &ids {
        states.push(
            store
                .link_check(id)
                .await
                .expect("read")
                .expect("row")
                .state
                .as_str(),
        );
    }
    states.sort();
    assert_eq!(states, ["done", "queued", "queued", "queued"]);
    // The stopped loop holds no lease: with the account's cap of one link check at a time,
    // another process could not claim the next row if it did.
    store
        .claim_link_check("another-process", now(), 60)
        .await
        .expect("claim")
        .expect("a row the stopped loop does not hold");
}

async fn a_failing_handler_backs_off_and_its_loop_goes_on(backend: Backend) {
    let (_db, store, ids) = store_with_tests(backend, 1).await;
    let runtime = Runtime::new();
    let wake = Arc::new(Notify::new());
    let calls = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let seen = Arc::new(AtomicUsize::new(0));
    let (s, c, n, cancel) = (
        store.clone(),
        calls.clone(),
        seen.clone(),
        runtime.cancel_token(),
    );
    runtime.spawn(
        Loops::new(
            "link_checks",
            1,
            Some(wake.clone()),
            Duration::from_millis(50),
        )
        .run(cancel, move |slot| {
            let (s, c, n) = (s.clone(), c.clone(), n.clone());
            async move {
                let first = {
                    let mut calls = c.lock().expect("not poisoned");
                    calls.push(Instant::now());
                    calls.len() == 1
                };
                if first {
                    return Err(store::StoreError::Corrupt("the first call fails".into()));
                }
                check_one(&s, &slot, &n).await
            }
        }),
    );
    // Wake-ups during the pause do not cut it short: they would bring the failure straight back.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        wake.notify_one();
    }
    testkit::wait::until(
        "the loop did not come back after the error",
        Duration::from_secs(10),
        || seen.load(Ordering::SeqCst) > 0,
    )
    .await;
    let (first, second) = {
        let calls = calls.lock().expect("not poisoned");
        (calls[0], calls[1])
    };
    assert!(
        second - first >= Duration::from_millis(900),
        "the first error's pause is 1 s; the loop came back after {:?}",
        second - first
    );
    assert_eq!(
        store
            .link_check(&ids[0])
            .await
            .expect("read")
            .expect("row")
            .state,
        QueueState::Done
    );
    // Back to polling: new work is taken without another error pause.
    request_another_check(&store).await;
    testkit::wait::until(
        "the loop stopped after recovering",
        Duration::from_secs(10),
        || seen.load(Ordering::SeqCst) >= 2,
    )
    .await;
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failed_periodic_run_is_tried_again_and_shutdown_stops_it() {
    let runtime = Runtime::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    runtime.periodic("test", Duration::from_millis(50), move || {
        let r = r.clone();
        async move {
            match r.fetch_add(1, Ordering::SeqCst) {
                0 => Err("the first run fails"),
                _ => Ok(()),
            }
        }
    });
    testkit::wait::until(
        "the job was not run again after its failure",
        Duration::from_secs(10),
        || runs.load(Ordering::SeqCst) >= 3,
    )
    .await;
    tokio::time::timeout(Duration::from_secs(5), runtime.shutdown())
        .await
        .expect("shutdown ends a periodic job between runs");
    let after = runs.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), after, "no run after shutdown");
}

testkit::on_both!(
    loops_drain_a_queue_and_stop_at_shutdown,
    a_wake_up_cuts_an_idle_wait_short,
    a_heartbeat_keeps_a_lease_past_its_first_expiry,
    shutdown_finishes_the_row_in_flight_and_claims_nothing_after,
    a_failing_handler_backs_off_and_its_loop_goes_on,
);
