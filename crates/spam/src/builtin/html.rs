//! A small, forgiving HTML scanner for the content checks: visible text, links, images and
//! text hidden by inline styles. It does not build a tree; spam heuristics need only these facts.

/// What the content checks need to know about one HTML body.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct HtmlFacts {
    /// Text a reader would see (tags, comments, `<style>` and `<script>` removed).
    pub visible_text: String,
    /// `href` values of links, in order.
    pub links: Vec<String>,
    pub images: usize,
    /// Letters of text that sit directly inside elements hidden by inline style.
    pub hidden_letters: usize,
}

/// Bodies above this are scanned only up to it: the heuristics look at what readers see first.
const MAX_SCAN_BYTES: usize = 2 * 1024 * 1024;

pub(crate) fn scan(html: &str) -> HtmlFacts {
    let html = truncate_at_char_boundary(html, MAX_SCAN_BYTES);
    let mut facts = HtmlFacts::default();
    let mut rest = html;
    let mut hidden_open = false;
    while let Some(lt) = rest.find('<') {
        push_text(&mut facts, &rest[..lt], hidden_open);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else {
            rest = "";
            break;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if tag.starts_with('/') {
            hidden_open = false;
            continue;
        }
        if name == "style" || name == "script" {
            let close = format!("</{name}");
            rest = find_ascii_case_insensitive(rest, &close).map_or("", |i| &rest[i..]);
            continue;
        }
        match name.as_str() {
            "a" => {
                if let Some(href) = attribute(tag, "href") {
                    facts.links.push(href);
                }
            }
            "img" => facts.images += 1,
            _ => {}
        }
        hidden_open = attribute(tag, "style").is_some_and(|s| hides_text(&s));
    }
    push_text(&mut facts, rest, hidden_open);
    facts
}

fn push_text(facts: &mut HtmlFacts, raw: &str, hidden: bool) {
    if raw.trim().is_empty() {
        return;
    }
    let text = decode_entities(raw);
    if hidden {
        facts.hidden_letters += text.chars().filter(|c| c.is_alphabetic()).count();
    } else {
        facts.visible_text.push_str(&text);
        facts.visible_text.push(' ');
    }
}

/// Inline styles that make text invisible while keeping it in the message for filters to read.
fn hides_text(style: &str) -> bool {
    let compact: String = style
        .to_ascii_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    compact.split(';').any(|declaration| {
        let Some((property, value)) = declaration.split_once(':') else {
            return false;
        };
        let value = value.trim_end_matches("!important");
        let number = || {
            value
                .trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%')
                .parse::<f64>()
                .ok()
        };
        match property {
            "display" => value == "none",
            "visibility" => value == "hidden",
            "font-size" => number().is_some_and(|n| n <= 1.0),
            "opacity" | "max-height" => number().is_some_and(|n| n == 0.0),
            _ => false,
        }
    })
}

/// Reads `name="v"`, `name='v'` or `name=v` from a tag's source.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(name) {
        let start = from + pos;
        from = start + name.len();
        let before_ok = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = lower[from..].trim_start();
        if !before_ok || !after.starts_with('=') {
            continue;
        }
        let value_start = tag.len() - after.len() + 1;
        let value = tag[value_start..].trim_start();
        let unquoted = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
            _ => value
                .split(|c: char| c.is_whitespace())
                .next()
                .unwrap_or_default(),
        };
        return Some(decode_entities(unquoted.trim()));
    }
    None
}

fn decode_entities(text: &str) -> String {
    text.replace("&nbsp;", " ")
        .replace("&zwnj;", "")
        .replace("&#847;", "")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

fn find_ascii_case_insensitive(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

pub(crate) fn truncate_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_text_skips_tags_styles_and_comments() {
        let facts = scan(
            "<html><style>p{color:red}</style><!-- note --><p>Hello &amp; welcome</p><script>x()</script></html>",
        );
        assert_eq!(facts.visible_text.trim(), "Hello & welcome");
    }

    #[test]
    fn links_images_and_hidden_text_are_counted() {
        let facts = scan(
            r#"<a HREF="http://192.0.2.1/buy">buy</a><img src=x.png><div style="display: none">secret words</div><p>shown</p>"#,
        );
        assert_eq!(facts.links, vec!["http://192.0.2.1/buy".to_string()]);
        assert_eq!(facts.images, 1);
        assert_eq!(facts.hidden_letters, "secretwords".len());
        assert!(facts.visible_text.contains("shown"));
        assert!(!facts.visible_text.contains("secret"));
    }

    #[test]
    fn a_tag_cut_off_at_the_end_does_not_panic() {
        let facts = scan("<p>text</p><a href=\"http://x");
        assert!(facts.visible_text.contains("text"));
    }
}
