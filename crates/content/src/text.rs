//! The text-only view of an email: what a reader without HTML sees, approximated from the HTML.
//!
//! Layout tables are read cell by cell as blocks, elements hidden with CSS `display: none`
//! (preheaders, mobile-only blocks) stay hidden, links become numbered footnotes, images show
//! their `alt` text, and lines wrap at [`TEXT_WIDTH`].

use html2text::config;
use html2text::render::PlainDecorator;

/// Columns the text view wraps at; plain-text email conventionally stays under 80.
pub const TEXT_WIDTH: usize = 78;

/// Renders `html` as plain text.
///
/// Never fails: if the document's CSS cannot be used, it is rendered without it; if even that
/// fails (html2text gives up on pathological input), the view is empty and a warning is logged.
pub fn text_only(html: &str) -> String {
    let styled = plain()
        .use_doc_css()
        .string_from_read(html.as_bytes(), TEXT_WIDTH);
    match styled {
        Ok(text) => return tidy(&text),
        Err(error) => tracing::debug!(%error, "text view without document CSS"),
    }
    match plain().string_from_read(html.as_bytes(), TEXT_WIDTH) {
        Ok(text) => tidy(&text),
        Err(error) => {
            tracing::warn!(%error, "no text view could be made");
            String::new()
        }
    }
}

fn plain() -> config::Config<PlainDecorator> {
    // Email tables are layout, not data: each cell reads as its own block, one after the other,
    // as in a plain-text part. Overflowing the width beats failing on a long word.
    config::plain().raw_mode(true).allow_width_overflow()
}

/// Drops trailing blanks on each line and runs of more than one empty line, which layout tables
/// produce in quantity.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_and_headings_become_text() {
        let text = text_only("<h1>Welcome</h1><p>Thanks for <b>joining</b>.</p><p>Bye</p>");
        assert!(text.contains("Welcome"), "{text}");
        assert!(text.contains("Thanks for"), "{text}");
        assert!(text.contains("joining"), "{text}");
        assert!(!text.contains('<'), "no markup remains: {text}");
    }

    #[test]
    fn links_keep_their_targets() {
        let text = text_only(r#"<p>Read <a href="https://example.com/post">the post</a></p>"#);
        assert!(text.contains("the post"), "{text}");
        assert!(text.contains("https://example.com/post"), "{text}");
    }

    #[test]
    fn images_show_their_alt_text() {
        let text = text_only(r#"<p><img src="logo.png" alt="ACME Corp"></p>"#);
        assert!(text.contains("ACME Corp"), "{text}");
    }

    #[test]
    fn content_hidden_with_css_stays_hidden() {
        let text = text_only(
            r#"<style>.mobile { display: none }</style>
               <div style="display:none">secret preheader</div>
               <div class="mobile">mobile only</div><p>Visible</p>"#,
        );
        assert!(text.contains("Visible"), "{text}");
        assert!(!text.contains("secret preheader"), "{text}");
        assert!(!text.contains("mobile only"), "{text}");
    }

    #[test]
    fn long_paragraphs_wrap_at_the_text_width() {
        let words = "lorem ipsum dolor sit amet ".repeat(20);
        let text = text_only(&format!("<p>{words}</p>"));
        assert!(text.lines().count() > 3, "{text}");
        assert!(
            text.lines().all(|l| l.chars().count() <= TEXT_WIDTH),
            "{text}"
        );
    }

    #[test]
    fn layout_tables_do_not_leave_runs_of_blank_lines() {
        let text = text_only(
            "<table><tr><td><table><tr><td><p>One</p></td></tr></table></td></tr>\
             <tr><td>&nbsp;</td></tr><tr><td>&nbsp;</td></tr><tr><td><p>Two</p></td></tr></table>",
        );
        assert!(text.contains("One") && text.contains("Two"), "{text}");
        assert!(!text.contains("\n\n\n"), "{text:?}");
        assert!(
            !text.starts_with('\n') && !text.ends_with("\n\n"),
            "{text:?}"
        );
    }

    #[test]
    fn deeply_nested_tables_still_give_text() {
        let depth = 60;
        let html = format!(
            "{}<p>deep</p>{}",
            "<table><tr><td>".repeat(depth),
            "</td></tr></table>".repeat(depth)
        );
        assert!(text_only(&html).contains("deep"));
    }

    #[test]
    fn every_corpus_template_has_a_text_view() {
        for (path, html) in crate::corpus::templates() {
            let text = text_only(&html);
            assert!(
                text.split_whitespace().count() >= 5,
                "{} gave almost no text: {text:?}",
                path.display()
            );
        }
    }

    #[test]
    fn layout_tables_read_as_blocks_not_grids() {
        let text = text_only("<table><tr><td>Left column</td><td>Right column</td></tr></table>");
        let left = text.find("Left column").expect("left cell");
        let right = text.find("Right column").expect("right cell");
        assert!(left < right, "{text}");
        assert!(
            !text.contains(['─', '│', '┬']),
            "no table borders are drawn: {text}"
        );
    }

    #[test]
    fn rules_inside_media_queries_do_not_hide_content() {
        // The text view is not a narrow screen: what only mobile CSS hides stays.
        let text = text_only(
            "<style>@media (max-width: 600px) { .desktop { display: none !important } }</style>\
             <div class=\"desktop\">Desktop banner</div>",
        );
        assert!(text.contains("Desktop banner"), "{text}");
    }
}
