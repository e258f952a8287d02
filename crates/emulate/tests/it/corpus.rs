//! Every real-world template of the shared corpus goes through every profile.

use domain::Variant;
use domain::{Catalog, Client};
use emulate::document::visible_text;
use emulate::transform::transform_variant;
use emulate::{transform, Implementation, RuleBook};
use regex::Regex;
use scraper::Html;

use super::{repo, shipped};

#[test]
fn every_corpus_template_transforms_through_every_profile() {
    let (catalog, book) = shipped();
    let dir = repo().join("../shared/corpus");
    let mut templates = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus dir (../shared/corpus) readable") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("html") {
            continue;
        }
        let html = std::fs::read_to_string(&path).expect("template readable");
        templates += 1;
        for c in catalog.clients() {
            let out = transform(&html, c, &book)
                .unwrap_or_else(|e| panic!("{} through {}: {e}", path.display(), c.id));
            assert!(
                !out.html.trim().is_empty(),
                "{} through {}",
                path.display(),
                c.id
            );
            assert!(
                !out.html.contains("<script"),
                "{} through {}",
                path.display(),
                c.id
            );
        }
    }
    assert!(
        templates >= 20,
        "expected the shared corpus, found {templates} templates"
    );
}

/// The corpus templates: name and HTML.
fn corpus() -> Vec<(String, String)> {
    let dir = repo().join("../shared/corpus");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("corpus dir (../shared/corpus) readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("html"))
        .map(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            (
                name.to_string(),
                std::fs::read_to_string(&p).expect("template readable"),
            )
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 20,
        "expected the shared corpus, found {}",
        out.len()
    );
    out
}

/// Text with its white space runs (no-break spaces included) made one space.
fn squeeze(s: &str) -> String {
    s.split(|c: char| c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Outlook for Windows profiles: the Word engine's rule sets.
fn word_profiles<'a>(catalog: &'a Catalog, book: &RuleBook) -> Vec<&'a Client> {
    let word: Vec<&Client> = catalog
        .clients()
        .iter()
        .filter(|c| book.rule_set_for(c).is_ok_and(|s| s.policy.word_engine))
        .collect();
    assert!(
        word.len() >= 4,
        "expected the Word-engine profiles, found {}",
        word.len()
    );
    word
}

/// The drawn text of `html` (text nodes outside comments, the head and raw-text elements), each
/// with whether the source hides it from Word (`mso-hide:all` on it or around it).
fn source_texts(html: &str) -> Vec<(String, bool)> {
    let doc = Html::parse_document(html);
    doc.tree
        .root()
        .descendants()
        .filter_map(|n| {
            let text = n.value().as_text()?;
            let undrawn = n.ancestors().any(|a| {
                a.value()
                    .as_element()
                    .is_some_and(|e| matches!(e.name(), "head" | "style" | "script" | "title"))
            });
            let squeezed = squeeze(text);
            if undrawn || squeezed.is_empty() {
                return None;
            }
            let hidden = n.ancestors().any(|a| {
                a.value()
                    .as_element()
                    .and_then(|e| e.attr("style"))
                    .is_some_and(|s| {
                        s.to_ascii_lowercase()
                            .replace(char::is_whitespace, "")
                            .contains("mso-hide:all")
                    })
            });
            Some((squeezed, hidden))
        })
        .collect()
}

/// What `client` draws of `html`, as squeezed text nodes, and the transformed HTML.
fn drawn(html: &str, client: &Client, book: &RuleBook) -> (Vec<String>, String) {
    let out = transform(html, client, book)
        .unwrap_or_else(|e| panic!("transform for {}: {e}", client.id));
    let text = visible_text(&out.html).iter().map(|t| squeeze(t)).collect();
    (text, out.html)
}

// Real templates write their text in both branches (the mso one only adds ghost tables and VML),
// so Word draws all the text a browser draws of the source, except what the source hides from
// Word, and nothing else: no blank page, no settings printed.
#[test]
fn every_corpus_email_shows_its_text_in_every_outlook_for_windows_profile() {
    let (catalog, book) = shipped();
    let mut failures = Vec::new();
    for (name, html) in corpus() {
        let source = source_texts(&html);
        for c in word_profiles(&catalog, &book) {
            let (word, _) = drawn(&html, c, &book);
            let joined = word.join(" ");
            for (text, hidden) in &source {
                if !hidden && !joined.contains(text.as_str()) {
                    failures.push(format!("{name} on {}: missing {text:?}", c.id));
                }
            }
            for text in &word {
                if !source.iter().any(|(t, _)| t == text) {
                    failures.push(format!("{name} on {}: extra {text:?}", c.id));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn mailgun_action_shows_its_content_in_every_outlook_for_windows_profile() {
    let (catalog, book) = shipped();
    let html = corpus()
        .into_iter()
        .find(|(n, _)| n == "mailgun--action.html")
        .map(|(_, h)| h)
        .expect("mailgun--action.html in the corpus");
    for c in word_profiles(&catalog, &book) {
        let text = drawn(&html, c, &book).0.join(" ");
        for expected in [
            "Please confirm your email address by clicking the link below.",
            "Confirm email address",
            "The Mailgunners",
            "@Mail_Gun",
        ] {
            assert!(
                text.contains(expected),
                "{} lacks {expected:?}: {text:?}",
                c.id
            );
        }
    }
}

// 7 corpus emails carry `<!--[if mso]><noscript><xml><o:OfficeDocumentSettings>…`: Word reads the
// settings and draws none of them, whether the island sits in <noscript> or not.
#[test]
fn no_outlook_for_windows_profile_draws_office_settings() {
    let (catalog, book) = shipped();
    let settings = Regex::new(r"(?i)<o:\w+>([^<]+)</o:").expect("pattern");
    let mut carrying = 0;
    for (name, html) in corpus() {
        let values: Vec<String> = settings
            .captures_iter(&html)
            .map(|c| squeeze(&c[1]))
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            continue;
        }
        carrying += 1;
        for c in word_profiles(&catalog, &book) {
            let (word, _) = drawn(&html, c, &book);
            for v in &values {
                assert!(!word.contains(v), "{name} on {} draws {v:?}", c.id);
            }
            assert!(!word.iter().any(|t| t == "96"), "{name} on {}", c.id);
        }
    }
    assert!(
        carrying >= 7,
        "expected the corpus emails with Office settings, found {carrying}"
    );
}

// No corpus email passes Gmail's 102 KB: each is made long by rows added to its first table, so
// the cut falls mid-table, where a string cut put the clip line in front of the table.
#[test]
fn a_clipped_corpus_email_ends_with_the_clip_line_outside_its_tables() {
    let (catalog, book) = shipped();
    let clipping: Vec<&Client> = catalog
        .clients()
        .iter()
        .filter(|c| book.behaviours().of(c).has(Implementation::ClipLongMessage))
        .collect();
    assert!(!clipping.is_empty());
    let mut clipped = 0;
    for (name, html) in corpus() {
        let Some(at) = html.find("</table>") else {
            continue;
        };
        let rows: String = (0..4000)
            .map(|i| format!("<tr><td>Line item {i}</td></tr>"))
            .collect();
        let long = format!("{}{rows}{}", &html[..at], &html[at..]);
        // The cut falls among the added rows.
        let clip = emulate::transform::CLIP_BYTES;
        assert!(at < clip && at + rows.len() > clip, "{name}");
        clipped += 1;
        let first = source_texts(&long)
            .into_iter()
            .map(|(t, _)| t)
            .find(|t| !t.starts_with('\u{200c}'));
        for c in &clipping {
            let (text, out) = drawn(&long, c, &book);
            let last_two: Vec<&str> = text.iter().rev().take(2).map(String::as_str).collect();
            assert_eq!(
                last_two,
                vec!["View entire message", "[Message clipped]"],
                "{name} on {}: the clip line is not the last text",
                c.id
            );
            assert!(
                text.iter().any(|t| t.starts_with("Line item")),
                "{name} on {}: the rows before the cut are drawn",
                c.id
            );
            if let Some(first) = &first {
                let at = text.iter().position(|t| t == first);
                assert!(
                    at.is_some_and(|i| i + 2 < text.len()),
                    "{name} on {}: {first:?} is not drawn before the clip line",
                    c.id
                );
            }
            let doc = emulate::document::Document::parse(&out);
            assert_eq!(
                doc.inside_table("data-mailproof-clipped"),
                Some(false),
                "{name} on {}: the clip line is inside a table",
                c.id
            );
        }
    }
    assert!(clipped >= 20, "{clipped}");
}

// The analysis and the transformation are two walks over the HTML: on every real email and every
// profile, the analysis names exactly the behaviours some screenshot variant applies, and a
// zoom-out only where the transformation leaves one pending for the page's measurement.
#[test]
fn the_analysis_names_exactly_the_behaviours_the_transformation_applies() {
    let (catalog, book) = shipped();
    let mut pairs = 0;
    let mut failures = Vec::new();
    for (name, html) in corpus() {
        for c in catalog.clients() {
            pairs += 1;
            let mut applied = std::collections::BTreeSet::new();
            let mut pending = None;
            for variant in [Variant::Default, Variant::NoImages] {
                let out = transform_variant(&html, c, &book, variant)
                    .unwrap_or_else(|e| panic!("{name} through {}: {e}", c.id));
                applied.extend(out.behaviours.iter().cloned());
                if let Some(zoom) = &out.zoom_to_fit {
                    pending = zoom.behaviour().map(String::from);
                }
            }
            let analysis = emulate::analyze(&html, c, &book)
                .unwrap_or_else(|e| panic!("{name} analysed for {}: {e}", c.id));
            let named: std::collections::BTreeSet<String> =
                analysis.behaviours.iter().cloned().collect();
            for b in applied.difference(&named) {
                failures.push(format!("{name} on {}: applied, not named: {b}", c.id));
            }
            for b in named.difference(&applied) {
                if pending.as_deref() != Some(b.as_str()) {
                    failures.push(format!("{name} on {}: named, not applied: {b}", c.id));
                }
            }
        }
    }
    assert!(pairs > 1000, "{pairs}");
    assert!(
        failures.is_empty(),
        "{} of {pairs} pairs disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
