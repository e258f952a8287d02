//! Images: blocking, the network policy and slow hosts.

use std::time::{Duration, Instant};

use crate::support::{
    is_red, page, pixel, render, request, run, unique_path, Behaviour, ImageServer, ENGINES,
    RESOURCE_WAIT,
};

#[test]
fn blocked_images_are_never_requested_and_never_drawn() {
    run(async {
        let server = ImageServer::start("127.0.0.1", Behaviour::RedPng).await;
        for engine in ENGINES {
            let path = unique_path("blocked");
            let mut req = request(engine, page(&server.url(&path)), 600, 1.0);
            req.block_images = true;
            let shot = render(req.clone()).await;
            assert_eq!(server.hits(&path), 0, "{engine} requested a blocked image");
            assert!(
                !is_red(pixel(&shot, 100, 200, 1.0)),
                "{engine} drew a blocked image"
            );

            req.block_images = false;
            let shot = render(req).await;
            assert!(
                server.hits(&path) >= 1,
                "{engine} did not request the image"
            );
            assert!(
                is_red(pixel(&shot, 100, 200, 1.0)),
                "{engine} did not draw the image"
            );
        }
    });
}

#[test]
fn images_on_refused_addresses_do_not_load() {
    run(async {
        // 127.0.0.2 is loopback but outside the test allow-list (127.0.0.1/32).
        let server = ImageServer::start("127.0.0.2", Behaviour::RedPng).await;
        for engine in ENGINES {
            let path = unique_path("refused");
            let shot = render(request(engine, page(&server.url(&path)), 600, 1.0)).await;
            assert!(
                !is_red(pixel(&shot, 100, 200, 1.0)),
                "{engine} drew a refused image"
            );
        }
        assert_eq!(server.total(), 0, "the refused host was contacted");
        assert!(crate::support::renderer().await.refused_requests() >= 3);
    });
}

#[test]
fn a_hung_image_host_does_not_hang_the_render() {
    run(async {
        let server = ImageServer::start("127.0.0.1", Behaviour::Hang).await;
        for engine in ENGINES {
            let path = unique_path("hung");
            let started = Instant::now();
            let shot = render(request(engine, page(&server.url(&path)), 600, 1.0)).await;
            assert_eq!(shot.width, 600);
            // The render timeout is 30 s; a render that waited on the host would fail with it.
            assert!(
                started.elapsed() < RESOURCE_WAIT + Duration::from_secs(20),
                "{engine} waited {:?} for a hung host",
                started.elapsed()
            );
        }
        assert!(server.total() >= 1, "the hung host was never asked");
    });
}

/// A page server the test controls: `/ok-*` a PNG, `/gone-*` 404 (an image and a stylesheet),
/// `/slow-*` never answers; its images sit beside one on a refused address and one on a host
/// name that does not resolve. Each screenshot says which failed and why, in every engine, and
/// an images-off screenshot lists only the stylesheet.
#[test]
fn each_screenshot_lists_the_resources_it_could_not_load_and_why() {
    use domain::{FetchFailure, ResourceKind};
    run(async {
        let server = testkit::http::HttpStub::resources(
            "127.0.0.1".parse().expect("ip"),
            crate::support::red_png(),
        )
        .await;
        let refused = ImageServer::start("127.0.0.2", Behaviour::RedPng).await;
        for engine in ENGINES {
            let id = unique_path("failed");
            let ok = server.url(&format!("/ok-{}", &id[1..]));
            let gone = server.url(&format!("/gone-{}.png", &id[1..]));
            let gone_css = server.url(&format!("/gone-{}.css", &id[1..]));
            let slow = server.url(&format!("/slow-{}.png", &id[1..]));
            let blocked = refused.url(&id);
            let nowhere = format!("http://no-such-host{}.invalid/x.png", &id[1..]);
            let html = format!(
                r#"<!doctype html><html><head><link rel="stylesheet" href="{gone_css}"></head>
<body style="margin:0"><p>Failed resources</p>
<img src="{ok}" width="20" height="20" alt="ok"><img src="{gone}" width="20" height="20" alt="gone">
<img src="{blocked}" width="20" height="20" alt="refused"><img src="{slow}" width="20" height="20" alt="slow">
<img src="{nowhere}" width="20" height="20" alt="nowhere">
<div style="width:20px;height:20px;background-image:url('{gone}?bg')"></div></body></html>"#
            );
            let shot = render(request(engine, html.clone(), 600, 1.0)).await;
            let why = |url: &str| {
                shot.failed
                    .iter()
                    .find(|f| f.url == url)
                    .map(|f| (f.kind, f.reason, f.status))
            };
            assert_eq!(why(&ok), None, "{engine}: {:?}", shot.failed);
            assert_eq!(
                why(&gone),
                Some((ResourceKind::Image, FetchFailure::HttpStatus, Some(404))),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(
                why(&gone_css),
                Some((
                    ResourceKind::Stylesheet,
                    FetchFailure::HttpStatus,
                    Some(404)
                )),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(
                why(&format!("{gone}?bg")),
                Some((
                    ResourceKind::BackgroundImage,
                    FetchFailure::HttpStatus,
                    Some(404)
                )),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(
                why(&blocked),
                Some((ResourceKind::Image, FetchFailure::RefusedByPolicy, None)),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(
                why(&slow),
                Some((ResourceKind::Image, FetchFailure::Timeout, None)),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(
                why(&nowhere),
                Some((ResourceKind::Image, FetchFailure::Dns, None)),
                "{engine}: {:?}",
                shot.failed
            );
            assert_eq!(shot.failed.len(), 6, "{engine}: {:?}", shot.failed);

            let mut off = request(engine, html, 600, 1.0);
            off.block_images = true;
            let shot = render(off).await;
            let kinds: Vec<_> = shot
                .failed
                .iter()
                .map(|f| (f.kind, f.url.as_str()))
                .collect();
            assert_eq!(
                kinds,
                vec![(ResourceKind::Stylesheet, gone_css.as_str())],
                "{engine} images off"
            );
        }
    });
}
