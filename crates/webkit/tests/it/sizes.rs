//! Width follows `width x scale` exactly and height covers the whole document.

use crate::support::{decode, request, rgb_at, runtime, shared};

/// A page 3000 CSS px tall whose last 100 px are green, so a cut-off capture shows.
const TALL_PAGE: &str = r#"<!doctype html><html><body style="margin:0;background:#fff">
<div style="height:2900px;background:#ddd">top</div>
<div style="height:100px;background:rgb(0,160,0)">bottom</div></body></html>"#;

#[test]
fn desktop_600_at_1x_is_600_px_wide_and_as_tall_as_the_document() {
    let fixture = shared();
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(TALL_PAGE, 600, 1)))
        .expect("600@1 capture");
    assert_eq!(capture.width_px, 600);
    assert_eq!(capture.height_px, 3000);
    let image = decode(&capture);
    assert_eq!(
        rgb_at(&image, 300, 2990),
        [0, 160, 0],
        "the bottom of the document is in the shot"
    );
}

#[test]
fn mobile_390_at_3x_is_1170_px_wide_and_as_tall_as_the_document() {
    let fixture = shared();
    let capture = runtime()
        .block_on(fixture.engine.capture(&request(TALL_PAGE, 390, 3)))
        .expect("390@3 capture");
    assert_eq!(capture.width_px, 1170);
    assert_eq!(capture.height_px, 9000);
    let image = decode(&capture);
    assert_eq!(rgb_at(&image, 585, 8990), [0, 160, 0]);
}

#[test]
fn mobile_width_triggers_the_emails_max_width_media_query() {
    let page = r#"<!doctype html><html><head><style>
        body{margin:0} .bar{height:50px;background:rgb(0,0,200)}
        @media (max-width:480px){.bar{background:rgb(250,220,0)}}
        </style></head><body><div class="bar"></div><div style="height:500px"></div></body></html>"#;
    let fixture = shared();
    let (desktop, mobile) = runtime().block_on(async {
        let desktop = fixture
            .engine
            .capture(&request(page, 600, 1))
            .await
            .expect("desktop");
        let mobile = fixture
            .engine
            .capture(&request(page, 390, 2))
            .await
            .expect("mobile");
        (desktop, mobile)
    });
    assert_eq!(rgb_at(&decode(&desktop), 10, 10), [0, 0, 200]);
    assert_eq!(mobile.width_px, 780);
    assert_eq!(rgb_at(&decode(&mobile), 20, 20), [250, 220, 0]);
}

#[test]
fn a_document_wider_than_the_viewport_is_cut_to_the_viewport_width() {
    let page = r#"<!doctype html><html><body style="margin:0">
        <table width="700" style="width:700px;height:200px;background:#888"><tr><td>wide</td></tr></table>
        </body></html>"#;
    let capture = runtime()
        .block_on(shared().engine.capture(&request(page, 390, 1)))
        .expect("capture of a wide document");
    assert_eq!(capture.width_px, 390);
}

#[test]
fn a_real_template_from_the_corpus_renders_at_desktop_width() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/cerberus--responsive.html"
    );
    let html = std::fs::read_to_string(path).expect("the shared corpus is beside the repository");
    let capture = runtime()
        .block_on(shared().engine.capture(&request(&html, 600, 1)))
        .expect("corpus capture");
    assert_eq!(capture.width_px, 600);
    assert!(
        capture.height_px > 800,
        "a full template is taller than one screen: {}",
        capture.height_px
    );
    let image = decode(&capture);
    let distinct: std::collections::HashSet<_> = image.pixels().map(|p| p.0).collect();
    assert!(
        distinct.len() > 50,
        "the template renders text and colours, not a blank page"
    );
}

#[test]
fn a_document_too_tall_for_one_surface_is_cut_not_lost() {
    // 15000 CSS px at 3x is 45000 device px, past cairo's 32767 limit.
    let page = r#"<!doctype html><html><body style="margin:0">
        <div style="height:15000px;background:rgb(0,90,0)"></div></body></html>"#;
    let capture = runtime()
        .block_on(shared().engine.capture(&request(page, 390, 3)))
        .expect("capture of a very tall document");
    assert_eq!(capture.width_px, 1170);
    assert!(
        (30_000..=32_767).contains(&capture.height_px),
        "cut just below the surface limit: {}",
        capture.height_px
    );
    assert_eq!(
        rgb_at(&decode(&capture), 600, capture.height_px - 10),
        [0, 90, 0]
    );
}
