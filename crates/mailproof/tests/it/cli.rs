//! Issue 12 points 3–4: `mailproof check`, the real binary against a running service with one
//! engine (Blink) and two clients. An unchanged email passes against its own baseline (a test on
//! the server, or a report.json from an earlier run); one element's colour changed fails with
//! exit 1 naming both clients; the JUnit report parses; credentials come only from the
//! environment, and their absence or rejection is exit 2 with the variables named.

use std::path::Path;
use std::process::Output;

use quick_xml::events::Event;
use serde_json::Value;

use crate::support::*;

const CLIENTS: &str = "gmail_chrome_web,yahoo_chrome_web";

fn email(block_colour: &str) -> String {
    format!(
        "<!doctype html><html><head><title>CLI check</title></head>\
         <body style=\"margin:0;background:#ffffff\">\
         <table width=\"100%\" cellpadding=\"0\" cellspacing=\"0\"><tr><td style=\"padding:20px;font-family:Arial\">\
         <h1 style=\"color:#222222\">CI check</h1>\
         <div style=\"width:300px;height:120px;background-color:{block_colour}\">&nbsp;</div>\
         <p style=\"color:#444444\">Some text below the block.</p></td></tr></table></body></html>"
    )
}

/// Runs `mailproof check <args>` with the given credentials (none: the variables are removed).
async fn check(creds: Option<(&str, &str)>, args: &[&str]) -> Output {
    check_env(creds, &[], args).await
}

async fn check_env(creds: Option<(&str, &str)>, env: &[(&str, String)], args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.arg("check")
        .args(args)
        .env_remove("MAILPROOF_API_KEY")
        .env_remove("MAILPROOF_PASSWORD")
        .env("RUST_LOG", "warn");
    if let Some((k, p)) = creds {
        cmd.env("MAILPROOF_API_KEY", k).env("MAILPROOF_PASSWORD", p);
    }
    cmd.output().await.expect("run mailproof check")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[track_caller]
fn expect_code(o: &Output, code: i32) -> (String, String) {
    let (out, err) = text(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit code\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    (out, err)
}

/// (testcase name, failure messages) of every testcase; panics unless the XML is well-formed.
fn junit_cases(xml: &str) -> Vec<(String, Vec<String>)> {
    let mut r = quick_xml::Reader::from_str(xml);
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    loop {
        match r.read_event().expect("well-formed JUnit XML") {
            Event::Eof => return cases,
            Event::Start(e) | Event::Empty(e) => {
                let attr = |k: &str| {
                    e.try_get_attribute(k)
                        .expect("attribute")
                        .map(|a| a.unescape_value().expect("value").into_owned())
                        .unwrap_or_default()
                };
                match e.name().as_ref() {
                    b"testcase" => cases.push((attr("name"), Vec::new())),
                    b"failure" => cases
                        .last_mut()
                        .expect("failure inside a testcase")
                        .1
                        .push(attr("message")),
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write the email");
    p.display().to_string()
}

#[tokio::test]
async fn an_unchanged_email_passes_and_a_recoloured_block_fails_naming_each_client() {
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    let work = tempfile::tempdir().expect("dir");
    let same = write(work.path(), "same.html", &email("#3366cc"));
    let changed = write(work.path(), "changed.html", &email("#cc3333"));
    let creds = Some((ADMIN_KEY, ADMIN_PASS));
    let base_dir = work.path().join("baseline");
    let base_dir_s = base_dir.display().to_string();
    let common = [
        "--server",
        s.base.as_str(),
        "--clients",
        CLIENTS,
        "--timeout",
        "4m",
    ];

    // The baseline run: nothing to compare with, so it passes; its report and PNGs stay in --out.
    let o = check(
        creds,
        &[
            &[same.as_str(), "--out", &base_dir_s, "--format", "json"][..],
            &common[..],
        ]
        .concat(),
    )
    .await;
    let (out, _) = expect_code(&o, 0);
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    let base_id = report["test_id"].as_str().expect("test_id").to_string();
    let saved: Value = serde_json::from_slice(
        &std::fs::read(base_dir.join("report.json")).expect("report.json in --out"),
    )
    .expect("report.json is JSON");
    assert_eq!(saved["test_id"], base_id.as_str());
    for c in report["clients"].as_array().expect("clients") {
        assert_eq!(c["status"], "Complete", "{c}");
        let png = base_dir.join(c["screenshots"]["default"].as_str().expect("a PNG path"));
        let bytes = std::fs::read(&png).expect("the downloaded screenshot");
        image::load_from_memory(&bytes).expect("a PNG");
    }

    // The same email against the server-side baseline: exit 0.
    let o = check(
        creds,
        &[
            &[same.as_str(), "--baseline", &base_id, "--max-diff", "0.1%"][..],
            &common[..],
        ]
        .concat(),
    )
    .await;
    let (out, _) = expect_code(&o, 0);
    assert!(out.contains("result: passed"), "{out}");
    assert!(
        out.contains("gmail_chrome_web") && out.contains("yahoo_chrome_web"),
        "{out}"
    );

    // The recoloured block against it: exit 1, each client named with its change and the limit;
    // the JUnit report parses and fails both testcases.
    let o = check(
        creds,
        &[
            &[
                changed.as_str(),
                "--baseline",
                &base_id,
                "--format",
                "junit",
            ][..],
            &common[..],
        ]
        .concat(),
    )
    .await;
    let (xml, err) = expect_code(&o, 1);
    for client in CLIENTS.split(',') {
        assert!(
            err.contains(&format!("{client}: default changed")) && err.contains("(limit 0.1%)"),
            "stderr names {client}: {err}"
        );
    }
    let cases = junit_cases(&xml);
    assert_eq!(cases.len(), 2, "{xml}");
    for (name, failures) in &cases {
        assert_eq!(failures.len(), 1, "{name}: {xml}");
        assert!(
            failures[0].starts_with(&format!("{name}: default changed")),
            "{xml}"
        );
    }

    // The same two, compared here against the saved report instead of by the server.
    let o = check(
        creds,
        &[
            &[
                same.as_str(),
                "--baseline-file",
                &format!("{base_dir_s}/report.json"),
            ][..],
            &common[..],
        ]
        .concat(),
    )
    .await;
    let (out, _) = expect_code(&o, 0);
    assert!(
        out.contains(&format!("baseline: test {base_id} (from ")),
        "{out}"
    );
    let new_dir = work.path().join("new");
    let o = check(
        creds,
        &[
            &[
                changed.as_str(),
                "--baseline-file",
                &format!("{base_dir_s}/report.json"),
                "--out",
                &new_dir.display().to_string(),
            ][..],
            &common[..],
        ]
        .concat(),
    )
    .await;
    let (out, _) = expect_code(&o, 1);
    for client in CLIENTS.split(',') {
        assert!(out.contains(&format!("CHANGED  {client}")), "{out}");
        assert!(
            out.contains(&format!("  - {client}: default changed")),
            "{out}"
        );
    }
    // The highlight images are kept beside the new screenshots.
    let new_report: Value =
        serde_json::from_slice(&std::fs::read(new_dir.join("report.json")).expect("report.json"))
            .expect("JSON");
    for c in new_report["clients"].as_array().expect("clients") {
        let hl = c["comparison"]["variants"][0]["highlight"]
            .as_str()
            .expect("highlight path");
        assert!(new_dir.join(hl).is_file(), "{hl}");
    }
}

#[tokio::test]
async fn credentials_come_only_from_the_environment_and_are_named_when_missing_or_refused() {
    let s = Server::start().await;
    let work = tempfile::tempdir().expect("dir");
    let email = write(work.path(), "e.html", &email("#3366cc"));
    let o = check(None, &[email.as_str(), "--server", s.base.as_str()]).await;
    let (_, err) = expect_code(&o, 2);
    assert!(
        err.contains("MAILPROOF_API_KEY and MAILPROOF_PASSWORD not set"),
        "{err}"
    );
    let o = check(
        Some((ADMIN_KEY, "wrong")),
        &[email.as_str(), "--server", s.base.as_str()],
    )
    .await;
    let (_, err) = expect_code(&o, 2);
    assert!(
        err.contains("refused the credentials in MAILPROOF_API_KEY / MAILPROOF_PASSWORD"),
        "{err}"
    );
    // There is no flag to pass them by.
    let o = check(
        None,
        &[
            email.as_str(),
            "--server",
            s.base.as_str(),
            "--password",
            "x",
        ],
    )
    .await;
    let (_, err) = expect_code(&o, 2);
    assert!(err.contains("unexpected argument '--password'"), "{err}");
    // A baseline that is not a test of this account is found before a test is spent.
    let o = check(
        Some((ADMIN_KEY, ADMIN_PASS)),
        &[
            email.as_str(),
            "--server",
            s.base.as_str(),
            "--baseline",
            "00000000000000000000000000",
        ],
    )
    .await;
    let (_, err) = expect_code(&o, 2);
    assert!(
        err.contains("looking up the baseline test") && err.contains("InvalidTestID"),
        "{err}"
    );
    let listed = s.get("/v5/email/tests").await.ok().clone();
    assert_eq!(listed, serde_json::json!([]), "no test was created");
    // This server has no engines, so the screenshot never comes: the timeout names what waits.
    let o = check(
        Some((ADMIN_KEY, ADMIN_PASS)),
        &[
            email.as_str(),
            "--server",
            s.base.as_str(),
            "--clients",
            "gmail_chrome_web",
            "--timeout",
            "2s",
        ],
    )
    .await;
    let (_, err) = expect_code(&o, 2);
    assert!(
        err.contains("did not finish within --timeout 2s: still processing gmail_chrome_web"),
        "{err}"
    );
}

const CLEAN_HTML: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Acme monthly: what we shipped in November</title></head>
<body style="font-family:Arial,sans-serif;color:#222">
<table width="600" cellpadding="0" cellspacing="0" align="center"><tr><td>
<h1>November at Acme</h1>
<p>Hello Jane,</p>
<p>This month the team finished the new reporting screens you asked about in the spring survey.
Reports now load faster, can be shared with colleagues, and keep their filters when you come back.</p>
<p>We also fixed the calendar export that some of you reported, and the mobile app remembers your
last project again.</p>
<p>Thanks for reading, and see you next month.</p>
<p>Maria from the Acme product team</p>
</td></tr></table></body></html>
"#;

const SPAM_HTML: &str = r##"<html><head><title>FREE VIAGRA!!! 100% GUARANTEED $$$ CASH NOW</title></head><body bgcolor="#ff0000">
<p><b><font size="7">BUY VIAGRA AND CIALIS ONLINE - NO PRESCRIPTION NEEDED!!!</font></b></p>
<p>Dear friend, you have been selected as the WINNER of $1,000,000 US DOLLARS in our lottery!!!
100% GUARANTEED, RISK FREE, act now! Limited time offer, click below to claim your prize money.</p>
<p><a href="http://203.0.113.7/claim.php?id=1">CLICK HERE TO CLAIM YOUR CASH $$$</a></p>
<p>Cheap VIAGRA, CIALIS, LEVITRA, XANAX and VALIUM at the lowest prices from our online pharmacy.
No doctor visit, no prescription, discreet shipping worldwide! Enlarge your penis today, 100%
satisfaction guaranteed or your money back!!!</p>
<p>Make money fast working from home!!! Earn $5000 per week, no experience needed. This is not spam,
you signed up for this offer. To be removed from our list click <a href="http://203.0.113.7/remove">here</a>.</p>
<p><a href="http://203.0.113.7/buy">ORDER NOW</a> <a href="http://203.0.113.7/buy">ORDER NOW</a></p>
</body></html>
"##;

#[tokio::test]
async fn a_seed_spam_test_is_sent_from_here_and_a_spam_verdict_fails_the_check_naming_the_filter() {
    let work = tempfile::tempdir().expect("dir");
    // The listener offers STARTTLS, which the CLI's plain send does not use.
    let s = MailServer::start_with(&format!(
        "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n{}",
        starttls_keys(work.path())
    ))
    .await;
    let clean = write(work.path(), "clean.html", CLEAN_HTML);
    let spammy = write(work.path(), "spammy.html", SPAM_HTML);
    let env = [
        ("MAILPROOF_SMTP_HOST", s.smtp.ip().to_string()),
        ("MAILPROOF_SMTP_PORT", s.smtp.port().to_string()),
        ("MAILPROOF_SMTP_FROM", "maria@acme.example".to_string()),
    ];
    let creds = Some((ADMIN_KEY, ADMIN_PASS));
    let common = [
        "--server",
        s.base.as_str(),
        "--clients",
        "gmail_chrome_web",
        "--spam",
        "seed",
        "--format",
        "junit",
        "--timeout",
        "4m",
    ];
    // Mail sent from here reaches the service without TLS, which Gmail rejects: the sender
    // requirements only warn in the first runs, so that the verdicts alone decide them.
    let warn = ["--requirements", "warn"];

    let o = check_env(
        creds,
        &env,
        &[&[spammy.as_str()][..], &common[..], &warn[..]].concat(),
    )
    .await;
    let (xml, err) = expect_code(&o, 1);
    let cases = junit_cases(&xml);
    let spam_failures: Vec<&String> = cases.iter().flat_map(|(_, f)| f).collect();
    assert!(
        !spam_failures.is_empty()
            && spam_failures
                .iter()
                .all(|f| f.starts_with("spam filter ") && f.contains("marked the email as spam")),
        "only spam verdicts fail: {xml}"
    );
    assert!(err.contains("marked the email as spam"), "{err}");
    // The filters' test cases follow the client's: one per filter, each with a verdict.
    assert!(cases.len() >= 3, "a client and the filters: {xml}");

    let o = check_env(
        creds,
        &env,
        &[&[clean.as_str()][..], &common[..], &warn[..]].concat(),
    )
    .await;
    let (xml, _) = expect_code(&o, 0);
    assert_eq!(junit_cases(&xml).len(), cases.len(), "{xml}");
    assert!(
        xml.contains(r#"<testsuite name="mailproof.requirements""#),
        "the providers' cards are test cases too: {xml}"
    );

    // By default a provider that would reject the email fails the check, named in JUnit with
    // the rule, what was seen and the fix.
    let o = check_env(creds, &env, &[&[clean.as_str()][..], &common[..]].concat()).await;
    let (xml, err) = expect_code(&o, 1);
    let failures: Vec<String> = junit_cases(&xml).into_iter().flat_map(|(_, f)| f).collect();
    assert!(
        failures.iter().any(|f| f
            .starts_with("Gmail would reject it: The message was sent over TLS: received from")
            && f.contains("Fix: Enable STARTTLS")),
        "{xml}"
    );
    assert!(
        failures.iter().all(|f| f.contains(" would reject it: ")),
        "only the requirements fail the clean email: {xml}"
    );
    assert!(err.contains("Gmail would reject it"), "{err}");

    // Without an SMTP server to send through, seed is refused before a test is created.
    let o = check(creds, &[&[clean.as_str()][..], &common[..]].concat()).await;
    let (_, err) = expect_code(&o, 2);
    assert!(err.contains("MAILPROOF_SMTP_HOST"), "{err}");
}
