//! Code analysis (`GET /v5/email/tests/<id>/codeanalysis/<client>`) and client tips
//! (`GET /v5/email/tips/<client>`) over real HTTP, with their errors.

use serde_json::{json, Value};

use crate::support::*;

/// `display:flex` on line 7.
const FLEX: &str = "<!doctype html>\n<html>\n<head>\n<title>t</title>\n</head>\n<body>\n\
<div style=\"display:flex\"><p>a</p><p>b</p></div>\n</body>\n</html>\n";

fn group<'a>(analysis: &'a Value, severity: &str) -> &'a Value {
    analysis["code_analysis"]
        .as_array()
        .expect("code_analysis array")
        .iter()
        .map(|g| &g["severity"])
        .find(|g| g["name"] == severity)
        .unwrap_or_else(|| panic!("no {severity} group in {analysis}"))
}

fn discrepancy<'a>(analysis: &'a Value, severity: &str, property: &str) -> Option<&'a Value> {
    group(analysis, severity)["discrepancies"]
        .as_array()
        .expect("discrepancies array")
        .iter()
        .find(|d| d["property"] == property)
}

async fn create(s: &Server, html: &str, clients: &[&str]) -> String {
    let r = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "analysis", "html": html, "clients": clients}),
        )
        .await;
    r.ok()["id"].as_str().expect("test id").to_string()
}

#[tokio::test]
async fn code_analysis_and_tips_over_http() {
    let s = Server::start().await;
    let id = create(&s, FLEX, &["outlook2021_win", "applemail_macos"]).await;

    let win = s
        .get(&format!(
            "/v5/email/tests/{id}/codeanalysis/outlook2021_win"
        ))
        .await;
    let win = win.ok();
    let flex = discrepancy(win, "error", "display:flex")
        .unwrap_or_else(|| panic!("display:flex error in {win}"));
    assert_eq!(flex["lines"], json!([7]));
    assert!(flex["message"].as_str().is_some_and(|m| !m.is_empty()));
    let errors = group(win, "error");
    assert_eq!(
        errors["discrepancy_count"].as_u64(),
        Some(
            errors["discrepancies"]
                .as_array()
                .map_or(0, |a| a.len() as u64)
        )
    );
    let names: Vec<&Value> = win["code_analysis"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| &g["severity"]["name"])
        .collect();
    assert_eq!(names, vec!["error", "warning", "info"]);

    let apple = s
        .get(&format!(
            "/v5/email/tests/{id}/codeanalysis/applemail_macos"
        ))
        .await;
    let apple = apple.ok();
    assert!(
        discrepancy(apple, "error", "display:flex").is_none()
            && discrepancy(apple, "warning", "display:flex").is_none(),
        "{apple}"
    );
    assert_eq!(group(apple, "error")["discrepancy_count"], 0, "{apple}");

    // Upper case and surrounding spaces in the client id are accepted, as for results.
    s.get(&format!(
        "/v5/email/tests/{id}/codeanalysis/OUTLOOK2021_WIN"
    ))
    .await
    .ok();

    // Errors: a client not in the test, an unknown test, another account's test.
    s.get(&format!("/v5/email/tests/{id}/codeanalysis/gmail_android"))
        .await
        .expect_error("ClientNotFound", 404);
    s.get("/v5/email/tests/0123456789abcdef0123456789abcdef/codeanalysis/outlook2021_win")
        .await
        .expect_error("InvalidTestID", 404);
    s.add_account("other", "enterprise", &[]);
    s.call(
        "GET",
        &format!("/v5/email/tests/{id}/codeanalysis/outlook2021_win"),
        Some(("other", "password-1")),
        None,
    )
    .await
    .expect_error("InvalidTestID", 404);

    // Tips.
    let tips = s.get("/v5/email/tips/outlook2021_win").await;
    let tips = tips.ok();
    assert_eq!(tips["client"], "outlook2021_win");
    let list = tips["tips"].as_array().expect("tips array");
    assert!(!list.is_empty() && list.len() <= 10, "{tips}");
    assert!(
        list.iter().any(|t| t["name"] == "max-width"
            && t["tip"]
                .as_str()
                .is_some_and(|x| x.contains("<!--[if mso]>"))),
        "{tips}"
    );
    assert!(list
        .iter()
        .all(|t| t["name"].is_string() && t["tip"].is_string()));
    let apple_tips = s.get("/v5/email/tips/applemail_macos").await;
    assert!(
        apple_tips.ok()["tips"]
            .as_array()
            .expect("tips")
            .iter()
            .all(|t| t["name"] != "max-width"),
        "{}",
        apple_tips.ok()
    );
    s.get("/v5/email/tips/no_such_client")
        .await
        .expect_error("InvalidClient", 400);
    s.call("GET", "/v5/email/tips/outlook2021_win", None, None)
        .await
        .expect_error("AccessDenied", 401);
    // The client id is required; a restricted plan hears only about its own clients.
    s.get("/v5/email/tips/").await.expect_error("NoClient", 400);
    s.get(&format!("/v5/email/tests/{id}/codeanalysis/"))
        .await
        .expect_error("NoClient", 400);
    s.add_account("restricted", "standard", &["--clients", "applemail_macos"]);
    s.call(
        "GET",
        "/v5/email/tips/outlook2021_win",
        Some(("restricted", "password-1")),
        None,
    )
    .await
    .expect_error("InvalidClient", 400);
    s.call(
        "GET",
        "/v5/email/tips/applemail_macos",
        Some(("restricted", "password-1")),
        None,
    )
    .await
    .ok();
}

/// A real email of `../shared/corpus` through the API: every finding points at lines of the
/// submitted HTML, and the Word engine reports more errors than Apple Mail.
#[tokio::test]
async fn code_analysis_of_a_corpus_email() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/cerberus--hybrid.html");
    let html = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (../shared/corpus must exist)", path.display()));
    let lines = html.lines().count() as u64 + 1;
    let s = Server::start().await;
    let id = create(&s, &html, &["outlook2021_win", "applemail_macos"]).await;
    let mut errors = Vec::new();
    for client in ["outlook2021_win", "applemail_macos"] {
        let r = s
            .get(&format!("/v5/email/tests/{id}/codeanalysis/{client}"))
            .await;
        let a = r.ok();
        for g in a["code_analysis"].as_array().expect("groups") {
            for d in g["severity"]["discrepancies"].as_array().expect("list") {
                let ls = d["lines"].as_array().expect("lines");
                assert!(!ls.is_empty(), "{d}");
                assert!(
                    ls.iter()
                        .all(|l| l.as_u64().is_some_and(|l| (1..=lines).contains(&l))),
                    "{d}"
                );
            }
        }
        errors.push(group(a, "error")["discrepancy_count"].as_u64().unwrap_or(0));
    }
    assert!(
        errors[0] > errors[1],
        "Outlook {} vs Apple Mail {}",
        errors[0],
        errors[1]
    );
}

/// A documented behaviour (data/behaviours.toml) over HTTP: Gmail's analysis names the dropped
/// `<style>` block with its lines and source; Apple Mail's does not mention it.
#[tokio::test]
async fn code_analysis_names_a_clients_behaviour_with_its_lines() {
    let html = "<!doctype html>\n<html>\n<head>\n<style>\n.a { color: #111111; }\n@media screen {\n\
@font-face { font-family: X; src: local(X); }\n}\n</style>\n</head>\n<body><p class=\"a\">x</p></body>\n</html>\n";
    let s = Server::start().await;
    let clients = ["gmail_chrome_web", "applemail_macos"];
    let id = create(&s, html, &clients).await;
    let mut analyses = Vec::new();
    for client in clients {
        let path = format!("/v5/email/tests/{id}/codeanalysis/{client}");
        analyses.push(s.get(&path).await.ok().clone());
    }
    let (gmail, apple) = (&analyses[0], &analyses[1]);
    let d = discrepancy(gmail, "error", "@font-face inside @media")
        .unwrap_or_else(|| panic!("the nested at-rule is named: {gmail}"));
    assert_eq!(d["lines"], json!([4, 7]), "{d}");
    let msg = d["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("drops this whole <style> block (lines 4–9)")
            && msg.contains("gmail-style-nested-at-rule")
            && msg.contains("https://github.com/hteumeuleu/email-bugs/issues/21"),
        "{msg}"
    );
    assert!(
        discrepancy(apple, "error", "@font-face inside @media").is_none(),
        "{apple}"
    );
}
