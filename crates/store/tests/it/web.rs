//! Web sessions and share links: expiry, revocation and ownership.

use domain::Variant;

use store::Backend;

use crate::store_with_test;

async fn sessions_expire_and_end_on_sign_out(backend: Backend) {
    let (_dir, store, _) = store_with_test(backend, vec![Variant::Default]).await;
    store
        .create_session("a", Some(1), 100, 200)
        .await
        .expect("create");
    store
        .create_session("sandbox", None, 100, 200)
        .await
        .expect("create");
    let s = store.session("a", 150).await.expect("read");
    assert_eq!(s.map(|s| s.account_id), Some(Some(1)));
    assert_eq!(
        store
            .session("sandbox", 150)
            .await
            .expect("read")
            .map(|s| s.account_id),
        Some(None)
    );
    assert_eq!(store.session("a", 201).await.expect("read"), None);
    store.delete_session("a").await.expect("delete");
    assert_eq!(store.session("a", 150).await.expect("read"), None);
    // Creating a session later sweeps the expired ones.
    store
        .create_session("b", Some(1), 300, 400)
        .await
        .expect("create");
    assert_eq!(store.session("sandbox", 150).await.expect("read"), None);
}

async fn share_links_expire_are_revocable_and_belong_to_their_account(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    store
        .create_share("h1", &id, account.id, 100, 200)
        .await
        .expect("share");
    store
        .create_share("h2", &id, account.id, 110, 900)
        .await
        .expect("share");
    assert_eq!(
        store
            .live_share("h1", 150)
            .await
            .expect("read")
            .map(|s| s.test_id),
        Some(id.clone())
    );
    assert_eq!(store.live_share("h1", 201).await.expect("read"), None);
    assert!(!store
        .revoke_share(account.id + 1, "h2", 150)
        .await
        .expect("revoke"));
    assert!(store.live_share("h2", 150).await.expect("read").is_some());
    assert!(store
        .revoke_share(account.id, "h2", 150)
        .await
        .expect("revoke"));
    assert_eq!(store.live_share("h2", 160).await.expect("read"), None);
    let listed = store.shares_of_test(account.id, &id).await.expect("list");
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].token_hash, "h2");
    assert_eq!(listed[0].revoked_at, Some(150));
    assert!(store
        .shares_of_test(account.id + 1, &id)
        .await
        .expect("list")
        .is_empty());
}

async fn summaries_count_finished_clients_of_the_accounts_own_tests(backend: Backend) {
    let (_dir, store, id) = store_with_test(backend, vec![Variant::Default]).await;
    let account = store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account");
    let got = store
        .test_summaries(account.id, &[id.clone(), "missing".into()])
        .await
        .expect("summaries");
    assert_eq!(got.len(), 1);
    let s = &got[&id];
    assert_eq!((s.subject.as_str(), s.clients, s.finished), ("S", 1, 0));
    assert!(store
        .test_summaries(account.id + 1, &[id])
        .await
        .expect("summaries")
        .is_empty());
}

on_both!(
    sessions_expire_and_end_on_sign_out,
    share_links_expire_are_revocable_and_belong_to_their_account,
    summaries_count_finished_clients_of_the_accounts_own_tests,
);
