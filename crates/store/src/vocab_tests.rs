//! What the store reads back as a vocabulary type ([`domain`]) is one of that type's spellings,
//! or an error naming the column's type; never a default, never another queue's state.

use domain::{FilterType, QueueState, SpamVerdict, TestKind};

use crate::{Backend, Store, StoreError};

/// The reads that turn a column into a vocabulary type.
#[derive(Clone, Copy, Debug)]
enum Read {
    ContentCheck,
    LinkCheck,
    Callback,
    Spam,
}

/// The corrupt-data message of `read` on test `id`.
async fn refusal(store: &Store, read: Read, id: &str) -> String {
    let result = match read {
        Read::ContentCheck => store.content_check(id).await.map(|_| ()),
        Read::LinkCheck => store.link_check(id).await.map(|_| ()),
        Read::Callback => store.test_callback(id).await.map(|_| ()),
        Read::Spam => store.spam_results(id).await.map(|_| ()),
    };
    match result {
        Err(StoreError::Corrupt(m)) => m,
        other => panic!("{read:?}: expected a corrupt-data error, got {other:?}"),
    }
}

async fn unknown_stored_values_are_refused_by_name(backend: Backend) {
    let (_db, store) = crate::testing::store(backend).await;
    let account = crate::testing::add_account(&store, "k").await;
    let test = crate::NewTest {
        spam_filters: vec![("f1".into(), FilterType::B2b)],
        callback_url: Some("https://hooks.example/done".into()),
        ..crate::testing::new_test(account.id, TestKind::Spam)
    };
    store.create_test(&test).await.expect("test");
    let id = test.id.as_str();
    store.request_content_check(id, 1_000).await.expect("check");
    store.request_link_check(id, 1_000).await.expect("links");
    // The one filter's verdict completes the test and queues its callback.
    let verdict = crate::SpamUpdate {
        client: "f1".into(),
        spam: SpamVerdict::NotSpam,
        details: String::new(),
    };
    assert!(store
        .record_spam_result(id, &verdict, 1_100)
        .await
        .expect("verdict"));

    // Read back as written.
    let check = store.content_check(id).await.expect("read").expect("row");
    assert_eq!(check.state, QueueState::Queued);
    let spam = store.spam_results(id).await.expect("read");
    assert_eq!(
        spam.iter().map(|r| (r.kind, r.spam)).collect::<Vec<_>>(),
        [(FilterType::B2b, Some(SpamVerdict::NotSpam))]
    );
    let (_, callback) = store.test_callback(id).await.expect("callback");
    assert_eq!(callback.map(|c| c.state), Some(QueueState::Queued));

    let cases = [
        (
            "UPDATE content_checks SET state = 'Done'",
            Read::ContentCheck,
            "\"Done\" is not a queue state (one of: queued, new, leased, done, delivered, failed)",
        ),
        // A state of another queue is no state of this one.
        (
            "UPDATE content_checks SET state = 'delivered'",
            Read::ContentCheck,
            "queue state \"delivered\" is not one of queued, leased, done, failed",
        ),
        (
            "UPDATE link_checks SET state = 'new'",
            Read::LinkCheck,
            "queue state \"new\" is not one of queued, leased, done, failed",
        ),
        (
            "UPDATE callbacks SET state = 'done'",
            Read::Callback,
            "queue state \"done\" is not one of queued, leased, delivered, failed",
        ),
        // A score where a verdict belongs is not read as spam.
        (
            "UPDATE spam_results SET spam = 7",
            Read::Spam,
            "\"7\" is not a spam verdict (one of: 1, 0, -1)",
        ),
        (
            "UPDATE spam_results SET spam = 1, kind = 'B2C'",
            Read::Spam,
            "\"B2C\" is not a spam filter type (one of: b2b, b2c)",
        ),
    ];
    for (set, read, error) in cases {
        sqlx::query(&format!("{set} WHERE test_id = $1"))
            .bind(id)
            .execute(&store.pool)
            .await
            .expect("writing the bad value");
        assert_eq!(refusal(&store, read, id).await, error, "{set}");
    }
}

#[tokio::test]
async fn unknown_stored_values_are_refused_by_name_on_sqlite() {
    unknown_stored_values_are_refused_by_name(Backend::Sqlite).await;
}

#[tokio::test]
async fn unknown_stored_values_are_refused_by_name_on_postgres() {
    unknown_stored_values_are_refused_by_name(Backend::Postgres).await;
}
