//! Analytics campaigns: scoped to their account, activated once (clearing test hits), cleared
//! only in test mode, listed by the §4.5 rules, deleted with their hits.

use analytics::{Client, Device, HitKind, Source};
use store::campaign_report::{ClientOpens, DeviceOpens, Engagement, Period, Tally};
use store::{Backend, CampaignUpdate, HitBudgets, ListFilter, NewCampaign, NewHit};

use crate::store_with_test;

fn campaign(account_id: i64, guid: &str, name: &str, created_at: i64) -> NewCampaign {
    NewCampaign {
        guid: guid.into(),
        account_id,
        name: name.into(),
        customer_id: None,
        total_subscribers: 100,
        merge_tag: Some("*|EMAIL|*".into()),
        read_threshold: 15,
        skim_threshold: 7,
        delete_threshold: 2,
        google_analytics: true,
        click_html: Some("<a href=\"https://a.example/\">a</a>".into()),
        click_links: vec!["https://a.example/".into()],
        created_at,
    }
}

/// The kind of the stored name `kind` with `number`.
fn kind_of(kind: &str, number: i64) -> HitKind {
    HitKind::from_stored(kind, number).expect("a hit kind")
}

fn hit(guid: &str, at: i64, kind: &str) -> NewHit {
    NewHit {
        guid: guid.into(),
        at,
        kind: kind_of(kind, 0),
        number: 0,
        merge_value: Some("a@example.org".into()),
        source: Source::Direct,
        client: Client::Other,
        device: Device::Unknown,
        mpp_by_agent_only: false,
    }
}

/// A hit of recipient `who` (`None`: no merge value) from `source`.
fn hit_by(who: Option<&str>, at: i64, kind: &str, number: i64, source: Source) -> NewHit {
    NewHit {
        kind: kind_of(kind, number),
        number,
        merge_value: who.map(String::from),
        source,
        client: Client::Unknown,
        ..hit("g1", at, kind)
    }
}

async fn account(store: &store::Store) -> store::Account {
    store
        .account_by_key("k")
        .await
        .expect("read")
        .expect("account")
}

fn all() -> ListFilter {
    ListFilter {
        limit: 50,
        ..ListFilter::default()
    }
}

async fn a_campaign_lives_through_test_mode_activation_and_deletion(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    let other = account.id + 1_000;
    let c = campaign(account.id, "g1", "Spring Sale", 1_000);
    store.create_campaign(&c).await.expect("create");
    let row = store
        .campaign(account.id, "g1")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.campaign, row.activated_at, row.expires_at),
        (c.clone(), None, None)
    );
    assert!(
        store.campaign(other, "g1").await.expect("read").is_none(),
        "another account"
    );

    // Test hits are recorded as such; clearing removes them while in test mode.
    store
        .record_hit(&hit("g1", 1_100, "open"), true)
        .await
        .expect("hit");
    store
        .record_hit(&hit("g1", 1_101, "print"), true)
        .await
        .expect("hit");
    assert_eq!(
        store.clear_campaign_data(other, "g1").await.expect("clear"),
        None
    );
    assert_eq!(
        store
            .clear_campaign_data(account.id, "g1")
            .await
            .expect("clear"),
        Some(2)
    );
    store
        .record_hit(&hit("g1", 1_200, "open"), true)
        .await
        .expect("hit");
    let hits = store.campaign_hits("g1").await.expect("hits");
    assert_eq!((hits.len(), hits[0].test), (1, true));

    // Activation removes test hits, happens once, and is scoped to the account.
    assert!(!store
        .activate_campaign(other, "g1", 2_000, 9_000)
        .await
        .expect("activate"));
    assert!(store
        .activate_campaign(account.id, "g1", 2_000, 9_000)
        .await
        .expect("activate"));
    assert!(!store
        .activate_campaign(account.id, "g1", 2_001, 9_001)
        .await
        .expect("again"));
    assert!(store.campaign_hits("g1").await.expect("hits").is_empty());
    let row = store
        .campaign(account.id, "g1")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.activated_at, row.expires_at),
        (Some(2_000), Some(9_000))
    );
    assert_eq!(
        store
            .clear_campaign_data(account.id, "g1")
            .await
            .expect("clear"),
        None
    );

    store
        .record_hit(&hit("g1", 2_100, "read"), false)
        .await
        .expect("hit");
    assert!(store
        .set_campaign_expiration(account.id, "g1", 10_000)
        .await
        .expect("set"));
    assert!(!store
        .set_campaign_expiration(other, "g1", 10_000)
        .await
        .expect("set"));
    let update = CampaignUpdate {
        total_subscribers: Some(250),
        skim_threshold: Some(9),
        ..CampaignUpdate::default()
    };
    assert!(store
        .update_campaign(account.id, "g1", &update)
        .await
        .expect("update"));
    assert!(!store
        .update_campaign(other, "g1", &update)
        .await
        .expect("update"));
    let row = store
        .campaign_for_hit("g1")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (
            row.expires_at,
            row.campaign.total_subscribers,
            row.campaign.skim_threshold,
            row.campaign.read_threshold
        ),
        (Some(10_000), 250, 9, 15)
    );
    assert_eq!(store.campaign_hits("g1").await.expect("hits").len(), 1);

    assert!(!store.delete_campaign(other, "g1").await.expect("delete"));
    assert!(store
        .delete_campaign(account.id, "g1")
        .await
        .expect("delete"));
    assert!(store.campaign_for_hit("g1").await.expect("read").is_none());
    assert!(store.campaign_hits("g1").await.expect("hits").is_empty());
}

async fn campaigns_are_listed_by_the_list_rules(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    for (i, name) in ["Alpha 50%", "beta", "ALPHA two"].iter().enumerate() {
        let mut c = campaign(account.id, &format!("g{i}"), name, 1_000 + i as i64);
        c.customer_id = (i == 1).then(|| "cust".to_string());
        store.create_campaign(&c).await.expect("create");
    }
    let guids = |rows: Vec<store::CampaignRow>| -> Vec<String> {
        rows.into_iter().map(|r| r.campaign.guid).collect()
    };
    assert_eq!(
        guids(
            store
                .list_campaigns(account.id, &all())
                .await
                .expect("list")
        ),
        ["g2", "g1", "g0"]
    );
    let f = ListFilter {
        subject: Some("alpha".into()),
        ..all()
    };
    assert_eq!(
        guids(store.list_campaigns(account.id, &f).await.expect("list")),
        ["g2", "g0"]
    );
    let f = ListFilter {
        subject: Some("50%".into()),
        ..all()
    };
    assert_eq!(
        guids(store.list_campaigns(account.id, &f).await.expect("list")),
        ["g0"]
    );
    let f = ListFilter {
        from: Some(1_001),
        to: Some(1_001),
        ..all()
    };
    assert_eq!(
        guids(store.list_campaigns(account.id, &f).await.expect("list")),
        ["g1"]
    );
    let f = ListFilter {
        customer_id: Some("cust".into()),
        ..all()
    };
    assert_eq!(
        guids(store.list_campaigns(account.id, &f).await.expect("list")),
        ["g1"]
    );
    let f = ListFilter {
        limit: 2,
        offset: 2,
        ..all()
    };
    assert_eq!(
        guids(store.list_campaigns(account.id, &f).await.expect("list")),
        ["g0"]
    );
    assert!(store
        .list_campaigns(account.id + 1, &all())
        .await
        .expect("list")
        .is_empty());
}

/// Strangers who know a campaign's tracking URL cannot end its test mode: any number of opens
/// from any number of recipients stays test data and is kept; the owner's activation still ends
/// it, clearing those hits.
async fn strangers_opens_never_activate_a_campaign_but_the_owner_does(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    store
        .create_campaign(&campaign(account.id, "g1", "N", 1_000))
        .await
        .expect("create");
    store
        .record_hit(&hit("g1", 1_050, "open"), true)
        .await
        .expect("the owner's own test open");
    // The attack: 505 forged opens (here 600, 200 to a batch), each with its own merge value.
    for batch in 0..3 {
        let forged: Vec<NewHit> = (0..200)
            .map(|i| NewHit {
                merge_value: Some(format!("stranger{batch}-{i}@example.org")),
                ..hit("g1", 1_100 + i, "open")
            })
            .collect();
        let written = store
            .record_hits(&forged, HitBudgets::default())
            .await
            .expect("batch");
        assert_eq!(written.recorded, 200);
    }
    assert_eq!(
        run_dates(&store, account.id, "g1").await,
        (None, None),
        "still testing"
    );
    let kept = store.campaign_hits("g1").await.expect("hits");
    assert_eq!(kept.len(), 601, "the test hits are kept");
    assert!(kept.iter().all(|h| h.test));
    assert!(
        kept.iter().any(|h| h.hit.at == 1_050),
        "the owner's own open too"
    );
    // The owner's way: activation ends test mode and clears the test hits.
    assert!(store
        .activate_campaign(account.id, "g1", 1_200, 9_000)
        .await
        .expect("activate"));
    assert_eq!(
        run_dates(&store, account.id, "g1").await,
        (Some(1_200), Some(9_000))
    );
    assert!(store.campaign_hits("g1").await.expect("hits").is_empty());
}

/// A campaign's activation and end (`None, None` in test mode).
async fn run_dates(
    store: &store::Store,
    account_id: i64,
    guid: &str,
) -> (Option<i64>, Option<i64>) {
    let row = store
        .campaign(account_id, guid)
        .await
        .expect("read")
        .expect("row");
    (row.activated_at, row.expires_at)
}

/// A flood is stored up to the budgets and no further: per campaign, then per account (all its
/// campaigns together, another account untouched), each refusal counted by its reason. Removing
/// hits (clearing test data, activation) gives their room back.
async fn floods_beyond_the_storage_budgets_are_refused_and_counted(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    let other = store::testing::add_account(&store, "other-key").await;
    for guid in ["g1", "g2"] {
        store
            .create_campaign(&campaign(account.id, guid, guid, 1_000))
            .await
            .expect("create");
    }
    store
        .create_campaign(&campaign(other.id, "g3", "g3", 1_000))
        .await
        .expect("create");
    let budgets = HitBudgets {
        per_campaign: 5,
        per_account: 8,
    };
    let flood = |guid: &str, n: i64| -> Vec<NewHit> {
        (0..n).map(|i| hit(guid, 1_100 + i, "open")).collect()
    };
    let w = store
        .record_hits(&flood("g1", 10), budgets)
        .await
        .expect("g1");
    assert_eq!(
        (w.recorded, w.over_campaign_budget, w.over_account_budget),
        (5, 5, 0)
    );
    let w = store
        .record_hits(&flood("g2", 10), budgets)
        .await
        .expect("g2");
    assert_eq!(
        (w.recorded, w.over_campaign_budget, w.over_account_budget),
        (3, 0, 7),
        "the account holds 8 with g1's 5"
    );
    let w = store
        .record_hits(&flood("g3", 4), budgets)
        .await
        .expect("g3");
    assert_eq!(
        (w.recorded, w.over_campaign_budget, w.over_account_budget),
        (4, 0, 0)
    );
    assert_eq!(store.campaign_hits("g1").await.expect("hits").len(), 5);
    assert_eq!(store.campaign_hits("g2").await.expect("hits").len(), 3);
    // Clearing g1's test hits frees its room and the account's.
    assert_eq!(
        store
            .clear_campaign_data(account.id, "g1")
            .await
            .expect("clear"),
        Some(5)
    );
    let w = store
        .record_hits(&flood("g1", 10), budgets)
        .await
        .expect("g1");
    assert_eq!(
        (w.recorded, w.over_campaign_budget, w.over_account_budget),
        (5, 5, 0)
    );
    // Activation empties g2: the account has room for 3 more again.
    assert!(store
        .activate_campaign(account.id, "g2", 1_200, 9_000)
        .await
        .expect("activate"));
    let w = store
        .record_hits(&flood("g2", 4), budgets)
        .await
        .expect("g2");
    assert_eq!(
        (w.recorded, w.over_campaign_budget, w.over_account_budget),
        (3, 0, 1)
    );
}

/// Hits follow the retention of tests (§8), counted from the campaign's end; the campaign stays.
async fn retention_removes_hits_of_campaigns_that_ended_before_the_cutoff(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    for guid in ["ended", "running", "testing"] {
        store
            .create_campaign(&campaign(account.id, guid, guid, 1_000))
            .await
            .expect("create");
    }
    assert!(store
        .activate_campaign(account.id, "ended", 1_000, 5_000)
        .await
        .expect("activate"));
    assert!(store
        .activate_campaign(account.id, "running", 1_000, 9_000)
        .await
        .expect("activate"));
    for guid in ["ended", "running"] {
        store
            .record_hit(&hit(guid, 2_000, "open"), false)
            .await
            .expect("hit");
    }
    store
        .record_hit(&hit("testing", 2_000, "open"), true)
        .await
        .expect("hit");
    store.purge_before(5_000, 10_000, 10).await.expect("purge");
    assert_eq!(
        store.campaign_hits("ended").await.expect("hits").len(),
        1,
        "ends at the cutoff"
    );
    store.purge_before(5_001, 10_000, 10).await.expect("purge");
    assert!(store.campaign_hits("ended").await.expect("hits").is_empty());
    assert!(
        store
            .campaign(account.id, "ended")
            .await
            .expect("read")
            .is_some(),
        "metadata stays"
    );
    for guid in ["running", "testing"] {
        assert_eq!(
            store.campaign_hits(guid).await.expect("hits").len(),
            1,
            "{guid}"
        );
    }
}

/// The report counts opens by class side by side, buckets reading time from direct opens only
/// and says "not measurable" for the rest, and counts clicks per link apart from scanners'.
async fn the_report_separates_readers_from_machines(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    let mut c = campaign(account.id, "g1", "N", 1_000);
    c.click_links = vec!["https://a.example/1".into(), "https://a.example/2".into()];
    store.create_campaign(&c).await.expect("create");
    assert!(store
        .activate_campaign(account.id, "g1", 900, 99_000)
        .await
        .expect("activate"));
    let direct = |who, at, kind, number, client, device| NewHit {
        client,
        device,
        ..hit_by(Some(who), at, kind, number, Source::Direct)
    };
    let hits = [
        // a reads 10 s in Thunderbird, prints, forwards, is in dark mode; opens again later
        // without any timing (not measurable, never a made-up glance).
        direct("a", 1_000, "open", 0, Client::Thunderbird, Device::Desktop),
        direct("a", 1_002, "read", 2, Client::Thunderbird, Device::Desktop),
        direct("a", 1_010, "read", 10, Client::Thunderbird, Device::Desktop),
        direct("a", 1_004, "read", 4, Client::Thunderbird, Device::Desktop),
        hit_by(Some("a"), 1_001, "print", 0, Source::Direct),
        hit_by(Some("a"), 1_001, "forward", 0, Source::Direct),
        hit_by(Some("a"), 1_000, "dark", 0, Source::Direct),
        direct("a", 8_200, "open", 0, Client::Thunderbird, Device::Desktop),
        // b skims 4 s on an iPhone, measured by the held-open image.
        direct("b", 1_000, "open", 0, Client::AppleMailIos, Device::Mobile),
        direct("b", 1_000, "hold", 4, Client::AppleMailIos, Device::Mobile),
        // c reads in Gmail: a reader, but the proxy hides the time; its steps are ignored.
        NewHit {
            client: Client::Gmail,
            ..hit_by(Some("c"), 1_000, "open", 0, Source::GmailProxy)
        },
        hit_by(Some("c"), 1_000, "read", 20, Source::GmailProxy),
        // d and e: Apple's relays, e judged on the agent alone.
        hit_by(Some("d"), 1_000, "open", 0, Source::AppleMpp),
        hit_by(Some("d"), 1_000, "dark", 0, Source::AppleMpp),
        NewHit {
            mpp_by_agent_only: true,
            ..hit_by(Some("e"), 1_000, "open", 0, Source::AppleMpp)
        },
        hit_by(None, 1_000, "open", 0, Source::Unknown),
        direct("a", 1_030, "click", 1, Client::Thunderbird, Device::Desktop),
        hit_by(Some("b"), 1_000, "click", 1, Source::Scanner),
    ];
    for h in &hits {
        store.record_hit(h, false).await.expect("hit");
    }
    // Test hits of another mode are not the report's.
    store
        .record_hit(&hit_by(Some("z"), 1_000, "open", 0, Source::Direct), true)
        .await
        .expect("hit");

    assert!(store
        .campaign_report(account.id + 1, "g1", true)
        .await
        .expect("report")
        .is_none());
    let r = store
        .campaign_report(account.id, "g1", true)
        .await
        .expect("report")
        .expect("own campaign");
    assert!(!r.test_mode);
    let t = |hits, unique| Tally { hits, unique };
    assert_eq!(r.opens.total, t(7, 6));
    assert_eq!(r.opens.reliable, t(4, 3));
    assert_eq!(r.opens.machine, t(2, 2));
    assert_eq!(r.opens.unknown, t(1, 1));
    let by = |s: Source| r.sources.iter().find(|x| x.source == s).map(|x| x.opens);
    assert_eq!(by(Source::AppleMpp), Some(t(2, 2)));
    assert_eq!(by(Source::Scanner), Some(t(0, 0)));
    assert_eq!(
        r.engagement,
        Engagement {
            read: 1,
            skim: 1,
            glance: 0,
            not_measurable: 2
        }
    );
    assert_eq!(
        r.clients,
        [
            ClientOpens {
                client: Client::Thunderbird,
                opens: 2
            },
            ClientOpens {
                client: Client::AppleMailIos,
                opens: 1
            },
            ClientOpens {
                client: Client::Gmail,
                opens: 1
            },
        ]
    );
    assert_eq!(
        r.devices[0],
        DeviceOpens {
            device: Device::Desktop,
            opens: 2
        }
    );
    assert_eq!(
        r.per_hour,
        [
            Period {
                start: 0,
                opens: 6,
                reliable: 3,
                machine: 2
            },
            Period {
                start: 7_200,
                opens: 1,
                reliable: 1,
                machine: 0
            },
        ]
    );
    assert_eq!(
        r.per_day,
        [Period {
            start: 0,
            opens: 7,
            reliable: 4,
            machine: 2
        }]
    );
    assert_eq!((r.prints, r.forwards, r.dark), (t(1, 1), t(1, 1), t(2, 2)));
    assert_eq!(r.dark_share, Some(2.0 / 6.0));
    assert_eq!(r.clicks.len(), 2);
    assert_eq!(
        (
            r.clicks[0].url.as_str(),
            r.clicks[0].clicks,
            r.clicks[0].machine
        ),
        ("https://a.example/1", t(1, 1), 1)
    );
    assert_eq!((r.clicks[1].clicks, r.clicks[1].machine), (t(0, 0), 0));
    assert_eq!(
        (r.apple_mpp.by_agent_only, r.apple_mpp.ranges_configured),
        (1, true)
    );
    let back = store.campaign_hits("g1").await.expect("hits");
    assert_eq!(back[0].hit, hits[0], "classes are read back as written");
}

/// One batch (the group commit of the hit path) takes each campaign's mode under its
/// transaction: a campaign in test mode gets test hits whatever their number, an active
/// campaign's hits are never test data, and hits of a deleted campaign are left out without
/// failing the others.
async fn a_batch_of_hits_takes_each_campaigns_mode(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    for guid in ["testing", "active"] {
        store
            .create_campaign(&campaign(account.id, guid, guid, 1_000))
            .await
            .expect("create");
    }
    assert!(store
        .activate_campaign(account.id, "active", 1_000, 90_000)
        .await
        .expect("activate"));
    let batch = [
        hit("testing", 1_100, "print"),
        hit("active", 1_100, "open"),
        hit("testing", 1_101, "open"),
        hit("gone", 1_101, "open"),
        hit("testing", 1_102, "open"),
        hit("testing", 1_103, "read"),
    ];
    let written = store
        .record_hits(&batch, HitBudgets::default())
        .await
        .expect("batch");
    assert_eq!((written.recorded, written.orphaned), (5, 1));
    let testing = store.campaign_hits("testing").await.expect("hits");
    assert_eq!(testing.len(), 4);
    assert!(testing.iter().all(|h| h.test));
    let active = store.campaign_hits("active").await.expect("hits");
    assert_eq!(active.len(), 1);
    assert!(!active[0].test);
}

/// Batches of one campaign written at once (several writers on PostgreSQL) share its budget
/// exactly: the campaign ends with its budget's worth of hits and the rest are refused.
async fn concurrent_batches_share_a_campaigns_budget_exactly(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    store
        .create_campaign(&campaign(account.id, "busy", "busy", 1_000))
        .await
        .expect("create");
    let budgets = HitBudgets {
        per_campaign: 30,
        per_account: 0,
    };
    let mut writers = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            let batch: Vec<NewHit> = (0..10)
                .map(|i| hit("busy", 2_000 + w * 10 + i, "open"))
                .collect();
            store.record_hits(&batch, budgets).await.expect("batch")
        }));
    }
    let (mut recorded, mut refused) = (0, 0);
    for w in writers {
        let w = w.await.expect("writer");
        recorded += w.recorded;
        refused += w.over_campaign_budget;
    }
    assert_eq!((recorded, refused), (30, 50));
    assert_eq!(store.campaign_hits("busy").await.expect("hits").len(), 30);
}

on_both!(
    the_report_separates_readers_from_machines,
    concurrent_batches_share_a_campaigns_budget_exactly,
    a_batch_of_hits_takes_each_campaigns_mode,
    retention_removes_hits_of_campaigns_that_ended_before_the_cutoff,
    strangers_opens_never_activate_a_campaign_but_the_owner_does,
    floods_beyond_the_storage_budgets_are_refused_and_counted,
    a_campaign_lives_through_test_mode_activation_and_deletion,
    campaigns_are_listed_by_the_list_rules,
);
