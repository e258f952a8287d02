//! The text of an email's source a client's branch holds, worked out without the transformation,
//! so that what an engine draws of the transformed email can be checked against it: the Word
//! engine's profiles read Microsoft's conditional comments for their Word version, every other
//! profile reads them as comments; Office XML (`<xml>` islands, `o:` and `w:` elements) is
//! settings, never text, in any client. VML (`v:`) is drawing, and the text of its text boxes is
//! drawn (a VML button's label).

use domain::Client;

use crate::conditional::{self, Mso};
use crate::document::Document;
use crate::{EmulateError, RuleBook};

/// The text nodes of `html` that `client`'s branch holds (trimmed, in document order), whether or
/// not CSS hides them: a drawn page may show less, never more.
pub fn branch_text(
    html: &str,
    client: &Client,
    book: &RuleBook,
) -> Result<Vec<String>, EmulateError> {
    let set = book.rule_set_for(client)?;
    let source = if set.policy.word_engine {
        conditional::activate(html, Mso::of(client)).0
    } else {
        html.to_string()
    };
    let mut doc = Document::parse(&self_closed(&source));
    doc.remove_elements(is_office_xml);
    Ok(doc.texts())
}

/// `html` with Office XML's self-closing tags (`<w:anchorlock/>`, `<o:lock ... />`) written open
/// and closed: Word reads them as XML, empty, while an HTML parser ignores the `/` and would take
/// the VML button's label after `<w:anchorlock/>` for the setting's content.
fn self_closed(html: &str) -> String {
    static SELF_CLOSING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)<([ovw]:[a-z0-9_-]+)([^<>]*?)/\s*>")
            .unwrap_or_else(|e| panic!("self-closing pattern does not compile: {e}"))
    });
    SELF_CLOSING.replace_all(html, "<$1$2></$1>").into_owned()
}

/// Office XML settings: an `<xml>` island, or an element of the `o:` or `w:` namespaces.
pub fn is_office_xml(name: &str) -> bool {
    name == "xml" || name.starts_with("o:") || name.starts_with("w:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_closing_office_tag_holds_nothing() {
        let html = "<v:roundrect><w:anchorlock/><center>Sign up now!</center></v:roundrect>";
        let mut doc = Document::parse(&self_closed(html));
        doc.remove_elements(is_office_xml);
        assert_eq!(doc.texts(), vec!["Sign up now!"]);
        assert_eq!(
            self_closed("<o:lock v:ext=\"edit\" />"),
            "<o:lock v:ext=\"edit\" ></o:lock>"
        );
    }

    #[test]
    fn office_xml_is_never_text() {
        for name in [
            "xml",
            "o:officedocumentsettings",
            "o:pixelsperinch",
            "w:anchorlock",
        ] {
            assert!(is_office_xml(name), "{name}");
        }
        for name in ["table", "option", "v:textbox", "v:roundrect"] {
            assert!(!is_office_xml(name), "{name}");
        }
    }
}
