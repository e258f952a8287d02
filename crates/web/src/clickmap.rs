//! A campaign's click map: clicks per tracked link, placed at the links' boxes on mailproof's own
//! screenshot of the campaign's click-tracking HTML.
//!
//! "Draw the click map" creates two email tests through the API's own test creation, both in
//! [`CLIENT`]: the HTML as sent, and the same HTML with each tracked link painted in a colour of
//! its own (`analytics::clickmap::boxes_html`, inline styles that change no box). Both are drawn
//! by the render workers like any test; the painted screenshot's pixels give each link's box, and
//! the counts are drawn over the plain screenshot. The tests are found again by their subjects.

use std::collections::BTreeMap;

use analytics::clickmap::{boxes_html, find_boxes, LinkBox};
use app::screenshots as shots;
use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use domain::{Picture, ScreenshotStatus, TestKind, Variant};
use maud::{html, Markup};
use serde::Deserialize;
use store::{CampaignRow, ListFilter};

use crate::session::Viewer;
use crate::{app_error, internal, WebState};

/// The profile both pictures are drawn in: a Chromium webmail whose emulation keeps inline
/// styles, `object-position` and `visibility` (data/rules/hey-desktop-webmail.toml), so the
/// painted copy lays out exactly as the plain one.
pub const CLIENT: &str = "hey_chrome_web";

/// The picture the click map is drawn over.
const DEFAULT_SHOT: Picture = Picture::Shot(Variant::Default);

/// The subjects of a click map's two tests start with these: the tests list and the diff
/// picker leave them out, as they are the page's own, not the person's.
pub(crate) const HELPER_SUBJECT_PREFIXES: [&str; 2] = ["Click map: ", "Click map boxes: "];

fn plain_subject(guid: &str) -> String {
    format!("{}{guid}", HELPER_SUBJECT_PREFIXES[0])
}

fn boxes_subject(guid: &str) -> String {
    format!("{}{guid}", HELPER_SUBJECT_PREFIXES[1])
}

/// What a list of the person's tests leaves out.
pub(crate) fn helper_prefixes() -> Vec<String> {
    HELPER_SUBJECT_PREFIXES
        .iter()
        .map(|p| p.to_string())
        .collect()
}

#[derive(Deserialize)]
pub struct DrawForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /campaigns/<guid>/clickmap`: creates the two tests, back to the campaign's page.
pub async fn draw(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(guid): Path<String>,
    Form(f): Form<DrawForm>,
) -> Response {
    if let Err(refused) = viewer.check_csrf(&f.csrf) {
        return refused;
    }
    let row = match crate::campaigns::owned(&state, &viewer, &guid).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let Some(html) = row.campaign.click_html.clone() else {
        return Redirect::to(&format!("/campaigns/{guid}")).into_response();
    };
    let painted = match boxes_html(&html) {
        Ok(p) => p,
        Err(e) => return internal("painting the campaign's links failed", e),
    };
    for (subject, html) in [
        (plain_subject(&guid), html),
        (boxes_subject(&guid), painted),
    ] {
        let req = app::create::TestRequest {
            subject: Some(subject),
            html: Some(html),
            clients: vec![CLIENT.to_string()],
            ..app::create::TestRequest::default()
        };
        let created =
            app::create::create_test(&state.app, &viewer.caller, TestKind::Email, req).await;
        if let Err(e) = created {
            return app_error(&e);
        }
    }
    Redirect::to(&format!("/campaigns/{guid}#clickmap-h")).into_response()
}

/// The newest test of the account with exactly `subject`, and its screenshot's status.
async fn test_for(
    state: &WebState,
    account: i64,
    subject: &str,
) -> Result<Option<(String, ScreenshotStatus)>, Response> {
    let filter = ListFilter {
        subject: Some(subject.to_string()),
        limit: 10,
        ..ListFilter::default()
    };
    let rows = state
        .app
        .store
        .list_tests(account, &filter)
        .await
        .map_err(|e| internal("listing the click map's tests failed", e))?;
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let summaries = state
        .app
        .store
        .test_summaries(account, &ids)
        .await
        .map_err(|e| internal("reading the click map's tests failed", e))?;
    // Newest first; the subject filter is "contains", so the exact subject is checked here.
    let Some(id) = ids
        .into_iter()
        .find(|id| summaries.get(id).is_some_and(|s| s.subject == subject))
    else {
        return Ok(None);
    };
    let clients = state
        .app
        .store
        .test_clients(&id)
        .await
        .map_err(|e| internal("reading the click map's screenshot failed", e))?;
    let status = clients
        .iter()
        .find(|c| c.client_id == CLIENT)
        .map_or(ScreenshotStatus::Pending, |c| c.status);
    Ok(Some((id, status)))
}

/// The painted screenshot's link boxes, and the picture's size.
async fn boxes(state: &WebState, test: &str) -> Result<(Vec<LinkBox>, u32, u32), String> {
    let key = store::screenshot_key(test, CLIENT, &DEFAULT_SHOT);
    let png = state
        .app
        .blobs
        .get(&key)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the painted screenshot is missing")?;
    let picture = image::load_from_memory_with_format(&png, image::ImageFormat::Png)
        .map_err(|e| e.to_string())?
        .to_rgb8();
    let (w, h) = picture.dimensions();
    Ok((find_boxes(picture.as_raw(), w), w, h))
}

/// `part` of `whole` clicks, as the report shows shares.
fn share_text(part: i64, whole: i64) -> String {
    crate::report::percent(part, whole)
}

fn pct(part: u32, whole: u32) -> String {
    format!("{:.3}%", f64::from(part) * 100.0 / f64::from(whole.max(1)))
}

/// The click map section of a campaign's page; `clicks` is clicks per link number.
pub async fn section(
    state: &WebState,
    viewer: &Viewer,
    row: &CampaignRow,
    clicks: &BTreeMap<u32, i64>,
) -> Result<Markup, Response> {
    let c = &row.campaign;
    let Some(account) = viewer.caller.account() else {
        return Ok(html! {});
    };
    if c.click_html.is_none() {
        return Ok(html! {
            section aria-labelledby="clickmap-h" {
                h2 #clickmap-h { "Click map" }
                p { "This campaign has no click tracking: create it with the email's HTML to track its links." }
            }
        });
    }
    let plain = test_for(state, account.id, &plain_subject(&c.guid)).await?;
    let painted = test_for(state, account.id, &boxes_subject(&c.guid)).await?;
    let now = chrono::Utc::now().timestamp();
    let total: i64 = clicks.values().sum();
    let drawing = matches!(
        (&plain, &painted),
        (Some((_, a)), Some((_, b)))
            if [a, b].iter().all(|s| **s != ScreenshotStatus::Bounced)
                && [a, b].iter().any(|s| **s != ScreenshotStatus::Complete)
    );
    let body = match (plain, painted) {
        (
            Some((plain, ScreenshotStatus::Complete)),
            Some((painted, ScreenshotStatus::Complete)),
        ) => match boxes(state, &painted).await {
            Ok((boxes, w, h)) => {
                let src = shots::url(&state.app.settings, &plain, CLIENT, &DEFAULT_SHOT, now);
                html! {
                    figure.clickmap {
                        div.clickmap-stage {
                            img src=(src) alt="The campaign's email as drawn by mailproof, with the clicks of each link over it" width=(w) height=(h);
                            @for b in &boxes {
                                @let n = clicks.get(&b.number).copied().unwrap_or(0);
                                // The badge is the link's number, as in the table below; its
                                // clicks and share of all clicks stand beside it.
                                span.click-box data-link=(b.number) data-clicks=(n)
                                    style={ "left:" (pct(b.x, w)) ";top:" (pct(b.y, h)) ";width:" (pct(b.width, w)) ";height:" (pct(b.height, h)) } {
                                    span.click-count {
                                        span.link-no { span.vh { "Link " } (b.number) }
                                        span.click-n { (n) " " @if n == 1 { "click" } @else { "clicks" } " · " (share_text(n, total)) }
                                    }
                                }
                            }
                        }
                        figcaption { "Drawn in " (crate::pages::display_name(state, CLIENT)) "; " a href={ "/tests/" (plain) } { "the test" } "." }
                    }
                }
            }
            Err(e) => html! { p.error { "The click map could not be read: " (e) } },
        },
        (Some((_, ScreenshotStatus::Bounced)), _) | (_, Some((_, ScreenshotStatus::Bounced))) => {
            html! { p.error { "mailproof could not draw the email; see the click map's tests." } }
        }
        (Some(_), Some(_)) => {
            html! { p role="status" { "The click map is being drawn; it appears here when it is ready." } }
        }
        _ => html! {
            form.inline method="post" action={ "/campaigns/" (c.guid) "/clickmap" } {
                input type="hidden" name="csrf" value=(viewer.csrf);
                button type="submit" { "Draw the click map" }
                span.help { "Draws the email in " (crate::pages::display_name(state, CLIENT)) " as a test does (two tests: the email, and its links painted to find their boxes)." }
            }
        },
    };
    Ok(html! {
        // While it is being drawn, the section updates itself.
        section #clickmap aria-labelledby="clickmap-h" data-reload-after=[drawing.then_some("2000")] {
            h2 #clickmap-h { "Click map" }
            (body)
            table.list #clicks {
                caption { "Clicks per link (people; scanners' clicks are counted apart in the report)" }
                thead { tr { th scope="col" { "Link" } th scope="col" { "URL" } th scope="col" { "Clicks" } th scope="col" { "Share" } } }
                tbody {
                    @for (i, url) in c.click_links.iter().enumerate() {
                        @let n = i as u32 + 1;
                        @let k = clicks.get(&n).copied().unwrap_or(0);
                        tr data-link=(n) { td { (n) } td.url { (url) } td.clicks { (k) } td.share { (share_text(k, total)) } }
                    }
                }
            }
        }
    })
}
