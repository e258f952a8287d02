//! Issue 13, point 5: `GET /metrics` in Prometheus text format, scraped over HTTP; its figures
//! move when tests are created, mail arrives and requests are answered.

use serde_json::json;

use crate::support::*;

pub(crate) async fn scrape(s: &Server, token: Option<&str>) -> (u16, String) {
    let mut req = s.http.get(s.url("/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("scrape /metrics");
    let status = r.status().as_u16();
    (status, r.text().await.expect("metrics body"))
}

/// The value of the sample named exactly `series` (name plus labels), 0 when absent.
pub(crate) fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(series))
        .filter_map(|rest| rest.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

const CREATE: &str =
    r#"mailproof_http_requests_total{method="POST",route="/{version}/email/tests",status="200"}"#;
const RENDER_WAITING: &str = r#"mailproof_queue_waiting{queue="render"}"#;
const SMTP_ACCEPTED: &str = r#"mailproof_smtp_messages_total{outcome="accepted"}"#;
const SMTP_REFUSED: &str = r#"mailproof_smtp_messages_total{outcome="refused"}"#;

#[tokio::test]
async fn metrics_move_when_tests_run_and_mail_arrives() {
    // No engines: render jobs stay queued, so the queue figures can be read exactly.
    let s =
        MailServer::start_with("[spam]\ndaemons = false\n[metrics]\ntoken = \"scrape-me\"\n").await;
    let (status, _) = scrape(&s, None).await;
    assert_eq!(status, 401, "the token is required when configured");
    let (status, before) = scrape(&s, Some("scrape-me")).await;
    assert_eq!(status, 200);
    assert!(before.ends_with("# EOF\n"), "{before}");
    assert_eq!(sample(&before, CREATE), 0.0);

    for n in 0..2 {
        s.post(
            "/v5/email/tests",
            &json!({"subject": format!("metrics {n}"), "html": "<p>hi</p>",
                    "clients": ["applemail_macos"]}),
        )
        .await
        .ok();
    }
    s.add_account("inbox-key", "enterprise", &["--auto-inbox", "metrics"]);
    let mut conn = SmtpConn::connect(s.smtp).await;
    let (code, text) = conn
        .send(
            "sender@example.org",
            &["metrics@inbox.localhost".to_owned()],
            b"From: a@example.org\r\nTo: metrics@inbox.localhost\r\nSubject: m\r\n\r\n<p>m</p>\r\n",
        )
        .await;
    assert_eq!(code, 250, "{text}");
    let (code, _) = conn.cmd("MAIL FROM:<a@example.org>").await;
    assert_eq!(code, 250);
    let (code, _) = conn.cmd("RCPT TO:<nobody@elsewhere.example>").await;
    assert!(code >= 500, "a foreign recipient is refused");

    let (_, after) = scrape(&s, Some("scrape-me")).await;
    assert_eq!(sample(&after, CREATE), 2.0, "{after}");
    assert!(
        sample(&after, RENDER_WAITING) >= 2.0,
        "both tests' jobs wait without engines:\n{after}"
    );
    assert_eq!(sample(&after, SMTP_ACCEPTED), 1.0, "{after}");
    assert_eq!(sample(&after, SMTP_REFUSED), 1.0, "{after}");
    // Ids never become labels: one series for every test's status URL.
    assert!(!after.contains("/v5/email/tests/"), "{after}");
}

/// `--log-format json` (or `MAILPROOF_LOG_FORMAT=json`): every log line is one JSON object.
#[test]
fn json_logs_are_one_object_per_line() {
    use std::io::{BufRead, BufReader};
    use std::path::Path;
    use std::process::Stdio;
    use testkit::service::Launch;

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("mailproof.toml");
    std::fs::write(&config, "[render]\nengines = []\n[spam]\ndaemons = false\n").expect("config");
    let mut child = Launch::serve(Path::new(BIN), "json logs")
        .args(["--smtp", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("MAILPROOF_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailproof");
    let stderr = child.stderr.take().expect("stderr");
    let lines: Vec<String> = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .take(3)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(!lines.is_empty(), "no log line at start-up");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
}
