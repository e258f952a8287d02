//! Inbound mail and svc sends are leased queues: concurrent claimers never get one row twice, and
//! a claim whose process died is taken over once its lease expires.

use domain::{SpamMethod, TestKind, Variant};
use store::{Backend, NewInbound, NewTest, Outcome, Store};

use crate::store_with_test;

fn message(received_at: i64) -> NewInbound {
    NewInbound {
        received_at,
        mail_from: "a@example.org".into(),
        rcpt_to: vec!["k.sa@seed.example".into(), "k.own@seed.example".into()],
        peer: "127.0.0.1".into(),
        helo: "h".into(),
        data: b"Subject: s\r\n\r\nbody\r\n".to_vec(),
    }
}

async fn svc_test(store: &Store, account_id: i64, n: usize) -> String {
    let test = NewTest {
        subject: format!("svc {n}"),
        html: format!("<p>{n}</p>"),
        created_at: 1_000 + n as i64,
        spam_method: Some(SpamMethod::Svc),
        seed_key: Some(format!("key{n}")),
        spam_filters: vec![
            ("SA".into(), domain::FilterType::B2b),
            ("OWN".into(), domain::FilterType::B2c),
        ],
        ..store::testing::new_test(account_id, TestKind::Spam)
    };
    store.create_test(&test).await.expect("svc test");
    test.id
}

/// A store with one svc test, and its id.
async fn store_with_svc_test(backend: Backend) -> (store::testing::TestDb, Store, String) {
    let (dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    let id = svc_test(&store, account.id, 1).await;
    (dir, store, id)
}

/// Four workers drain the queue at once, each in a loop of claim and finish; every message must be
/// claimed exactly once.
async fn concurrent_claimers_get_each_inbound_message_once(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(store.insert_inbound(&message(i)).await.expect("insert"));
    }
    let mut workers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        workers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut got = Vec::new();
            while let Some(row) = store
                .claim_inbound(&worker, 2_000, 60)
                .await
                .expect("claim")
            {
                got.push(row.id);
                assert!(store
                    .finish_inbound(row.id, &worker, &Outcome::Done, &[])
                    .await
                    .expect("finish"));
            }
            got
        }));
    }
    let mut claimed = Vec::new();
    for w in workers {
        claimed.extend(w.await.expect("worker task"));
    }
    claimed.sort();
    assert_eq!(claimed, ids, "each message claimed exactly once");
    assert_eq!(store.pending_inbound().await.expect("count"), 0);
}

async fn an_inbound_claim_whose_lease_expired_is_taken_over(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let id = store.insert_inbound(&message(1)).await.expect("insert");
    let first = store
        .claim_inbound("dead", 1_000, 60)
        .await
        .expect("claim")
        .expect("the message");
    assert_eq!((first.id, first.attempts), (id, 1));
    assert!(
        store
            .claim_inbound("w2", 1_060, 60)
            .await
            .expect("claim")
            .is_none(),
        "leased until 1060"
    );
    let taken = store
        .claim_inbound("w2", 1_061, 60)
        .await
        .expect("claim")
        .expect("taken over after expiry");
    assert_eq!((taken.id, taken.attempts), (id, 2));
    assert!(
        !store
            .finish_inbound(id, "dead", &Outcome::Done, &[])
            .await
            .expect("finish"),
        "the dead worker's late result is ignored"
    );
    assert!(store
        .finish_inbound(id, "w2", &Outcome::Done, &[])
        .await
        .expect("finish"));
    let (_, state) = store.inbound(id).await.expect("read").expect("row");
    assert_eq!(state, "done");
}

/// A message that waits (its seed key not bound yet) keeps what is done, is not due before its
/// time and does not spend an attempt; a failing one is set aside when its last attempt gives up.
async fn inbound_waits_and_retries_are_remembered_across_claims(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let id = store.insert_inbound(&message(1)).await.expect("insert");
    store
        .claim_inbound("w1", 1_000, 60)
        .await
        .expect("claim")
        .expect("row");
    assert!(store
        .finish_inbound(
            id,
            "w1",
            &Outcome::Retry {
                error: None,
                not_before: 1_010,
                counted: false,
            },
            &["k.own@seed.example".into()],
        )
        .await
        .expect("finish"));
    assert!(store
        .claim_inbound("w2", 1_009, 60)
        .await
        .expect("claim")
        .is_none());
    let again = store
        .claim_inbound("w2", 1_010, 60)
        .await
        .expect("claim")
        .expect("due again");
    assert_eq!(again.attempts, 1, "waiting spent no attempt");
    assert_eq!(again.done_rcpts, vec!["k.own@seed.example".to_string()]);
    assert!(store
        .finish_inbound(
            id,
            "w2",
            &Outcome::Retry {
                error: Some("spamd down".into()),
                not_before: 1_020,
                counted: true,
            },
            &again.done_rcpts,
        )
        .await
        .expect("finish"));
    let third = store
        .claim_inbound("w3", 1_020, 60)
        .await
        .expect("claim")
        .expect("due again");
    assert_eq!(third.attempts, 2);
    assert!(store
        .finish_inbound(
            id,
            "w3",
            &Outcome::GiveUp {
                error: Some("spamd down".into()),
            },
            &third.done_rcpts,
        )
        .await
        .expect("finish"));
    let (_, state) = store.inbound(id).await.expect("read").expect("row");
    assert_eq!(state, "failed", "set aside after the last attempt");
    assert!(store
        .claim_inbound("w4", 9_999, 60)
        .await
        .expect("claim")
        .is_none());
}

async fn concurrent_claimers_send_each_svc_test_once(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    let mut ids = Vec::new();
    for n in 0..30 {
        ids.push(svc_test(&store, account.id, n).await);
    }
    let mut workers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        workers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut got = Vec::new();
            while let Some(send) = store
                .claim_svc_send(&worker, 2_000, 60)
                .await
                .expect("claim")
            {
                assert_eq!(send.html, format!("<p>{}</p>", &send.subject[4..]));
                assert!(store
                    .finish_svc_send(&send.test_id, &worker, 2_000, &Outcome::Done)
                    .await
                    .expect("finish"));
                got.push(send.test_id);
            }
            got
        }));
    }
    let mut claimed = Vec::new();
    for w in workers {
        claimed.extend(w.await.expect("worker task"));
    }
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids, "each test sent exactly once");
}

fn refused(not_before: i64) -> Outcome {
    Outcome::Retry {
        error: Some("connection refused".into()),
        not_before,
        counted: true,
    }
}

async fn an_svc_send_whose_lease_expired_is_taken_over_and_retries_wait(backend: Backend) {
    let (_dir, store, id) = store_with_svc_test(backend).await;
    let first = store
        .claim_svc_send("dead", 2_000, 60)
        .await
        .expect("claim")
        .expect("the send");
    assert_eq!((first.test_id.as_str(), first.attempts), (id.as_str(), 1));
    assert!(store
        .claim_svc_send("w2", 2_060, 60)
        .await
        .expect("claim")
        .is_none());
    let taken = store
        .claim_svc_send("w2", 2_061, 60)
        .await
        .expect("claim")
        .expect("taken over after expiry");
    assert_eq!(taken.attempts, 2);
    assert!(!store
        .finish_svc_send(&id, "dead", 2_062, &Outcome::Done)
        .await
        .expect("finish"));
    assert!(store
        .finish_svc_send(&id, "w2", 2_062, &refused(2_100))
        .await
        .expect("finish"));
    assert!(store
        .claim_svc_send("w3", 2_099, 60)
        .await
        .expect("claim")
        .is_none());
    let last = store
        .claim_svc_send("w3", 2_100, 60)
        .await
        .expect("claim")
        .expect("due after the retry time");
    assert_eq!(last.attempts, 3);
    assert!(store
        .finish_svc_send(
            &id,
            "w3",
            2_101,
            &Outcome::GiveUp {
                error: Some("connection refused".into()),
            },
        )
        .await
        .expect("finish"));
    assert!(
        store
            .claim_svc_send("w4", 9_999, 60)
            .await
            .expect("claim")
            .is_none(),
        "given up after the last attempt"
    );
}

/// Each seed address of an svc test gets its own message: a delivery recorded under the lease
/// keeps the lease and is not sent again by the next claimer; one recorded by a sender that lost
/// its lease is refused.
async fn svc_recipients_recorded_under_the_lease_are_not_sent_again(backend: Backend) {
    let (_dir, store, id) = store_with_svc_test(backend).await;
    let first = store
        .claim_svc_send("dead", 2_000, 60)
        .await
        .expect("claim")
        .expect("the send");
    assert_eq!(
        first.unsent,
        ["SA", "OWN"],
        "every filter's address, in order"
    );
    assert!(store
        .record_svc_recipient_sent(&id, "SA", "dead", 2_010, 2_070)
        .await
        .expect("record"));
    assert!(
        store
            .claim_svc_send("w2", 2_061, 60)
            .await
            .expect("claim")
            .is_none(),
        "a recorded delivery renewed the lease"
    );
    let taken = store
        .claim_svc_send("w2", 2_071, 60)
        .await
        .expect("claim")
        .expect("taken over after the renewed lease expired");
    assert_eq!(
        taken.unsent,
        ["OWN"],
        "the address already sent to is not sent again"
    );
    assert!(
        !store
            .record_svc_recipient_sent(&id, "OWN", "dead", 2_072, 2_132)
            .await
            .expect("record"),
        "the sender that lost the lease records nothing"
    );
    assert!(store
        .finish_svc_send(&id, "w2", 2_073, &refused(2_100))
        .await
        .expect("finish"));
    let again = store
        .claim_svc_send("w3", 2_100, 60)
        .await
        .expect("claim")
        .expect("due after the retry time");
    assert_eq!(again.unsent, ["OWN"]);
}

on_both!(
    svc_recipients_recorded_under_the_lease_are_not_sent_again,
    concurrent_claimers_get_each_inbound_message_once,
    an_inbound_claim_whose_lease_expired_is_taken_over,
    inbound_waits_and_retries_are_remembered_across_claims,
    concurrent_claimers_send_each_svc_test_once,
    an_svc_send_whose_lease_expired_is_taken_over_and_retries_wait,
);
