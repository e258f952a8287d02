//! Issue 13.4: the service with `[blobs]` on a real S3-compatible server (`s3s-fs` on loopback):
//! screenshots rendered in Blink land in the bucket, the presigned URLs serve them from there,
//! deleting the test removes them, and a missing bucket stops the service at start.

use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use store::test_s3::{files_under, S3Server};

use crate::support::*;

/// Two Blink clients, so the bucket holds more than one client's folder.
const CLIENTS: [&str; 2] = ["gmail_chrome_web", "gmail_mobile_web"];

const EMAIL: &str = "<!doctype html><html><body style=\"margin:0;background:#ffffff\">\
    <table width=\"100%\"><tr><td style=\"padding:20px;font-family:Arial\">\
    <h1 style=\"color:#222\">Stored in S3</h1><p>Rendered, then read back from the bucket.</p>\
    </td></tr></table></body></html>";

#[tokio::test]
async fn screenshots_live_in_the_s3_bucket_serve_from_it_and_go_with_their_test() {
    let s3 = S3Server::start().await;
    let s = Server::start_with(Options {
        config: format!(
            "{}[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n",
            s3.config_toml()
        ),
    })
    .await;
    let body = json!({"subject": "S3", "html": EMAIL, "clients": CLIENTS});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let info = s.wait_processed(&id, Duration::from_secs(300)).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        CLIENTS.len(),
        "every client completes: {info}"
    );

    let results = s
        .get(&format!("/v5.0.1/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    let mut urls = Vec::new();
    let mut expected = Vec::new();
    for client in CLIENTS {
        let r = &results[client];
        assert_eq!(r["status"], "Complete", "{client}: {r}");
        let variants = r["screenshots"].as_object().expect("screenshots").clone();
        assert!(variants.contains_key("default"), "{client}: {r}");
        let named = variants.into_iter().chain([
            ("thumbnail".to_string(), r["thumbnail"].clone()),
            ("full_thumbnail".to_string(), r["full_thumbnail"].clone()),
        ]);
        for (name, url) in named {
            let url = url
                .as_str()
                .unwrap_or_else(|| panic!("{client}: a {name} URL in {r}"))
                .to_string();
            // Presigned: fetched without credentials, as a browser or CI job would.
            let got = s.http.get(&url).send().await.expect("get screenshot");
            assert_eq!(got.status(), 200, "{client} {name}: {url}");
            assert_eq!(got.headers()["content-type"], "image/png");
            let png = got.bytes().await.expect("bytes").to_vec();
            image::load_from_memory(&png)
                .unwrap_or_else(|e| panic!("{client} {name}: a valid PNG: {e}"));
            let key = format!("shots/{id}/{client}/{name}.png");
            let in_bucket = std::fs::read(s3.bucket_dir().join(&key))
                .unwrap_or_else(|e| panic!("{key} is an object in the S3 server's directory: {e}"));
            assert!(
                in_bucket == png,
                "{key}: the service served the bucket's bytes"
            );
            urls.push(url);
            expected.push(key);
        }
    }
    expected.sort();
    assert_eq!(
        objects_of(&s3, &id),
        expected,
        "the bucket holds exactly the screenshots and thumbnails the results name"
    );
    let local = files_under(&s.data_dir().join("blobs"));
    assert!(
        local.is_empty(),
        "nothing is written to local blob files: {local:?}"
    );

    let deleted = s.delete(&format!("/v5/email/tests/{id}")).await;
    assert_eq!(deleted.ok()["success"], true);
    let left = objects_of(&s3, &id);
    assert!(
        left.is_empty(),
        "deleting the test removes its objects: {left:?}"
    );
    for url in &urls {
        let status = s.http.get(url).send().await.expect("get").status();
        assert_eq!(status, 403, "a deleted test's screenshot is gone: {url}");
    }
}

/// The keys of `test`'s objects that the S3 server holds on disk.
fn objects_of(s3: &S3Server, test: &str) -> Vec<String> {
    let prefix = format!("shots/{test}/");
    s3.keys_on_disk()
        .into_iter()
        .filter(|k| k.starts_with(&prefix))
        .collect()
}

#[tokio::test]
async fn a_missing_bucket_stops_the_service_at_start_naming_bucket_and_endpoint() {
    let s3 = S3Server::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("mailproof.toml");
    // Only the bucket line: the test credentials contain the bucket's name too.
    let bucket_line = format!("bucket = \"{}\"", s3.bucket());
    let toml = s3
        .config_toml()
        .replace(&bucket_line, "bucket = \"no-such-bucket\"")
        + "[render]\nengines = []\n[spam]\ndaemons = false\n";
    std::fs::write(&config, toml).expect("write config");
    let mut child = testkit::service::Launch::serve(std::path::Path::new(BIN), "missing bucket")
        .args(["--smtp", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailproof serve");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mailproof serve") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mailproof serve still runs 60 s after starting with a missing bucket");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(!status.success(), "serve fails: {stderr}");
    for part in ["no-such-bucket", s3.endpoint(), "create the bucket"] {
        assert!(stderr.contains(part), "{part:?} in: {stderr}");
    }
}
