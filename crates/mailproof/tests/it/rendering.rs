//! Issue 3's acceptance: real screenshots from the three engines, image blocking that really
//! blocks, presigned URL rules, and recovery from a killed engine and a killed service.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// One client per engine, each supporting image blocking.
const CLIENTS: [&str; 3] = ["gmail_chrome_web", "thunderbird_win", "iphone15_ios"];

/// A loopback server answering every request with a solid red 64x64 PNG, counting requests.
async fn red_image_server() -> String {
    let mut png = Vec::new();
    let img = image::RgbImage::from_pixel(64, 64, image::Rgb([255, 0, 0]));
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("encode png");
    testkit::http::HttpStub::fixed("image/png", png)
        .await
        .url("/red.png")
}

fn email(img: &str) -> String {
    format!(
        "<!doctype html><html><body style=\"margin:0;background:#ffffff\">\
         <table width=\"100%\"><tr><td style=\"padding:20px;font-family:Arial\">\
         <h1 style=\"color:#222\">Rendering check</h1>\
         <img src=\"{img}\" width=\"200\" height=\"200\" alt=\"\" style=\"display:block;width:200px;height:200px\">\
         <p>Below the image.</p></td></tr></table></body></html>"
    )
}

fn render_config() -> Options {
    Options {
        config: "[fetch]\nallow = [\"127.0.0.1/32\"]\n[render]\nengines = [\"blink\", \"gecko\", \"webkit\"]\nslots_per_engine = 1\n# A short timeout keeps the lease a killed service leaves behind short.\nrender_timeout = 10\n"
            .into(),
    }
}

fn red_pixels(png: &[u8]) -> usize {
    let img = image::load_from_memory(png).expect("a valid PNG").to_rgb8();
    img.pixels()
        .filter(|p| p[0] > 200 && p[1] < 60 && p[2] < 60)
        .count()
}

async fn fetch_png(s: &Server, url: &str) -> Vec<u8> {
    let r = s.http.get(url).send().await.expect("get screenshot");
    assert_eq!(r.status(), 200, "{url}");
    assert_eq!(r.headers()["content-type"], "image/png");
    r.bytes().await.expect("bytes").to_vec()
}

#[tokio::test]
async fn one_client_per_engine_with_image_blocking_completes_with_real_screenshots() {
    let img = red_image_server().await;
    let s = Server::start_with(render_config()).await;
    let body = json!({"subject": "Render", "html": email(&img), "clients": CLIENTS, "image_blocking": true});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let info = s.wait_processed(&id, Duration::from_secs(300)).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        3,
        "all complete: {info}"
    );

    let catalog = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let results = s
        .get(&format!("/v5.0.1/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    for client in CLIENTS {
        let r = &results[client];
        assert_eq!(r["status"], "Complete", "{client}: {r}");
        assert!(r["status_details"]["completed"].is_i64());
        assert!(r["status_details"]["attempts"].as_i64().expect("attempts") >= 1);
        let vp = &catalog[client]["viewport"];
        let scale = vp["scale"].as_f64().expect("scale");
        for (variant, css_width) in [("default", &vp["width"]), ("no_images", &vp["width"])] {
            let png = fetch_png(&s, r["screenshots"][variant].as_str().expect("url")).await;
            let img = image::load_from_memory(&png).expect("valid PNG");
            let want = (css_width.as_f64().expect("width") * scale).round() as u32;
            assert_eq!(
                img.width(),
                want,
                "{client} {variant}: pixel width = CSS width x scale"
            );
            let red = red_pixels(&png);
            if variant == "default" {
                assert!(
                    red > 1000,
                    "{client}: the image shows in the default shot ({red} red pixels)"
                );
            } else {
                assert_eq!(
                    red, 0,
                    "{client}: the image is blocked in the no_images shot"
                );
            }
        }
        for thumb in ["thumbnail", "full_thumbnail"] {
            let png = fetch_png(&s, r[thumb].as_str().expect("url")).await;
            image::load_from_memory(&png).expect("thumbnail is a valid PNG");
        }
        assert_eq!(r["engine"], catalog[client]["engine"]);
    }
    // The rotating client also has its horizontal shots, rendered in the rotated viewport.
    let phone = &results["iphone15_ios"];
    let png = fetch_png(
        &s,
        phone["screenshots"]["horizontal"].as_str().expect("url"),
    )
    .await;
    let vp = &catalog["iphone15_ios"]["viewport"];
    let want =
        (vp["height"].as_f64().expect("h") * vp["scale"].as_f64().expect("s")).round() as u32;
    assert_eq!(image::load_from_memory(&png).expect("png").width(), want);

    // Presigned URL rules.
    let url = results["gmail_chrome_web"]["screenshots"]["default"]
        .as_str()
        .expect("url")
        .to_string();
    let path_only = url.split('?').next().expect("path").to_string();
    let with_owner = s
        .http
        .get(&path_only)
        .header("Authorization", basic(ADMIN_KEY, ADMIN_PASS))
        .send()
        .await
        .expect("get");
    assert_eq!(
        with_owner.status(),
        200,
        "the owner's credentials work without a signature"
    );
    assert_eq!(
        s.http.get(&path_only).send().await.expect("get").status(),
        403,
        "unsigned, no credentials"
    );
    let expired = url.replace("expires=", "expires=1");
    assert_eq!(
        s.http.get(&expired).send().await.expect("get").status(),
        403,
        "signature does not match"
    );
    s.add_account("other", "enterprise", &[]);
    let foreign = s
        .http
        .get(&url)
        .header("Authorization", basic("other", "password-1"))
        .send()
        .await
        .expect("get");
    assert_eq!(foreign.status(), 403, "another account's credentials");
}

#[tokio::test]
async fn a_test_survives_a_killed_service_and_completes_after_restart() {
    let img = red_image_server().await;
    let s = Server::start_with(render_config()).await;
    let body = json!({"subject": "Restart", "html": email(&img), "clients": CLIENTS});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dir = s.kill();
    let s = Server::start_in(dir, render_config()).await;
    let info = s.wait_processed(&id, Duration::from_secs(300)).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        3,
        "{info}"
    );
}

/// Kills every process whose command line mentions `needle` (the server's data directory names
/// each engine's profile directory), as a crash would.
fn kill_processes_mentioning(needle: &str, name_part: &str) -> usize {
    procs::with_command_line(&[needle, name_part])
        .into_iter()
        .filter(|&pid| procs::signal(pid, procs::Signal::KILL))
        .count()
}

#[tokio::test]
async fn killing_an_engine_during_a_test_leaves_no_screenshot_stuck() {
    let img = red_image_server().await;
    let s = Server::start_with(render_config()).await;
    // Warm up, so the engines are running when they are killed.
    let warm = json!({"subject": "Warm", "html": email(&img), "clients": CLIENTS});
    let id = s.post("/v5/email/tests", &warm).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    s.wait_processed(&id, Duration::from_secs(300)).await;

    let body = json!({"subject": "Crash", "html": email(&img), "clients": CLIENTS, "image_blocking": true});
    let id = s.post("/v5/email/tests", &body).await.ok()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let data_dir = s.data_dir().to_string_lossy().to_string();
    let killed = kill_processes_mentioning(&data_dir, "chromium")
        + kill_processes_mentioning(&data_dir, "firefox");
    assert!(
        killed > 0,
        "found engine processes to kill under {data_dir}"
    );
    let info = s.wait_processed(&id, Duration::from_secs(300)).await;
    assert_eq!(
        info["completed"].as_array().map_or(0, Vec::len),
        3,
        "{info}"
    );
}
