//! Queue figures for `/metrics`: waiting, leased and the oldest due job's age, per queue.

use domain::Variant;
use store::{Backend, QueueStat};

use crate::store_with_test;

fn stat(stats: &[QueueStat], queue: &str) -> (i64, i64, i64) {
    let s = stats
        .iter()
        .find(|s| s.queue == queue)
        .unwrap_or_else(|| panic!("no {queue} queue in {stats:?}"));
    (s.waiting, s.leased, s.oldest_age_secs)
}

async fn queue_figures_follow_claims_leases_and_expiry(backend: Backend) {
    let (_dir, store, id) =
        store_with_test(backend, vec![Variant::Default, Variant::NoImages]).await;
    let stats = store.queue_stats(1_010).await.expect("stats");
    assert_eq!(stat(&stats, "render"), (2, 0, 10));
    assert_eq!(stat(&stats, "link_checks"), (0, 0, 0));
    assert_eq!(stat(&stats, "inbound"), (0, 0, 0));
    assert_eq!(stat(&stats, "callbacks"), (0, 0, 0));

    store
        .claim_job("w1", 1_010, 60)
        .await
        .expect("claim")
        .expect("job");
    store.request_link_check(&id, 1_005).await.expect("request");
    let stats = store.queue_stats(1_020).await.expect("stats");
    assert_eq!(stat(&stats, "render"), (1, 1, 20));
    assert_eq!(stat(&stats, "link_checks"), (1, 0, 15));

    let render = |stats: &[QueueStat]| {
        let s = stats.iter().find(|s| s.queue == "render").expect("render");
        (s.expired_leases, s.expired_lease_secs)
    };
    assert_eq!(render(&stats), (0, 0), "w1 holds its lease");

    // w1's lease ran out (at 1 070): its job waits again, and shows as held by a holder that
    // stopped renewing until someone takes it over.
    let stats = store.queue_stats(1_100).await.expect("stats");
    assert_eq!(stat(&stats, "render"), (2, 0, 100));
    assert_eq!(render(&stats), (1, 30));
    store
        .claim_job("w2", 1_100, 60)
        .await
        .expect("claim")
        .expect("job");
    store
        .claim_job("w2", 1_100, 60)
        .await
        .expect("claim")
        .expect("the expired job");
    let stats = store.queue_stats(1_101).await.expect("stats");
    assert_eq!(render(&stats), (0, 0), "taken over");
}

on_both!(queue_figures_follow_claims_leases_and_expiry,);
