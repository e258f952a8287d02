//! The email as a document: parsed into a tree by an HTML5 parser (html5ever, through scraper's
//! tree) the way the engines parse it, changed there, and serialised. A cut made on the tree
//! closes what it leaves open, and an insertion lands where it is put, not where a parser later
//! moves stray markup (text after a half table goes in front of the table).

use ego_tree::NodeId;
use html5ever::driver::{self, ParseOpts};
use html5ever::serialize::{serialize, SerializeOpts, TraversalScope};
use html5ever::tendril::TendrilSink;
use html5ever::tree_builder::TreeBuilderOpts;
use scraper::{Html, HtmlTreeSink, Node};

/// Elements whose text no engine draws.
const UNDRAWN: [&str; 6] = ["head", "style", "script", "title", "template", "noembed"];

/// A parsed email.
pub struct Document {
    html: Html,
}

impl Document {
    /// Parses `html` as the render engines do: JavaScript is off in all of them, so `<noscript>`
    /// content is markup, not text.
    pub fn parse(html: &str) -> Document {
        let opts = ParseOpts {
            tree_builder: TreeBuilderOpts {
                scripting_enabled: false,
                ..TreeBuilderOpts::default()
            },
            ..ParseOpts::default()
        };
        let html = driver::parse_document(HtmlTreeSink::new(Html::new_document()), opts).one(html);
        Document { html }
    }

    /// The document as HTML, with `<noscript>` content written as markup (as it was parsed).
    pub fn serialize(&self) -> Result<String, std::io::Error> {
        let opts = SerializeOpts {
            scripting_enabled: false,
            traversal_scope: TraversalScope::IncludeNode,
            create_missing_parent: false,
        };
        let mut out = Vec::new();
        serialize(&mut out, &self.html, opts)?;
        String::from_utf8(out).map_err(std::io::Error::other)
    }

    /// The `<body>` element (a parsed document always has one).
    fn body(&self) -> Option<NodeId> {
        self.html
            .tree
            .root()
            .descendants()
            .find(|n| n.value().as_element().is_some_and(|e| e.name() == "body"))
            .map(|n| n.id())
    }

    /// Appends `fragment` (HTML, parsed as body content) as the last content of the body: after
    /// everything the email has, outside its tables.
    pub fn append_to_body(&mut self, fragment: &str) {
        let Some(body) = self.body() else { return };
        let parsed = Html::parse_fragment(fragment);
        let grafted = self.html.tree.extend_tree(parsed.tree).id();
        // A fragment parses as Fragment > html > its nodes.
        let nodes: Vec<NodeId> = self
            .html
            .tree
            .get(grafted)
            .into_iter()
            .flat_map(|f| f.children())
            .flat_map(|html| html.children())
            .map(|n| n.id())
            .collect();
        if let Some(mut body) = self.html.tree.get_mut(body) {
            for n in nodes {
                body.append_id(n);
            }
        }
    }

    /// Removes every element `doomed` names (by its lowercased tag name), with its content;
    /// returns how many were removed (nested ones counted once, with their outermost).
    pub fn remove_elements(&mut self, doomed: impl Fn(&str) -> bool) -> usize {
        let ids: Vec<NodeId> = self
            .html
            .tree
            .root()
            .descendants()
            .filter(|n| n.value().as_element().is_some_and(|e| doomed(e.name())))
            .filter(|n| {
                !n.ancestors()
                    .any(|a| a.value().as_element().is_some_and(|e| doomed(e.name())))
            })
            .map(|n| n.id())
            .collect();
        for id in &ids {
            if let Some(mut n) = self.html.tree.get_mut(*id) {
                n.detach();
            }
        }
        ids.len()
    }

    /// The text a browser draws, one entry per text node with something besides white space
    /// (trimmed): comments, the head and raw-text elements left out; CSS (`display:none`) is not
    /// looked at.
    pub fn texts(&self) -> Vec<String> {
        self.html
            .tree
            .root()
            .descendants()
            .filter_map(|n| match n.value() {
                Node::Text(t) if !t.trim().is_empty() => {
                    let undrawn = n.ancestors().any(|a| {
                        a.value()
                            .as_element()
                            .is_some_and(|e| UNDRAWN.contains(&e.name()))
                    });
                    (!undrawn).then(|| t.trim().to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// Whether the first element carrying the attribute `attr` has a `<table>` around it; `None`
    /// when no element carries it.
    pub fn inside_table(&self, attr: &str) -> Option<bool> {
        let node = self.html.tree.root().descendants().find(|n| {
            n.value()
                .as_element()
                .is_some_and(|e| e.attr(attr).is_some())
        })?;
        Some(
            node.ancestors()
                .any(|a| a.value().as_element().is_some_and(|e| e.name() == "table")),
        )
    }
}

/// The text a browser draws of `html` ([`Document::texts`]).
pub fn visible_text(html: &str) -> Vec<String> {
    Document::parse(html).texts()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_appended_fragment_lands_after_a_table_left_open() {
        let mut doc = Document::parse("<body><table><tr><td>cell");
        doc.append_to_body("<div data-end>end</div>");
        assert_eq!(doc.texts(), vec!["cell", "end"]);
        assert_eq!(doc.inside_table("data-end"), Some(false));
        let out = doc.serialize().expect("serialises");
        assert!(
            out.contains("</td></tr></tbody></table><div data-end=\"\">end</div>"),
            "{out}"
        );
    }

    #[test]
    fn noscript_content_is_markup_as_with_javascript_off() {
        let html = "<head><noscript><xml><o:settings>96</o:settings></xml></noscript></head><body>x</body>";
        let mut doc = Document::parse(html);
        assert!(doc.texts().contains(&"96".to_string()), "{:?}", doc.texts());
        assert_eq!(
            doc.remove_elements(|n| n == "xml" || n.starts_with("o:")),
            1
        );
        assert_eq!(doc.texts(), vec!["x"]);
    }

    #[test]
    fn comments_head_and_styles_are_not_drawn_text() {
        let html = "<title>t</title><style>p{}</style><!--[if mso]>mso<![endif]--><p>drawn</p>";
        assert_eq!(visible_text(html), vec!["drawn"]);
    }
}
