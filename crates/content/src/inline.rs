//! Moves the CSS of `<style>` blocks into `style` attributes, as senders do before mailing, for
//! the `content/inlinecss` view (spec §4.1).
//!
//! What cannot live in an attribute (`@media`, `@font-face`, `:hover` and other rules that match
//! nothing at rest) stays in the `<style>` blocks, which is what email developers expect from an
//! inliner. Linked stylesheets are never loaded (that would be a network fetch outside
//! [`crate::fetch`] and its policy); their `<link>` tags are kept so the document still names them.

use css_inline::{CSSInliner, InlineOptions};

/// Why a document could not be inlined.
#[derive(Debug, thiserror::Error)]
pub enum InlineError {
    #[error(
        "the stylesheets of this HTML could not be inlined: {0}; check the CSS inside its <style> \
         blocks"
    )]
    Css(String),
}

/// Returns `html` with its `<style>` rules applied as inline `style` attributes.
///
/// The inliner is lenient, as browsers are: rules it cannot parse are skipped rather than
/// refused, so an error here is rare (css-inline reports one only if serialising fails).
pub fn inline_css(html: &str) -> Result<String, InlineError> {
    let options = InlineOptions::default()
        .inline_style_tags(true)
        .keep_style_tags(true)
        .remove_inlined_selectors(true)
        .keep_link_tags(true)
        .load_remote_stylesheets(false);
    CSSInliner::new(options)
        .inline(html)
        .map_err(|e| InlineError::Css(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline(html: &str) -> String {
        inline_css(html).expect("the test HTML inlines")
    }

    /// The text of every `<style>` block, joined.
    fn style_blocks(html: &str) -> String {
        html.split("<style")
            .skip(1)
            .filter_map(|rest| rest.split_once('>')?.1.split_once("</style>"))
            .map(|(css, _)| css)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn style_rules_become_style_attributes() {
        let out = inline(
            "<html><head><style>p { color: red; } .big { font-size: 20px }</style></head>\
             <body><p class=\"big\">hi</p></body></html>",
        );
        assert!(
            out.contains(r#"<p class="big" style="color: red;font-size: 20px;">hi</p>"#),
            "{out}"
        );
        assert!(
            !style_blocks(&out).contains("color: red"),
            "inlined rules leave <style>: {out}"
        );
    }

    #[test]
    fn existing_inline_styles_win_over_stylesheet_rules() {
        let out =
            inline("<style>p { color: red; margin: 0 }</style><p style=\"color: blue\">hi</p>");
        assert!(out.contains("color: blue"), "{out}");
        assert!(!out.contains("color: red"), "{out}");
        assert!(out.contains("margin: 0"), "{out}");
    }

    #[test]
    fn media_queries_stay_in_a_style_block() {
        let out = inline(
            "<head><style>p { color: red } @media (max-width: 600px) { p { color: black !important } }</style></head><p>x</p>",
        );
        let kept = style_blocks(&out);
        assert!(kept.contains("@media (max-width: 600px)"), "{out}");
        assert!(out.contains(r#"<p style="color: red;">"#), "{out}");
    }

    #[test]
    fn font_faces_and_hover_rules_are_kept() {
        let out = inline(
            "<style>@font-face { font-family: Brand; src: url(brand.woff2) } a:hover { color: blue }</style><a href=\"#\">x</a>",
        );
        let kept = style_blocks(&out);
        assert!(kept.contains("@font-face"), "{out}");
        assert!(kept.contains("a:hover"), "{out}");
    }

    #[test]
    fn linked_stylesheets_are_neither_fetched_nor_dropped() {
        // An unroutable address: if the inliner tried to fetch it, it would fail or hang.
        let out = inline(
            "<head><link rel=\"stylesheet\" href=\"http://192.0.2.1/style.css\"></head><p>x</p>",
        );
        assert!(
            out.contains(r#"href="http://192.0.2.1/style.css""#),
            "{out}"
        );
    }

    #[test]
    fn broken_css_is_skipped_like_a_browser_would() {
        let out = inline("<style>p {{{ color: red } h1 { color: blue }</style><p>x</p><h1>t</h1>");
        assert!(out.contains("<p>x</p>"), "{out}");
    }

    #[test]
    fn every_corpus_template_inlines() {
        for (path, html) in crate::corpus::templates() {
            let out = inline_css(&html)
                .unwrap_or_else(|e| panic!("{} did not inline: {e}", path.display()));
            assert!(
                out.len() > html.len() / 2,
                "{} lost content",
                path.display()
            );
            if style_blocks(&html).contains("@media") {
                assert!(
                    style_blocks(&out).contains("@media"),
                    "{} lost its media queries",
                    path.display()
                );
            }
        }
    }
}
