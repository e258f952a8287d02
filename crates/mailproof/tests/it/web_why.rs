//! The web interface's "why" panel (issue 11 point 6) and visual diff page (issue 12 point 2),
//! over plain HTTP with a signed-in session and no rendering: the panel carries the same findings
//! as the code-analysis endpoint, its line links reach the source view, and the diff page says
//! when the tests share no client or are still processing. Another account's test is not found.

use serde_json::json;

use crate::support::*;

/// `display:flex` on line 7.
const FLEX: &str = "<!doctype html>\n<html>\n<head>\n<title>t</title>\n</head>\n<body>\n\
<div style=\"display:flex\"><p>a</p><p>b</p></div>\n</body>\n</html>\n";

/// A signed-in browser session, cookies kept by hand.
pub(crate) struct Session {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

impl Session {
    pub(crate) async fn sign_in(s: &Server, key: &str, password: &str) -> Session {
        let (status, cookie, _) = web_sign_in(s, None, key, password, "/tests").await;
        assert!((300..400).contains(&status), "sign-in: {status}");
        Session {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("http client"),
            base: s.base.clone(),
            cookie: cookie.expect("session cookie"),
        }
    }

    pub(crate) async fn page(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await
            .expect("page");
        let status = r.status().as_u16();
        (status, r.text().await.expect("page text"))
    }

    /// Posts a form; the status and the `Location` it redirects to.
    pub(crate) async fn post(&self, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .form(fields)
            .send()
            .await
            .expect("form post");
        let location = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (r.status().as_u16(), location)
    }
}

/// The CSRF token the page's forms carry.
fn csrf(page: &str) -> String {
    const FIELD: &str = "name=\"csrf\" value=\"";
    let at = page.find(FIELD).expect("a form with a CSRF token") + FIELD.len();
    page[at..].split('"').next().unwrap_or_default().to_string()
}

async fn create(s: &Server, subject: &str, html: &str, clients: &[&str]) -> String {
    s.post(
        "/v5/email/tests",
        &json!({"subject": subject, "html": html, "clients": clients}),
    )
    .await
    .ok()["id"]
        .as_str()
        .expect("test id")
        .to_string()
}

/// The `<li>` of the finding for `property` in the panel's `severity` section, if any.
fn finding<'a>(page: &'a str, severity: &str, property: &str) -> Option<&'a str> {
    let start = page.find(&format!("data-severity=\"{severity}\""))?;
    let section = &page[start..];
    let section = &section[..section.find("</section>")?];
    let at = section.find(&format!("data-property=\"{property}\""))?;
    let li = &section[at..];
    Some(&li[..li.find("</li>")?])
}

#[tokio::test]
async fn the_why_panel_and_the_diff_page_over_http() {
    let s = Server::start().await;
    s.add_account("intruder", "enterprise", &[]);
    let id = create(
        &s,
        "Newsletter",
        FLEX,
        &["outlook2021_win", "applemail_macos"],
    )
    .await;
    let web = Session::sign_in(&s, ADMIN_KEY, ADMIN_PASS).await;

    // Outlook for Windows drops display:flex on line 7, and the panel links to that line.
    let (status, win) = web
        .page(&format!("/tests/{id}/clients/outlook2021_win"))
        .await;
    assert_eq!(status, 200, "{win}");
    assert!(win.contains("aside class=\"why\""), "{win}");
    let flex = finding(&win, "error", "display:flex")
        .unwrap_or_else(|| panic!("no display:flex error in the panel: {win}"));
    assert!(
        flex.contains(&format!("href=\"/tests/{id}/content?view=source#L7\"")),
        "{flex}"
    );
    assert!(
        flex.contains("Line <a") && !flex.contains("Lines"),
        "{flex}"
    );
    // The same finding the API answers, message included.
    let api = s
        .get(&format!(
            "/v5/email/tests/{id}/codeanalysis/outlook2021_win"
        ))
        .await;
    let message = api.ok()["code_analysis"][0]["severity"]["discrepancies"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["property"] == "display:flex"))
        .and_then(|d| d["message"].as_str())
        .expect("the API's display:flex message")
        .to_string();
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    assert!(flex.contains(&escaped), "{flex} lacks {message}");
    let tips = s.get("/v5/email/tips/outlook2021_win").await;
    let first_tip = tips.ok()["tips"][0]["name"]
        .as_str()
        .expect("a tip")
        .to_string();
    assert!(
        win.contains("Tips for this client") && win.contains(&first_tip),
        "{win}"
    );

    // Apple Mail draws flex: nothing about it there.
    let (status, apple) = web
        .page(&format!("/tests/{id}/clients/applemail_macos"))
        .await;
    assert_eq!(status, 200);
    assert!(apple.contains("aside class=\"why\""), "{apple}");
    assert!(!apple.contains("data-property=\"display:flex\""), "{apple}");

    // The line link's target: line 7 of the source view, with its code.
    let (status, source) = web.page(&format!("/tests/{id}/content?view=source")).await;
    assert_eq!(status, 200);
    let l7 = &source[source.find("id=\"L7\"").expect("an anchor for line 7")..];
    let l7 = &l7[..l7.find("</span>\n").map_or(l7.len(), |e| e + 7)];
    assert!(l7.contains("display:flex"), "{l7}");

    // A test of other clients, still waiting to render (this server has no engines): the diff
    // page says both things, and the picker offers the earlier test of the same subject.
    let other = create(&s, "Newsletter", "<p>other</p>", &["gmail_chrome_web"]).await;
    let (status, picker) = web.page(&format!("/tests/{other}")).await;
    assert_eq!(status, 200);
    assert!(
        picker.contains(&format!("<option value=\"{id}\" selected>Newsletter")),
        "the previous test of the same subject is preselected: {picker}"
    );
    let (status, none) = web.page(&format!("/tests/{other}/diff?with={id}")).await;
    assert_eq!(status, 200, "{none}");
    assert!(none.contains("no client in common"), "{none}");
    assert!(
        none.contains("Apple Mail (macOS)"),
        "the clients are named: {none}"
    );
    assert!(none.contains("is still processing"), "{none}");
    let (status, same) = web.page(&format!("/tests/{id}/diff?with={id}")).await;
    assert_eq!(status, 200);
    assert!(same.contains("data-state=\"not-compared\""), "{same}");
    assert_eq!(same.matches("is still processing").count(), 1, "{same}");

    // Another account's test is not found, in either place, and its panel too.
    let theirs = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(("intruder", "password-1")),
            Some(&json!({"subject": "x", "html": FLEX, "clients": ["outlook2021_win"]})),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    for path in [
        format!("/tests/{theirs}/diff?with={id}"),
        format!("/tests/{id}/diff?with={theirs}"),
        format!("/tests/{theirs}/clients/outlook2021_win"),
    ] {
        let (status, body) = web.page(&path).await;
        assert_eq!(status, 404, "{path}");
        assert!(body.contains("Test not found"), "{path}: {body}");
    }
}

/// A link to a loopback address (refused by the network policy, never contacted) on line 3 and
/// an image without `alt` on line 4.
const LINKS: &str =
    "<!doctype html>\n<html><body>\n<p><a href=\"http://127.0.0.1:9/offer\">Offer</a></p>\n\
<img src=\"http://127.0.0.1:9/logo.png\">\n</body></html>\n";

#[tokio::test]
async fn the_link_check_from_the_web_pages() {
    let s = Server::start().await;
    let id = create(&s, "Links", LINKS, &["gmail_chrome_web"]).await;
    let web = Session::sign_in(&s, ADMIN_KEY, ADMIN_PASS).await;

    let (status, test_page) = web.page(&format!("/tests/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        test_page.contains(&format!("href=\"/tests/{id}/links\"")),
        "a Links tab"
    );
    let (status, before) = web.page(&format!("/tests/{id}/links")).await;
    assert_eq!(status, 200);
    assert!(before.contains("have not been checked yet"), "{before}");

    // Starting the check is a form post with the session's CSRF token.
    let (status, _) = web.post(&format!("/tests/{id}/links"), &[]).await;
    assert_eq!(status, 403, "no token, no check");
    let (status, _) = web.page(&format!("/tests/{id}/links")).await;
    assert_eq!(status, 200);
    let token = csrf(&before);
    let (status, location) = web
        .post(&format!("/tests/{id}/links"), &[("csrf", token.as_str())])
        .await;
    assert!((300..400).contains(&status), "{status}");
    assert_eq!(location, format!("/tests/{id}/links"));

    let start = std::time::Instant::now();
    let report = loop {
        let (_, p) = web.page(&location).await;
        if !p.contains("data-reload-after") {
            break p;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the link check did not finish: {p}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    // The same report as the API's, row by row.
    let api = s.get(&format!("/v5/email/tests/{id}/links")).await;
    let links = api.ok()["links"].as_array().expect("links").clone();
    assert_eq!(links.len(), 2, "{links:?}");
    let rows: Vec<&str> = report.split("<tr data-state=").skip(1).collect();
    assert_eq!(rows.len(), 2, "{report}");
    let offer = rows[0];
    assert!(offer.starts_with("\"error\""), "{offer}");
    assert!(offer.contains("content?view=source#L3\""), "{offer}");
    let error = links[0]["error"]
        .as_str()
        .expect("the loopback link's error");
    assert!(
        offer.contains(&error.replace('"', "&quot;")),
        "{offer} lacks {error}"
    );
    let logo = rows[1];
    assert!(logo.contains("#L4\"") && logo.contains("Image"), "{logo}");
    assert!(logo.contains("no alt attribute"), "{logo}");
    // The blocklists' own sentence: what was looked up, or why nothing was.
    let uribl = api.ok()["uribl_status"]
        .as_str()
        .expect("uribl_status")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    assert!(
        report.contains("URI blocklists") && report.contains(&uribl),
        "{report} lacks {uribl}"
    );

    // Not another account's test.
    s.add_account("intruder", "enterprise", &[]);
    let other = Session::sign_in(&s, "intruder", "password-1").await;
    let (status, _) = other.page(&format!("/tests/{id}/links")).await;
    assert_eq!(status, 404);
}

/// No `lang` (line 2), an image without `alt` on line 4, "click here" on line 5; the server has no
/// engines, so contrast is said to be not judged rather than passed.
const CHECKS: &str = "<!doctype html>\n<html>\n<head><title>Checks</title></head><body>\n\
<img src=\"cid:logo\">\n<p><a href=\"https://example.com/\">click here</a></p>\n</body></html>\n";

#[tokio::test]
async fn the_content_checks_from_the_web_pages() {
    let s = Server::start().await;
    let id = create(&s, "Checks", CHECKS, &["gmail_chrome_web"]).await;
    let web = Session::sign_in(&s, ADMIN_KEY, ADMIN_PASS).await;
    s.add_account("intruder", "enterprise", &[]);

    let (status, test_page) = web.page(&format!("/tests/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        test_page.contains(&format!("href=\"/tests/{id}/checks\"")),
        "the test page links its checks: {test_page}"
    );
    let (_, panel) = web
        .page(&format!("/tests/{id}/clients/gmail_chrome_web"))
        .await;
    assert!(
        panel.contains(&format!("href=\"/tests/{id}/checks\"")),
        "the why panel points to the checks: {panel}"
    );

    // The page shows what the API answers, finding by finding, with line links.
    let api = loop {
        let body = s
            .get(&format!("/v5/email/tests/{id}/checks"))
            .await
            .ok()
            .clone();
        if body["status"] == "complete" {
            break body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let (status, page) = web.page(&format!("/tests/{id}/checks")).await;
    assert_eq!(status, 200, "{page}");
    let findings = api["checks"].as_array().expect("checks");
    assert!(findings.len() >= 3, "{api}");
    for f in findings {
        let message = f["message"].as_str().expect("message");
        let escaped = message
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;");
        assert!(page.contains(&escaped), "{page} lacks {message}");
        if let Some(line) = f["line"].as_u64() {
            assert!(
                page.contains(&format!("content?view=source#L{line}\"")),
                "line {line} of {message} is linked: {page}"
            );
        }
    }
    for (id_, line) in [("lang", None), ("img-alt", Some(4)), ("link-text", Some(5))] {
        let found = findings.iter().find(|f| {
            f["id"].as_str().is_some_and(|i| i.starts_with(id_))
                && (line.is_none() || f["line"].as_u64() == line)
        });
        assert!(found.is_some(), "no {id_} finding in {api}");
    }

    // Another account's test is not found.
    let theirs = s
        .call(
            "POST",
            "/v5/email/tests",
            Some(("intruder", "password-1")),
            Some(&json!({"subject": "x", "html": CHECKS, "clients": ["gmail_chrome_web"]})),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (status, _) = web.page(&format!("/tests/{theirs}/checks")).await;
    assert_eq!(status, 404);
}
