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
