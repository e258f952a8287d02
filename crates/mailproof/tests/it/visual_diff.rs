//! Issue 12 point 2: the visual diff between two tests, on real screenshots from one engine. The
//! same email twice differs nowhere; one element's background colour changed is found as a box
//! around that element in every client; another account's test is `InvalidTestID`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// Three clients of one engine (Blink), none in dark mode, so the colours drawn are the email's.
const CLIENTS: [&str; 3] = ["gmail_chrome_web", "yahoo_chrome_web", "outlook_com_chrome"];

/// The element whose background colour test C changes, in both colours.
const BLOCK_OLD: [u8; 3] = [0x33, 0x66, 0xcc];
const BLOCK_NEW: &str = "#cc3333";

fn email(block_colour: &str) -> String {
    format!(
        "<!doctype html><html><body style=\"margin:0;background:#ffffff\">\
         <table width=\"100%\" cellpadding=\"0\" cellspacing=\"0\"><tr><td style=\"padding:20px;font-family:Arial\">\
         <h1 style=\"color:#222222\">Visual diff check</h1>\
         <p style=\"color:#444444\">Some text above the block, drawn with anti-aliasing.</p>\
         <div style=\"width:240px;height:80px;background-color:{block_colour}\">&nbsp;</div>\
         <p style=\"color:#444444\">Some text below the block.</p></td></tr></table></body></html>"
    )
}

async fn create(s: &Server, html: &str) -> String {
    let body = json!({"subject": "Diff", "html": html, "clients": CLIENTS});
    s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string()
}

async fn wait_complete(s: &Server, id: &str, limit: Duration) {
    let info = s.wait_processed(id, limit).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        CLIENTS.len(),
        "every client completes: {info}"
    );
}

async fn fetch_png(s: &Server, url: &str) -> image::RgbImage {
    let r = s.http.get(url).send().await.expect("get image");
    assert_eq!(r.status(), 200, "{url}");
    let bytes = r.bytes().await.expect("bytes");
    image::load_from_memory(&bytes)
        .expect("a valid PNG")
        .to_rgb8()
}

/// The bounding box (x0, y0, x1, y1 inclusive) of the pixels of `colour` in a screenshot.
fn find(img: &image::RgbImage, colour: [u8; 3]) -> (u32, u32, u32, u32) {
    let mut b: Option<(u32, u32, u32, u32)> = None;
    for (x, y, p) in img.enumerate_pixels() {
        if (0..3).all(|i| p.0[i].abs_diff(colour[i]) <= 6) {
            b = Some(match b {
                None => (x, y, x, y),
                Some((a, c, d, e)) => (a.min(x), c.min(y), d.max(x), e.max(y)),
            });
        }
    }
    b.expect("the block's colour is in the screenshot")
}

async fn diff(s: &Server, a: &str, b: &str) -> Value {
    s.get(&format!("/v5/email/tests/{a}/diff/{b}"))
        .await
        .ok()
        .clone()
}

#[tokio::test]
async fn the_same_email_does_not_differ_and_a_recoloured_block_is_found_in_every_client() {
    let s = Server::start_with(Options {
        config: "[render]\nengines = [\"blink\"]\nslots_per_engine = 1\n".into(),
    })
    .await;
    s.add_account("intruder", "enterprise", &[]);
    let a = create(&s, &email("#3366cc")).await;
    let b = create(&s, &email("#3366cc")).await;
    let c = create(&s, &email(BLOCK_NEW)).await;
    for id in [&a, &b, &c] {
        wait_complete(&s, id, Duration::from_secs(120)).await;
    }

    let same = diff(&s, &a, &b).await;
    assert_eq!(same["test_id"], a.as_str());
    assert_eq!(same["other_test_id"], b.as_str());
    for client in CLIENTS {
        let d = &same["clients"][client];
        assert_eq!(d["status"], "Compared", "{client}: {d}");
        let v = &d["variants"]["default"];
        assert_eq!(v["changed_pixels"], 0, "{client}: {v}");
        assert_eq!(v["changed_share"], 0.0, "{client}: {v}");
        assert_eq!(v["boxes"], json!([]), "{client}: {v}");
        assert_eq!(v["extra_height"], 0, "{client}: {v}");
    }

    let results = s
        .get(&format!("/v5/email/tests/{a}/results"))
        .await
        .ok()
        .clone();
    let changed = diff(&s, &a, &c).await;
    for client in CLIENTS {
        let shot = fetch_png(
            &s,
            results[client]["screenshots"]["default"]
                .as_str()
                .expect("url"),
        )
        .await;
        let (x0, y0, x1, y1) = find(&shot, BLOCK_OLD);
        let v = &changed["clients"][client]["variants"]["default"];
        let share = v["changed_share"].as_f64().expect("share");
        assert!(share > 0.0 && share < 0.5, "{client}: {v}");
        let boxes = v["boxes"].as_array().expect("boxes");
        // The block's edge pixels may pass as anti-aliasing; its inside may not.
        let covers = boxes.iter().any(|b| {
            let n = |k: &str| b[k].as_u64().expect("number") as u32;
            n("x") <= x0 + 2
                && n("y") <= y0 + 2
                && n("x") + n("width") + 2 > x1
                && n("y") + n("height") + 2 > y1
        });
        assert!(
            covers,
            "{client}: no box covers the block at ({x0},{y0})-({x1},{y1}): {v}"
        );
        // The highlight image is served presigned, like screenshots, and marks the block.
        let url = v["diff_image"].as_str().expect("diff_image url");
        let hl = fetch_png(&s, url).await;
        assert_eq!(hl.dimensions(), shot.dimensions(), "{client}");
        assert_eq!(hl.get_pixel((x0 + x1) / 2, (y0 + y1) / 2).0, [255, 0, 255]);
    }

    // Tests of another account, or no test at all, are InvalidTestID in either position.
    s.call(
        "GET",
        &format!("/v5/email/tests/{a}/diff/{b}"),
        Some(("intruder", "password-1")),
        None,
    )
    .await
    .expect_error("InvalidTestID", 404);
    s.get(&format!(
        "/v5/email/tests/{a}/diff/00000000000000000000000000"
    ))
    .await
    .expect_error("InvalidTestID", 404);
    s.get(&format!(
        "/v5/email/tests/00000000000000000000000000/diff/{a}"
    ))
    .await
    .expect_error("InvalidTestID", 404);
}
