//! Dark mode, image blocking and the proxy are honoured per capture on the same warm engine.

use crate::support::{decode, request, rgb_at, runtime, shared, IMAGE_RGB, RESOURCE_WAIT};
use std::time::{Duration, Instant};

const DARK_AWARE_PAGE: &str = r#"<!doctype html><html><head><style>
    body{margin:0;background:rgb(240,240,200)}
    @media (prefers-color-scheme: dark){body{background:rgb(20,20,60)}}
    </style></head><body><div style="height:300px"></div></body></html>"#;

/// A page with one 200x200 image on white, fetched through the engine's proxy from a loopback
/// port where nothing listens.
fn image_page(path: &str) -> String {
    let port = closed_port();
    format!(
        r#"<!doctype html><html><body style="margin:0;background:#fff">
        <img src="http://127.0.0.1:{port}{path}" width="200" height="200" alt="" style="display:block">
        <div style="height:300px"></div></body></html>"#
    )
}

/// A loopback port nothing listens on. (Not a well-known one like 9: browsers refuse those
/// "bad ports" before any proxy sees the request.)
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address").port()
}

#[test]
fn dark_rule_applies_only_when_dark_is_requested() {
    let engine = &shared().engine;
    let (light, dark, light_again) = runtime().block_on(async {
        let mut req = request(DARK_AWARE_PAGE, 600, 1);
        let light = engine.capture(&req).await.expect("light capture");
        req.dark = true;
        let dark = engine.capture(&req).await.expect("dark capture");
        req.dark = false;
        let light_again = engine
            .capture(&req)
            .await
            .expect("light capture after dark");
        (light, dark, light_again)
    });
    assert_eq!(rgb_at(&decode(&light), 100, 100), [240, 240, 200]);
    assert_eq!(rgb_at(&decode(&dark), 100, 100), [20, 20, 60]);
    assert_eq!(
        rgb_at(&decode(&light_again), 100, 100),
        [240, 240, 200],
        "dark does not stick"
    );
}

#[test]
fn blocked_images_are_never_requested_and_not_painted() {
    let fixture = shared();
    let path = "/blocked-image.png";
    let capture = runtime().block_on(async {
        let mut req = request(&image_page(path), 600, 1);
        req.block_images = true;
        fixture
            .engine
            .capture(&req)
            .await
            .expect("capture with images blocked")
    });
    assert_eq!(
        fixture.proxy.hits(path),
        0,
        "a blocked image must not reach the network"
    );
    assert_ne!(rgb_at(&decode(&capture), 100, 100), IMAGE_RGB);
}

#[test]
fn images_load_through_the_proxy_even_from_loopback_when_not_blocked() {
    let fixture = shared();
    let path = "/allowed-image.png";
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(&image_page(path), 600, 2)))
        .expect("capture with images");
    assert_eq!(
        fixture.proxy.hits(path),
        1,
        "the image went through the configured proxy once"
    );
    assert_eq!(
        rgb_at(&decode(&capture), 200, 200),
        IMAGE_RGB,
        "the image is painted at 2x"
    );
}

#[test]
fn a_stalled_image_delays_the_capture_only_by_the_resource_wait() {
    let fixture = shared();
    let path = "/slow-image.png";
    let started = Instant::now();
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(&image_page(path), 600, 1)))
        .expect("capture despite a stalled image");
    let took = started.elapsed();
    assert_eq!(fixture.proxy.hits(path), 1);
    assert_eq!(capture.width_px, 600);
    assert!(
        took < RESOURCE_WAIT + Duration::from_secs(15),
        "the capture waited {took:?}, far past the {RESOURCE_WAIT:?} resource wait"
    );
    // The stopped load must not cut the next capture's wait short.
    let next = runtime()
        .block_on(
            fixture
                .engine
                .capture(&request(&image_page("/after-stall.png"), 600, 1)),
        )
        .expect("capture after a stalled one");
    assert_eq!(rgb_at(&decode(&next), 100, 100), IMAGE_RGB);
}

#[test]
fn a_large_image_is_painted_in_the_capture() {
    let fixture = shared();
    let path = "/large-image.png";
    let page = format!(
        r#"<!doctype html><html><body style="margin:0;background:#fff">
        <img src="http://127.0.0.1:{}{path}" width="600" height="600" alt="" style="display:block">
        </body></html>"#,
        closed_port()
    );
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(&page, 600, 1)))
        .expect("capture with a large image");
    assert_eq!(fixture.proxy.hits(path), 1);
    let image = decode(&capture);
    for (x, y) in [(10, 10), (300, 300), (590, 590)] {
        assert_eq!(
            rgb_at(&image, x, y),
            IMAGE_RGB,
            "pixel {x},{y} of the large image"
        );
    }
}

#[test]
fn a_meta_refresh_neither_leaves_the_message_nor_fetches_its_target() {
    let fixture = shared();
    let path = "/refresh-target.png";
    let page = format!(
        r#"<!doctype html><html><head>
        <meta http-equiv="refresh" content="0;url=http://127.0.0.1:{}{path}">
        </head><body style="margin:0;background:rgb(0,120,255)"><div style="height:300px"></div></body></html>"#,
        closed_port()
    );
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(&page, 600, 1)))
        .expect("capture of a page with a meta refresh");
    // The refresh timer fires right after the load; give it time to reach the network.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        fixture.proxy.hits(path),
        0,
        "the refresh target was not requested"
    );
    assert_eq!(
        rgb_at(&decode(&capture), 50, 50),
        [0, 120, 255],
        "the message itself was shot"
    );
}

#[test]
fn scripts_in_the_message_do_not_run() {
    let page = r#"<!doctype html><html><body style="margin:0;background:rgb(255,255,255)"
        onload="document.body.style.background='rgb(255,0,0)'">
        <div style="height:300px"></div>
        <script>document.body.style.background = 'rgb(255,0,0)';</script></body></html>"#;
    let capture = runtime()
        .block_on(shared().engine.capture(&request(page, 600, 1)))
        .expect("capture of a page with scripts");
    assert_eq!(rgb_at(&decode(&capture), 100, 100), [255, 255, 255]);
}
