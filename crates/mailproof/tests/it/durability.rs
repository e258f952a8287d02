//! Nothing acknowledged is lost: a test acknowledged with 200 survives SIGKILL of the service.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn an_acknowledged_test_survives_sigkill() {
    let s = Server::start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = s
            .post(
                "/v5/email/tests",
                &json!({"subject": format!("Kept {i}"), "html": "<p>x</p>"}),
            )
            .await;
        ids.push(r.ok()["id"].as_str().expect("id").to_string());
    }
    let dir = s.kill();
    let s = Server::start_in(dir, Options::default()).await;
    for (i, id) in ids.iter().enumerate() {
        let info = s.get(&format!("/v5/email/tests/{id}")).await.ok().clone();
        assert_eq!(info["subject"], format!("Kept {i}"));
    }
    assert_eq!(
        s.get("/v5/tests")
            .await
            .ok()
            .as_array()
            .expect("list")
            .len(),
        5
    );
}

#[tokio::test]
async fn accounts_can_be_managed_while_the_server_runs() {
    let s = Server::start().await;
    s.add_account("live", "standard", &["--auto-inbox", "live-inbox"]);
    s.call("GET", "/v5/auth", Some(("live", "password-1")), None)
        .await
        .ok();
    let out = std::process::Command::new(BIN)
        .args(["accounts", "list", "--data-dir"])
        .arg(s.data_dir())
        .envs(database_env(s.dir.path()))
        .output()
        .expect("accounts list");
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("live") && listing.contains("standard") && listing.contains("live-inbox"),
        "{listing}"
    );
    assert!(!listing.contains("password-1"));
    let dup = std::process::Command::new(BIN)
        .args([
            "accounts",
            "add",
            "--api-key",
            "live",
            "--password",
            "password-2",
            "--plan",
            "free",
            "--data-dir",
        ])
        .arg(s.data_dir())
        .envs(database_env(s.dir.path()))
        .output()
        .expect("accounts add");
    assert!(!dup.status.success(), "a duplicate key is refused");
    let rm = std::process::Command::new(BIN)
        .args(["accounts", "remove", "--api-key", "live", "--data-dir"])
        .arg(s.data_dir())
        .envs(database_env(s.dir.path()))
        .output()
        .expect("accounts remove");
    assert!(rm.status.success());
    s.call("GET", "/v5/auth", Some(("live", "password-1")), None)
        .await
        .expect_error("AccessDenied", 401);
}

#[tokio::test]
async fn sigterm_stops_the_service_cleanly_and_keeps_its_data() {
    let s = Server::start().await;
    let id = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "Before stop", "html": "x"}),
        )
        .await
        .ok()["id"]
        .clone();
    let (clean, dir) = s.terminate();
    assert!(clean, "mailproof serve exits 0 on SIGTERM");
    let s = Server::start_in(dir, Options::default()).await;
    let info = s
        .get(&format!("/v5/email/tests/{}", id.as_str().expect("id")))
        .await
        .ok()
        .clone();
    assert_eq!(info["subject"], "Before stop");
}
