//! The code analysis on the shipped rule sets: line numbers, severities, and agreement with what
//! the transformation (and so the screenshot) does, probe by probe for every profile.

use emulate::probes::{expected, ProbeColour, PROBES};
use emulate::{analyze, Severity};

use super::shipped;

fn client(catalog: &domain::Catalog, id: &str) -> domain::Client {
    catalog
        .clients()
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("catalog has {id}"))
        .clone()
}

/// `display:flex` on line 7, `position` on line 9 (in a `<style>`), a `<video>` on line 11.
const SMALL: &str = "<!doctype html>\n<html>\n<head>\n<style>\n.a { color: #333; }\n</style>\n\
<title>x</title><div style=\"display:flex\">a</div>\n<style>\n.b { position: absolute; }\n</style>\n\
<video src=\"a.mp4\"></video>\n</html>\n";

#[test]
fn display_flex_is_an_error_on_its_line_for_outlook_windows_and_nothing_for_apple_mail() {
    let (catalog, book) = shipped();
    let outlook = analyze(SMALL, &client(&catalog, "outlook2021_win"), &book).expect("analyses");
    let flex = outlook
        .find(Severity::Error, "display:flex")
        .unwrap_or_else(|| panic!("display:flex error: {outlook:#?}"));
    assert_eq!(flex.lines, vec![7]);
    assert_eq!(flex.feature, "css-display-flex");
    assert!(flex.message.contains("Outlook"), "{}", flex.message);
    let position = outlook
        .find(Severity::Error, "position")
        .expect("position error");
    assert_eq!(position.lines, vec![9]);
    let video = outlook
        .find(Severity::Error, "<video>")
        .expect("video error");
    assert_eq!(video.lines, vec![11]);

    let apple = analyze(SMALL, &client(&catalog, "applemail_macos"), &book).expect("analyses");
    assert!(
        apple.findings.iter().all(|f| !f.property.contains("flex")),
        "{apple:#?}"
    );
    assert_eq!(apple.of(Severity::Error).count(), 0, "{apple:#?}");
}

#[test]
fn partial_support_is_a_warning_with_the_public_note_and_scoped_drops_are_errors() {
    let (catalog, book) = shipped();
    let html = "<table><tr><td style=\"padding: 4px\">a</td></tr></table>\n\
                <div style=\"padding: 4px\">b</div>\n";
    let a = analyze(html, &client(&catalog, "outlook2021_win"), &book).expect("analyses");
    let partial = a
        .find(Severity::Warning, "padding")
        .expect("padding warning");
    assert_eq!(partial.lines, vec![1, 2]);
    assert!(
        partial.message.contains("table cells"),
        "caniemail's note: {}",
        partial.message
    );
    let styled = analyze(
        "<style>p { color: red }</style>\n",
        &client(&catalog, "outlook2021_win"),
        &book,
    )
    .expect("analyses");
    let style = styled
        .find(Severity::Warning, "<style>")
        .expect("html-style is partial in Outlook for Windows");
    assert_eq!(
        (style.feature.as_str(), style.lines.as_slice()),
        ("html-style", &[1][..])
    );
    let dropped = a
        .find(Severity::Error, "padding on <div>")
        .expect("padding on div is dropped by Word");
    assert_eq!(dropped.lines, vec![2]);
    assert!(a.find(Severity::Error, "padding on <td>").is_none());
}

#[test]
fn behaviours_are_info_and_multiline_styles_keep_their_lines() {
    let (catalog, book) = shipped();
    let html = "<!--[if mso]><table><tr><td><![endif]-->\n<div class=\"c\"\n  style=\"\n   color: #000000;\n   background-color: #ffffff\">x</div>\n";
    let win = analyze(html, &client(&catalog, "outlook2021_win"), &book).expect("analyses");
    let cond = win
        .of(Severity::Info)
        .find(|f| f.feature == "mso-conditionals")
        .expect("conditional info");
    assert_eq!(cond.lines, vec![1]);
    let dark = win
        .find(Severity::Info, "background-color")
        .expect("full inversion of the background colour");
    assert_eq!(dark.lines, vec![5]);
    assert_eq!(
        win.find(Severity::Info, "color")
            .expect("text colour")
            .lines,
        vec![4]
    );

    let com = analyze(html, &client(&catalog, "outlook_com_chrome"), &book).expect("analyses");
    let class = com
        .find(Severity::Info, "class attribute")
        .expect("class rewriting is a behaviour of Outlook.com");
    assert_eq!(class.lines, vec![2]);
    assert!(com
        .of(Severity::Info)
        .all(|f| f.feature != "mso-conditionals"));
}

#[test]
fn content_hidden_from_word_is_not_judged_for_word() {
    let (catalog, book) = shipped();
    let html = "<div style=\"mso-hide:all\">\n<div style=\"display:flex\">x</div>\n</div>\n\
                <!--[if !mso]><!--><p style=\"float:left\">y</p><!--<![endif]-->\n";
    let a = analyze(html, &client(&catalog, "outlook2021_win"), &book).expect("analyses");
    assert!(a.find(Severity::Error, "display:flex").is_none(), "{a:#?}");
    assert!(a.find(Severity::Error, "float").is_none(), "{a:#?}");
}

/// For every profile and probe: the analysis marks the probe's feature unsupported exactly when
/// the rule data makes the probe's sample red because of it (the fidelity report found the
/// screenshots agree with that verdict), and the probe is red exactly when the analysis reports
/// an error for its feature or one it requires.
#[test]
fn the_analysis_of_every_probe_agrees_with_the_fidelity_verdict_for_every_profile() {
    let (catalog, book) = shipped();
    let mut checked = 0;
    for c in catalog.clients() {
        let set = book.get(&c.rules).expect("rule set");
        for p in PROBES {
            let exp = expected(p, set);
            let a = analyze(p.html, c, &book).expect("probe analyses");
            let errors: Vec<&str> = a.of(Severity::Error).map(|f| f.feature.as_str()).collect();
            assert_eq!(
                errors.contains(&p.slug),
                exp.because.contains(&p.slug),
                "{} on {}: analysis errors {errors:?}, expected red because of {:?}",
                p.slug,
                c.id,
                exp.because
            );
            let involved = std::iter::once(p.slug).chain(p.requires.iter().copied());
            let red = involved.clone().any(|s| errors.contains(&s));
            assert_eq!(
                red,
                exp.colour == ProbeColour::Red,
                "{} on {}: errors {errors:?}, expected {exp:?}",
                p.slug,
                c.id
            );
            checked += 1;
        }
    }
    assert!(checked >= 12 * 20, "only {checked} probe/profile pairs");
}

#[test]
fn every_corpus_email_analyses_for_every_profile_with_lines_inside_the_email() {
    let (catalog, book) = shipped();
    let dir = super::repo().join("../shared/corpus");
    let mut emails = 0;
    let entries = std::fs::read_dir(&dir).expect("../shared/corpus readable");
    for e in entries {
        let path = e.expect("corpus entry").path();
        if path.extension().and_then(|x| x.to_str()) != Some("html") {
            continue;
        }
        let html = std::fs::read_to_string(&path).expect("corpus email readable");
        let last = u32::try_from(html.lines().count() + 1).expect("line count fits");
        for c in catalog.clients() {
            let a = analyze(&html, c, &book).expect("corpus email analyses");
            for f in &a.findings {
                assert!(!f.lines.is_empty(), "{f:?}");
                assert!(
                    f.lines.iter().all(|l| (1..=last).contains(l)),
                    "{}: {f:?} outside 1..={last}",
                    path.display()
                );
            }
        }
        emails += 1;
    }
    assert!(emails > 0, "no corpus emails in {}", dir.display());
}

#[test]
fn tips_come_from_each_clients_rule_set_most_consequential_first() {
    let (catalog, book) = shipped();
    let win = emulate::tips(&client(&catalog, "outlook2021_win"), &book).expect("tips");
    assert!(!win.is_empty() && win.len() <= emulate::tips::MAX_TIPS);
    assert_eq!(win[0].feature, "mso-conditionals", "{win:#?}");
    let max_width = win
        .iter()
        .find(|t| t.feature == "css-max-width")
        .expect("Outlook for Windows drops max-width");
    assert!(
        max_width.tip.contains("ignores max-width") && max_width.tip.contains("<!--[if mso]>"),
        "{}",
        max_width.tip
    );
    assert!(win.iter().any(|t| t.feature == "dark-mode"));

    let apple = emulate::tips(&client(&catalog, "applemail_macos"), &book).expect("tips");
    assert!(
        apple
            .iter()
            .all(|t| t.feature != "css-max-width" && t.feature != "mso-conditionals"),
        "{apple:#?}"
    );
    let com = emulate::tips(&client(&catalog, "outlook_com_chrome"), &book).expect("tips");
    assert!(com.iter().any(|t| t.feature == "class-prefix"), "{com:#?}");
    for c in catalog.clients() {
        let t = emulate::tips(c, &book).expect("tips for every profile");
        let names: std::collections::BTreeSet<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), t.len(), "{}: duplicate tip names", c.id);
        assert!(
            t.iter().all(|t| t.tip.contains(&c.display_name)),
            "{}: every tip names the client",
            c.id
        );
    }
}

// The zoom-out depends on the laid-out page: the source's fixed widths are a guess (a media query
// may undo them, a long word may widen a fluid page), and the screenshot's measurement settles it.
#[test]
fn the_zoom_out_finding_follows_what_the_drawn_page_measured() {
    let (catalog, book) = shipped();
    let gmail = client(&catalog, "gmail_android");
    let fixed = "<html><body><table width=\"600\"><tr><td>Hello</td></tr></table></body></html>";
    let fluid = "<html><body><p>Hello</p></body></html>";

    let guessed = analyze(fixed, &gmail, &book).expect("analyses");
    let id = guessed
        .zoom_out()
        .expect("Gmail Android zooms out")
        .to_string();
    assert!(guessed.behaviours.contains(&id), "{guessed:#?}");

    let mut fitted = guessed.clone();
    fitted.measured(false);
    assert!(!fitted.behaviours.contains(&id));
    assert!(
        fitted.findings.iter().all(|f| f.feature != id),
        "{fitted:#?}"
    );

    let mut widened = analyze(fluid, &gmail, &book).expect("analyses");
    assert!(!widened.behaviours.contains(&id));
    widened.measured_by_rule_set(Some(&format!("gmail-android-app + {id}")));
    assert!(widened.behaviours.contains(&id));
    let f = widened
        .find(Severity::Warning, "page width")
        .unwrap_or_else(|| panic!("{widened:#?}"));
    assert!(f.message.contains("no fixed width"), "{}", f.message);

    // No screenshot yet: the guess stands.
    let mut waiting = guessed.clone();
    waiting.measured_by_rule_set(None);
    assert_eq!(waiting, guessed);
}
