//! Analytics campaigns: scoped to their account, activated once (clearing test hits), cleared
//! only in test mode, listed by the §4.5 rules, deleted with their hits.

use analytics::{Client, Device, HitKind, Source};
use store::campaign_report::{ClientOpens, DeviceOpens, Engagement, Period, Tally};
use store::{Backend, CampaignUpdate, ListFilter, NewCampaign, NewHit, TestModeRules};

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

async fn test_opens_activate_a_campaign_at_the_threshold_and_are_cleared(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    store
        .create_campaign(&campaign(account.id, "g1", "N", 1_000))
        .await
        .expect("create");
    // Other kinds do not count towards the threshold.
    for (at, kind) in [
        (1_100, "open"),
        (1_101, "print"),
        (1_102, "read"),
        (1_103, "open"),
    ] {
        assert!(!store
            .record_test_hit(&hit("g1", at, kind), 3, 9_000)
            .await
            .expect("hit"));
    }
    assert_eq!(store.campaign_hits("g1").await.expect("hits").len(), 4);
    assert!(store
        .record_test_hit(&hit("g1", 1_200, "open"), 3, 9_000)
        .await
        .expect("third open"));
    let row = store
        .campaign(account.id, "g1")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.activated_at, row.expires_at),
        (Some(1_200), Some(9_000))
    );
    assert!(store.campaign_hits("g1").await.expect("hits").is_empty());
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

/// One batch (the group commit of the hit path) accounts test mode hit by hit: the open that
/// reaches the threshold activates the campaign and clears its test hits, the batch's later hits
/// of it are real ones, an active campaign's hits are never test data, and hits of a deleted
/// campaign are left out without failing the others.
async fn a_batch_of_hits_keeps_test_mode_accounting_in_order(backend: Backend) {
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
    store
        .record_hit(&hit("testing", 1_050, "open"), true)
        .await
        .expect("an earlier test open");
    let batch = [
        hit("testing", 1_100, "print"),
        hit("active", 1_100, "open"),
        hit("testing", 1_101, "open"),
        hit("gone", 1_101, "open"),
        hit("testing", 1_102, "open"),
        hit("testing", 1_103, "read"),
        hit("testing", 1_104, "open"),
    ];
    let rules = TestModeRules {
        activate_at_opens: 3,
        run_secs: 500,
    };
    let written = store.record_hits(&batch, rules).await.expect("batch");
    assert_eq!(
        (written.recorded, written.orphaned, written.activated),
        (3, 1, vec!["testing".to_string()])
    );
    let row = store
        .campaign(account.id, "testing")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.activated_at, row.expires_at),
        (Some(1_102), Some(1_602))
    );
    let kept: Vec<(i64, String, bool)> = store
        .campaign_hits("testing")
        .await
        .expect("hits")
        .into_iter()
        .map(|h| (h.hit.at, h.hit.kind.as_str().to_string(), h.test))
        .collect();
    assert_eq!(
        kept,
        vec![(1_103, "read".into(), false), (1_104, "open".into(), false)]
    );
    let active = store.campaign_hits("active").await.expect("hits");
    assert_eq!(active.len(), 1);
    assert!(!active[0].test);
    // Below the threshold nothing is activated and every hit is test data.
    store
        .create_campaign(&campaign(account.id, "slow", "slow", 1_000))
        .await
        .expect("create");
    let written = store
        .record_hits(
            &[hit("slow", 1_200, "open"), hit("slow", 1_201, "open")],
            rules,
        )
        .await
        .expect("batch");
    assert!(written.activated.is_empty());
    assert!(store
        .campaign_hits("slow")
        .await
        .expect("hits")
        .iter()
        .all(|h| h.test));
}

/// Batches of one campaign in test mode written at once (several writers on PostgreSQL) count
/// its opens as if one after another: exactly the threshold's worth of test opens is cleared at
/// activation and every later open is a real hit.
async fn concurrent_batches_count_test_opens_exactly_once(backend: Backend) {
    let (_dir, store, _test) = store_with_test(backend, Vec::new()).await;
    let account = account(&store).await;
    store
        .create_campaign(&campaign(account.id, "busy", "busy", 1_000))
        .await
        .expect("create");
    let rules = TestModeRules {
        activate_at_opens: 30,
        run_secs: 500,
    };
    let mut writers = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            let batch: Vec<NewHit> = (0..10)
                .map(|i| hit("busy", 2_000 + w * 10 + i, "open"))
                .collect();
            store
                .record_hits(&batch, rules)
                .await
                .expect("batch")
                .activated
        }));
    }
    let mut activations = 0;
    for w in writers {
        activations += w.await.expect("writer").len();
    }
    assert_eq!(activations, 1);
    let left = store.campaign_hits("busy").await.expect("hits");
    assert_eq!(left.len(), 80 - 30);
    assert!(left.iter().all(|h| !h.test));
}

on_both!(
    the_report_separates_readers_from_machines,
    concurrent_batches_count_test_opens_exactly_once,
    a_batch_of_hits_keeps_test_mode_accounting_in_order,
    retention_removes_hits_of_campaigns_that_ended_before_the_cutoff,
    test_opens_activate_a_campaign_at_the_threshold_and_are_cleared,
    a_campaign_lives_through_test_mode_activation_and_deletion,
    campaigns_are_listed_by_the_list_rules,
);
