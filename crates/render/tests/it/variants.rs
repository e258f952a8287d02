//! Widths, scales and colour schemes in every engine.

use domain::ColorScheme;

use crate::support::{self, page, pixel, render, request, run, ENGINES};

#[test]
fn every_engine_draws_600_wide_at_1x_and_390_wide_at_3x() {
    run(async {
        for engine in ENGINES {
            let shot = render(request(engine, page("data:,"), 600, 1.0)).await;
            assert_eq!(shot.width, 600, "{engine} 600@1");
            assert!(
                shot.height >= 900,
                "{engine} shoots the whole document, got {}",
                shot.height
            );
            let shot = render(request(engine, page("data:,"), 390, 3.0)).await;
            assert_eq!(shot.width, 1170, "{engine} 390@3");
            assert!(
                shot.height >= 2700,
                "{engine} 390@3 whole document, got {}",
                shot.height
            );
            let card = image::load_from_memory(&shot.thumbnail).expect("thumbnail PNG");
            assert_eq!((card.width(), card.height()), render::thumbnail_size(390));
            let full = image::load_from_memory(&shot.full_thumbnail).expect("full thumbnail PNG");
            assert_eq!(full.width(), render::FULL_THUMBNAIL_WIDTH);
        }
    });
}

#[test]
fn dark_scheme_makes_prefers_color_scheme_dark_rules_apply() {
    run(async {
        for engine in ENGINES {
            let mut req = request(engine, page("data:,"), 600, 1.0);
            req.color_scheme = ColorScheme::Dark;
            let dark = render(req.clone()).await;
            let bar = pixel(&dark, 300, 50, 1.0);
            assert!(
                bar[1] > 200 && bar[2] < 60,
                "{engine}: dark bar is green, got {bar:?}"
            );
            req.color_scheme = ColorScheme::Light;
            let light = render(req).await;
            let bar = pixel(&light, 300, 50, 1.0);
            assert!(
                bar[2] > 200 && bar[1] < 60,
                "{engine}: light bar is blue, got {bar:?}"
            );
        }
    });
}

#[test]
fn concurrent_renders_of_both_schemes_each_get_their_own_scheme() {
    run(async {
        let renderer = support::renderer().await;
        let mut tasks = Vec::new();
        for i in 0..6 {
            let renderer = renderer.clone();
            tasks.push(tokio::spawn(async move {
                let mut req = request(domain::Engine::Gecko, page("data:,"), 600, 1.0);
                let dark = i % 2 == 0;
                req.color_scheme = if dark {
                    ColorScheme::Dark
                } else {
                    ColorScheme::Light
                };
                let shot = renderer.render(req).await.expect("render");
                (dark, pixel(&shot, 300, 50, 1.0))
            }));
        }
        for task in tasks {
            let (dark, bar) = task.await.expect("task");
            if dark {
                assert!(bar[1] > 200 && bar[2] < 60, "dark render got {bar:?}");
            } else {
                assert!(bar[2] > 200 && bar[1] < 60, "light render got {bar:?}");
            }
        }
    });
}

#[test]
fn webkit_draws_a_fractional_scale_at_the_next_whole_one_narrowed_to_the_width_asked() {
    run(async {
        // A client zooming a 600 px email out to a 390 px screen at 3x: 600 CSS px in 1170 px.
        let scale = 3.0 * 390.0 / 600.0;
        let shot = render(request(domain::Engine::Webkit, page("data:,"), 600, scale)).await;
        assert_eq!(shot.width, 1170);
        let bar = pixel(&shot, 300, 50, scale);
        assert!(
            bar[2] > 200 && bar[1] < 60,
            "the light bar is blue where 1.95x puts it, got {bar:?}"
        );
    });
}
