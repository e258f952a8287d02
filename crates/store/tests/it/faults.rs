//! Faults of what the render queue runs on: a job released for a storage or database fault keeps
//! its attempts; a process claims only the clients its engines draw; a renewed lease is kept and a
//! taken-over job is finished once; a bounced client can be reprocessed.

use domain::{ScreenshotStatus, Variant};
use store::{Backend, JobOutcome, ReprocessOutcome};

use crate::{done, store_with_clients, store_with_test};

fn release(retry_at: i64) -> JobOutcome {
    JobOutcome::Release {
        error: "storing the screenshot failed: connection refused".into(),
        retry_at,
    }
}

async fn a_released_job_keeps_its_attempts_however_often_it_is_released(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let mut now = 2_000;
    // Far more releases than any attempt limit: an outage of any length bounces nothing.
    for _ in 0..6 {
        let job = store
            .claim_job("w", now, 10)
            .await
            .expect("claim")
            .expect("the released job is due again");
        assert_eq!(job.attempts, 1, "a release gives its attempt back");
        assert!(store
            .finish_job(&job, "w", now + 1, &release(now + 5))
            .await
            .expect("finish"));
        assert!(
            store
                .claim_job("w", now + 4, 10)
                .await
                .expect("claim")
                .is_none(),
            "a released job waits for its retry time"
        );
        let c = &store.test_clients(&id).await.expect("clients")[0];
        assert_ne!(c.status, ScreenshotStatus::Bounced);
        now += 5;
    }
    let job = store
        .claim_job("w", now, 10)
        .await
        .expect("claim")
        .expect("job");
    assert_eq!(job.attempts, 1);
    assert!(store
        .finish_job(&job, "w", now + 1, &done())
        .await
        .expect("finish"));
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(c.status, ScreenshotStatus::Complete);
    assert_eq!(c.attempts, 1, "the outage shows no extra attempts");
}

async fn a_process_claims_only_the_clients_its_engines_draw(backend: Backend) {
    let (_dir, store, _id) = store_with_clients(
        backend,
        &[
            ("blink-client", vec![Variant::Default]),
            ("webkit-client", vec![Variant::Default]),
        ],
    )
    .await;
    let webkit_only = ["webkit-client".to_string()];
    let job = store
        .claim_job_for("webkit", 2_000, 10, Some(&webkit_only))
        .await
        .expect("claim")
        .expect("the webkit client's job");
    assert_eq!(job.client_id, "webkit-client");
    assert!(
        store
            .claim_job_for("webkit", 2_000, 10, Some(&webkit_only))
            .await
            .expect("claim")
            .is_none(),
        "the other client's job is not this process's"
    );
    assert!(store
        .claim_job_for("none", 2_000, 10, Some(&[]))
        .await
        .expect("claim")
        .is_none());
    let other = store
        .claim_job("full", 2_000, 10)
        .await
        .expect("claim")
        .expect("a process with every engine takes the rest");
    assert_eq!(other.client_id, "blink-client");
}

async fn a_renewed_lease_is_kept_and_a_taken_over_job_is_finished_once(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let first = store
        .claim_job("w1", 2_000, 10)
        .await
        .expect("claim")
        .expect("job");
    assert_eq!(first.taken_over_from, None);
    assert!(store
        .renew_job_lease(&first, "w1", 2_018)
        .await
        .expect("renew"));
    assert!(
        store
            .claim_job("w2", 2_015, 10)
            .await
            .expect("claim")
            .is_none(),
        "past the first lease, but renewed"
    );
    let second = store
        .claim_job("w2", 2_019, 10)
        .await
        .expect("claim")
        .expect("w1 stopped renewing: taken over");
    assert_eq!(second.id, first.id);
    assert_eq!(second.taken_over_from.as_deref(), Some("w1"));
    assert!(
        !store
            .renew_job_lease(&first, "w1", 2_030)
            .await
            .expect("renew"),
        "w1 learns it lost the job"
    );
    assert!(!store
        .finish_job(&first, "w1", 2_020, &done())
        .await
        .expect("finish"));
    assert_eq!(
        store.job_holder(first.id).await.expect("holder"),
        Some((domain::QueueState::Leased, Some("w2".to_string()))),
        "what w1 is told"
    );
    assert!(store
        .finish_job(&second, "w2", 2_021, &done())
        .await
        .expect("finish"));
    assert!(
        !store
            .finish_job(&second, "w2", 2_022, &done())
            .await
            .expect("finish"),
        "a second finish is refused"
    );
    assert_eq!(
        store.job_holder(first.id).await.expect("holder"),
        Some((domain::QueueState::Done, None))
    );
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(c.status, ScreenshotStatus::Complete);
    assert_eq!(c.completed_at, Some(2_021));
}

async fn a_worker_taking_back_its_own_lost_claim_spends_no_attempt(backend: Backend) {
    let (_dir, store, _id) = store_with_test(backend, vec![Variant::Default]).await;
    let lost = store
        .claim_job("w1", 2_000, 10)
        .await
        .expect("claim")
        .expect("job");
    assert_eq!(lost.attempts, 1);
    // w1 never heard back (the connection broke): the lease runs out and w1 claims again.
    let again = store
        .claim_job("w1", 2_011, 10)
        .await
        .expect("claim")
        .expect("the expired lease");
    assert_eq!(again.id, lost.id);
    assert_eq!(again.taken_over_from.as_deref(), Some("w1"));
    assert_eq!(again.attempts, 1, "not the email's fault");
    let other = store
        .claim_job("w2", 2_022, 10)
        .await
        .expect("claim")
        .expect("taken over by another worker");
    assert_eq!(
        other.attempts, 2,
        "w1 may have crashed on the email: that counts"
    );
}

async fn a_bounced_client_can_be_reprocessed(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let job = store
        .claim_job("w", 2_000, 10)
        .await
        .expect("claim")
        .expect("job");
    let bounce = JobOutcome::Bounce {
        code: "render_failed".into(),
        message: "cannot draw".into(),
    };
    assert!(store
        .finish_job(&job, "w", 2_001, &bounce)
        .await
        .expect("finish"));
    let out = store
        .reprocess(&id, &["c1".to_string()], 2_002)
        .await
        .expect("reprocess");
    assert!(
        matches!(out.as_slice(), [(c, ReprocessOutcome::Queued { remaining: 1 })] if c == "c1"),
        "{out:?}"
    );
    let c = &store.test_clients(&id).await.expect("clients")[0];
    assert_eq!(c.status, ScreenshotStatus::Pending);
    assert_eq!(c.bounce_code, None);
    assert_eq!(c.bounce_message, None);
    let again = store
        .claim_job("w", 2_002, 10)
        .await
        .expect("claim")
        .expect("queued again");
    assert_eq!(again.attempts, 1);
    assert!(store
        .finish_job(&again, "w", 2_003, &done())
        .await
        .expect("finish"));
    assert_eq!(
        store.test_clients(&id).await.expect("clients")[0].status,
        ScreenshotStatus::Complete
    );
}

async fn the_first_published_key_fingerprint_stays_until_replaced(backend: Backend) {
    let (_dir, store) = store::testing::store(backend).await;
    let published = |fp: &'static str| {
        let store = store.clone();
        async move {
            store
                .publish_key_fingerprint("url_signing", fp, 1_000)
                .await
                .expect("publish")
        }
    };
    assert_eq!(published("aaaa").await, "aaaa");
    assert_eq!(
        published("bbbb").await,
        "aaaa",
        "a second key is told the first"
    );
    store
        .replace_key_fingerprint("url_signing", "bbbb", 2_000)
        .await
        .expect("replace");
    assert_eq!(published("bbbb").await, "bbbb");
}

on_both!(
    a_released_job_keeps_its_attempts_however_often_it_is_released,
    a_process_claims_only_the_clients_its_engines_draw,
    a_renewed_lease_is_kept_and_a_taken_over_job_is_finished_once,
    a_worker_taking_back_its_own_lost_claim_spends_no_attempt,
    a_bounced_client_can_be_reprocessed,
    the_first_published_key_fingerprint_stays_until_replaced,
);
