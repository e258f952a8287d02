//! Faults of what mailproof runs on (issue 20), injected into a split deployment on PostgreSQL and
//! an S3-compatible server: the object store stopped mid-test, a render process killed, render
//! processes with different engine lists side by side; `/healthz` during each. Slow parts (engines,
//! the S3 server, PostgreSQL) start once per test, and the tests are few.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::roles::{finish_as_renderer, process_config, tiny_png, wait_processed, Proc, Shared};
use crate::support::*;

/// `/healthz` must answer within this whatever is down.
const HEALTH_WITHIN: Duration = Duration::from_secs(2);

/// Clients of `engine` with the default variant only (one job each), from the shipped catalog.
fn clients_of(engine: domain::Engine, n: usize) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/clients.toml");
    let text = std::fs::read_to_string(path).expect("read data/clients.toml");
    let catalog = domain::Catalog::parse(&text).expect("the shipped catalog parses");
    let ids: Vec<String> = catalog
        .clients()
        .iter()
        .filter(|c| c.engine == engine && !c.rotate)
        .map(|c| c.id.clone())
        .take(n)
        .collect();
    assert_eq!(ids.len(), n, "the catalog has {n} {engine:?} clients");
    ids
}

/// A render process's extra configuration: `engines`, one page at a time per engine.
fn render_extra(engines: &str) -> String {
    format!("[render]\nengines = [{engines}]\nslots_per_engine = 1\nrender_timeout = 20\n")
}

/// An api process and a Blink render process on `shared`.
fn api_and_blink_renderer(shared: &Shared) -> (Proc, Proc) {
    let api = Proc::start(shared, "api", &process_config(shared, "api", ""), &[]);
    let render = Proc::start(
        shared,
        "render",
        &process_config(shared, "render", &render_extra("\"blink\"")),
        &[],
    );
    (api, render)
}

/// `/healthz`, timed: it must answer within [`HEALTH_WITHIN`] whatever is down.
async fn timed_health(p: &Proc) -> Value {
    let started = Instant::now();
    let body = p.healthz().await;
    assert!(
        started.elapsed() < HEALTH_WITHIN,
        "/healthz took {:?}: {body}",
        started.elapsed()
    );
    body
}

pub(crate) async fn metrics(p: &Proc) -> String {
    p.http
        .get(format!("{}/metrics", p.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

/// The sum of a counter's series whose labels contain `labels` (e.g. `engine="webkit"`).
pub(crate) fn counter(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn create_test(api: &Proc, subject: &str, clients: &[String]) -> String {
    let created = api
        .call(
            "POST",
            "/v5/email/tests",
            Some(&json!({"subject": subject, "html": format!("<h1>{subject}</h1><p>Fault test.</p>"), "clients": clients})),
        )
        .await
        .ok()
        .clone();
    created["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn an_object_store_outage_releases_jobs_and_every_client_completes_after_it() {
    let mut shared = Shared::on_postgres_and_s3().await;
    let (api, render) = api_and_blink_renderer(&shared);
    let health = timed_health(&api).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["components"]["storage"]["state"], "ok", "{health}");

    shared.s3.as_mut().expect("the S3 server").stop();
    let stopped = Instant::now();
    for p in [&api, &render] {
        let health = timed_health(p).await;
        assert_eq!(health["status"], "degraded", "{health}");
        let storage = &health["components"]["storage"];
        assert_eq!(storage["state"], "down", "{health}");
        assert!(
            storage["reason"]
                .as_str()
                .is_some_and(|r| r.contains("object store")),
            "the reason names the object store: {health}"
        );
    }
    assert!(stopped.elapsed() < HEALTH_WITHIN * 2);

    // A short queue: ten clients, each rendered, failing to store and released several times
    // during the outage (the old rule bounced them after 3 attempts, 2 s then 4 s apart).
    let clients = clients_of(domain::Engine::Blink, 10);
    let id = create_test(&api, "Storage outage", &clients).await;
    while stopped.elapsed() < Duration::from_secs(30) {
        let info = api
            .call("GET", &format!("/v5/email/tests/{id}"), None)
            .await
            .ok()
            .clone();
        assert!(
            info["bounced"].as_array().is_none_or(Vec::is_empty),
            "a client bounced for the storage outage: {info}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let during = metrics(&render).await;
    assert!(
        counter(
            &during,
            "mailproof_dependency_errors_total",
            "dependency=\"storage\""
        ) >= 1.0,
        "storage errors are counted: {during}"
    );
    assert_eq!(
        counter(&during, "mailproof_screenshots_stored_total", ""),
        0.0,
        "nothing counts as stored while the store is down: {during}"
    );

    shared.s3.as_mut().expect("the S3 server").restart().await;
    let health = timed_health(&api).await;
    assert_eq!(health["components"]["storage"]["state"], "ok", "{health}");
    let info = wait_processed(&api, &id, Duration::from_secs(180)).await;
    assert_eq!(
        info["completed"].as_array().map(Vec::len),
        Some(clients.len()),
        "every client Complete after the outage: {info}"
    );
    let results = api
        .call("GET", &format!("/v5/email/tests/{id}/results"), None)
        .await
        .ok()
        .clone();
    for (client, r) in results.as_object().expect("results by client") {
        // Attempts count what the email did to the engine, not the outage.
        assert_eq!(
            r["status_details"]["attempts"], 1,
            "{client}: {}",
            r["status_details"]
        );
    }
    let after = metrics(&render).await;
    assert_eq!(
        counter(&after, "mailproof_screenshots_stored_total", ""),
        clients.len() as f64,
        "{after}"
    );
    assert_eq!(
        counter(&after, "mailproof_bounces_total", ""),
        0.0,
        "{after}"
    );
    let in_bucket = shared.s3.as_ref().expect("the S3 server").keys_on_disk();
    for client in &clients {
        let key = format!("shots/{id}/{client}/default.png");
        assert!(in_bucket.contains(&key), "{key} not in {in_bucket:?}");
    }
}

#[tokio::test]
async fn engines_decide_what_a_process_claims_and_a_killed_one_is_taken_over_within_15_s() {
    let shared = Shared::on_postgres_and_s3().await;
    let api = Proc::start(&shared, "api", &process_config(&shared, "api", ""), &[]);
    // While its engines start, a render process answers /healthz already: `starting`.
    let starting = Proc::spawn(
        &shared,
        "render-full",
        &process_config(
            &shared,
            "render",
            &render_extra("\"blink\", \"gecko\", \"webkit\""),
        ),
        &[],
    );
    let line = starting
        .lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the health line");
    let health_url = line
        .strip_prefix("health on ")
        .unwrap_or_else(|| panic!("the first line names /healthz: {line:?}"))
        .to_string();
    let early: Value = reqwest::get(&health_url)
        .await
        .expect("healthz while starting")
        .json()
        .await
        .expect("healthz JSON");
    assert_eq!(early["status"], "starting", "{early}");
    assert_eq!(
        early["components"]["engines"]["gecko"]["state"], "starting",
        "{early}"
    );
    let mut full = starting.ready();
    let webkit_only = Proc::start(
        &shared,
        "render-webkit",
        &process_config(&shared, "render", &render_extra("\"webkit\"")),
        &[],
    );

    // Work for every engine: the WebKit-only process must leave Blink's and Gecko's alone.
    let mut clients = clients_of(domain::Engine::Blink, 2);
    clients.extend(clients_of(domain::Engine::Gecko, 2));
    clients.extend(clients_of(domain::Engine::Webkit, 3));
    let id = create_test(&api, "Engines", &clients).await;
    let info = wait_processed(&api, &id, Duration::from_secs(240)).await;
    assert_eq!(
        info["completed"].as_array().map(Vec::len),
        Some(clients.len()),
        "no client bounced: {info}"
    );
    let text = metrics(&webkit_only).await;
    assert_eq!(
        counter(&text, "mailproof_screenshots_stored_total", "") as usize,
        counter(
            &text,
            "mailproof_screenshots_stored_total",
            "engine=\"webkit\""
        ) as usize,
        "the WebKit-only process drew only WebKit clients: {text}"
    );
    assert_eq!(counter(&text, "mailproof_bounces_total", ""), 0.0, "{text}");

    // kill -9 of the full process while it holds a Blink job: nobody else here draws Blink, so
    // the test claims like a renderer would and measures when the job is free again.
    let blink = clients_of(domain::Engine::Blink, 4);
    let id = create_test(&api, "Killed", &blink).await;
    let store = shared.store().await;
    let started = Instant::now();
    while store
        .queue_stats(chrono::Utc::now().timestamp())
        .await
        .expect("queue figures")
        .iter()
        .all(|q| q.queue != "render" || q.leased == 0)
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the full process never claimed a job of {id}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    full.kill9();
    let killed = Instant::now();
    let blobs = shared.blobs();
    let png = tiny_png();
    let mut taken_over = None;
    while taken_over.is_none() {
        let now = chrono::Utc::now().timestamp();
        match store
            .claim_job_for("test-harness", now, 60, Some(&blink))
            .await
            .expect("claim")
        {
            Some(job) => {
                if job.taken_over_from.is_some() {
                    taken_over = Some(killed.elapsed());
                }
                finish_as_renderer(&store, &blobs, &job, "test-harness", &png).await;
            }
            None => {
                assert!(
                    killed.elapsed() < Duration::from_secs(30),
                    "the killed process's job was not free again within 30 s"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    // The rest of the test's Blink jobs: nobody else here draws them.
    while let Some(job) = store
        .claim_job_for(
            "test-harness",
            chrono::Utc::now().timestamp(),
            60,
            Some(&blink),
        )
        .await
        .expect("claim")
    {
        finish_as_renderer(&store, &blobs, &job, "test-harness", &png).await;
    }
    let taken_over = taken_over.expect("measured");
    assert!(
        taken_over <= Duration::from_secs(15),
        "the killed process's job was taken over after {taken_over:?}"
    );
    let info = wait_processed(&api, &id, Duration::from_secs(60)).await;
    assert_eq!(
        info["completed"].as_array().map(Vec::len),
        Some(blink.len()),
        "{info}"
    );
    store.close().await;
    drop(webkit_only);
}

/// `/healthz` of `p` as it answers, whatever the status, timed.
async fn timed_health_any(p: &Proc) -> (u16, Value) {
    let started = Instant::now();
    let r = p
        .http
        .get(format!("{}/healthz", p.base))
        .send()
        .await
        .expect("healthz answers");
    let status = r.status().as_u16();
    let body: Value = r.json().await.expect("healthz JSON");
    assert!(
        started.elapsed() < HEALTH_WITHIN,
        "/healthz took {:?}: {body}",
        started.elapsed()
    );
    (status, body)
}

#[tokio::test]
async fn a_postgres_restart_mid_test_strands_no_job_and_finishes_none_twice() {
    // A cluster of this test's own: the shared one serves the rest of the suite meanwhile.
    let (cluster, db) = store::testing::PrivateCluster::start().await;
    let shared = Shared::with(Some(db), None);
    let (api, render) = api_and_blink_renderer(&shared);
    let clients = clients_of(domain::Engine::Blink, 6);
    let id = create_test(&api, "Database restart", &clients).await;
    // Mid-test: some screenshot done, others still to do.
    let started = Instant::now();
    loop {
        let info = api
            .call("GET", &format!("/v5/email/tests/{id}"), None)
            .await
            .ok()
            .clone();
        if info["completed"].as_array().is_some_and(|c| !c.is_empty()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "nothing completed: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.stop();
    for p in [&api, &render] {
        let (status, health) = timed_health_any(p).await;
        assert_eq!(status, 503, "{health}");
        assert_eq!(health["status"], "degraded", "{health}");
        assert_eq!(
            health["components"]["database"]["state"], "down",
            "{health}"
        );
        assert!(
            health["components"]["database"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("database")),
            "{health}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.start_again();
    let restarted = Instant::now();
    let info = wait_processed(&api, &id, Duration::from_secs(60)).await;
    assert_eq!(
        info["completed"].as_array().map(Vec::len),
        Some(clients.len()),
        "{info}"
    );
    // Six renders of one slot take a few seconds; a job stranded for a lease would take longer.
    assert!(
        restarted.elapsed()
            < Duration::from_secs(15) + Duration::from_secs(clients.len() as u64 * 2),
        "the test finished {:?} after the restart",
        restarted.elapsed()
    );
    // Each job claimed once: none taken over (its process lived), none drawn twice.
    let store = shared.store().await;
    let attempts: Vec<i64> = store
        .test_clients(&id)
        .await
        .expect("clients")
        .iter()
        .map(|c| c.attempts)
        .collect();
    assert_eq!(attempts, vec![1; clients.len()], "claims per client");
    store.close().await;
    let text = metrics(&render).await;
    assert_eq!(
        counter(&text, "mailproof_screenshots_stored_total", "") as usize,
        clients.len(),
        "{text}"
    );
    assert_eq!(
        counter(&text, "mailproof_lease_takeovers_total", ""),
        0.0,
        "{text}"
    );
}

/// The `application_name`s of the connections to the database of `url`.
async fn application_names(url: &str) -> std::collections::BTreeSet<String> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to the test database");
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT application_name FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut conn)
    .await
    .expect("read pg_stat_activity");
    names.into_iter().map(|(n,)| n).collect()
}

/// The lines `from` writes, as they come, read on a thread of their own.
fn lines_of(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// Issue 31, scope 3: while PostgreSQL is away every process answers at once with what it can
/// (`/metrics` from memory within 1 s, the API a §7 `ServiceUnavailable` within 2 s, SMTP `451`
/// within 2 s) instead of waiting on the database, and a process started meanwhile names the
/// database it waits for and starts once it answers. Its connections say which process and role
/// they are (`application_name`).
#[tokio::test]
async fn with_postgres_away_every_process_answers_at_once_and_a_new_one_waits_naming_it() {
    let (cluster, db) = store::testing::PrivateCluster::start().await;
    let url = db.url.clone();
    let shared = Shared::with(Some(db), None);
    let api = Proc::start(&shared, "api", &process_config(&shared, "api", ""), &[]);
    let render = Proc::start(
        &shared,
        "render",
        &process_config(&shared, "render", ""),
        &[],
    );
    let mail = Proc::start(
        &shared,
        "mail",
        &process_config(&shared, "mail", ""),
        &["--smtp", "127.0.0.1:0"],
    );
    api.call("GET", "/v5/email/tests", None).await.ok();
    let names = application_names(&url).await;
    for role in ["api", "render", "mail"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("mailproof {role} (pid "))),
            "no connection names the {role} process: {names:?}"
        );
    }

    cluster.stop();
    for p in [&api, &render, &mail] {
        let started = Instant::now();
        let text = metrics(p).await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "/metrics took {took:?} with the database away"
        );
        assert!(
            text.contains("mailproof_queue_figures_age_seconds"),
            "{text}"
        );
    }
    let started = Instant::now();
    let listed = api.call("GET", "/v5/email/tests", None).await;
    let took = started.elapsed();
    listed.expect_error("ServiceUnavailable", 503);
    assert!(took < Duration::from_secs(2), "the API took {took:?}");

    let mut conn = SmtpConn::connect(mail.smtp.expect("the mail process listens")).await;
    assert_eq!(conn.cmd("MAIL FROM:<sender@example.org>").await.0, 250);
    let started = Instant::now();
    let (code, text) = conn.cmd("RCPT TO:<someone@inbox.localhost>").await;
    let took = started.elapsed();
    assert_eq!(
        code, 451,
        "a recipient not checkable now is deferred: {text}"
    );
    assert!(took < Duration::from_secs(2), "RCPT took {took:?}");

    // A process started while the database is away says what it waits for, and waits.
    let mut child = shared
        .launch("late", &process_config(&shared, "render", ""), &[])
        .command()
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start a render process");
    let log = lines_of(child.stderr.take().expect("stderr"));
    let ready = lines_of(child.stdout.take().expect("stdout"));
    let port = url
        .rsplit_once(':')
        .and_then(|(_, tail)| tail.split('/').next())
        .expect("the cluster's port")
        .to_string();
    let mut waits = Vec::new();
    while waits.len() < 2 {
        let line = log
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!("the late process did not say what it waits for: {waits:?}")
            });
        if line.contains("PostgreSQL is unreachable") {
            assert!(line.contains(&port), "names the database: {line}");
            waits.push(line);
        }
    }
    assert!(
        ready
            .try_recv()
            .map_or(true, |l| !l.contains("listening on")),
        "started without its database"
    );
    cluster.start_again();
    let started = Instant::now();
    loop {
        let line = ready
            .recv_timeout(Duration::from_secs(60))
            .expect("the late process started once PostgreSQL was back");
        if line.contains("listening on") {
            break;
        }
    }
    eprintln!(
        "the late process started {:?} after PostgreSQL was back; it said: {waits:?}",
        started.elapsed()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The rows of `queue` still open (waiting or leased) in `stats`.
fn open_rows(stats: &[store::QueueStat], queue: &str) -> (i64, i64) {
    stats
        .iter()
        .find(|s| s.queue == queue)
        .map_or((0, 0), |s| (s.waiting, s.leased))
}

/// Waits until each of `queues` has `(waiting, leased)` open rows, checking every 100 ms for at
/// most `within` after `since`; returns when each got there, measured from `since`. `what` says
/// what was awaited in the failure message, with the queues' figures.
async fn until_rows<'q>(
    store: &store::Store,
    queues: &[&'q str],
    rows: (i64, i64),
    since: Instant,
    within: Duration,
    what: &str,
) -> std::collections::BTreeMap<&'q str, Duration> {
    let mut reached = std::collections::BTreeMap::new();
    while reached.len() < queues.len() {
        let stats = store
            .queue_stats(chrono::Utc::now().timestamp())
            .await
            .expect("queue figures");
        for q in queues {
            if open_rows(&stats, q) == rows {
                reached.entry(*q).or_insert_with(|| since.elapsed());
            }
        }
        assert!(
            reached.len() == queues.len() || since.elapsed() < within,
            "{what} within {within:?}: {stats:?} ({reached:?} were)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reached
}

/// Issue 31, scope 2, with real processes: a mail process and a render process are killed
/// (`kill -9`) while each holds rows of its queues (a link check and a seed message waiting on the
/// network, a content check waiting on an image), and fresh processes finish each row within 15 s
/// of the kill, once. The holders are kept busy by outside parts that do not answer them: a web
/// server that answers each path's first request only after a minute, and a DNS server that never
/// answers. (The render queue's takeover is `engines_decide_what_a_process_claims…`, the
/// callbacks' `webhooks::a_callback_in_flight_survives_sigkill…`; the svc sender's sends wait on
/// nothing outside the process, so its takeover is tested at the loop level, in
/// `background/tests/runtime.rs`, with the queue's own lease.)
#[tokio::test]
async fn rows_held_by_killed_mail_and_render_processes_are_finished_once_within_15_s() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Until the holders are killed, every request waits a minute; after, each is answered at
    // once.
    let released = Arc::new(AtomicBool::new(false));
    let stub_released = released.clone();
    let web = testkit::http::HttpStub::start(
        std::net::Ipv4Addr::new(127, 0, 0, 2).into(),
        move |r: testkit::http::Request| {
            let released = stub_released.clone();
            async move {
                if !released.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                if r.target.ends_with(".png") {
                    testkit::http::Response::ok("image/png", tiny_png())
                } else {
                    testkit::http::Response::ok("text/html", &b"<p>landing</p>"[..])
                }
            }
        },
    )
    .await;
    let base = web.base();
    // A DNS server that never answers: the killed mail process's lookups wait on it.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind a silent DNS port");
    let silent_at = silent.local_addr().expect("addr");
    // Kept open (and read, so its buffer never fills) until the test ends.
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while silent.recv(&mut buf).is_ok() {}
    });

    let shared = Shared::new().await;
    shared.make_dkim_key();
    let fetch = "[fetch]\nallow = [\"127.0.0.2/32\"]\n";
    let api = Proc::start(&shared, "api", &process_config(&shared, "api", fetch), &[]);
    // The killed processes wait for the web server longer than it delays its first answers.
    let slow_fetch = "[fetch]\nallow = [\"127.0.0.2/32\"]\ntimeout = 120\n";
    let held_config =
        format!("{slow_fetch}[dns]\nnameserver = \"{silent_at}\"\ntimeout_ms = 10000\n");
    let mut mail = Proc::start(
        &shared,
        "mail-1",
        &process_config(&shared, "mail", &held_config),
        &["--smtp", "127.0.0.1:0"],
    );
    let mut render = Proc::start(
        &shared,
        "render-1",
        &process_config(&shared, "render", slow_fetch),
        &[],
    );

    let html = format!(
        "<p><a href=\"{base}/offer\">offer</a><img src=\"{base}/photo.png\" alt=\"photo\"></p>"
    );
    let created = api
        .call(
            "POST",
            "/v5/email/tests",
            Some(&json!({"subject": "Kill", "html": html})),
        )
        .await;
    let id = created.ok()["id"].as_str().expect("id").to_owned();
    api.call(
        "PUT",
        &format!("/v5/email/tests/{id}/links"),
        Some(&json!({})),
    )
    .await
    .ok();
    api.call("GET", &format!("/v5/email/tests/{id}/checks"), None)
        .await
        .ok();
    let seed = api
        .call(
            "POST",
            "/v5/spam/tests",
            Some(&json!({"subject": "Kill", "html": "<p>x</p>", "test_method": "seed"})),
        )
        .await;
    let seed_id = seed.ok()["id"].as_str().expect("id").to_owned();
    let addresses = address_list(seed.ok());
    let mut conn = SmtpConn::connect(mail.smtp.expect("smtp")).await;
    let message = format!(
        "From: news@mail.acme.example\r\nTo: x@example.org\r\nSubject: Kill\r\nMessage-ID: <{:x}@mail.acme.example>\r\n\r\n<p>x</p>\r\n",
        rand::random::<u64>()
    );
    let (code, text) = conn
        .send("news@mail.acme.example", &addresses, message.as_bytes())
        .await;
    assert_eq!(code, 250, "{text}");

    let store = shared.store().await;
    let queues = ["link_checks", "content_checks", "inbound"];
    // Every row held by the processes about to be killed (a held row is leased, none waits).
    until_rows(
        &store,
        &queues,
        (0, 1),
        Instant::now(),
        Duration::from_secs(30),
        "the rows were not all held",
    )
    .await;
    mail.kill9();
    render.kill9();
    let killed = Instant::now();
    released.store(true, Ordering::SeqCst);
    let _mail = Proc::start(
        &shared,
        "mail-2",
        // Real filters, so that the seed message is judged and its row finished (without them
        // it would wait for them, retried).
        &process_config(
            &shared,
            "mail",
            &format!("{fetch}[dns]\nenabled = false\n[spam]\ndaemons = true\n"),
        ),
        &["--smtp", "127.0.0.1:0"],
    );
    let _render = Proc::start(
        &shared,
        "render-2",
        &process_config(&shared, "render", fetch),
        &[],
    );
    let takers_ready = killed.elapsed();
    let finished = until_rows(
        &store,
        &queues,
        (0, 0),
        killed,
        Duration::from_secs(60),
        "the killed processes' rows were not finished",
    )
    .await;
    println!(
        "rows of killed processes finished after: {finished:?} (the new processes were ready after {takers_ready:?})"
    );
    for (q, after) in &finished {
        // The bound: a crashed holder's work is taken over within 15 s on every queue.
        assert!(
            *after <= Duration::from_secs(15),
            "{q}: finished {after:?} after the kill"
        );
    }
    // Finished once, with what the takers found.
    let links = api
        .call("GET", &format!("/v5/email/tests/{id}/links"), None)
        .await;
    assert_eq!(links.ok()["status"], "complete", "{}", links.body);
    let offer = &links.body["links"][0];
    assert_eq!(offer["status"], 200, "{offer}");
    let checks = api
        .call("GET", &format!("/v5/email/tests/{id}/checks"), None)
        .await;
    assert_eq!(checks.ok()["status"], "complete", "{}", checks.body);
    let spam = api
        .call("GET", &format!("/v5/spam/tests/{seed_id}"), None)
        .await;
    let judged = spam
        .ok()
        .as_array()
        .is_some_and(|entries| entries.iter().any(|e| !e["spam"].is_null()));
    assert!(judged, "the seed message was judged: {}", spam.body);
    assert_eq!(
        links.body["links"].as_array().map(Vec::len),
        Some(2),
        "one entry per link and image, however many processes checked them: {}",
        links.body
    );
    store.close().await;
}

/// Issue 31, scope 2, the svc sender's queue with a real process: the svc sender of a mail process
/// is killed (`kill -9`) while it holds a send, and a fresh mail process sends it within 15 s,
/// once per seed address. The send waits on nothing outside the process, so the test holds it
/// there: its delivery to its own listener waits on the table the listener stores mail in, which
/// the test locks (PostgreSQL only).
#[tokio::test]
async fn an_svc_send_held_by_a_killed_mail_process_is_sent_once_within_15_s() {
    use sqlx::Connection as _;
    let db = store::testing::database(store::Backend::Postgres).await;
    let url = db.url.clone();
    let shared = Shared::with(Some(db), None);
    shared.make_dkim_key();
    let api = Proc::start(&shared, "api", &process_config(&shared, "api", ""), &[]);
    let mut mail = Proc::start(
        &shared,
        "mail-1",
        &process_config(&shared, "mail", ""),
        &["--smtp", "127.0.0.1:0"],
    );
    let mut lock = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut lock)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE inbound_messages IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .expect("lock the mail table");
    let created = api
        .call(
            "POST",
            "/v5/spam/tests",
            Some(&json!({"subject": "Kill svc", "html": "<p>x</p>", "test_method": "svc"})),
        )
        .await;
    let id = created.ok()["id"].as_str().expect("id").to_owned();
    // One seed address per filter, one entry per filter in the test's results.
    let seeds = api
        .call("GET", &format!("/v5/spam/tests/{id}"), None)
        .await
        .ok()
        .as_array()
        .map_or(0, Vec::len);
    assert!(seeds > 1, "the test has several seed addresses");

    // Claimed: it cannot be sent while the lock stands (each delivery's store waits on it).
    let store = shared.store().await;
    until_rows(
        &store,
        &["svc_sends"],
        (0, 1),
        Instant::now(),
        Duration::from_secs(30),
        "the send was not held",
    )
    .await;
    mail.kill9();
    let killed = Instant::now();
    sqlx::query("ROLLBACK")
        .execute(&mut lock)
        .await
        .expect("unlock");
    let _mail = Proc::start(
        &shared,
        "mail-2",
        &process_config(&shared, "mail", ""),
        &["--smtp", "127.0.0.1:0"],
    );
    until_rows(
        &store,
        &["svc_sends"],
        (0, 0),
        killed,
        Duration::from_secs(60),
        "the svc send was not sent",
    )
    .await;
    let after = killed.elapsed();
    println!("svc send of a killed mail process finished {after:?} after the kill");
    assert!(
        after <= Duration::from_secs(15),
        "sent {after:?} after the kill"
    );
    let (stored,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM inbound_messages")
        .fetch_one(&mut lock)
        .await
        .expect("count");
    assert_eq!(
        stored as usize, seeds,
        "one message per seed address of test {id}, none twice"
    );
    store.close().await;
}

/// Runs `mailproof serve --role api` on `data_dir` with `key` until it is ready, then stops it;
/// or, when it refuses to start, returns its error output.
fn api_start(
    data_dir: &std::path::Path,
    key: &std::path::Path,
    extra: &[&str],
) -> Result<(), String> {
    use std::io::{BufRead, BufReader};
    let mut child = testkit::service::Launch::serve(std::path::Path::new(BIN), "api")
        .args(["--role", "api", "--data-dir"])
        .arg(data_dir)
        .arg("--url-signing-key-file")
        .arg(key)
        .args(extra)
        .command()
        .env_remove("MAILPROOF_DATABASE_URL")
        .env_remove("MAILPROOF_CONFIG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start mailproof serve");
    let stdout = child.stdout.take().expect("stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("mailproof: listening on "));
    if ready {
        let _ = child.kill();
        let _ = child.wait();
        return Ok(());
    }
    let out = child.wait_with_output().expect("wait");
    Err(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn an_api_process_with_another_signing_key_than_the_published_one_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let (first, second) = (dir.path().join("a.key"), dir.path().join("b.key"));
    std::fs::write(&first, rand::random::<[u8; 32]>()).expect("write key");
    std::fs::write(&second, rand::random::<[u8; 32]>()).expect("write key");
    api_start(&data, &first, &[]).expect("the first api process starts");
    api_start(&data, &first, &[]).expect("again with the same key");
    let err = api_start(&data, &second, &[]).expect_err("another key is refused");
    assert!(
        err.contains("fingerprint") && err.contains("--replace-signing-key"),
        "{err}"
    );
    api_start(&data, &second, &["--replace-signing-key"]).expect("replaced on purpose");
    let err = api_start(&data, &first, &[]).expect_err("now the first key is the other one");
    assert!(err.contains("url_signing_key_file"), "{err}");
}

#[test]
fn accounts_add_reads_the_service_configuration_and_never_creates_a_database_silently() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("service-data");
    let config = dir.path().join("mailproof.toml");
    std::fs::write(
        &config,
        format!("data_dir = {:?}\n", data.display().to_string()),
    )
    .expect("write config");
    let add = |key: &str, args: &[&str], env: Option<(&str, &std::path::Path)>| {
        let mut cmd = Command::new(BIN);
        cmd.args([
            "accounts",
            "add",
            "--api-key",
            key,
            "--password",
            "password-1",
        ])
        .args(["--plan", "standard"])
        .args(args)
        .current_dir(dir.path())
        .env_remove("MAILPROOF_CONFIG")
        .env_remove("MAILPROOF_DATA_DIR")
        .env_remove("MAILPROOF_DATABASE_URL");
        if let Some((name, value)) = env {
            cmd.env(name, value);
        }
        cmd.output().expect("run mailproof accounts add")
    };
    // No database where the configuration points: refused, naming the file and the way out.
    let out = add(
        "first",
        &["--config", config.to_str().expect("utf-8")],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&data.join("mailproof.sqlite").display().to_string())
            && err.contains("--create-database"),
        "{err}"
    );
    assert!(
        !data.join("mailproof.sqlite").exists(),
        "nothing was created"
    );
    let out = add(
        "first",
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--create-database",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(data.join("mailproof.sqlite").exists());
    // MAILPROOF_CONFIG as serve reads it: the same database, so the key is taken.
    let out = add("first", &[], Some(("MAILPROOF_CONFIG", &config)));
    assert!(
        !out.status.success(),
        "the account exists in the configured database"
    );
    let out = add("second", &[], Some(("MAILPROOF_CONFIG", &config)));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !dir.path().join("data").exists(),
        "nothing was created in ./data"
    );
}

/// A file of the source tree, by its path from the top.
fn tree_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {full}: {e}"))
}

/// Every `MAILPROOF_*` name in `text`.
fn mailproof_variables(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("MAILPROOF_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// `mailproof serve` with `args` and a listen address it refuses, so that it reports every
/// problem of its settings and stops before opening anything.
fn settings_problems(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(BIN)
        .args(["serve", "--http", "not-an-address"])
        .args(args)
        .env_remove("MAILPROOF_ROLE")
        .env_remove("MAILPROOF_CONFIG")
        .envs(env.iter().copied())
        .output()
        .expect("run mailproof serve");
    assert!(!out.status.success(), "{args:?} started");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("not-an-address"), "{err}");
    err
}

/// compose.yaml, deploy/mailproof.toml, the Dockerfile and .dockerignore against what the binary
/// accepts (read as text: no container runtime here, and no YAML parser among the dependencies).
#[test]
fn compose_file_matches_the_binary() {
    let compose = tree_file("compose.yaml");
    let dockerfile = tree_file("Dockerfile");
    let toml_path = format!("{}/../../deploy/mailproof.toml", env!("CARGO_MANIFEST_DIR"));
    let toml = tree_file("deploy/mailproof.toml");
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("mailproof serve --help");
    let help = String::from_utf8_lossy(&help.stdout);
    // Every variable the deployment sets is one `serve` reads.
    let variables = mailproof_variables(&format!("{compose}\n{dockerfile}"));
    assert!(variables.contains("MAILPROOF_ROLE"), "{variables:?}");
    for var in &variables {
        assert!(
            help.contains(&format!("env: {var}=")),
            "serve does not read {var}"
        );
    }
    // Every role a service is given is one `serve` accepts, with the deployment's configuration.
    let roles: Vec<&str> = compose
        .lines()
        .filter_map(|l| l.trim().strip_prefix("MAILPROOF_ROLE:"))
        .map(str::trim)
        .collect();
    assert_eq!(roles, ["api", "render", "mail"], "{compose}");
    for role in roles {
        let err = settings_problems(&["--config", &toml_path], &[("MAILPROOF_ROLE", role)]);
        assert!(!err.contains("role"), "{role}: {err}");
        assert!(
            !err.contains("is not valid"),
            "deploy/mailproof.toml: {err}"
        );
    }
    let err = settings_problems(&["--config", &toml_path], &[("MAILPROOF_ROLE", "worker")]);
    assert!(err.contains("unknown role"), "the check can fail: {err}");
    // The configuration file is mounted where MAILPROOF_CONFIG says, the keys where the file
    // says they are.
    let config_at = compose
        .lines()
        .find_map(|l| l.trim().strip_prefix("MAILPROOF_CONFIG:"))
        .map(str::trim)
        .expect("MAILPROOF_CONFIG is set");
    assert!(
        compose.contains(&format!("./deploy/mailproof.toml:{config_at}:ro")),
        "deploy/mailproof.toml is mounted at {config_at}"
    );
    let keys_at = compose
        .lines()
        .find_map(|l| l.trim().strip_prefix("- ./deploy/keys:"))
        .and_then(|l| l.strip_suffix(":ro"))
        .expect("deploy/keys is mounted read-only");
    for key in ["url_signing_key_file", "dkim_key_file"] {
        let line = toml
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key} in deploy/mailproof.toml"));
        assert!(
            line.contains(&format!("\"{keys_at}/")),
            "{line} is not under {keys_at}"
        );
    }
    // The health check asks /healthz on the port the image listens on, and waits for a 200.
    let port = dockerfile
        .split("MAILPROOF_HTTP=0.0.0.0:")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .expect("the image's MAILPROOF_HTTP");
    assert!(
        compose.contains(&format!("/dev/tcp/127.0.0.1/{port}"))
            && compose.contains("GET /healthz HTTP/1.0")
            && compose.contains("grep -q ' 200 '"),
        "the health check"
    );
    // The processes listen beyond loopback, where /metrics answers only with a token.
    assert!(
        toml.contains("[metrics]") && toml.lines().any(|l| l.starts_with("token = ")),
        "deploy/mailproof.toml opens /metrics with a token"
    );
    // The processes wait for PostgreSQL's own health check and the bucket.
    assert!(compose.contains("condition: service_healthy") && compose.contains("pg_isready"));
    assert!(compose.contains("condition: service_completed_successfully"));
    // An init reaps the engines' helpers; the image runs as a user the key files can name.
    assert!(compose.contains("init: true"));
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/bin/tini\", \"--\""));
    assert!(dockerfile.contains("--uid 10001") && compose.contains("chown 10001"));
    // Nothing built or written at run time goes into the image.
    let ignore = tree_file(".dockerignore");
    for entry in [
        "target/",
        ".git/",
        "data/*",
        "**/*.sqlite*",
        "**/*.key",
        "**/*.pem",
    ] {
        assert!(
            ignore.lines().any(|l| l == entry),
            ".dockerignore lacks {entry}"
        );
    }
    assert!(
        !dockerfile.contains("COPY data/ "),
        "the whole data directory is copied"
    );
}
