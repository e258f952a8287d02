//! The issue's acceptance cases, at the HTML level, across every profile of the catalog.

use domain::ColorScheme;
use emulate::transform;

use super::{is_word_engine, shipped};

const MSO_BLOCKS: &str = r#"<!DOCTYPE html><html><head><title>t</title></head><body>
<!--[if mso]><table><tr><td id="mso-only" style="background-color:#ff0000">RED OUTLOOK BLOCK</td></tr></table><![endif]-->
<!--[if !mso]><!--><div id="not-mso" style="background-color:#00ff00">GREEN WEB BLOCK</div><!--<![endif]-->
</body></html>"#;

const BUTTON: &str = r##"<html><body><div><!--[if mso]>
<v:roundrect xmlns:v="urn:schemas-microsoft-com:vml" xmlns:w="urn:schemas-microsoft-com:office:word" href="https://example.com" style="height:40px;v-text-anchor:middle;width:200px;" arcsize="10%" strokecolor="#1e3650" fill="t">
<v:fill type="tile" color="#556270" />
<w:anchorlock/>
<center style="color:#ffffff;font-family:sans-serif;font-size:13px;font-weight:bold;">Show me the button!</center>
</v:roundrect>
<![endif]--><!--[if !mso]><!-- --><a href="https://example.com" style="background-color:#556270;border-radius:4px;color:#ffffff;display:inline-block;">Web button</a><!--<![endif]--></div></body></html>"##;

const POSITIONED: &str = r#"<html><head><style>
.badge { position: absolute; top: 0; color: #123456; }
</style></head><body><p class="badge">x</p></body></html>"#;

const DARK_AWARE: &str = r#"<html><head><style>
body { background: #ffffff; }
@media (prefers-color-scheme: dark) { .card { background-color: #000000 !important; } }
</style></head><body><div class="card">hello</div></body></html>"#;

#[test]
fn mso_only_content_shows_in_word_engine_profiles_and_nowhere_else() {
    let (catalog, book) = shipped();
    let mut word = 0;
    for c in catalog.clients() {
        let out = transform(MSO_BLOCKS, c, &book).expect("transforms").html;
        let red = out.contains("RED OUTLOOK BLOCK") && !out.contains("<!--[if mso]>");
        let green = out.contains("GREEN WEB BLOCK");
        if is_word_engine(&book, c) {
            word += 1;
            assert!(red && !green, "{}: {out}", c.id);
        } else {
            // The mso block stays inside its comment, which a browser does not draw.
            assert!(!red && green, "{}: {out}", c.id);
        }
    }
    assert!(word >= 5, "the catalog has the classic Outlook versions");
}

#[test]
fn a_vml_button_becomes_html_with_its_fill_and_label_in_word_engine_profiles() {
    let (catalog, book) = shipped();
    for c in catalog.clients() {
        let out = transform(BUTTON, c, &book).expect("transforms").html;
        if is_word_engine(&book, c) {
            assert!(out.contains("background-color:#556270"), "{}: {out}", c.id);
            assert!(out.contains("Show me the button!"), "{}: {out}", c.id);
            assert!(!out.contains("<v:roundrect"), "{}: {out}", c.id);
            assert!(!out.contains("Web button"), "{}: {out}", c.id);
        } else {
            assert!(out.contains("Web button"), "{}: {out}", c.id);
        }
    }
}

#[test]
fn position_absolute_in_a_style_block_is_gone_in_gmail_web_and_kept_in_apple_mail() {
    let (catalog, book) = shipped();
    let gmail = catalog.get("gmail_chrome_web").expect("gmail profile");
    let out = transform(POSITIONED, gmail, &book).expect("transforms");
    assert!(!out.html.contains("position"), "{}", out.html);
    assert!(out.html.contains("color: #123456"), "{}", out.html);
    assert!(
        out.removed.iter().any(|r| r.starts_with("css-position")),
        "{:?}",
        out.removed
    );
    let apple = catalog.get("applemail_macos").expect("apple profile");
    let out = transform(POSITIONED, apple, &book).expect("transforms");
    assert!(out.html.contains("position: absolute"), "{}", out.html);
}

#[test]
fn gmail_prefixes_classes_consistently_in_markup_and_css() {
    let (catalog, book) = shipped();
    let gmail = catalog.get("gmail_chrome_web").expect("gmail profile");
    let out = transform(POSITIONED, gmail, &book)
        .expect("transforms")
        .html;
    assert!(out.contains("class=\"m_5215793badge\""), "{out}");
    assert!(out.contains(".m_5215793badge {"), "{out}");
}

#[test]
fn apple_mail_dark_twin_asks_for_dark_only_once_the_css_opts_in() {
    let (catalog, book) = shipped();
    let dark = catalog.get("applemail_macos_dm").expect("dark profile");
    let light = catalog.get("applemail_macos").expect("light profile");
    let opted = DARK_AWARE.replace("body {", ":root { color-scheme: light dark; } body {");
    let d = transform(&opted, dark, &book).expect("transforms");
    let l = transform(&opted, light, &book).expect("transforms");
    assert_eq!(d.color_scheme, ColorScheme::Dark);
    assert_eq!(l.color_scheme, ColorScheme::Light);
    assert!(d.rule_set.contains("dark-apple-opt-in"), "{}", d.rule_set);
    assert!(d.html.contains("prefers-color-scheme"), "{}", d.html);
    assert!(d.html.contains("background: #ffffff"), "{}", d.html);
    assert_eq!(d.dark_pass, None, "Apple Mail leaves colours alone");
    // The meta tag alone does not opt in (email-bugs #104): styled HTML is drawn as sent.
    let meta = DARK_AWARE.replace(
        "<head>",
        "<head><meta name=\"color-scheme\" content=\"light dark\"><meta name=\"supported-color-schemes\" content=\"light dark\">",
    );
    let m = transform(&meta, dark, &book).expect("transforms");
    assert_eq!(m.color_scheme, ColorScheme::Light);
    assert!(!m.rule_set.contains("dark-apple-opt-in"), "{}", m.rule_set);
    // An unstyled email gets Mail's dark default colours.
    let plain = transform("<p>Hello</p>", dark, &book).expect("transforms");
    assert_eq!(plain.color_scheme, ColorScheme::Dark);
    assert!(
        plain.html.contains("color-scheme: light dark"),
        "{}",
        plain.html
    );
    let plain_light = transform("<p>Hello</p>", light, &book).expect("transforms");
    assert!(
        !plain_light.html.contains("color-scheme"),
        "{}",
        plain_light.html
    );
}

#[test]
fn clients_that_force_colours_leave_it_to_the_page_pass_and_do_not_ask_for_dark() {
    let (catalog, book) = shipped();
    let html = r##"<html><body><table bgcolor="#ffffff"><tr><td style="color:#000000">x</td></tr></table></body></html>"##;
    let gmail_ios = catalog.get("gmail_ios_dm").expect("gmail ios dark");
    let out = transform(html, gmail_ios, &book).expect("transforms");
    assert_eq!(
        out.color_scheme,
        ColorScheme::Light,
        "Gmail ignores prefers-color-scheme"
    );
    assert_eq!(out.dark_pass, Some(emulate::color::DarkPass::FullInvert));
    assert!(
        out.rule_set.contains("dark-full-invert"),
        "{}",
        out.rule_set
    );
    // Recoloured after load, on computed colours: the source keeps its own.
    assert!(out.html.contains("bgcolor=\"#ffffff\""), "{}", out.html);
    let light = catalog.get("gmail_ios").expect("gmail ios light");
    let out = transform(html, light, &book).expect("transforms");
    assert_eq!(out.dark_pass, None);
    let android = catalog.get("gmail_android_dm").expect("gmail android dark");
    let out = transform(html, android, &book).expect("transforms");
    assert_eq!(
        out.dark_pass,
        Some(emulate::color::DarkPass::BlinkForceDark)
    );
}

#[test]
fn outlook_com_dark_twin_both_inverts_and_honours_the_media_query() {
    let (catalog, book) = shipped();
    let c = catalog
        .get("outlook_com_chrome_dm")
        .expect("outlook.com dark");
    let out = transform(DARK_AWARE, c, &book).expect("transforms");
    assert_eq!(out.color_scheme, ColorScheme::Dark);
    assert!(out.html.contains("prefers-color-scheme"), "{}", out.html);
}

#[test]
fn clients_without_style_support_drop_every_style_block() {
    let (catalog, book) = shipped();
    let gmx = catalog.get("gmx_chrome_web").expect("gmx web");
    let out = transform(POSITIONED, gmx, &book).expect("transforms");
    assert!(!out.html.contains(".badge"), "{}", out.html);
    assert!(
        out.html.contains("data-mailproof-pane"),
        "webmails wrap the email in their pane"
    );
}

#[test]
fn gmail_drops_style_blocks_in_the_body_and_on_syntax_errors() {
    let (catalog, book) = shipped();
    let gmail = catalog.get("gmail_chrome_web").expect("gmail profile");
    let html = r#"<html><head><style>.a { color: red; } .b { color: }</style></head>
<body><style>.c { color: blue; }</style><p class="a">x</p></body></html>"#;
    let out = transform(html, gmail, &book).expect("transforms");
    assert!(!out.html.contains("color: red"), "{}", out.html);
    assert!(!out.html.contains("color: blue"), "{}", out.html);
    let apple = catalog.get("applemail_macos").expect("apple profile");
    let out = transform(html, apple, &book).expect("transforms");
    assert!(
        out.html.contains("color: red") && out.html.contains("color: blue"),
        "{}",
        out.html
    );
}

#[test]
fn word_engine_drops_the_css_it_ignores() {
    let (catalog, book) = shipped();
    let c = catalog.get("outlook2016_win").expect("outlook 2016");
    let html = r#"<div style="max-width:600px;float:left;border-radius:8px;box-shadow:0 0 2px #000;display:flex;color:#333">x</div><p style="mso-hide:all">hidden from outlook</p>"#;
    let out = transform(html, c, &book).expect("transforms").html;
    for gone in [
        "max-width",
        "float",
        "border-radius",
        "box-shadow",
        "flex",
        "hidden from outlook",
    ] {
        assert!(!out.contains(gone), "{gone} left in {out}");
    }
    assert!(out.contains("color: #333"), "{out}");
}

#[test]
fn oversized_input_is_refused() {
    let (catalog, book) = shipped();
    let c = catalog.get("applemail_macos").expect("apple");
    let big = "a".repeat(emulate::transform::MAX_HTML_BYTES + 1);
    assert!(matches!(
        transform(&big, c, &book),
        Err(emulate::EmulateError::TooLarge { .. })
    ));
}

#[test]
fn outlook_dark_twins_keep_data_ogsc_rules_for_the_page_pass_to_trigger() {
    let (catalog, book) = shipped();
    let html = r##"<html><head><style>[data-ogsc] .brand { color: #ff9900 !important; }</style></head>
<body><div style="color:#000000"><span class="brand">x</span></div><table bgcolor="#ffffff"><tr><td>y</td></tr></table></body></html>"##;
    for id in [
        "outlook_com_chrome_dm",
        "outlook_new_win_dm",
        "outlook_ios_dm",
        "outlook_android_dm",
        "outlook_macos_dm",
    ] {
        let dark = catalog.get(id).expect("outlook dark twin");
        let out = transform(html, dark, &book).expect("transforms");
        assert_eq!(
            out.dark_pass,
            Some(emulate::color::DarkPass::OutlookPartial),
            "{id}"
        );
        assert!(out.html.contains("[data-ogsc]"), "{id}: {}", out.html);
    }
    let light = catalog
        .get("outlook_com_chrome")
        .expect("outlook.com light");
    let out = transform(html, light, &book).expect("transforms");
    assert_eq!(out.dark_pass, None);
    assert!(!out.html.contains("data-ogsc=\"\""), "{}", out.html);
}

#[test]
fn a_backgrounds_cm_hero_shows_its_text_over_the_image_in_word_engine_profiles() {
    let (catalog, book) = shipped();
    let html = r##"<html><body><table><tr><td style="background-image:url('https://i.test/hero.png');background-color:#222222;">
<!--[if gte mso 9]>
<v:image xmlns:v="urn:schemas-microsoft-com:vml" fill="true" stroke="false" style="border: 0; display: inline-block; width: 680px; height: 180px;" src="https://i.test/hero.png" />
<v:rect xmlns:v="urn:schemas-microsoft-com:vml" fill="true" stroke="false" style="border: 0; display: inline-block; position: absolute; width: 680px; height: 180px;">
<v:fill opacity="0%" color="#222222" />
<![endif]-->
<div>Text over the hero</div>
<!--[if gte mso 9]></v:fill></v:rect></v:image><![endif]-->
</td></tr></table></body></html>"##;
    let c = catalog.get("outlook2019_win").expect("outlook 2019");
    let out = transform(html, c, &book).expect("transforms").html;
    assert!(
        !out.contains("<img"),
        "the image is the cell background, not a block above: {out}"
    );
    let cell = out
        .find("background-image:url(https://i.test/hero.png)")
        .unwrap_or_else(|| panic!("cell background: {out}"));
    let text = out.find("Text over the hero").expect("text kept");
    assert!(cell < text, "{out}");
    assert!(
        !out.contains("background-image:url('"),
        "Word ignores CSS background images: {out}"
    );
}

#[test]
fn word_engine_ignores_padding_outside_table_cells_and_width_on_divs() {
    let (catalog, book) = shipped();
    let html = r#"<table><tr><td style="padding:20px"><div style="padding:10px;width:300px;color:#333">x</div></td></tr></table>"#;
    let outlook = catalog.get("outlook2013_win").expect("outlook 2013");
    let out = transform(html, outlook, &book).expect("transforms").html;
    assert!(out.contains(r#"<td style="padding: 20px;">"#), "{out}");
    assert!(out.contains(r#"<div style="color: #333;">"#), "{out}");
    let apple = catalog.get("applemail_macos").expect("apple");
    let out = transform(html, apple, &book).expect("transforms").html;
    assert!(
        out.contains("padding: 10px") && out.contains("width: 300px"),
        "{out}"
    );
}
