//! The documented client behaviours (data/behaviours.toml): loading and validation, what each
//! does to an email for the clients it names and not for the others, the rule-set name that
//! reports them, and the code analysis that names them with their lines.

use emulate::behaviours::{Behaviours, Implementation};
use emulate::probes::{expected_behaviour, BehaviourExpectation, BEHAVIOUR_PROBES};
use emulate::{analyze, transform, RuleBook};

use super::{repo, shipped};

fn client(catalog: &domain::Catalog, id: &str) -> domain::Client {
    catalog
        .get(id)
        .unwrap_or_else(|| panic!("catalog has {id}"))
        .clone()
}

fn html_for(id: &str, html: &str) -> emulate::Transformed {
    let (catalog, book) = shipped();
    transform(html, &client(&catalog, id), &book).expect("transforms")
}

fn shipped_text() -> String {
    std::fs::read_to_string(repo().join("data/behaviours.toml")).expect("behaviours readable")
}

/// The shipped rule sets with `text` as their behaviours, checked against the catalog.
fn check_with(text: &str) -> Result<(), String> {
    let (catalog, _) = shipped();
    let behaviours = Behaviours::parse("behaviours.toml", text).map_err(|e| e.to_string())?;
    RuleBook::load_rules(&repo().join("data/rules"))
        .expect("rules load")
        .with_behaviours(behaviours)
        .check_catalog(&catalog)
        .map_err(|e| e.to_string())
}

#[test]
fn every_shipped_behaviour_has_clients_sources_and_a_confidence() {
    let (_, book) = shipped();
    let all = book.behaviours().all();
    assert!(all.len() >= 15, "{}", all.len());
    for b in all {
        assert!(!b.sources.is_empty() && !b.clients.is_empty(), "{}", b.id);
    }
    assert_eq!(check_with(&shipped_text()), Ok(()));
}

#[test]
fn an_unknown_client_id_is_refused_with_its_name() {
    let text = shipped_text().replacen("\"gmail_chrome_web\"", "\"gmail_on_the_moon\"", 1);
    let err = check_with(&text).expect_err("unknown client");
    assert!(
        err.contains("gmail_on_the_moon") && err.contains("clients.toml"),
        "{err}"
    );
}

#[test]
fn an_unknown_implementation_is_refused_with_the_known_ones() {
    let text = shipped_text().replacen(
        "implementation = \"clip-long-message\"",
        "implementation = \"clip-by-magic\"",
        1,
    );
    let err = check_with(&text).expect_err("unknown implementation");
    assert!(
        err.contains("clip-by-magic") && err.contains("clip-long-message"),
        "{err}"
    );
}

#[test]
fn a_policy_switched_behaviour_must_list_exactly_the_clients_whose_rule_set_switches_it() {
    // gmail_ios's rule set strips <style> in <body>: dropping it from the list is refused.
    let text = shipped_text().replacen(
        "clients = [\"gmail_chrome_web\", \"gmail_firefox_web\", \"gmail_ios\", \"gmail_ios_dm\", \"gmail_android\", \"gmail_android_dm\"]\nimplementation = \"style-in-body-stripped\"",
        "clients = [\"gmail_chrome_web\", \"gmail_firefox_web\", \"gmail_ios_dm\", \"gmail_android\", \"gmail_android_dm\"]\nimplementation = \"style-in-body-stripped\"",
        1,
    );
    assert_ne!(text, shipped_text(), "the replacement must apply");
    let err = check_with(&text).expect_err("policy and behaviours disagree");
    assert!(
        err.contains("gmail_ios") && err.contains("html-style-in-body"),
        "{err}"
    );
}

#[test]
fn the_rule_set_shown_names_the_behaviours_that_changed_the_email() {
    let html =
        "<html><head></head><body><style>.a{color:red}</style><p class=\"a\">x</p></body></html>";
    let gmail = html_for("gmail_chrome_web", html);
    assert!(
        gmail.rule_set.starts_with("gmail-desktop-webmail + "),
        "{}",
        gmail.rule_set
    );
    assert!(
        gmail.rule_set.contains("gmail-style-in-body"),
        "{}",
        gmail.rule_set
    );
    assert!(
        gmail.rule_set.contains("gmail-class-prefix"),
        "{}",
        gmail.rule_set
    );
    assert!(
        !gmail.rule_set.contains("gmail-clipping"),
        "{}",
        gmail.rule_set
    );
    let apple = html_for("applemail_macos", html);
    assert_eq!(apple.rule_set, "apple-mail-macos");
}

const NESTED: &str = "<html><head><style>.keep{color:#00ff00}\n@media screen {\n@font-face { font-family: X; src: url(x.woff2); }\n}\n</style>\n<style>.other{color:#0000ff}</style></head><body><p class=\"keep other\">x</p></body></html>";

#[test]
fn gmail_drops_a_style_block_with_a_nested_at_rule_and_keeps_the_others() {
    let g = html_for("gmail_chrome_web", NESTED);
    assert!(!g.html.contains("#00ff00"), "{}", g.html);
    assert!(g.html.contains("#0000ff"), "{}", g.html);
    assert!(
        g.rule_set.contains("gmail-style-nested-at-rule"),
        "{}",
        g.rule_set
    );
    let apple = html_for("applemail_macos", NESTED);
    assert!(apple.html.contains("#00ff00"), "{}", apple.html);
}

#[test]
fn gmail_keeps_sixteen_kilobytes_of_css_in_total() {
    let pad = "x".repeat(10_000);
    let html = format!(
        "<html><head><style>.a{{color:#111111}} /* {pad} */</style><style>.b{{color:#222222}} /* {pad} */</style></head><body></body></html>"
    );
    for id in ["gmail_chrome_web", "gmail_ios", "gmail_android"] {
        let g = html_for(id, &html);
        assert!(
            g.html.contains("#111111") && !g.html.contains("#222222"),
            "{id}"
        );
    }
    let apple = html_for("applemail_macos", &html);
    assert!(apple.html.contains("#222222"));
}

#[test]
fn gmail_clips_past_the_clipping_size_with_its_line_and_others_do_not() {
    let html = format!(
        "<html><body><p>start</p><!-- {} --><p>TAIL-MARK</p></body></html>",
        "y".repeat(120_000)
    );
    for id in ["gmail_chrome_web", "gmail_mobile_web", "gmail_android_dm"] {
        let g = html_for(id, &html);
        assert!(
            g.html.contains("[Message clipped]") && g.html.contains("View entire message"),
            "{id}"
        );
        assert!(!g.html.contains("TAIL-MARK"), "{id}");
        assert!(g.rule_set.contains("gmail-clipping"), "{}", g.rule_set);
    }
    let y = html_for("yahoo_chrome_web", &html);
    assert!(y.html.contains("TAIL-MARK") && !y.html.contains("[Message clipped]"));
    let short = html_for("gmail_chrome_web", "<p>TAIL-MARK</p>");
    assert!(!short.html.contains("[Message clipped]"));
}

#[test]
fn outlook_com_prefixes_only_the_first_class_of_a_compound_and_drops_class_attribute_compounds() {
    let html = "<html><head><style>.a.b{color:#010101} .c[class]{color:#020202} [data-ogsc] .e{color:#040404} [class=\"d\"]{color:#030303}</style></head><body><p class=\"a b\">x</p></body></html>";
    for id in ["outlook_com_chrome", "outlook_new_win"] {
        let o = html_for(id, html);
        assert!(o.html.contains(".x_a.b {"), "{id}: {}", o.html);
        assert!(o.html.contains("class=\"x_a x_b\""), "{id}: {}", o.html);
        assert!(!o.html.contains("#020202"), "{id}: {}", o.html);
        assert!(o.html.contains("[data-ogsc] .x_e {"), "{id}: {}", o.html);
        assert!(o.html.contains("[class=\"d\"]"), "{id}: {}", o.html);
        assert!(
            o.rule_set.contains("owa-compound-selector"),
            "{}",
            o.rule_set
        );
        assert!(
            o.rule_set.contains("owa-attribute-selector"),
            "{}",
            o.rule_set
        );
    }
    let g = html_for("gmail_chrome_web", html);
    assert!(g.html.contains(".m_5215793a.m_5215793b"), "{}", g.html);
}

#[test]
fn the_word_engine_keeps_the_first_class_lines_at_least_a_line_and_fills_empty_cells() {
    let html = "<html><head><style>p{line-height:4px} .t{line-height:4px;mso-line-height-rule:exactly}</style></head><body>\
<p class=\"a b\" style=\"font-family:'Open Sans', Arial, sans-serif\">x</p>\
<p style=\"font-family:'Open Sans', Arial; mso-font-alt: Arial\">y</p>\
<table><tr><td height=\"4\"></td><td height=\"4\" style=\"font-size:4px;line-height:4px\"></td></tr></table></body></html>";
    let w = html_for("outlook2021_win", html);
    assert!(w.html.contains("class=\"a\""), "{}", w.html);
    assert!(
        w.html.contains("line-height: max(4px, 1.2em)"),
        "{}",
        w.html
    );
    assert!(w.html.contains(".t { line-height: 4px;"), "{}", w.html);
    assert!(
        w.html.contains("font-family: &quot;Times New Roman&quot;"),
        "{}",
        w.html
    );
    assert!(
        w.html.contains("font-family: Arial; mso-font-alt: Arial"),
        "{}",
        w.html
    );
    assert!(
        w.html.contains("<td height=\"4\">&nbsp;</td>"),
        "{}",
        w.html
    );
    assert!(
        w.html.contains("line-height: max(4px, 1.2em);\"></td>"),
        "{}",
        w.html
    );
    for id in [
        "word-first-class-only",
        "word-line-height-minimum",
        "word-web-font-fallback",
        "word-spacer-cell",
    ] {
        assert!(w.rule_set.contains(id), "{id}: {}", w.rule_set);
    }
    let o = html_for("outlook_new_win", html);
    assert!(o.html.contains("class=\"x_a x_b\""));
    assert!(!o.html.contains("Times New Roman") && !o.html.contains("max(4px"));
    assert!(o.html.contains("<td height=\"4\"></td>"), "{}", o.html);
}

#[test]
fn yahoo_turns_height_into_min_height_and_gmail_does_not() {
    let html = "<div style=\"height:20px;overflow:hidden\">x</div>";
    let y = html_for("yahoo_chrome_web", html);
    assert!(y.html.contains("min-height: 20px"), "{}", y.html);
    assert!(y.rule_set.contains("yahoo-height-min-height"));
    let g = html_for("gmail_chrome_web", html);
    assert!(
        g.html.contains("height: 20px") && !g.html.contains("min-height"),
        "{}",
        g.html
    );
}

#[test]
fn ios_mail_links_phone_numbers_dates_and_addresses_and_format_detection_stops_phones_only() {
    let html = "<html><head></head><body><p>Call 555 123 4567 on November 26 at 1 Infinite Loop Dr.</p><a href=\"https://x.test\">555 987 6543</a></body></html>";
    let i = html_for("iphone15_ios", html);
    assert_eq!(
        i.html.matches("x-apple-data-detectors=\"true\"").count(),
        3,
        "{}",
        i.html
    );
    assert!(i.html.contains("href=\"tel:5551234567\""), "{}", i.html);
    assert!(
        !i.html.contains("tel:5559876543"),
        "links are left alone: {}",
        i.html
    );
    let off = html.replace(
        "<head>",
        "<head><meta name=\"format-detection\" content=\"telephone=no\">",
    );
    let i = html_for("iphone15_ios", &off);
    assert_eq!(
        i.html.matches("x-apple-data-detectors=\"true\"").count(),
        2,
        "{}",
        i.html
    );
    assert!(!i.html.contains("tel:"));
    for id in ["gmail_ios", "outlook_ios", "applemail_macos"] {
        assert!(
            !html_for(id, html).html.contains("x-apple-data-detectors"),
            "{id}"
        );
    }
}

/// The analysis names `behaviour` for `yes` and not for `no`, on `line`.
fn named(html: &str, behaviour: &str, line: u32, yes: &[&str], no: &[&str]) {
    let (catalog, book) = shipped();
    for id in yes {
        let a = analyze(html, &client(&catalog, id), &book).expect("analyses");
        let f = a
            .findings
            .iter()
            .find(|f| f.feature == behaviour)
            .unwrap_or_else(|| panic!("{id} names {behaviour}: {a:#?}"));
        assert!(
            f.lines.contains(&line),
            "{id} {behaviour} on line {line}: {f:#?}"
        );
        assert!(
            f.message.contains("https://"),
            "the source is cited: {}",
            f.message
        );
    }
    for id in no {
        let a = analyze(html, &client(&catalog, id), &book).expect("analyses");
        assert!(
            a.findings.iter().all(|f| f.feature != behaviour),
            "{id} must not name {behaviour}: {a:#?}"
        );
    }
}

#[test]
fn the_analysis_names_each_behaviour_on_its_line_for_its_clients_only() {
    named(
        NESTED,
        "gmail-style-nested-at-rule",
        3,
        &["gmail_chrome_web", "gmail_android"],
        &["applemail_macos", "outlook_com_chrome", "yahoo_chrome_web"],
    );
    let f = {
        let (catalog, book) = shipped();
        analyze(NESTED, &client(&catalog, "gmail_chrome_web"), &book)
            .expect("analyses")
            .findings
            .into_iter()
            .find(|f| f.feature == "gmail-style-nested-at-rule")
            .expect("named")
    };
    assert!(
        f.message
            .contains("drops this whole <style> block (lines 1–5)")
            && f.message.contains("@font-face inside @media"),
        "{}",
        f.message
    );
    named(
        "<p>a</p>\n<!--[if mso]><table><tr><td><![endif]-->\n",
        "new-outlook-ignores-mso",
        2,
        &["outlook_new_win"],
        &["outlook_com_chrome", "outlook2021_win", "gmail_chrome_web"],
    );
    named(
        "<style>\n.a.b { color: red }\n.c[class] { color: red }\n</style>",
        "owa-compound-selector",
        2,
        &["outlook_com_chrome", "outlook_new_win"],
        &["gmail_chrome_web", "yahoo_chrome_web", "outlook_ios"],
    );
    named(
        "<style>\n.a.b { color: red }\n.c[class] { color: red }\n</style>",
        "owa-attribute-selector",
        3,
        &["outlook_com_chrome"],
        &["gmail_chrome_web", "applemail_macos"],
    );
    let word = "<p>x</p>\n<p class=\"a b\" style=\"line-height:4px;font-family:'Open Sans',Arial\">y</p>\n<table><tr><td height=\"4\"></td></tr></table>\n";
    for (b, line) in [
        ("word-first-class-only", 2),
        ("word-line-height-minimum", 2),
        ("word-web-font-fallback", 2),
        ("word-spacer-cell", 3),
    ] {
        named(
            word,
            b,
            line,
            &["outlook2021_win", "windows_mail"],
            &["outlook_new_win", "gmail_chrome_web"],
        );
    }
    named(
        "<p>x</p>\n<div style=\"height:20px\">y</div>",
        "yahoo-height-min-height",
        2,
        &["yahoo_chrome_web", "aol_android"],
        &["gmail_chrome_web", "outlook_com_chrome"],
    );
    named(
        "<p>x</p>\n<p>Call 555 123 4567</p>",
        "ios-data-detectors",
        2,
        &["iphone15_ios", "ipad_ios"],
        &["applemail_macos", "gmail_ios"],
    );
    let long = format!("<p>a</p>\n<p>{}</p>", "z".repeat(110_000));
    named(
        &long,
        "gmail-clipping",
        2,
        &["gmail_chrome_web", "gmail_ios"],
        &["applemail_macos", "yahoo_chrome_web"],
    );
}

/// The line of each behaviour probe where the code analysis must name its behaviour: where the
/// behaviour triggers in the probe's source (the filled source for the size probes).
const PROBE_LINES: &[(&str, u32)] = &[
    ("behaviour-style-nested-at-rule", 5),
    ("behaviour-style-syntax-error", 4),
    ("behaviour-style-size-limit", 6),
    ("behaviour-style-in-body", 4),
    ("behaviour-clip", 4),
    ("behaviour-class-prefix", 5),
    ("behaviour-compound-selector", 3),
    ("behaviour-attribute-selector", 3),
    ("behaviour-mso-comments", 4),
    ("behaviour-first-class", 5),
    ("behaviour-line-height", 4),
    ("behaviour-spacer-cell", 4),
    ("behaviour-web-font", 4),
    ("behaviour-height", 4),
    ("behaviour-data-detectors", 5),
    ("behaviour-auto-fit", 5),
    ("behaviour-images-off", 4),
    ("behaviour-zoom-out", 4),
    ("behaviour-zoom-out-ios", 4),
    ("behaviour-dark-light-background", 4),
    ("behaviour-dark-designed", 4),
    ("behaviour-dark-hook", 3),
    ("behaviour-dark-apple-opt-in", 4),
    ("behaviour-dark-apple-meta-only", 4),
];

/// Every behaviour probe x every client: the code analysis names the probe's behaviour, on the
/// probe's line, for exactly the clients data/behaviours.toml applies it to, by its id (the
/// findings of behaviours a rule-set policy switches included).
#[test]
fn the_analysis_of_each_behaviour_probe_names_it_exactly_where_the_probe_expects_it() {
    let (catalog, book) = shipped();
    let mut named_points = 0;
    for probe in BEHAVIOUR_PROBES {
        let html = probe.html();
        assert!(
            html.contains(&format!("data-probe=\"{}\"", probe.name)),
            "{}",
            probe.name
        );
        let line = PROBE_LINES
            .iter()
            .find(|(name, _)| *name == probe.name)
            .map(|(_, line)| *line)
            .unwrap_or_else(|| {
                panic!(
                    "add {} to PROBE_LINES with the line its behaviour triggers on",
                    probe.name
                )
            });
        let ids_of_imp: Vec<&str> = book
            .behaviours()
            .all()
            .iter()
            .filter(|b| b.implementation == probe.implementation)
            .map(|b| b.id.as_str())
            .collect();
        for c in catalog.clients() {
            // A narrow-only probe triggers nothing on a wider screen.
            let applies = book
                .behaviours()
                .of(c)
                .find(probe.implementation)
                .filter(|_| !probe.narrow_only || c.viewport.width <= emulate::probes::NARROW);
            let a = analyze(&html, c, &book).expect("analyses");
            let naming: Vec<&emulate::Finding> = a
                .findings
                .iter()
                .filter(|f| ids_of_imp.contains(&f.feature.as_str()))
                .collect();
            match applies {
                Some(b) => {
                    let f = naming
                        .iter()
                        .find(|f| f.feature == b.id)
                        .unwrap_or_else(|| {
                            panic!("{} should name {} for {}: {a:#?}", probe.name, b.id, c.id)
                        });
                    assert!(
                        f.lines.contains(&line),
                        "{} names {} for {} on lines {:?}, not on line {line}",
                        probe.name,
                        b.id,
                        c.id,
                        f.lines
                    );
                    assert!(
                        f.message.contains(b.sources[0].as_str()),
                        "{}: the source is cited: {}",
                        b.id,
                        f.message
                    );
                    named_points += 1;
                }
                None => assert!(
                    naming.is_empty(),
                    "{} must not name {:?} for {}",
                    probe.name,
                    naming.iter().map(|f| &f.feature).collect::<Vec<_>>(),
                    c.id
                ),
            }
        }
    }
    assert!(named_points > BEHAVIOUR_PROBES.len(), "{named_points}");
}

#[test]
fn behaviour_probes_expect_the_behaviour_colour_only_where_the_file_applies_it() {
    let (catalog, book) = shipped();
    let gmail = client(&catalog, "gmail_chrome_web");
    let apple = client(&catalog, "applemail_macos");
    let probe = BEHAVIOUR_PROBES
        .iter()
        .find(|p| p.implementation == Implementation::StyleNestedAtRuleDropsBlock)
        .expect("probe");
    assert!(
        matches!(expected_behaviour(probe, &gmail, &book), BehaviourExpectation::Firm(c, _) if c == probe.applied)
    );
    assert!(
        matches!(expected_behaviour(probe, &apple, &book), BehaviourExpectation::Firm(c, _) if c != probe.applied)
    );
    let height = BEHAVIOUR_PROBES
        .iter()
        .find(|p| p.implementation == Implementation::HeightToMinHeight)
        .expect("probe");
    assert!(
        matches!(expected_behaviour(height, &client(&catalog, "yahoo_ios"), &book), BehaviourExpectation::Open(ref why) if why.contains("disputed")),
        "sources disagree on Yahoo iOS"
    );
    let prefix = BEHAVIOUR_PROBES
        .iter()
        .find(|p| p.implementation == Implementation::ClassIdPrefix)
        .expect("probe");
    assert!(
        matches!(expected_behaviour(prefix, &client(&catalog, "outlook_ios"), &book), BehaviourExpectation::Open(ref why) if why.contains("unverified")),
    );
}

#[test]
fn samsung_lays_a_wide_email_out_at_686_px_and_other_clients_do_not() {
    let wide = "<table width=\"600\"><tr><td>x</td></tr></table>";
    // Decided on the laid-out page, as the zoom-outs are: measured wider than the screen, the
    // page is laid out 686 px wide, whatever width it measured.
    let s = html_for("samsung_email_android", wide);
    assert_eq!(s.layout_width, None, "not decided from the source");
    assert!(!s.rule_set.contains("samsung-auto-fit"), "{}", s.rule_set);
    let mut fits = s.clone();
    fits.measured(360, 360);
    assert_eq!(fits.layout_width, None);
    assert!(!fits.rule_set.contains("samsung-auto-fit"));
    let mut zoomed = s;
    zoomed.measured(600, 360);
    assert_eq!(zoomed.layout_width, Some(686));
    assert!(
        zoomed.rule_set.ends_with(" + samsung-auto-fit"),
        "{}",
        zoomed.rule_set
    );
    for id in ["iphone15_ios", "gmail_android"] {
        let mut t = html_for(id, wide);
        t.measured(600, 360);
        assert_eq!(t.layout_width, Some(600), "{id}");
    }
    assert_eq!(html_for("outlook_android", wide).zoom_to_fit, None);
    named(
        "<p>x</p>\n<table width=\"600\"><tr><td>x</td></tr></table>",
        "samsung-auto-fit",
        2,
        &["samsung_email_android", "samsung_email_android_dm"],
        &["gmail_android", "iphone15_ios"],
    );
}

#[test]
fn gmail_drops_a_style_block_and_a_style_attribute_with_space_separated_rgb() {
    let html = "<html><head><style>.a{color:#0a0a0a} .b{color: rgb(0 128 0)}</style><style>.c{color:#0c0c0c}</style></head>\
<body><p style=\"color: rgb(0 128 0); margin: 7px\">x</p></body></html>";
    let g = html_for("gmail_ios", html);
    assert!(
        !g.html.contains("#0a0a0a") && g.html.contains("#0c0c0c"),
        "{}",
        g.html
    );
    assert!(!g.html.contains("margin: 7px"), "{}", g.html);
    assert!(
        g.rule_set.contains("gmail-style-syntax-error"),
        "{}",
        g.rule_set
    );
    let a = html_for("applemail_macos", html);
    assert!(
        a.html.contains("#0a0a0a") && a.html.contains("margin: 7px"),
        "{}",
        a.html
    );
    named(
        "<style>\n.a { color: #111 }\n.b { color: rgb(0 128 0) }\n</style>",
        "gmail-style-syntax-error",
        3,
        &["gmail_chrome_web", "gmail_android"],
        &["applemail_macos", "gmail_mobile_web"],
    );
}

fn images_off(id: &str, html: &str) -> emulate::Transformed {
    let (catalog, book) = shipped();
    emulate::transform_variant(
        html,
        &client(&catalog, id),
        &book,
        domain::Variant::NoImages,
    )
    .expect("transforms")
}

const STYLED_IMAGE: &str = "<html><body><table><tr><td bgcolor=\"#ff0000\"><img src=\"https://x.test/hero.png\" width=\"300\" height=\"100\" alt=\"Hero &amp; sale\" data-probe=\"p\" class=\"hero\" style=\"display:block;background-color:#123456;color:#abcdef;font-size:30px\"><img src=\"cid:logo@x\" alt=\"logo\"></td></tr></table></body></html>";

#[test]
fn with_images_off_gmail_and_apple_mail_draw_the_alt_text_styled_by_the_image() {
    for id in [
        "gmail_chrome_web",
        "gmail_android",
        "applemail_macos",
        "iphone15_ios",
    ] {
        let t = images_off(id, STYLED_IMAGE);
        let box_at = t
            .html
            .find("data-mailproof-alt-text")
            .unwrap_or_else(|| panic!("{id}: {}", t.html));
        let boxed = &t.html[box_at..];
        let end = boxed.find("</span>").expect("closed");
        let boxed = &boxed[..end];
        assert!(
            boxed.contains("width:300px;height:100px;")
                && boxed.contains("background-color")
                && boxed.contains("#123456")
                && boxed.contains("data-probe=\"p\"")
                && boxed.contains(">Hero &amp; sale"),
            "{id}: {boxed}"
        );
        assert!(!t.html.contains("hero.png"), "{id}: the image is gone");
        assert!(t.html.contains("cid:logo@x"), "{id}: embedded images stay");
        assert!(
            t.rule_set.contains("images-off-alt-text"),
            "{id}: {}",
            t.rule_set
        );
        let shown = html_for(id, STYLED_IMAGE);
        assert!(shown.html.contains("hero.png") && !shown.html.contains("data-mailproof-alt"));
    }
}

#[test]
fn with_images_off_outlook_for_windows_draws_its_placeholder_with_the_alt_text_cut() {
    let long_alt = "a".repeat(250);
    let html = STYLED_IMAGE.replace("Hero &amp; sale", &long_alt);
    for id in ["outlook2016_win", "outlook365_win_dm"] {
        let t = images_off(id, &html);
        let at = t
            .html
            .find("data-mailproof-blocked-image")
            .unwrap_or_else(|| panic!("{id}: {}", t.html));
        let boxed = &t.html[at..];
        assert!(
            boxed.contains("Outlook prevented automatic download"),
            "{id}"
        );
        assert!(
            boxed.contains(&format!("<br>{}</span>", "a".repeat(200))),
            "{id}: {boxed}"
        );
        assert!(!boxed.contains(&"a".repeat(201)), "{id}: cut at 200");
        assert!(
            !boxed[..boxed.find("</span>").expect("closed")].contains("#123456"),
            "{id}: not the image's background"
        );
        assert!(!t.html.contains("hero.png"), "{id}");
        assert!(
            t.rule_set.contains("outlook-win-images-off-placeholder"),
            "{}",
            t.rule_set
        );
    }
}

#[test]
fn with_images_off_clients_whose_sources_disagree_keep_the_engine_drawing() {
    for id in [
        "outlook_com_chrome",
        "outlook_new_win",
        "yahoo_chrome_web",
        "thunderbird_win",
        "windows_mail",
    ] {
        let t = images_off(id, STYLED_IMAGE);
        assert!(
            t.html.contains("hero.png")
                && !t.html.contains("data-mailproof-alt-text")
                && !t.html.contains("data-mailproof-blocked-image"),
            "{id}: {}",
            t.html
        );
    }
    assert!(images_off("outlook_com_chrome", STYLED_IMAGE)
        .rule_set
        .contains("owa-images-off"));
}

/// Gmail Android and iOS Mail shrink what is wider than the screen once laid out: the transform
/// leaves the decision to the page's measured width, whatever the CSS says, and only then names
/// the behaviour and lays the page out at that width.
#[test]
fn gmail_android_and_ios_mail_zoom_out_by_the_measured_page_not_by_the_source() {
    let wide = "<table width=\"600\"><tr><td>x</td></tr></table>";
    let unrelated_query = format!(
        "<style>@media only screen and (max-width: 620px) {{ .footer {{ font-size: 12px }} }}</style>{wide}"
    );
    for (id, behaviour) in [
        ("gmail_android", "gmail-android-auto-fit"),
        ("iphone15_ios", "ios-mail-zoom-out"),
        ("iphone_se_ios", "ios-mail-zoom-out"),
    ] {
        for html in [wide, unrelated_query.as_str()] {
            let t = html_for(id, html);
            assert_eq!(t.layout_width, None, "{id}: not decided from the source");
            assert!(t.zoom_to_fit.is_some(), "{id}: measured first");
            assert!(!t.rule_set.contains(behaviour), "{id}: {}", t.rule_set);
            let mut fits = t.clone();
            fits.measured(300, 320);
            assert_eq!(fits.layout_width, None, "{id}: a page that fits");
            assert_eq!(fits.rule_set, t.rule_set);
            let mut zoomed = t;
            zoomed.measured(600, 320);
            assert_eq!(zoomed.layout_width, Some(600), "{id}");
            assert!(
                zoomed.rule_set.ends_with(&format!(" + {behaviour}")),
                "{id}: {}",
                zoomed.rule_set
            );
            assert!(zoomed.zoom_to_fit.is_none(), "{id}: measured once");
        }
    }
    let opted_out = format!("<meta name=\"x-apple-disable-message-reformatting\">{wide}");
    for (id, html) in [
        ("iphone15_ios", opted_out.as_str()),
        ("gmail_ios", wide),
        ("outlook_android", wide),
    ] {
        assert_eq!(html_for(id, html).zoom_to_fit, None, "{id}: {html}");
    }
    assert!(html_for("gmail_android", &opted_out).zoom_to_fit.is_some());
}
#[test]
fn dark_behaviours_must_name_dark_profiles_whose_rule_set_predicts_the_same_class() {
    let (catalog, book) = shipped();
    let text = std::fs::read_to_string(repo().join("data/behaviours.toml")).expect("readable");
    let check = |text: &str| {
        Behaviours::parse("t", text)
            .expect("parses")
            .check(&catalog, &|name| book.get(name))
    };
    assert_eq!(check(&text), Vec::<String>::new());
    // A light profile under a dark behaviour.
    let light = text.replace(
        "clients = [\"gmail_ios_dm\", \"outlook365_win_dm\"]",
        "clients = [\"gmail_ios\", \"outlook365_win_dm\"]",
    );
    assert_ne!(
        light, text,
        "the full-invert entry is where the test expects it"
    );
    let problems = check(&light);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("gmail_ios") && p.contains("not a dark-mode profile")),
        "{problems:?}"
    );
    // A partial rule set under the full-inversion behaviour.
    let wrong_class = text.replace(
        "clients = [\"gmail_ios_dm\", \"outlook365_win_dm\"]",
        "clients = [\"gmail_ios_dm\", \"outlook365_win_dm\", \"outlook_com_chrome_dm\"]",
    );
    let problems = check(&wrong_class);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("outlook_com_chrome_dm") && p.contains("PartialInvert")),
        "{problems:?}"
    );
}
