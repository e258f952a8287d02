//! Versions and approvals: a new email test joins the versions of the account's latest email test
//! with its subject (never another account's, never a spam test), can be moved into another's
//! versions, and each reviewer's latest decision gives the version's state.

use domain::{ApprovalState, Decision, TestKind};
use store::{Backend, NewTest, Reviewer, Store};

async fn email(store: &Store, account: i64, subject: &str, at: i64) -> String {
    let t = NewTest {
        subject: subject.into(),
        created_at: at,
        ..store::testing::new_test(account, TestKind::Email)
    };
    store.create_test(&t).await.expect("create");
    t.id
}

fn ids(v: &[store::VersionRow]) -> Vec<(&str, i64)> {
    v.iter().map(|r| (r.test_id.as_str(), r.version)).collect()
}

async fn versions_follow_the_subject_and_approvals_the_latest_decision(backend: Backend) {
    let (_dir, store) = store::testing::store(backend).await;
    let a = store::testing::add_account(&store, "a").await.id;
    let b = store::testing::add_account(&store, "b").await.id;
    let v1 = email(&store, a, "Spring sale", 1_000).await;
    let other = email(&store, a, "Newsletter", 1_001).await;
    let theirs = email(&store, b, "Spring sale", 1_002).await;
    let spam = NewTest {
        subject: "Spring sale".into(),
        created_at: 1_003,
        ..store::testing::new_test(a, TestKind::Spam)
    };
    store.create_test(&spam).await.expect("spam test");
    let v2 = email(&store, a, "Spring sale", 1_004).await;

    let versions = store.versions_of(a, &v2).await.expect("versions");
    assert_eq!(ids(&versions), vec![(v1.as_str(), 1), (v2.as_str(), 2)]);
    assert_eq!(
        ids(&store.versions_of(b, &theirs).await.expect("b")),
        vec![(theirs.as_str(), 1)]
    );
    assert!(store.versions_of(b, &v2).await.expect("not b's").is_empty());
    assert!(store
        .versions_of(a, &spam.id)
        .await
        .expect("spam")
        .is_empty());

    // Chosen explicitly: the newsletter becomes the third version; never into another account's.
    assert!(!store
        .move_to_versions_of(a, &other, &theirs)
        .await
        .expect("refused"));
    assert!(!store
        .move_to_versions_of(a, &spam.id, &v1)
        .await
        .expect("spam refused"));
    assert!(store
        .move_to_versions_of(a, &other, &v1)
        .await
        .expect("moved"));
    let versions = store.versions_of(a, &v1).await.expect("versions");
    assert_eq!(
        ids(&versions),
        vec![(v1.as_str(), 1), (other.as_str(), 2), (v2.as_str(), 3)],
        "numbered by creation"
    );

    // Decisions: the latest per reviewer counts; changes requested outweigh approvals.
    let jane = Reviewer::Share {
        token_hash: "h1",
        name: "Jane",
    };
    store
        .decide(
            &v2,
            &Reviewer::Owner,
            "Owner",
            Decision::Approved,
            None,
            2_000,
        )
        .await
        .expect("owner");
    let state = |store: Store, id: String| async move {
        store
            .versions_of(a, &id)
            .await
            .expect("versions")
            .last()
            .map(|v| v.approval)
    };
    assert_eq!(
        state(store.clone(), v2.clone()).await,
        Some(ApprovalState::Approved)
    );
    store
        .decide(
            &v2,
            &jane,
            "Jane",
            Decision::ChangesRequested,
            Some("Logo too small"),
            2_001,
        )
        .await
        .expect("jane");
    assert_eq!(
        state(store.clone(), v2.clone()).await,
        Some(ApprovalState::ChangesRequested)
    );
    let same_jane = Reviewer::Share {
        token_hash: "h1",
        name: "JANE",
    };
    store
        .decide(&v2, &same_jane, "JANE", Decision::Approved, None, 2_002)
        .await
        .expect("again");
    let decided = store.approvals(&v2).await.expect("approvals");
    assert_eq!(decided.len(), 2, "one decision per reviewer: {decided:?}");
    assert_eq!(decided[1].decision, Decision::Approved);
    assert_eq!(decided[1].note, None);
    assert_eq!(decided[1].share_token_hash.as_deref(), Some("h1"));
    assert_eq!(
        state(store.clone(), v2.clone()).await,
        Some(ApprovalState::Approved)
    );
    assert_eq!(versions[0].approval, ApprovalState::Awaiting);

    // Retention removes the decisions with the content.
    store
        .purge_before(i64::MAX, 9_000, 10)
        .await
        .expect("purge");
    assert!(store.approvals(&v2).await.expect("read").is_empty());
}

on_both!(versions_follow_the_subject_and_approvals_the_latest_decision,);
