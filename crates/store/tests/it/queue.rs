//! The one queue implementation (`store::Queue`), driven through its generic methods on the render
//! queue: lease expiry, renewal, retry with backoff, giving up, stats.

use domain::Variant;
use store::{Backend, Backoff, Claim, Outcome, Store, RENDER};

use crate::store_with_test;

async fn claim(store: &Store, worker: &str, now: i64, lease: i64) -> Option<store::Claimed> {
    store
        .claim(&RENDER, &Claim::new(worker, now, lease))
        .await
        .expect("claim")
}

fn render_stat(stats: &[store::QueueStat]) -> &store::QueueStat {
    stats
        .iter()
        .find(|s| s.queue == "render")
        .expect("render in the stats")
}

async fn a_lapsed_lease_is_claimed_again_and_the_old_holder_is_refused(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let first = claim(&store, "w1", 2_000, 60).await.expect("a job");
    assert_eq!(first.attempts, 1);
    assert!(
        claim(&store, "w2", 2_060, 60).await.is_none(),
        "live until 2060"
    );
    let second = claim(&store, "w2", 2_061, 60)
        .await
        .expect("taken over after expiry");
    assert_eq!((&second.key, second.attempts), (&first.key, 2));
    assert!(!store
        .renew_lease(&RENDER, &first.key, "w1", 3_000)
        .await
        .expect("renew"));
    assert!(!store
        .finish(&RENDER, &first.key, "w1", &Outcome::Done)
        .await
        .expect("finish"));
    assert!(store
        .finish(&RENDER, &second.key, "w2", &Outcome::Done)
        .await
        .expect("finish"));
    assert!(claim(&store, "w3", 9_999, 60).await.is_none(), "done");
}

async fn renewal_keeps_a_lease_past_its_first_expiry(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let job = claim(&store, "w1", 2_000, 10).await.expect("a job");
    assert!(store
        .renew_lease(&RENDER, &job.key, "w1", 2_100)
        .await
        .expect("renew"));
    assert!(
        claim(&store, "w2", 2_050, 10).await.is_none(),
        "renewed until 2100: not taken over at 2050"
    );
    let stats = store.queue_stats(2_050).await.expect("stats");
    let render = render_stat(&stats);
    assert_eq!((render.waiting, render.leased), (0, 1));
    assert!(claim(&store, "w2", 2_101, 10).await.is_some());
}

async fn a_failed_attempt_waits_for_its_backoff(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let job = claim(&store, "w1", 2_000, 60).await.expect("a job");
    let outcome = RENDER.failed(job.attempts, 2_001, "engine crashed".into());
    let Outcome::Retry {
        not_before,
        counted: true,
        ..
    } = outcome
    else {
        panic!("the first failure is retried: {outcome:?}");
    };
    let full = RENDER.backoff.delay_secs(1, 0.0);
    assert!(
        (2_001 + full / 2..=2_001 + full).contains(&not_before),
        "{not_before}"
    );
    assert!(store
        .finish(&RENDER, &job.key, "w1", &outcome)
        .await
        .expect("finish"));
    assert!(
        claim(&store, "w1", not_before - 1, 60).await.is_none(),
        "not due before its backoff"
    );
    let stats = store.queue_stats(not_before - 1).await.expect("stats");
    assert_eq!(render_stat(&stats).waiting, 1);
    assert_eq!(render_stat(&stats).oldest_age_secs, 0, "waiting, not due");
    let again = claim(&store, "w1", not_before, 60).await.expect("due");
    assert_eq!(again.attempts, 2);
    // A retry that is not counted gives the attempt back.
    let release = Outcome::Retry {
        error: Some("storage down".into()),
        not_before: not_before + 5,
        counted: false,
    };
    assert!(store
        .finish(&RENDER, &again.key, "w1", &release)
        .await
        .expect("finish"));
    let third = claim(&store, "w1", not_before + 5, 60).await.expect("due");
    assert_eq!(third.attempts, 2, "the released attempt was given back");
}

async fn the_last_attempt_gives_up_for_good(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    let max = RENDER.max_attempts.expect("render gives up");
    let mut now = 2_000;
    let mut attempts = Vec::new();
    while let Some(job) = claim(&store, "w", now, 60).await {
        attempts.push(job.attempts);
        let outcome = RENDER.failed(job.attempts, now, "engine crashed".into());
        assert!(store
            .finish(&RENDER, &job.key, "w", &outcome)
            .await
            .expect("finish"));
        now += 10_000;
        assert!(attempts.len() as i64 <= max, "never gives up: {attempts:?}");
    }
    assert_eq!(attempts, (1..=max).collect::<Vec<_>>());
    let stats = store.queue_stats(now).await.expect("stats");
    assert_eq!(
        (render_stat(&stats).waiting, render_stat(&stats).leased),
        (0, 0)
    );
}

#[test]
fn the_backoff_doubles_to_its_cap_and_jitter_takes_off_at_most_its_share() {
    let b = Backoff::doubling(10, 60);
    let full: Vec<i64> = (1..=6).map(|a| b.delay_secs(a, 0.0)).collect();
    assert_eq!(full, [10, 20, 40, 60, 60, 60]);
    let most: Vec<i64> = (1..=6).map(|a| b.delay_secs(a, 0.999_999)).collect();
    assert_eq!(most, [6, 11, 21, 31, 31, 31]);
    assert_eq!(b.delay_secs(i64::MAX, 0.0), 60, "no overflow past the cap");
    assert_eq!(Backoff::fixed(5).delay_secs(9, 0.0), 5);
    assert_eq!(Backoff::doubling(1, 1).delay_secs(1, 0.99), 1, "never zero");
    for _ in 0..100 {
        let at = b.retry_at(1_000, 2);
        assert!((1_010..=1_020).contains(&at), "{at}");
    }
}

#[test]
fn a_queue_gives_up_at_its_max_attempts_only() {
    let q = RENDER.with_backoff(Backoff::fixed(1), 2);
    assert!(!q.gives_up(1));
    assert!(q.gives_up(2));
    assert!(matches!(q.failed(2, 0, "x".into()), Outcome::GiveUp { .. }));
}

on_both!(
    a_lapsed_lease_is_claimed_again_and_the_old_holder_is_refused,
    renewal_keeps_a_lease_past_its_first_expiry,
    a_failed_attempt_waits_for_its_backoff,
    the_last_attempt_gives_up_for_good,
);
