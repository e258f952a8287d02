//! The runtime against a real store, on SQLite and PostgreSQL: loops drain a queue and stop on
//! shutdown, a row in flight at shutdown is finished and nothing is claimed after it, a wake-up
//! cuts an idle loop's wait short, a failing handler backs off and its loop goes on, a heartbeat
//! keeps a lease a handler holds past its first expiry, a failed periodic run is tried again, and
//! on every queue a row whose holder died is taken over within 15 s and finished once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use background::{Heartbeat, Loops, Runtime, Slot};
use domain::{QueueState, TestKind, Variant};
use store::{Backend, Claim, Key, Lease, Queue, Store, LINK_CHECKS, RENDER};
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

/// The link-check loops of the tests.
fn link_loops(store: &Store, workers: usize, wake: Option<Arc<Notify>>, poll: Duration) -> Loops {
    Loops::new(store, &LINK_CHECKS, workers, wake, poll)
}

/// Claims a link check for `slot`.
async fn claim_check(
    store: &Store,
    slot: Slot,
) -> Result<Option<(Key, String)>, store::StoreError> {
    let claimed = store
        .claim_link_check(&slot.owner, now(), slot.lease_secs())
        .await?;
    Ok(claimed.map(|(test_id, _)| (Key::Text(test_id.clone()), test_id)))
}

/// Finishes a claimed link check and counts it.
async fn finish_check(
    store: &Store,
    slot: Slot,
    test_id: String,
    seen: &AtomicUsize,
) -> Result<(), store::StoreError> {
    store
        .finish_link_check(&test_id, &slot.owner, "{}", now())
        .await?;
    // Counted once finished, so that a test waiting for the count sees the row done.
    seen.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn loops_drain_a_queue_and_stop_at_shutdown(backend: Backend) {
    let (_db, store, ids) = store_with_tests(backend, 12).await;
    let runtime = Runtime::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let (s, n, cancel) = (store.clone(), seen.clone(), runtime.cancel_token());
    runtime.spawn(async move {
        link_loops(&s, 3, None, Duration::from_millis(100))
            .run(
                cancel,
                |slot| claim_check(&s, slot),
                |slot, _, test_id| finish_check(&s, slot, test_id, &n),
            )
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
    let wake_loops = wake.clone();
    // Polling once an hour: only the wake-up can make the loop look again in time.
    runtime.spawn(async move {
        link_loops(&s, 1, Some(wake_loops), Duration::from_secs(3600))
            .run(
                cancel,
                |slot| claim_check(&s, slot),
                |slot, _, test_id| finish_check(&s, slot, test_id, &n),
            )
            .await
    });
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
        Lease {
            hold: Duration::from_secs(2),
            renew_every: Duration::from_millis(300),
        },
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
    runtime.spawn(async move {
        link_loops(&s, 1, None, Duration::from_millis(50))
            .run(
                cancel,
                |slot| claim_check(&s, slot),
                |slot, _, test_id| {
                    let (s, n) = (&s, &n);
                    async move {
                        n.fetch_add(1, Ordering::SeqCst);
                        // Long enough for the stop to come while the row is held.
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        s.finish_link_check(&test_id, &slot.owner, "{}", now())
                            .await
                            .map(|_| ())
                    }
                },
            )
            .await
    });
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
    let wake_loops = wake.clone();
    runtime.spawn(async move {
        link_loops(&s, 1, Some(wake_loops), Duration::from_millis(50))
            .run(
                cancel,
                |slot| {
                    let (s, c) = (&s, &c);
                    async move {
                        let first = {
                            let mut calls = c.lock().expect("not poisoned");
                            calls.push(Instant::now());
                            calls.len() == 1
                        };
                        if first {
                            return Err(store::StoreError::Corrupt("the first call fails".into()));
                        }
                        claim_check(s, slot).await
                    }
                },
                |slot, _, test_id| finish_check(&s, slot, test_id, &n),
            )
            .await
    });
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

/// The holder's name of a row whose process was killed: it never renews nor finishes again.
const DEAD: &str = "killed-holder";

/// Makes one row of `queue` due, as the service queues it.
async fn one_due_row(store: &Store, queue: &Queue) {
    let account = store::testing::add_account(store, "k").await;
    let with_client = store::NewTestClient {
        client_id: "c1".into(),
        variants: vec![Variant::Default],
    };
    let base = store::testing::new_test(account.id, TestKind::Email);
    match queue.name {
        "render" | "callbacks" => {
            let test = store::NewTest {
                clients: vec![with_client],
                callback_url: Some("https://hooks.example/done".into()),
                ..base
            };
            store.create_test(&test).await.expect("test");
            if queue.name == "callbacks" {
                // A callback is queued when its test completes: its one job is drawn.
                let job = store
                    .claim_job("renderer", now(), 60)
                    .await
                    .expect("claim")
                    .expect("the job");
                let done = store::JobOutcome::Done {
                    engine: "blink".into(),
                    shot: Default::default(),
                };
                let finished = store.finish_job(&job, "renderer", now(), &done).await;
                assert!(finished.expect("finish"), "the job is the renderer's");
            }
        }
        "link_checks" | "content_checks" | "inbox_rows" => {
            store.create_test(&base).await.expect("test");
            let requested = match queue.name {
                "link_checks" => store.request_link_check(&base.id, now()).await,
                "content_checks" => store.request_content_check(&base.id, now()).await.map(drop),
                _ => store
                    .request_report(&store::INBOX_ROWS, &base.id, now())
                    .await
                    .map(drop),
            };
            requested.expect("request");
        }
        "inbound" => {
            store
                .insert_inbound(&store::NewInbound {
                    received_at: now(),
                    mail_from: "a@example.org".into(),
                    rcpt_to: vec!["k.sa@seed.example".into()],
                    peer: "127.0.0.1".into(),
                    helo: "h".into(),
                    data: b"Subject: s\r\n\r\nbody\r\n".to_vec(),
                })
                .await
                .expect("mail");
        }
        "svc_sends" => {
            let test = store::NewTest {
                spam_method: Some(domain::SpamMethod::Svc),
                seed_key: Some("key1".into()),
                spam_filters: vec![("SA".into(), domain::FilterType::B2b)],
                created_at: now(),
                ..store::testing::new_test(account.id, TestKind::Spam)
            };
            store.create_test(&test).await.expect("svc test");
        }
        other => panic!("no due row is made here for the queue {other}: add it"),
    }
}

/// `owner`'s finish of `key` as its worker records it: true when recorded, false when refused.
async fn finish_as_worker(store: &Store, queue: &Queue, key: &Key, owner: &str) -> bool {
    let now = now();
    match (queue.name, key) {
        // A send is done once `spam_sent_at` says so, which only its own finish writes.
        ("svc_sends", Key::Text(test_id)) => store
            .finish_svc_send(test_id, owner, now, &store::Outcome::Done)
            .await
            .expect("finish"),
        _ => store
            .finish(queue, key, owner, &store::Outcome::Done)
            .await
            .expect("finish"),
    }
}

/// What is open in `queue`: rows waiting or leased.
async fn open_rows(store: &Store, queue: &Queue) -> i64 {
    let stats = store.queue_stats(now()).await.expect("figures");
    let stat = stats
        .iter()
        .find(|q| q.queue == queue.name)
        .expect("the queue's figures");
    stat.waiting + stat.leased
}

/// One queue's takeover: a row held by a process that died (claimed under the queue's lease, never
/// renewed) is claimed by the live loops within 15 s of the claim; the loops' heartbeat keeps it
/// while the handler works longer than their lease; it is finished once, and the dead holder's
/// late finish (its process back after an outage, in the worst case) is refused.
async fn a_dead_holders_row_is_taken_over_and_finished_once(
    backend: Backend,
    queue: &'static Queue,
) {
    let (_db, store) = store::testing::store(backend).await;
    one_due_row(&store, queue).await;
    let dead = store
        .claim(queue, &Claim::new(DEAD, now(), queue.lease.hold_secs()))
        .await
        .expect("claim")
        .expect("the due row");
    let died = Instant::now();
    let runtime = Runtime::new();
    let handled = Arc::new(std::sync::Mutex::new(
        Vec::<(Key, Duration, bool, bool)>::new(),
    ));
    let (s, h, cancel) = (store.clone(), handled.clone(), runtime.cancel_token());
    // The live loops hold their rows for 2 s, renewed every 0.5 s, and work 3 s on one: only the
    // heartbeat keeps the row theirs meanwhile.
    let short = Lease {
        hold: Duration::from_secs(2),
        renew_every: Duration::from_millis(500),
    };
    runtime.spawn(async move {
        let s = &s;
        Loops::new(s, queue, 2, None, Duration::from_millis(200))
            .with_lease(short)
            .run(
                cancel,
                |slot| async move {
                    let claimed = s
                        .claim(queue, &Claim::new(&slot.owner, now(), slot.lease_secs()))
                        .await?;
                    Ok::<_, store::StoreError>(
                        claimed.map(|c| (c.key.clone(), (c.key, died.elapsed()))),
                    )
                },
                |slot, _, (key, after)| {
                    let h = &h;
                    async move {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        let rival = s.claim(queue, &Claim::new("rival", now(), 60)).await?;
                        let finished = finish_as_worker(s, queue, &key, &slot.owner).await;
                        h.lock().expect("not poisoned").push((
                            key,
                            after,
                            rival.is_none(),
                            finished,
                        ));
                        Ok(())
                    }
                },
            )
            .await
    });
    testkit::wait::until(
        &format!("{}: the dead holder's row was not finished", queue.name),
        Duration::from_secs(40),
        || !handled.lock().expect("not poisoned").is_empty(),
    )
    .await;
    // A second turn, if any, would come within the loops' poll.
    tokio::time::sleep(Duration::from_millis(600)).await;
    runtime.shutdown().await;
    let handled = handled.lock().expect("not poisoned").clone();
    assert_eq!(
        handled.len(),
        1,
        "{}: handled once: {handled:?}",
        queue.name
    );
    let (key, after, rival_refused, finished) = handled[0].clone();
    assert_eq!(key, dead.key, "{}", queue.name);
    println!("{}: taken over {after:?} after the holder died", queue.name);
    // The bound for every queue: a crashed holder's work is taken over within 15 s.
    assert!(
        after <= Duration::from_secs(15),
        "{}: taken over after {after:?}",
        queue.name
    );
    assert!(
        rival_refused,
        "{}: the heartbeat kept the row past the loops' 2 s lease",
        queue.name
    );
    assert!(finished, "{}: the taker's finish is recorded", queue.name);
    assert!(
        !finish_as_worker(&store, queue, &dead.key, DEAD).await,
        "{}: the dead holder's late finish is refused",
        queue.name
    );
    assert_eq!(
        open_rows(&store, queue).await,
        0,
        "{}: nothing left open",
        queue.name
    );
}

async fn every_queue_takes_over_a_dead_holders_row_and_finishes_it_once(backend: Backend) {
    // All six at once: each waits out a real lease, so one after another would take a minute.
    futures::future::join_all(
        store::QUEUES
            .iter()
            .map(|queue| a_dead_holders_row_is_taken_over_and_finished_once(backend, queue)),
    )
    .await;
}

testkit::on_both!(
    loops_drain_a_queue_and_stop_at_shutdown,
    a_wake_up_cuts_an_idle_wait_short,
    a_heartbeat_keeps_a_lease_past_its_first_expiry,
    shutdown_finishes_the_row_in_flight_and_claims_nothing_after,
    a_failing_handler_backs_off_and_its_loop_goes_on,
    every_queue_takes_over_a_dead_holders_row_and_finishes_it_once,
);
