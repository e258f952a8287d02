//! Issue 32, scopes 3 and 4, against the real `mailproof serve`: tests with one subject are the
//! versions of one email (and a test can be moved into another's); the owner approves or
//! requests changes through the API, a named reviewer through a share link in Chromium, and the
//! owner's page shows each decision with its author; a revoked link stops that reviewer at once;
//! another account can neither read nor write versions or approvals; `mailproof check
//! --require-approval` passes only when a version with the same HTML is approved.

use std::process::Output;

use serde_json::{json, Value};

use crate::support::*;
use crate::web_pages_ui::{assert_fits, create_share_link, shot_for_people, sign_in, window};
use crate::web_ui::{Browser, AXE};

const SUBJECT: &str = "Spring sale";

fn email(headline: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><title>{SUBJECT}</title></head><body>\
         <div style=\"display:none\">Twenty percent off everything in store until Sunday night</div>\
         <h1>{headline}</h1><p>Come and see.</p></body></html>"
    )
}

async fn create(s: &Server, html: &str) -> String {
    s.post(
        "/v5/email/tests",
        &json!({"subject": SUBJECT, "html": html, "clients": ["gmail_chrome_web"]}),
    )
    .await
    .ok()["id"]
        .as_str()
        .expect("id")
        .to_string()
}

fn version_ids(v: &Value) -> Vec<(String, i64, String)> {
    v["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|x| {
            (
                x["id"].as_str().unwrap_or_default().to_string(),
                x["version"].as_i64().unwrap_or_default(),
                x["approval"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn run_check(s: &Server, file: &std::path::Path) -> Output {
    tokio::process::Command::new(BIN)
        .args(["check", &file.display().to_string(), "--server", &s.base])
        .args(["--clients", "gmail_chrome_web", "--subject", SUBJECT])
        .args(["--require-approval", "--timeout", "120s"])
        .env("MAILPROOF_API_KEY", ADMIN_KEY)
        .env("MAILPROOF_PASSWORD", ADMIN_PASS)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run mailproof check")
}

#[tokio::test]
async fn versions_and_approvals_from_the_owner_a_named_reviewer_and_the_cli() {
    let axe = std::fs::read_to_string(AXE).unwrap_or_else(|e| {
        panic!("{AXE} is missing ({e}): run scripts/setup.sh to install axe-core")
    });
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    let first = email("Spring is here");
    let second = email("Spring is here: 20% off");
    let v1 = create(&s, &first).await;
    let v2 = create(&s, &second).await;
    let other = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Newsletter", "html": "<p>News</p>", "clients": ["gmail_chrome_web"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();

    let versions = s
        .get(&format!("/v5/email/tests/{v2}/versions"))
        .await
        .ok()
        .clone();
    assert_eq!(versions["version"], 2);
    assert_eq!(
        version_ids(&versions),
        vec![
            (v1.clone(), 1, "awaiting".into()),
            (v2.clone(), 2, "awaiting".into())
        ]
    );

    // Another account: nothing of this test, and none of its own tests moved in.
    s.add_account("intruder", "enterprise", &[]);
    let intruder = Some(("intruder", "password-1"));
    let theirs = s
        .call(
            "POST",
            "/v5/email/tests",
            intruder,
            Some(&json!({"subject": SUBJECT, "html": first, "clients": ["gmail_chrome_web"]})),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    for (method, path, body) in [
        ("GET", format!("/v5/email/tests/{v2}/versions"), None),
        ("GET", format!("/v5/email/tests/{v2}/approvals"), None),
        (
            "PUT",
            format!("/v5/email/tests/{v2}/approval"),
            Some(json!({"decision": "approved"})),
        ),
        (
            "PUT",
            format!("/v5/email/tests/{v2}/versions"),
            Some(json!({"version_of": theirs})),
        ),
    ] {
        s.call(method, &path, intruder, body.as_ref())
            .await
            .expect_error("InvalidTestID", 404);
    }
    s.put(
        &format!("/v5/email/tests/{other}/versions"),
        &json!({"version_of": theirs}),
    )
    .await
    .expect_error("InvalidTestID", 404);
    let theirs_versions = s
        .call(
            "GET",
            &format!("/v5/email/tests/{theirs}/versions"),
            intruder,
            None,
        )
        .await
        .ok()
        .clone();
    assert_eq!(
        version_ids(&theirs_versions).len(),
        1,
        "never joined to another account's"
    );

    // Chosen explicitly: the newsletter becomes version 3 of the sale.
    let moved = s
        .put(
            &format!("/v5/email/tests/{other}/versions"),
            &json!({"version_of": v1}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(moved["version"], 3);

    // The owner's decision, with its errors.
    s.put(
        &format!("/v5/email/tests/{v1}/approval"),
        &json!({"decision": "fine"}),
    )
    .await
    .expect_error("InvalidParameter", 400);
    s.put(
        &format!("/v5/email/tests/{v1}/approval"),
        &json!({"decision": "approved", "note": "x".repeat(2001)}),
    )
    .await
    .expect_error("InvalidParameter", 400);
    let approved = s
        .put(
            &format!("/v5/email/tests/{v1}/approval"),
            &json!({"decision": "approved", "note": "Good to go"}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(approved["approval"], "approved");
    assert_eq!(approved["decisions"][0]["name"], "Owner");
    assert_eq!(approved["decisions"][0]["via"], "owner");

    // A named reviewer through a share link, in the browser.
    let mut b = Browser::start().await;
    sign_in(&mut b, &s).await;
    let test_path = format!("/tests/{v2}");
    let share_path = create_share_link(&mut b, &s, &test_path).await;
    b.goto(&s.url(&share_path)).await;
    assert_eq!(
        b.text("#review [data-field=approval]").await,
        "Awaiting review"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#review ol.versions').length")
            .await,
        json!(0),
        "a shared proof shows no other versions"
    );
    b.set_value("#reviewer-name", "Jane Reviewer").await;
    b.set_value("#review-note", "The hero image is cut on phones")
        .await;
    b.click_and_wait("#review button[value=changes_requested]")
        .await;
    assert_eq!(
        b.text("#review [data-field=approval]").await,
        "Changes requested"
    );
    let api = s
        .get(&format!("/v5/email/tests/{v2}/approvals"))
        .await
        .ok()
        .clone();
    assert_eq!(api["approval"], "changes_requested");
    assert_eq!(api["decisions"][0]["name"], "Jane Reviewer");
    assert_eq!(api["decisions"][0]["via"], "share_link");
    assert_eq!(
        api["decisions"][0]["note"],
        "The hero image is cut on phones"
    );
    // Without a name nothing is recorded, and the reviewer is told why.
    let status = b
        .eval(&format!(
            "fetch({:?}, {{method: 'POST', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: 'name=&decision=approved'}}).then(r => r.status)",
            format!("{share_path}/review")
        ))
        .await;
    assert_eq!(status, json!(400));

    // The owner's page: each decision with its author, the versions with their states.
    for (width, height) in [(1440, 900), (390, 844)] {
        window(&mut b, width, height).await;
        b.goto(&s.url(&test_path)).await;
        let rows = b
            .eval("[...document.querySelectorAll('#review table.decisions tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()).slice(0, 3))")
            .await;
        assert_eq!(
            rows,
            json!([[
                "Jane Reviewer (share link)",
                "Requested changes",
                "The hero image is cut on phones"
            ]])
        );
        let listed = b
            .eval("[...document.querySelectorAll('#review ol.versions li')].map(l => [l.dataset.test, l.dataset.approval])")
            .await;
        assert_eq!(
            listed,
            json!([
                [v1, "approved"],
                [v2, "changes_requested"],
                [other, "awaiting"]
            ])
        );
        assert_fits(&mut b, "test with review", width).await;
        shot_for_people(&mut b, "test with review", width).await;
        b.check_accessibility(&axe, &format!("test with review ({width} px)"))
            .await;
        b.goto(&s.url(&share_path)).await;
        assert_fits(&mut b, "shared proof with review", width).await;
        shot_for_people(&mut b, "shared proof with review", width).await;
        b.check_accessibility(&axe, &format!("shared proof with review ({width} px)"))
            .await;
    }
    // The owner approves too; one request for changes still outweighs it. The tests list says so.
    b.goto(&s.url(&test_path)).await;
    b.click_and_wait("#review button[value=approved]").await;
    assert_eq!(
        b.text("#review [data-field=approval]").await,
        "Changes requested"
    );
    b.goto(&s.url("/tests")).await;
    let listed = b
        .eval(&format!("document.querySelector('a[href=\"/tests/{v2}\"]').closest('tr').querySelector('.review-state').textContent"))
        .await;
    assert_eq!(listed, json!("Changes requested"));

    // Revoked, the link decides nothing more.
    b.goto(&s.url(&test_path)).await;
    b.click_and_wait("form[action$='/shares/revoke'] button")
        .await;
    let status = b
        .eval(&format!(
            "fetch({:?}, {{method: 'POST', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: 'name=Jane+Reviewer&decision=approved'}}).then(r => r.status)",
            format!("{share_path}/review")
        ))
        .await;
    assert_eq!(status, json!(404));
    let api = s
        .get(&format!("/v5/email/tests/{v2}/approvals"))
        .await
        .ok()
        .clone();
    assert_eq!(api["approval"], "changes_requested", "{api}");

    // The CLI: the approved first version's HTML passes, the second's does not.
    let dir = tempfile::tempdir().expect("dir");
    let approved_file = dir.path().join("approved.html");
    std::fs::write(&approved_file, &first).expect("write");
    let out = run_check(&s, &approved_file).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("approval: version 1"), "{text}");
    let changed_file = dir.path().join("changed.html");
    std::fs::write(&changed_file, &second).expect("write");
    let out = run_check(&s, &changed_file).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("approval required: no version of this email with this content is approved"),
        "{text}"
    );
}
