//! The inbox rows' data file against the catalog, the preview as clients take it (hidden
//! preheaders, padding, a bounded length), senders, and the report's warnings and pictures.

use super::*;

fn data_file() -> InboxRows {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/inbox-rows.toml"
    ))
    .expect("data/inbox-rows.toml is readable");
    InboxRows::parse(&text).expect("data/inbox-rows.toml is valid")
}

#[test]
fn every_catalog_profile_shows_exactly_one_row() {
    let catalog = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/clients.toml"
    ))
    .expect("catalog");
    let catalog = domain::Catalog::parse(&catalog).expect("catalog parses");
    let rows = data_file();
    rows.check_ids(catalog.clients().iter().map(|c| c.id.as_str()))
        .expect("rows and catalog agree");
    // Removing a profile from its row is caught.
    let mut fewer = rows.clone();
    fewer.rows[0].clients.pop();
    let err = fewer
        .check_ids(catalog.clients().iter().map(|c| c.id.as_str()))
        .expect_err("a profile in no row");
    assert!(err.contains("profiles in no row"), "{err}");
}

#[test]
fn a_row_without_a_source_or_with_a_client_twice_is_refused() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/inbox-rows.toml"
    ))
    .expect("file");
    let no_source = text.replacen(
        "layout_source = \"iOS Mail's list",
        "layout_source = \"\"\nx = \"",
        1,
    );
    assert!(InboxRows::parse(&no_source).is_err());
    let twice = text.replacen("\"iphone_se_ios\"]", "\"iphone_se_ios\", \"gmail_ios\"]", 1);
    let err = InboxRows::parse(&twice).expect_err("gmail_ios twice");
    assert!(err.contains("in another row"), "{err}");
}

#[test]
fn a_hidden_preheader_is_the_start_of_the_preview() {
    let p = preview(
        r#"<html><head><title>T</title><style>p{color:red}</style></head><body>
        <div style="display:none; max-height:0">Your order has shipped and arrives Friday</div>
        <p>View in browser</p><h1>Hello</h1></body></html>"#,
    );
    assert_eq!(
        p.preheader.as_deref(),
        Some("Your order has shipped and arrives Friday")
    );
    assert!(!p.padded);
    assert_eq!(p.body_start(), "View in browser Hello");
    assert!(p.text.starts_with("Your order has shipped"), "{:?}", p.text);
}

#[test]
fn without_a_preheader_the_preview_is_the_first_visible_text() {
    let p = preview("<body><table><tr><td>&nbsp;</td><td><a href='#'>View in browser</a></td></tr></table><p>Hi there</p></body>");
    assert_eq!(p.preheader, None);
    assert_eq!(p.hidden_chars, 0);
    assert_eq!(readable(&p.text), "View in browser Hi there");
}

#[test]
fn padding_keeps_its_spacing_characters_and_is_noticed() {
    let pad = "&zwnj;&nbsp;".repeat(40);
    let p = preview(&format!(
        "<body><span class=\"preheader\" style=\"display:none\">Sale ends tonight{pad}</span><p>View online</p></body>"
    ));
    assert_eq!(p.preheader.as_deref(), Some("Sale ends tonight"));
    assert!(p.padded);
    // 17 letters and 80 spacing characters, kept so the engine gives them their room.
    assert_eq!(p.hidden_chars, 17 + 80);
    assert!(p.text.contains("\u{200c}\u{a0}\u{200c}"));
    assert_eq!(p.body_start(), "View online");
}

#[test]
fn a_preview_is_bounded() {
    let long = "word ".repeat(5000);
    let p = preview(&format!("<body><p>{long}</p></body>"));
    assert!(p.text.chars().count() <= MAX_PREVIEW_CHARS);
}

#[test]
fn senders_are_read_from_the_from_header() {
    let s = Sender::from_header(Some("\"Acme Shop\" <news@acme.example>"));
    assert_eq!(s.name.as_deref(), Some("Acme Shop"));
    assert_eq!(s.address.as_deref(), Some("news@acme.example"));
    assert_eq!(
        Sender::from_header(Some("a@b.example")).shown(),
        "a@b.example"
    );
    assert_eq!(Sender::from_header(None).shown(), "(no From header)");
}

fn measured(row: &str, field: &str, shown: &str, cut: bool) -> MeasuredField {
    MeasuredField {
        row: row.into(),
        field: field.into(),
        shown: shown.into(),
        cut,
        width: 300.0,
        used_width: 290.0,
        lines: 1,
        used_lines: 1,
    }
}

#[test]
fn a_short_preheader_is_named_with_the_text_that_follows_it_on_the_row() {
    let rows = data_file();
    let gmail = rows.of_client("gmail_ios").expect("gmail row");
    let p = preview(
        "<body><div style=\"display:none\">Big news</div><a>View in browser</a> <p>Dear reader</p></body>",
    );
    let m = vec![
        measured(&gmail.id, "sender", "Acme", false),
        measured(&gmail.id, "subject", "Hello", false),
        measured(&gmail.id, "preview", "Big news View in browser Dear", true),
    ];
    let report = report(
        &[gmail],
        &[
            ("gmail_ios".into(), ColorScheme::Light),
            ("gmail_ios_dm".into(), ColorScheme::Dark),
        ],
        Sender::from_header(Some("Acme <a@acme.example>")),
        "Hello",
        p,
        &m,
    )
    .expect("report");
    let row = &report.rows[0];
    assert_eq!(row.schemes, vec![ColorScheme::Light, ColorScheme::Dark]);
    assert_eq!(row.preview.text, "Big news View in browser Dear…");
    assert_eq!(row.body_text.as_deref(), Some("View in browser Dear"));
    let w = &report.warnings[0];
    assert_eq!(w.id, "short-preheader");
    assert_eq!(
        w.message,
        "the preheader is 8 characters: Gmail (iPhone) fills the row with “View in browser Dear”; lengthen it or pad it with &zwnj;&nbsp;"
    );
    assert!(!row.calibrated || row.source.contains("calibrated"));
}

#[test]
fn pictures_show_exactly_the_measured_text_escaped() {
    let rows = data_file();
    let apple = rows.of_client("iphone15_ios").expect("apple row");
    let m = vec![
        measured(&apple.id, "sender", "<b>Shop</b>", false),
        measured(&apple.id, "subject", "Big <sale>", true),
        measured(&apple.id, "preview", "Prices & more", false),
    ];
    let r = report(
        &[apple],
        &[("iphone15_ios".into(), ColorScheme::Light)],
        Sender::default(),
        "s",
        Preview::default(),
        &m,
    )
    .expect("report");
    let page = picture_page(apple, &r.rows[0], ColorScheme::Dark);
    assert!(page.contains("Big &lt;sale&gt;…"), "{page}");
    assert!(page.contains("&lt;b&gt;Shop&lt;/b&gt;"));
    assert!(page.contains("Prices &amp; more"));
    assert!(
        page.contains("emailtooltester.com"),
        "the picture names its source"
    );
    assert!(!page.contains("<sale>"));
}
