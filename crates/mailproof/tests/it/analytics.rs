//! Issue 22, first slice, over real HTTP: the analytics campaign calls and their §7.2 errors,
//! tenancy (another account's guid is `NoCampaigns`), and tracking hits (an image or a 302,
//! never an error page, recorded only for a known campaign).

use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::*;

const CLICK_HTML: &str = r#"<p><a href="https://shop.example/sale?x=1&amp;y=2">Sale</a>
<a href="mailto:help@example.org">Help</a><a href="https://shop.example/about">About</a></p>"#;

async fn create(s: &Server, body: Value) -> Value {
    s.post("/v5/analytics/createcampaign", &body)
        .await
        .ok()
        .clone()
}

pub(crate) fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string in {v}"))
}

/// The URL of the first `src="…"` or `href="…"` in `html` whose path ends with `file`.
pub(crate) fn url_in(html: &str, file: &str) -> String {
    html.split('"')
        .find(|part| {
            part.starts_with("http") && part.split('?').next().is_some_and(|p| p.ends_with(file))
        })
        .unwrap_or_else(|| panic!("no URL ending {file} in {html}"))
        .to_string()
}

fn is_datetime(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").is_ok())
}

#[tokio::test]
async fn a_campaign_is_created_looked_up_listed_updated_activated_and_deleted() {
    let s = Server::start().await;
    let name = "Frühlings-Sale";
    let encoded = base64::engine::general_purpose::STANDARD.encode(name);
    let created = create(
        &s,
        json!({
            "name": encoded, "transfer_encoding": "base64", "charset": "utf-8",
            "total_subscribers": "250", "merge_tag": "*|EMAIL|*", "customer_id": "cust-1",
            "read_threshold": 20,
            "click_tracking": {"google_analytics": true, "html": CLICK_HTML},
        }),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let code = text(&created, "tracking_code").to_string();
    assert_eq!(guid.len(), 36, "{guid}");
    for file in ["o.gif", "p.gif", "f.gif", "dm.gif", "r2.gif", "r20.gif"] {
        let url = url_in(&code, file);
        assert_eq!(url, s.url(&format!("/t/{guid}/{file}?d=*|EMAIL|*")));
    }
    assert!(!code.contains("<script"));
    let tracked = created["click_tracking"]["html"]
        .as_str()
        .expect("rewritten html");
    assert!(tracked.contains(&format!(
        "href=\"{}\"",
        s.url(&format!("/t/{guid}/1?d=*|EMAIL|*"))
    )));
    assert!(tracked.contains(&format!(
        "href=\"{}\"",
        s.url(&format!("/t/{guid}/2?d=*|EMAIL|*"))
    )));
    assert!(tracked.contains("mailto:help@example.org") && !tracked.contains("shop.example"));

    let code_again = s
        .get(&format!("/v5/analytics/gettrackingcode/{guid}"))
        .await;
    assert_eq!(code_again.ok()["tracking_code"], created["tracking_code"]);
    assert_eq!(code_again.ok()["guid"], created["guid"]);

    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await
        .ok()
        .clone();
    assert_eq!(info["name"], name);
    assert_eq!(info["status"], "testing");
    assert_eq!(info["tracking_code"], created["tracking_code"]);
    assert_eq!(info["total_subscribers"], 250);
    assert_eq!(
        (
            &info["read_threshold"],
            &info["skim_threshold"],
            &info["delete_threshold"]
        ),
        (&json!(20), &json!(7), &json!(2))
    );
    assert_eq!(info["merge_tag"], "*|EMAIL|*");
    assert!(is_datetime(&info["created_on"]), "{info}");
    assert_eq!(
        (&info["start_date"], &info["end_date"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(
        info["click_tracking"],
        json!({"google": true, "html": CLICK_HTML})
    );
    assert_eq!(info["guid"], guid.as_str());

    // Lists: the §4.5 rules, `subject` matching the name.
    let other = text(
        &create(&s, json!({"name": "Newsletter", "total_subscribers": 5})).await,
        "guid",
    )
    .to_string();
    let all = s.get("/v5/analytics/campaigns").await.ok().clone();
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    assert_eq!(all[0]["id"], other.as_str(), "newest first");
    assert_eq!(all[1]["type"], "analytics");
    assert_eq!(all[1]["subject"], name);
    assert!(all[1]["date"].is_i64());
    let found = s.get("/v5/analytics/campaigns?subject=hlings-SALE").await;
    assert_eq!(
        found.ok().as_array().map(|a| a[0]["id"].clone()),
        Some(json!(guid))
    );
    let found = s.get("/v5/analytics/campaigns/?customer_id=cust-1").await;
    assert_eq!(found.ok().as_array().map(Vec::len), Some(1));
    assert_eq!(
        s.get("/v5/analytics/campaigns?results=1&page=2").await.ok()[0]["id"],
        guid.as_str()
    );
    assert_eq!(
        s.get("/v5/analytics/campaigns?results=1&page=3").await.ok(),
        &json!([])
    );
    assert_eq!(
        s.get("/v5/analytics/campaigns?from=yesterday&to=2000-01-01+00:00:00")
            .await
            .status,
        400
    );
    s.get("/v5/analytics/campaigns?results=500")
        .await
        .expect_error("InvalidParameter", 400);

    // Update works in test mode, and keeps the thresholds ordered.
    let updated = s
        .put(
            &format!("/v5/analytics/updatecampaign/{guid}"),
            &json!({"total_subscribers": 300, "skim_threshold": 9}),
        )
        .await;
    assert_eq!(
        (
            &updated.ok()["total_subscribers"],
            &updated.ok()["skim_threshold"]
        ),
        (&json!(300), &json!(9))
    );
    s.put(
        &format!("/v5/analytics/updatecampaign/{guid}"),
        &json!({"delete_threshold": 10}),
    )
    .await
    .expect_error("InvalidData", 400);

    // Activation: current, 90 days, once.
    let activated = s
        .post(
            &format!("/v5/analytics/activatecampaign/{guid}"),
            &json!({}),
        )
        .await;
    assert_eq!(activated.ok()["status"], "current");
    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await
        .ok()
        .clone();
    assert_eq!(info["status"], "current");
    assert!(
        is_datetime(&info["start_date"]) && is_datetime(&info["end_date"]),
        "{info}"
    );
    assert_eq!(info["days_remaining"], 90);
    s.post(
        &format!("/v5/analytics/activatecampaign/{guid}"),
        &json!({}),
    )
    .await
    .expect_error("CampaignAlreadyActive", 409);
    s.post(
        &format!("/v5/analytics/clearcampaigndata/{guid}"),
        &json!({}),
    )
    .await
    .expect_error("CannotClearData", 409);

    // Expiration: between 30 days and 3 years from the start.
    let today = chrono::Utc::now().date_naive();
    let day = |d: i64| {
        (today + chrono::Duration::days(d))
            .format("%Y-%m-%d")
            .to_string()
    };
    let set = |date: Value| {
        let s = &s;
        let guid = guid.clone();
        async move {
            s.post(
                &format!("/v5/analytics/setcampaignexpiration/{guid}"),
                &json!({"date": date}),
            )
            .await
        }
    };
    set(json!(day(29)))
        .await
        .expect_error("ExpirationLessThanMinimum", 400);
    set(json!(day(3 * 366)))
        .await
        .expect_error("ExpirationMaximumExceeded", 400);
    set(json!("31/12/2030"))
        .await
        .expect_error("InvalidData", 400);
    s.post(
        &format!("/v5/analytics/setcampaignexpiration/{guid}"),
        &json!({"other": 1}),
    )
    .await
    .expect_error("InvalidData", 400);
    let ok = set(json!(day(400))).await;
    assert_eq!(ok.ok()["end_date"], format!("{} 23:59:59", day(400)));
    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await
        .ok()
        .clone();
    assert_eq!(info["days_remaining"], 401, "{info}");

    // Delete removes it for good.
    s.delete(&format!("/v5/analytics/campaigns/{guid}"))
        .await
        .ok();
    s.get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await
        .expect_error("NoCampaigns", 404);
    s.delete(&format!("/v5/analytics/campaigns/{guid}"))
        .await
        .expect_error("NoCampaigns", 404);
    assert_eq!(
        s.get("/v5/analytics/campaigns")
            .await
            .ok()
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn each_analytics_error_arises_where_its_condition_does() {
    let s = Server::start().await;
    let post = |body: Value| {
        let s = &s;
        async move { s.post("/v5/analytics/createcampaign", &body).await }
    };
    let empty = s
        .call(
            "POST",
            "/v5/analytics/createcampaign",
            Some((ADMIN_KEY, ADMIN_PASS)),
            None,
        )
        .await;
    empty.expect_error("NoContent", 400);
    post(json!({})).await.expect_error("NoContent", 400);
    post(json!({"total_subscribers": 5}))
        .await
        .expect_error("InvalidData", 400);
    let r = post(json!({"name": "N"})).await;
    r.expect_error("InvalidData", 400);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("total_subscribers"));
    let r = post(json!({"name": "N", "total_subscribers": "many"})).await;
    r.expect_error("InvalidData", 400);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("must be an integer"));
    post(json!({"name": "N", "total_subscribers": 2.5}))
        .await
        .expect_error("InvalidData", 400);
    post(json!({"name": "N", "total_subscribers": 5, "skim_threshold": 20}))
        .await
        .expect_error("InvalidData", 400);
    post(json!({"name": "N", "total_subscribers": 5, "merge_tag": "\"><script>"}))
        .await
        .expect_error("InvalidData", 400);
    post(json!({"name": "%%%", "transfer_encoding": "base64", "total_subscribers": 5}))
        .await
        .expect_error("InvalidData", 400);
    post(json!({"name": "N", "total_subscribers": 5, "click_tracking": {"url": "not a url"}}))
        .await
        .expect_error("InvalidURL", 400);
    post(json!({"name": "N", "total_subscribers": 5, "click_tracking": {"url": "http://127.0.0.1:9/x"}}))
        .await
        .expect_error("InvalidURL", 400);

    let unknown = "00000000-0000-4000-8000-000000000000";
    s.get(&format!("/v5/analytics/getcampaigninfo/{unknown}"))
        .await
        .expect_error("NoCampaigns", 404);
    s.get(&format!("/v5/analytics/gettrackingcode/{unknown}"))
        .await
        .expect_error("NoCampaigns", 404);
    s.get("/v5/analytics/getcampaigninfo/not-a-guid")
        .await
        .expect_error("InvalidData", 400);
    s.get("/v5/analytics/getcampaigninfo/")
        .await
        .expect_error("InvalidData", 400);
    s.get("/v5/analytics/gettrackingcode/")
        .await
        .expect_error("InvalidData", 400);

    let guid = text(
        &s.post(
            "/v5/analytics/createcampaign",
            &json!({"name": "N", "total_subscribers": 5}),
        )
        .await
        .ok()
        .clone(),
        "guid",
    )
    .to_string();
    s.post(
        &format!("/v5/analytics/setcampaignexpiration/{guid}"),
        &json!({"date": "2030-01-01"}),
    )
    .await
    .expect_error("CampaignNotActive", 409);
    s.call(
        "POST",
        &format!("/v5/analytics/setcampaignexpiration/{guid}"),
        Some((ADMIN_KEY, ADMIN_PASS)),
        None,
    )
    .await
    .expect_error("NoContent", 400);
    s.call(
        "PUT",
        &format!("/v5/analytics/updatecampaign/{guid}"),
        Some((ADMIN_KEY, ADMIN_PASS)),
        None,
    )
    .await
    .expect_error("NoContent", 400);
    s.put(
        &format!("/v5/analytics/updatecampaign/{guid}"),
        &json!({"name": "x"}),
    )
    .await
    .expect_error("InvalidData", 400);
    s.put(
        &format!("/v5/analytics/updatecampaign/{guid}"),
        &json!({"total_subscribers": "x"}),
    )
    .await
    .expect_error("InvalidData", 400);
    let cleared = s
        .post(
            &format!("/v5/analytics/clearcampaigndata/{guid}"),
            &json!({}),
        )
        .await;
    assert_eq!(cleared.ok()["cleared"], 0);

    // Credentials and plans as for tests.
    s.call(
        "GET",
        "/v5/analytics/campaigns",
        Some((ADMIN_KEY, "wrong")),
        None,
    )
    .await
    .expect_error("AccessDenied", 401);
    s.add_account("other", "standard", &[]);
    s.call(
        "POST",
        "/v5/analytics/createcampaign",
        Some(("other", "password-1")),
        Some(&json!({"name": "N", "total_subscribers": 5, "customer_id": "c"})),
    )
    .await
    .expect_error("PermissionError", 403);
    let auth = s.get("/v5/analytics/analytics_auth").await;
    assert_eq!(auth.ok(), &json!({"success": true}));
}

#[tokio::test]
async fn another_accounts_campaign_is_no_campaign_everywhere() {
    let s = Server::start().await;
    s.add_account("intruder", "enterprise", &[]);
    let guid = text(
        &create(&s, json!({"name": "Mine", "total_subscribers": 5})).await,
        "guid",
    )
    .to_string();
    let them = Some(("intruder", "password-1"));
    let body = json!({"date": "2030-01-01", "total_subscribers": 9});
    for (method, path) in [
        ("GET", format!("/v5/analytics/gettrackingcode/{guid}")),
        ("GET", format!("/v5/analytics/getcampaigninfo/{guid}")),
        ("GET", format!("/v5/analytics/getcampaignexport/{guid}")),
        ("POST", format!("/v5/analytics/activatecampaign/{guid}")),
        (
            "POST",
            format!("/v5/analytics/setcampaignexpiration/{guid}"),
        ),
        ("POST", format!("/v5/analytics/clearcampaigndata/{guid}")),
        ("PUT", format!("/v5/analytics/updatecampaign/{guid}")),
        ("DELETE", format!("/v5/analytics/campaigns/{guid}")),
    ] {
        let r = s.call(method, &path, them, Some(&body)).await;
        r.expect_error("NoCampaigns", 404);
        assert!(!r.body.to_string().contains("Mine"), "{path}: {}", r.body);
    }
    assert_eq!(
        s.call("GET", "/v5/analytics/campaigns", them, None)
            .await
            .ok(),
        &json!([])
    );
    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await
        .ok()
        .clone();
    assert_eq!(
        (&info["status"], &info["total_subscribers"]),
        (&json!("testing"), &json!(5))
    );
    // The sandbox is answered but stores nothing.
    let sandbox = Some(("sandbox", "sandbox"));
    let made = s
        .call(
            "POST",
            "/v5/analytics/createcampaign",
            sandbox,
            Some(&json!({"name": "S", "total_subscribers": 1})),
        )
        .await;
    let sguid = text(made.ok(), "guid").to_string();
    s.call(
        "GET",
        &format!("/v5/analytics/getcampaigninfo/{sguid}"),
        sandbox,
        None,
    )
    .await
    .expect_error("NoCampaigns", 404);
    s.get(&format!("/v5/analytics/getcampaigninfo/{sguid}"))
        .await
        .expect_error("NoCampaigns", 404);
}

#[tokio::test]
async fn hits_answer_an_image_or_a_redirect_and_are_recorded_only_for_a_known_campaign() {
    let s = Server::start().await;
    let created = create(
        &s,
        json!({"name": "Hits", "total_subscribers": 5, "merge_tag": "*|ID|*",
               "click_tracking": {"google_analytics": "true", "html": CLICK_HTML}}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let code = text(&created, "tracking_code");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let fetch = |url: String| {
        let http = http.clone();
        async move {
            http.get(url)
                .header("User-Agent", "Mozilla/5.0 (X11) Thunderbird/128.0")
                .send()
                .await
                .expect("hit")
        }
    };
    let image = |r: &reqwest::Response| {
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "image/gif");
        assert_eq!(r.headers()["cache-control"], "no-store, private");
        assert!(r.headers().get("set-cookie").is_none());
    };
    // The recipient's mail service replaced the merge tag.
    for file in ["o.gif", "p.gif", "r4.gif"] {
        let url = url_in(code, file).replace("*|ID|*", "reader-1");
        let r = fetch(url).await;
        image(&r);
        let body = r.bytes().await.expect("body");
        assert!(body.starts_with(b"GIF89a"));
    }
    // A click: 302 to the original link with the UTM parameters, recorded. (A click within a
    // few hundred ms of the recipient's first hit would be a link scanner's.)
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let r = fetch(s.url(&format!("/t/{guid}/1?d=reader-1"))).await;
    assert_eq!(r.status(), 302);
    assert_eq!(
        r.headers()["location"],
        "https://shop.example/sale?x=1&y=2&utm_source=mailproof&utm_medium=email&utm_campaign=Hits"
    );
    assert_eq!(r.headers()["cache-control"], "no-store, private");
    // Not recorded, still an image: a link that does not exist, a file the code never asks for,
    // an unknown or malformed guid.
    for path in [
        format!("/t/{guid}/9"),
        format!("/t/{guid}/x.gif"),
        format!("/t/{guid}/r3.gif"),
        "/t/00000000-0000-4000-8000-000000000000/o.gif".to_string(),
        "/t/nope/o.gif".to_string(),
    ] {
        image(&fetch(s.url(&path)).await);
    }
    // A merge value that a spreadsheet would run is exported inert.
    image(&fetch(s.url(&format!("/t/{guid}/dm.gif?d=%3D1%2B1"))).await);
    let export = export(&s, &guid).await;
    assert_eq!(export.status(), 200);
    assert_eq!(export.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = export.text().await.expect("csv");
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .map(|l| l.split(',').skip(1).collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![
                "kind",
                "number",
                "merge_value",
                "agent_class",
                "test",
                "source",
                "client",
                "device"
            ],
            vec![
                "open",
                "0",
                "reader-1",
                "direct",
                "1",
                "direct",
                "thunderbird",
                "desktop"
            ],
            vec![
                "print",
                "0",
                "reader-1",
                "direct",
                "1",
                "direct",
                "thunderbird",
                "desktop"
            ],
            vec![
                "read",
                "4",
                "reader-1",
                "direct",
                "1",
                "direct",
                "thunderbird",
                "desktop"
            ],
            vec![
                "click",
                "1",
                "reader-1",
                "direct",
                "1",
                "direct",
                "thunderbird",
                "desktop"
            ],
            vec![
                "dark",
                "0",
                "'=1+1",
                "direct",
                "1",
                "direct",
                "thunderbird",
                "desktop"
            ],
        ],
        "{csv}"
    );
    assert!(
        csv.starts_with("time,")
            && csv
                .lines()
                .nth(1)
                .is_some_and(|l| l.len() > 19 && l.as_bytes()[4] == b'-'),
        "{csv}"
    );
    // Five hits were recorded as test data: clearing removes exactly them.
    let cleared = s
        .post(
            &format!("/v5/analytics/clearcampaigndata/{guid}"),
            &json!({}),
        )
        .await;
    assert_eq!(cleared.ok()["cleared"], 5);
    // Hits before activation are test data, removed by activation.
    image(&fetch(url_in(code, "o.gif")).await);
    s.post(
        &format!("/v5/analytics/activatecampaign/{guid}"),
        &json!({}),
    )
    .await
    .ok();
    image(&fetch(url_in(code, "dm.gif")).await);
    // Deleting the campaign: its hits answer the image and record nothing.
    s.delete(&format!("/v5/analytics/campaigns/{guid}"))
        .await
        .ok();
    image(&fetch(url_in(code, "o.gif")).await);
    let r = fetch(s.url(&format!("/t/{guid}/1"))).await;
    image(&r);
}

/// Runs `sql` on the server's database, beside the server.
async fn on_database(s: &Server, sql: &[&str]) {
    let url = match database_url(s.dir.path()) {
        Some(url) => url,
        None => store::sqlite_url(&s.data_dir()).expect("the SQLite URL"),
    };
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url)
        .await
        .expect("connect to the database");
    for statement in sql {
        sqlx::query(statement)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    pool.close().await;
}

/// The `Error…Campaign` names of §7.2: each storage failure is answered with the name of what was
/// being done (503, retry), never with a campaign's data.
#[tokio::test]
async fn storage_failures_are_answered_with_the_campaign_error_names() {
    let s = Server::start().await;
    let guid = text(
        &create(&s, json!({"name": "N", "total_subscribers": 5})).await,
        "guid",
    )
    .to_string();
    on_database(
        &s,
        &["ALTER TABLE analytics_hits RENAME TO analytics_hits_gone"],
    )
    .await;
    s.post(
        &format!("/v5/analytics/activatecampaign/{guid}"),
        &json!({}),
    )
    .await
    .expect_error("ErrorActivatingCampaign", 503);
    s.post(
        &format!("/v5/analytics/clearcampaigndata/{guid}"),
        &json!({}),
    )
    .await
    .expect_error("ErrorUpdateCampaign", 503);
    s.delete(&format!("/v5/analytics/campaigns/{guid}"))
        .await
        .expect_error("ErrorUpdateCampaign", 503);
    on_database(
        &s,
        &["ALTER TABLE analytics_hits_gone RENAME TO analytics_hits"],
    )
    .await;
    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await;
    assert_eq!(info.ok()["status"], "testing", "nothing changed");

    let refuse_inserts = if store::Backend::from_env() == store::Backend::Postgres {
        "ALTER TABLE analytics_campaigns ADD CONSTRAINT refuse CHECK (false) NOT VALID"
    } else {
        "CREATE TRIGGER refuse BEFORE INSERT ON analytics_campaigns BEGIN SELECT RAISE(ABORT, 'refused'); END"
    };
    on_database(&s, &[refuse_inserts]).await;
    s.post(
        "/v5/analytics/createcampaign",
        &json!({"name": "N", "total_subscribers": 5}),
    )
    .await
    .expect_error("ErrorCreateCampaign", 503);

    on_database(
        &s,
        &[
            "DROP TABLE analytics_hits",
            "DROP TABLE analytics_campaigns",
        ],
    )
    .await;
    let r = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await;
    r.expect_error("ErrorGetCampaign", 503);
    s.get("/v5/analytics/campaigns")
        .await
        .expect_error("ErrorGetCampaign", 503);
    // A hit still gets its image.
    let hit = reqwest::get(s.url(&format!("/t/{guid}/o.gif")))
        .await
        .expect("hit");
    assert_eq!(
        (
            hit.status().as_u16(),
            hit.headers()["content-type"].to_str().ok()
        ),
        (200, Some("image/gif"))
    );
}

/// Opens never end test mode, however many (the service our users come from activates at 500):
/// anyone who has seen the tracking URL can send them. 600 opens leave the campaign testing with
/// its test hits, which its owner can still clear; the owner's activation ends test mode.
#[tokio::test]
async fn test_opens_never_activate_the_campaign() {
    let s = Server::start().await;
    let created = create(&s, json!({"name": "N", "total_subscribers": 5})).await;
    let guid = text(&created, "guid").to_string();
    let open = url_in(text(&created, "tracking_code"), "o.gif");
    let http = reqwest::Client::new();
    for i in 0..600 {
        let r = http
            .get(format!("{open}?d=r{i}"))
            .send()
            .await
            .expect("hit");
        assert_eq!(r.status(), 200);
    }
    let info = s
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await;
    assert_eq!(info.ok()["status"], "testing", "600 opens");
    let cleared = s
        .post(
            &format!("/v5/analytics/clearcampaigndata/{guid}"),
            &json!({}),
        )
        .await;
    assert_eq!(cleared.ok()["cleared"], 600, "{}", cleared.body);
    let activated = s
        .post(
            &format!("/v5/analytics/activatecampaign/{guid}"),
            &json!({}),
        )
        .await;
    assert_eq!(activated.ok()["status"], "current", "{}", activated.body);
}

/// `click_tracking.url` is fetched under the network policy, like an email test's `url`, and its
/// links are rewritten; a target the policy refuses is `InvalidURL`.
#[tokio::test]
async fn click_tracking_html_can_come_from_a_url() {
    let origin = serve_static(
        "<html><body><a href=\"https://shop.example/from-the-web\">Go</a></body></html>",
        "text/html; charset=utf-8",
    )
    .await;
    let open = Server::start_with(Options {
        config: "[fetch]\nallow = [\"127.0.0.1/32\"]\n".into(),
    })
    .await;
    let body = json!({"name": "N", "total_subscribers": 5,
                      "click_tracking": {"url": format!("{origin}/email.html")}});
    let created = create(&open, body.clone()).await;
    let guid = text(&created, "guid");
    let html = created["click_tracking"]["html"]
        .as_str()
        .expect("rewritten html");
    assert!(
        html.contains(&format!("href=\"{}\"", open.url(&format!("/t/{guid}/1")))),
        "{html}"
    );
    let info = open
        .get(&format!("/v5/analytics/getcampaigninfo/{guid}"))
        .await;
    assert!(info.ok()["click_tracking"]["html"]
        .as_str()
        .is_some_and(|h| h.contains("https://shop.example/from-the-web")));
    let strict = Server::start().await;
    strict
        .post("/v5/analytics/createcampaign", &body)
        .await
        .expect_error("InvalidURL", 400);
}

pub(crate) const THUNDERBIRD: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.3.0";
const GMAIL_PROXY: &str =
    "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)";

fn hit_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("client")
}

/// A tracking hit with user agent `agent`, answered an image or a redirect.
pub(crate) async fn hit_as(http: &reqwest::Client, url: &str, agent: &str) -> reqwest::Response {
    let r = http
        .get(url)
        .header("User-Agent", agent)
        .send()
        .await
        .expect("hit");
    assert!(
        r.status() == 200 || r.status() == 302,
        "{url}: {}",
        r.status()
    );
    r
}

async fn stats(s: &Server, guid: &str) -> Value {
    s.get(&format!("/v5/analytics/getcampaignstats/{guid}"))
        .await
        .ok()
        .clone()
}

/// Issue 22 scopes 4 and 5 over HTTP: a scripted set of hits, and the report that separates
/// readers from machines. The server's relay ranges contain 127.0.0.1, where the test's
/// requests come from, so a bare `Mozilla/5.0` here is Apple's relay.
#[tokio::test]
async fn the_report_counts_readers_and_machines_apart() {
    let (_ranges, s) = server_with_loopback_as_apple_relay().await;
    let created = create(
        &s,
        json!({"name": "Report", "total_subscribers": 10, "merge_tag": "*|EMAIL|*",
               "click_tracking": {"html": CLICK_HTML}}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let code = text(&created, "tracking_code").to_string();
    s.post(
        &format!("/v5/analytics/activatecampaign/{guid}"),
        &json!({}),
    )
    .await
    .ok();
    let at = |file: &str, who: &str| url_in(&code, file).replace("*|EMAIL|*", who);
    let http = hit_client();

    // a reads for 10 s in Thunderbird and prints.
    hit_as(&http, &at("o.gif", "a"), THUNDERBIRD).await;
    for secs in (2..=10).step_by(2) {
        hit_as(&http, &at(&format!("r{secs}.gif"), "a"), THUNDERBIRD).await;
    }
    hit_as(&http, &at("p.gif", "a"), THUNDERBIRD).await;
    // b: Apple's relay fetches the open and, with the device's dark scheme, the dark image.
    hit_as(&http, &at("o.gif", "b"), "Mozilla/5.0").await;
    hit_as(&http, &at("dm.gif", "b"), "Mozilla/5.0").await;
    // c reads in Gmail: the proxy fetches every step at once, which measures nothing.
    hit_as(&http, &at("o.gif", "c"), GMAIL_PROXY).await;
    hit_as(&http, &at("r20.gif", "c"), GMAIL_PROXY).await;
    // a clicks the first link; a scanner checks the second with HEAD.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let click = hit_as(&http, &s.url(&format!("/t/{guid}/1?d=a")), THUNDERBIRD).await;
    assert_eq!(
        click.headers()["location"],
        "https://shop.example/sale?x=1&y=2"
    );
    let head = http
        .head(s.url(&format!("/t/{guid}/2?d=d")))
        .header("User-Agent", THUNDERBIRD)
        .send()
        .await
        .expect("head");
    assert_eq!(head.status(), 302);

    let r = stats(&s, &guid).await;
    assert_eq!(r["guid"], guid.as_str());
    assert_eq!(r["test_mode"], false);
    assert_eq!(r["total_subscribers"], 10);
    assert_eq!(
        r["opens"],
        json!({"total": {"hits": 3, "unique": 3}, "reliable": {"hits": 2, "unique": 2},
               "machine": {"hits": 1, "unique": 1}, "unknown": {"hits": 0, "unique": 0}}),
        "{r}"
    );
    let source = |name: &str| {
        r["sources"]
            .as_array()
            .and_then(|all| all.iter().find(|x| x["source"] == name))
            .map(|x| x["opens"]["hits"].clone())
    };
    assert_eq!(source("direct"), Some(json!(1)));
    assert_eq!(source("apple_mpp"), Some(json!(1)));
    assert_eq!(source("gmail_proxy"), Some(json!(1)));
    assert_eq!(source("scanner"), Some(json!(0)));
    assert_eq!(
        r["engagement"],
        json!({"read": 1, "skim": 0, "glance": 0, "not_measurable": 1}),
        "a's 10 s is a read; Gmail's open is not measurable, never a glance"
    );
    assert_eq!(
        r["clients"],
        json!([{"client": "gmail", "opens": 1}, {"client": "thunderbird", "opens": 1}])
    );
    assert_eq!(
        r["devices"],
        json!([{"device": "desktop", "opens": 1}, {"device": "unknown", "opens": 1}])
    );
    assert_eq!(r["prints"], json!({"hits": 1, "unique": 1}));
    assert_eq!(r["forwards"], json!({"hits": 0, "unique": 0}));
    assert_eq!(r["dark"], json!({"hits": 1, "unique": 1}));
    assert!(
        (r["dark_share"].as_f64().unwrap_or(0.0) - 1.0 / 3.0).abs() < 1e-9,
        "{r}"
    );
    assert_eq!(
        r["clicks"],
        json!([
            {"number": 1, "url": "https://shop.example/sale?x=1&y=2",
             "clicks": {"hits": 1, "unique": 1}, "machine": 0},
            {"number": 2, "url": "https://shop.example/about",
             "clicks": {"hits": 0, "unique": 0}, "machine": 1},
        ])
    );
    assert_eq!(
        r["apple_mpp"],
        json!({"by_agent_only": 0, "ranges_configured": true})
    );
    let days = r["per_day"].as_array().expect("per_day");
    let hours = r["per_hour"].as_array().expect("per_hour");
    let opens = |p: &[Value]| p.iter().filter_map(|x| x["opens"].as_i64()).sum::<i64>();
    assert_eq!((opens(days), opens(hours)), (3, 3), "{r}");
    assert!(hours
        .iter()
        .all(|h| h["start"].as_i64().is_some_and(|t| t % 3600 == 0)));

    // The report is scoped like every campaign call.
    s.add_account("intruder", "enterprise", &[]);
    let path = format!("/v5/analytics/getcampaignstats/{guid}");
    let theirs = s
        .call("GET", &path, Some(("intruder", "password-1")), None)
        .await;
    theirs.expect_error("NoCampaigns", 404);
    assert!(!theirs.body.to_string().contains("shop.example"));
    s.get("/v5/analytics/getcampaignstats/not-a-guid")
        .await
        .expect_error("InvalidData", 400);
    s.get("/v5/analytics/getcampaignstats/")
        .await
        .expect_error("InvalidData", 400);
}

/// Without relay ranges configured, a bare `Mozilla/5.0` is still counted as Apple's relay, and
/// the report says it was judged on the user agent alone.
#[tokio::test]
async fn without_relay_ranges_the_report_says_mpp_was_judged_on_the_agent() {
    let s = Server::start().await;
    let created = create(
        &s,
        json!({"name": "N", "total_subscribers": 5, "merge_tag": "[id]"}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let open = url_in(text(&created, "tracking_code"), "o.gif").replace("[id]", "x");
    hit_as(&hit_client(), &open, "Mozilla/5.0").await;
    let r = stats(&s, &guid).await;
    assert_eq!(
        r["test_mode"], true,
        "hits of a campaign in test mode are its test data"
    );
    assert_eq!(r["opens"]["machine"], json!({"hits": 1, "unique": 1}));
    assert_eq!(
        r["apple_mpp"],
        json!({"by_agent_only": 1, "ranges_configured": false})
    );
    assert_eq!(
        r["engagement"],
        json!({"read": 0, "skim": 0, "glance": 0, "not_measurable": 0}),
        "machine opens are no engagement at all"
    );
}

/// Issue 29 scope 2: the scanner rule times a click from the recipient's first open, not from
/// its latest hit. A reader who opens, reads for a while and clicks 100 ms after a reading step is
/// a person (the rule used to forget the open after 2 s and time the click from the step); a
/// click 100 ms after the open is a scanner's.
#[tokio::test]
async fn a_click_right_after_a_reading_step_is_a_persons_and_right_after_the_open_a_scanners() {
    let s = Server::start().await;
    let created = create(
        &s,
        json!({"name": "Clicks", "total_subscribers": 5, "merge_tag": "[id]",
               "click_tracking": {"html": CLICK_HTML}}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let code = text(&created, "tracking_code").to_string();
    let http = hit_client();
    let at = |file: &str, who: &str| url_in(&code, file).replace("[id]", who);
    let click = |n: u32, who: &str| s.url(&format!("/t/{guid}/{n}?d={who}"));
    let pause = |ms| tokio::time::sleep(std::time::Duration::from_millis(ms));

    hit_as(&http, &at("o.gif", "reader"), THUNDERBIRD).await;
    pause(2_500).await;
    hit_as(&http, &at("r2.gif", "reader"), THUNDERBIRD).await;
    pause(100).await;
    hit_as(&http, &click(1, "reader"), THUNDERBIRD).await;

    hit_as(&http, &at("o.gif", "scanned"), THUNDERBIRD).await;
    pause(100).await;
    hit_as(&http, &click(2, "scanned"), THUNDERBIRD).await;

    let r = stats(&s, &guid).await;
    assert_eq!(
        r["clicks"],
        json!([
            {"number": 1, "url": "https://shop.example/sale?x=1&y=2",
             "clicks": {"hits": 1, "unique": 1}, "machine": 0},
            {"number": 2, "url": "https://shop.example/about",
             "clicks": {"hits": 0, "unique": 0}, "machine": 1},
        ]),
        "{r}"
    );
}

/// The held-open image (scope 2): held for a reader's own client and timed until it lets go; a
/// proxy, or a client past the per-address cap, gets the whole image at once.
#[tokio::test]
async fn the_held_open_image_times_a_direct_reader_and_never_a_proxy() {
    use tokio::io::AsyncReadExt;
    let s = Server::start_with(Options {
        config: "[analytics]\nmax_held_per_address = 1\nmax_held_responses = 4\n".into(),
    })
    .await;
    let created = create(
        &s,
        json!({"name": "N", "total_subscribers": 5, "merge_tag": "[id]"}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let code = text(&created, "tracking_code").to_string();
    let at = |file: &str, who: &str| url_in(&code, file).replace("[id]", who);
    let http = hit_client();
    let whole_now = |r: reqwest::Response| async move {
        let body = tokio::time::timeout(std::time::Duration::from_secs(5), r.bytes())
            .await
            .expect("answered at once")
            .expect("body");
        assert!(
            body.starts_with(b"GIF89a") && body.ends_with(&[0x3b]),
            "{body:?}"
        );
    };
    whole_now(hit_as(&http, &at("h.gif", "g"), GMAIL_PROXY).await).await;

    hit_as(&http, &at("o.gif", "a"), THUNDERBIRD).await;
    let mut held = start_held(&s, &at("h.gif", "a")).await;
    let mut buf = [0u8; 1024];
    // While it is held, the same address gets the next held image whole at once.
    whole_now(hit_as(&http, &at("h.gif", "b"), THUNDERBIRD).await).await;
    let more =
        tokio::time::timeout(std::time::Duration::from_millis(500), held.read(&mut buf)).await;
    assert!(more.is_err(), "the rest of the image is held back");
    tokio::time::sleep(std::time::Duration::from_millis(2_700)).await;
    drop(held);

    // The measure lands once the server sees the client go: about 3 s, a skim by the defaults.
    let mut report = Value::Null;
    for _ in 0..50 {
        report = stats(&s, &guid).await;
        if report["engagement"]["skim"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        report["engagement"],
        json!({"read": 0, "skim": 1, "glance": 0, "not_measurable": 0}),
        "{report}"
    );
    let csv = export_csv(&s, &guid).await;
    let held_for = held_seconds(&csv);
    assert!(
        held_for.len() == 1 && (3..=4).contains(&held_for[0]),
        "only the held one is recorded, with about 3 s: {csv}"
    );
}

/// The campaign's per-hit CSV export, answered 200 (the other analytics suites read hits here).
pub(crate) async fn export_csv(s: &Server, guid: &str) -> String {
    let r = export(s, guid).await;
    assert_eq!(r.status(), 200);
    r.text().await.expect("csv")
}

async fn export(s: &Server, guid: &str) -> reqwest::Response {
    s.http
        .get(s.url(&format!("/v5/analytics/getcampaignexport/{guid}")))
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .send()
        .await
        .expect("export")
}

/// A server whose Apple relay ranges (as an operator configures them) contain loopback, where the
/// tests' requests come from, so a bare `Mozilla/5.0` from a test is Apple's relay. The directory
/// holds the ranges file: keep it as long as the server.
pub(crate) async fn server_with_loopback_as_apple_relay() -> (tempfile::TempDir, Server) {
    let ranges = tempfile::tempdir().expect("dir");
    let csv = ranges.path().join("egress-ip-ranges.csv");
    std::fs::write(
        &csv,
        "17.0.0.0/8,US,US-CA,Cupertino,\n127.0.0.0/8,US,US-CA,Cupertino,\n",
    )
    .expect("write ranges");
    let s = Server::start_with(Options {
        config: format!(
            "[analytics]\napple_egress_csv = {:?}\n",
            csv.display().to_string()
        ),
    })
    .await;
    (ranges, s)
}

/// The seconds of each recorded held-open image in an export.
fn held_seconds(csv: &str) -> Vec<i64> {
    csv.lines()
        .filter(|l| l.contains(",hold,"))
        .filter_map(|l| l.split(',').nth(2)?.parse().ok())
        .collect()
}

/// Requests the held-open image `url` as Thunderbird over a raw connection and reads until the
/// start of the image has come (the rest is held back).
async fn start_held(s: &Server, url: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let path = url
        .strip_prefix(&s.base)
        .expect("the tracking base is the server's by default");
    let host = s.base.trim_start_matches("http://").to_string();
    let mut held = tokio::net::TcpStream::connect(&host)
        .await
        .expect("connect");
    held.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {THUNDERBIRD}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("request");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("GIF89a") {
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), held.read(&mut buf))
            .await
            .expect("the head and the start of the image come at once")
            .expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    held
}

/// Stopping the service does not wait out held-open images: they are finished at once and
/// recorded with the time they were held.
#[tokio::test]
async fn a_stopping_service_finishes_held_images_and_records_them() {
    use tokio::io::AsyncReadExt;
    let s = Server::start().await;
    let created = create(
        &s,
        json!({"name": "N", "total_subscribers": 5, "merge_tag": "[id]"}),
    )
    .await;
    let guid = text(&created, "guid").to_string();
    let hold = url_in(text(&created, "tracking_code"), "h.gif").replace("[id]", "a");
    let mut held = start_held(&s, &hold).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let started = std::time::Instant::now();
    let (stopped, dir) = tokio::task::spawn_blocking(move || s.terminate())
        .await
        .expect("terminate");
    assert!(stopped, "a clean stop");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the stop did not wait out the hold: {:?}",
        started.elapsed()
    );
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        held.read_to_end(&mut rest),
    )
    .await;
    let rest = String::from_utf8_lossy(&rest).to_string();
    assert!(
        rest.contains("0\r\n\r\n"),
        "the image was finished: {rest:?}"
    );

    let s = Server::start_in(dir, Options::default()).await;
    let csv = export_csv(&s, &guid).await;
    let held_for = held_seconds(&csv);
    assert!(
        held_for.len() == 1 && (1..=3).contains(&held_for[0]),
        "the hold was recorded with the seconds it was held (about 1): {csv}"
    );
}

/// `[analytics] tracking_base_url` puts tracking URLs on a base of their own (scope 3).
#[tokio::test]
async fn the_tracking_base_url_is_configurable() {
    let s = Server::start_with(Options {
        config: "[analytics]\ntracking_base_url = \"https://t.example.com/track/\"\n".into(),
    })
    .await;
    let created = create(
        &s,
        json!({"name": "N", "total_subscribers": 5, "click_tracking": {"html": CLICK_HTML}}),
    )
    .await;
    let guid = text(&created, "guid");
    let code = text(&created, "tracking_code");
    assert_eq!(
        url_in(code, "o.gif"),
        format!("https://t.example.com/track/{guid}/o.gif")
    );
    assert!(!code.contains(&s.base), "{code}");
    let html = created["click_tracking"]["html"].as_str().expect("html");
    assert!(
        html.contains(&format!("href=\"https://t.example.com/track/{guid}/1\"")),
        "{html}"
    );
    // The hits themselves are still served under /t/ of the api process.
    let r = hit_as(&hit_client(), &s.url(&format!("/t/{guid}/1")), THUNDERBIRD).await;
    assert_eq!(r.status(), 302);
}

/// Issue 22 scope 6 in the report: `getcampaignstats` ends with the per-client matrix (beside the
/// report's own `clients`, which it must not hide), one row per
/// profile of the data file with its cells as written there, and the image proxy named from the
/// sources where one stands in the way (Gmail's hides reading time; Outlook for Windows has none
/// and counts the open only once images are shown).
#[tokio::test]
async fn the_report_says_which_signals_each_client_lets_through() {
    let s = Server::start().await;
    let created = create(&s, json!({"name": "Matrix", "total_subscribers": 3})).await;
    let report = stats(&s, text(&created, "guid")).await;
    let rows = report["client_matrix"]
        .as_array()
        .expect("the matrix in the report");
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/analytics-matrix.toml"
    ))
    .expect("matrix file");
    let matrix = analytics::matrix::Matrix::parse(&file).expect("matrix");
    assert_eq!(rows.len(), matrix.clients.len());
    for (row, want) in rows.iter().zip(&matrix.clients) {
        assert_eq!(row["id"], json!(want.id));
        for (cell, value) in [
            ("open", serde_json::to_value(want.open).expect("open")),
            ("read", json!(want.read)),
            ("print", json!(want.print)),
            ("forward", json!(want.forward)),
            ("dark", json!(want.dark)),
        ] {
            assert_eq!(row[cell], value, "{} {cell}", want.id);
        }
    }
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == json!(id))
            .unwrap_or_else(|| panic!("{id} in the matrix"))
    };
    let gmail = row("gmail_chrome_web");
    assert_eq!(
        (&gmail["image_proxy"], &gmail["proxy_hides_timing"]),
        (&json!("Google image proxy"), &json!(true))
    );
    let outlook = row("outlook365_win");
    assert_eq!(
        (&outlook["image_proxy"], &outlook["open"]),
        (&Value::Null, &json!("blocked-by-default"))
    );
    assert_eq!(row("applemail_macos")["open"], json!("counted"));
    // Apple Mail applies dark-mode rules only to an email whose CSS declares color-scheme; the
    // light profile says what its dark twin does.
    for apple in ["applemail_macos", "applemail_macos_dm"] {
        assert_eq!(row(apple)["dark"], json!("when-opted-in"), "{apple}");
    }
    assert!(report["clients"].is_array(), "the report's clients stay");
}
