//! Issue 31, scope 1: a tracking hit is recorded or it is not answered as recorded. Two api
//! processes on a PostgreSQL cluster of the test's own take a stream of opens and clicks from
//! several client addresses while the cluster is stopped (`-m immediate`, as in a crash) and
//! started again. Afterwards every hit sent is accounted for exactly once: recorded (in the
//! campaign's export), answered unrecorded (`mailproof_hits_unrecorded_total`, by reason) or
//! refused (`mailproof_http_connections_refused_total`, answered 429).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::faults::{counter, metrics};
use crate::roles::{process_config, Proc, Shared};
use crate::support::*;

/// Client addresses on loopback, each a client of its own for the rate limits.
const ADDRESSES: [Ipv4Addr; 4] = [
    Ipv4Addr::new(127, 0, 0, 2),
    Ipv4Addr::new(127, 0, 0, 3),
    Ipv4Addr::new(127, 0, 0, 4),
    Ipv4Addr::new(127, 0, 0, 5),
];
/// Hit loops per address and api process.
const WORKERS: usize = 2;
/// How long PostgreSQL is away: the 30 s.
const OUTAGE: Duration = Duration::from_secs(30);
/// The link of the campaign's first tracked click.
const SHOP: &str = "https://shop.example/";

/// A per-address limit each address passes late in the test, so that rate refusals are in the
/// sum too.
const CONFIG: &str = "[hits]\nper_address_per_minute = 150\nper_campaign_per_minute = 0\n";
/// Pause between two hits of one loop: a stream, not a flood (answers over a rate limit come at
/// once and would spin the loops).
const PAUSE: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Tally {
    /// Merge values of hits answered with the image or the link.
    answered: Vec<String>,
    /// Hits answered 429 (refused before their request was read).
    refused: usize,
    /// Anything else: an error page, a wrong answer, no answer.
    wrong: Vec<String>,
    /// The longest time a hit waited for its answer.
    slowest: Duration,
}

/// Sends hits to `base` from `from` until `stop`: even ones open the image, odd ones click the
/// first link. Each hit has a merge value of its own.
async fn hit_loop(
    base: String,
    guid: String,
    from: Ipv4Addr,
    name: String,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
) -> usize {
    let http = reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .redirect(reqwest::redirect::Policy::none())
        // Far above any answer the hit path may give, so a slow answer is seen as slow.
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        let value = format!("{name}-{sent}");
        let click = sent % 2 == 1;
        let path = if click { "1" } else { "o.gif" };
        sent += 1;
        let started = Instant::now();
        let outcome = match http
            .get(format!("{base}/t/{guid}/{path}?d={value}"))
            .send()
            .await
        {
            Ok(r) => {
                let status = r.status().as_u16();
                let location = r
                    .headers()
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .map(str::to_owned);
                let body = r.bytes().await;
                match (status, click) {
                    (429, _) => Err(true),
                    (302, true) if location.as_deref() == Some(SHOP) => Ok(()),
                    (200, false) if body.is_ok_and(|b| b.starts_with(b"GIF89a")) => Ok(()),
                    _ => Err(false),
                }
            }
            Err(_) => Err(false),
        };
        let took = started.elapsed();
        {
            let mut t = tally.lock().expect("tally");
            t.slowest = t.slowest.max(took);
            match outcome {
                Ok(()) => t.answered.push(value),
                Err(true) => t.refused += 1,
                Err(false) => t.wrong.push(format!("{value} after {took:?}")),
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    sent
}

/// The merge values of the campaign's recorded hits, from its per-hit CSV export.
async fn recorded(p: &Proc, guid: &str) -> Vec<String> {
    let r = p
        .http
        .get(format!("{}/v5/analytics/getcampaignexport/{guid}", p.base))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .send()
        .await
        .expect("export");
    assert_eq!(r.status(), 200);
    let csv = r.text().await.expect("csv");
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).expect("merge_value column").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_hit_through_a_database_outage_is_recorded_or_counted() {
    let (cluster, db) = store::testing::PrivateCluster::start().await;
    let shared = Shared::with(Some(db), None);
    let apis = [
        Proc::start(
            &shared,
            "api-1",
            &process_config(&shared, "api", CONFIG),
            &[],
        ),
        Proc::start(
            &shared,
            "api-2",
            &process_config(&shared, "api", CONFIG),
            &[],
        ),
    ];
    let created = apis[0]
        .call(
            "POST",
            "/v5/analytics/createcampaign",
            Some(&json!({"name": "Outage", "total_subscribers": 1000,
                    "click_tracking": {"html": format!("<a href=\"{SHOP}\">Shop</a>")}})),
        )
        .await
        .ok()
        .clone();
    let guid = created["guid"].as_str().expect("guid").to_string();
    apis[0]
        .call(
            "POST",
            &format!("/v5/analytics/activatecampaign/{guid}"),
            Some(&json!({})),
        )
        .await
        .ok();

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut loops = Vec::new();
    for (n, p) in apis.iter().enumerate() {
        for from in ADDRESSES {
            for w in 0..WORKERS {
                loops.push(tokio::spawn(hit_loop(
                    p.base.clone(),
                    guid.clone(),
                    from,
                    format!("p{n}-{from}-w{w}"),
                    stop.clone(),
                    tally.clone(),
                )));
            }
        }
    }
    let answered = || tally.lock().expect("tally").answered.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = answered();
    tokio::task::block_in_place(|| cluster.stop());
    // Scope 3, while the database is away: the API answers a §7 error and `/metrics` its
    // in-memory figures, both at once rather than after a 30 s wait.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let listed = apis[0].call("GET", "/v5/email/tests", None).await;
    let api_took = started.elapsed();
    let started = Instant::now();
    let scraped = metrics(&apis[1]).await;
    let metrics_took = started.elapsed();
    tokio::time::sleep(OUTAGE - Duration::from_secs(2)).await;
    let during = answered() - before;
    tokio::task::block_in_place(|| cluster.start_again());
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let mut sent = 0;
    for l in loops {
        sent += l.await.expect("hit loop");
    }
    let tally = Arc::try_unwrap(tally)
        .ok()
        .expect("loops ended")
        .into_inner()
        .expect("tally");

    let recorded = recorded(&apis[0], &guid).await;
    let recorded_set: HashSet<&str> = recorded.iter().map(String::as_str).collect();
    let mut unrecorded = 0.0;
    let mut by_reason = std::collections::BTreeMap::<String, f64>::new();
    let mut refused_counted = 0.0;
    for p in &apis {
        let text = metrics(p).await;
        unrecorded += counter(&text, "mailproof_hits_unrecorded_total", "");
        for line in text
            .lines()
            .filter(|l| l.starts_with("mailproof_hits_unrecorded_total{"))
        {
            if let Some((series, value)) = line.rsplit_once(' ') {
                *by_reason.entry(series.to_string()).or_default() +=
                    value.parse::<f64>().unwrap_or(0.0);
            }
        }
        refused_counted += counter(&text, "mailproof_http_connections_refused_total", "");
    }
    eprintln!(
        "hits through a {OUTAGE:?} outage: {sent} sent ({before} answered before it, {during} during it), {} answered, {} recorded, {unrecorded} counted unrecorded {by_reason:?}, {} refused ({refused_counted} counted); slowest answer {:?}",
        tally.answered.len(),
        recorded.len(),
        tally.refused,
        tally.slowest,
    );
    eprintln!(
        "with the database away: the API answered in {api_took:?}, /metrics in {metrics_took:?}"
    );
    assert_eq!(listed.status, 503, "{}", listed.body);
    assert_eq!(listed.error(), "ServiceUnavailable", "{}", listed.body);
    assert!(listed.headers.contains_key("retry-after"));
    // The contract of issue 31 (answered within 2 s, `/metrics` within 1 s), not a speed test.
    assert!(
        api_took < Duration::from_secs(2),
        "the API took {api_took:?}"
    );
    assert!(
        metrics_took < Duration::from_secs(1),
        "/metrics took {metrics_took:?}"
    );
    let figures_age: f64 = scraped
        .lines()
        .find_map(|l| {
            l.strip_prefix("mailproof_queue_figures_age_seconds ")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no queue figures age: {scraped}"));
    assert_ne!(figures_age, 0.0, "the queue figures are marked stale");
    assert!(
        tally.wrong.is_empty(),
        "{} hits were not answered with the image, their link or 429 (first: {:?})",
        tally.wrong.len(),
        tally.wrong.first()
    );
    assert_eq!(
        recorded.len(),
        recorded_set.len(),
        "no hit is recorded twice"
    );
    let answered_set: HashSet<&str> = tally.answered.iter().map(String::as_str).collect();
    assert!(
        recorded_set.is_subset(&answered_set),
        "only hits sent here are recorded, each answered"
    );
    assert_eq!(
        tally.refused as f64, refused_counted,
        "every 429 is counted"
    );
    // Nothing answered is lost uncounted. The sum may pass the hits sent only by hits whose
    // batch's commit reached the database's log just before it was killed: the writer saw the
    // connection die and counted them unrecorded (README, "Analytics"); at most a batch per
    // writer (4 on PostgreSQL) and process.
    let accounted = recorded.len() as f64 + unrecorded + refused_counted;
    assert!(
        accounted >= sent as f64,
        "recorded {} + counted unrecorded {unrecorded} + counted refused {refused_counted} < {sent} hits sent",
        recorded.len()
    );
    assert!(
        accounted - sent as f64 <= (apis.len() * 4 * 500) as f64,
        "recorded {} + counted unrecorded {unrecorded} + counted refused {refused_counted} is more than the {sent} hits sent by more than the batches in flight",
        recorded.len()
    );
    assert!(
        by_reason
            .iter()
            .any(|(series, n)| series.contains("\"database\"") && *n > 0.0),
        "the outage left hits unrecorded for the database: {by_reason:?}"
    );
}
