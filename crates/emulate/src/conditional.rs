//! Microsoft's conditional comments, read the way the Word engine reads them: a small hand-written
//! parser (the grammar is a few markers and a boolean expression; no maintained crate reads it)
//! for the block structure ([`parse`]) and the conditions ([`Condition::parse`]).
//!
//! The forms, after Microsoft's documentation of Internet Explorer's conditional comments and the
//! spellings email templates use:
//! - downlevel-hidden `<!--[if expr]> … <![endif]-->`: a comment to every browser;
//! - downlevel-revealed `<![if expr]> … <![endif]>`, and its comment-safe spelling
//!   `<!--[if expr]><!--> … <!--<![endif]-->`: content every browser shows;
//! - any of the closings after any of the openings: `<!--[if mso]> … <!--<![endif]-->`
//!   (Mailgun's and MJML-style templates) is an mso-only block whose `<!--` belongs to its end;
//! - blocks nest: a closing ends the innermost open block; an unclosed block runs to the end.
//!
//! Only the Word engine evaluates them ([`activate`]); every other client is a browser, whose HTML
//! parser already reads hidden blocks as comments and shows revealed content.

use std::ops::Range;

/// The Word-engine profile conditionals are evaluated for: `mso` major version (e.g. 16).
#[derive(Clone, Copy, Debug)]
pub struct Mso {
    pub version: u32,
}

impl Mso {
    /// The Word version a profile's conditionals are evaluated as: the major of its catalog
    /// `version` (Outlook 2016 is "16.0"), 16 (the current Word engine) when it has none.
    pub fn of(client: &domain::Client) -> Mso {
        let version = client
            .version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(16);
        Mso { version }
    }
}

/// How a block is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `<!--[if expr]>`
    Hidden,
    /// `<![if expr]>`, or `<!--[if expr]><!-->` (also `<!--[if expr]><!-- -->`).
    Revealed,
}

/// One conditional block: where it opens and closes in the source, and what it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub form: Form,
    /// `None` when the expression does not parse: Word then skips the block.
    pub condition: Option<Condition>,
    /// The opening marker, condition included.
    pub open: Range<usize>,
    pub body: Vec<Piece>,
    /// The closing marker; `None` for a block left open to the end of the document.
    pub close: Option<Range<usize>>,
}

/// A stretch of the document: markup outside any marker, or a conditional block.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Text(Range<usize>),
    Block(Block),
    /// A closing marker with no open block: no browser and not Word shows it.
    StrayClose(Range<usize>),
}

/// A condition: `mso`, `mso 16`, `gte mso 9`, `IE`, `vml`, `true`, `!c`, `a & b`, `a | b`, `(c)`.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    /// A feature (lowercased), compared with a version when one is given (`gte mso 9`, `mso 16`).
    Feature {
        compare: Option<Compare>,
        name: String,
        version: Option<f64>,
    },
    Literal(bool),
    Not(Box<Condition>),
    And(Box<Condition>, Box<Condition>),
    Or(Box<Condition>, Box<Condition>),
}

/// The comparison operators of a feature test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Lt,
    Lte,
    Gt,
    Gte,
}

impl Condition {
    /// Parses an expression; `None` on a syntax error (unbalanced parentheses, a dangling
    /// operator, a comparison without a version).
    pub fn parse(text: &str) -> Option<Condition> {
        let tokens = tokenize(text)?;
        let mut p = CondParser {
            tokens: &tokens,
            pos: 0,
        };
        let c = p.or()?;
        (p.pos == tokens.len()).then_some(c)
    }

    /// Whether the condition holds in the Word engine of `mso`: it answers to `mso` (its version)
    /// and `vml`, is never `IE`, and knows no other feature.
    pub fn holds(&self, mso: Mso) -> bool {
        match self {
            Condition::Literal(b) => *b,
            Condition::Not(c) => !c.holds(mso),
            Condition::And(a, b) => a.holds(mso) && b.holds(mso),
            Condition::Or(a, b) => a.holds(mso) || b.holds(mso),
            Condition::Feature {
                compare,
                name,
                version,
            } => {
                let actual = match name.as_str() {
                    "mso" => f64::from(mso.version),
                    "vml" => 1.0,
                    _ => return false,
                };
                match (compare, version) {
                    (None, None) => true,
                    (None, Some(v)) => (actual - v).abs() < f64::EPSILON,
                    (Some(Compare::Lt), Some(v)) => actual < *v,
                    (Some(Compare::Lte), Some(v)) => actual <= *v,
                    (Some(Compare::Gt), Some(v)) => actual > *v,
                    (Some(Compare::Gte), Some(v)) => actual >= *v,
                    // Refused by the parser.
                    (Some(_), None) => false,
                }
            }
        }
    }
}

/// Evaluates a condition as written (`gte mso 9`) for the Word engine of `mso`; one that does not
/// parse is false.
pub fn evaluate(condition: &str, mso: Mso) -> bool {
    Condition::parse(condition).is_some_and(|c| c.holds(mso))
}

/// The markers, as they start in the (ASCII-lowercased) source.
const OPEN_HIDDEN: &str = "<!--[if";
const OPEN_REVEALED: &str = "<![if";
const CLOSE_REVEALED: &str = "<![endif]>";
const CLOSE_HIDDEN: &str = "<![endif]-->";

/// Reads the conditional-comment structure of `html`.
pub fn parse(html: &str) -> Vec<Piece> {
    let lower = html.to_ascii_lowercase();
    let mut scanner = Scanner {
        src: &lower,
        pos: 0,
    };
    let mut stack: Vec<Block> = Vec::new();
    let mut top: Vec<Piece> = Vec::new();
    let mut text_from = 0;
    while let Some((at, marker)) = scanner.next_marker() {
        let text = Piece::Text(text_from..at.start);
        let into =
            |stack: &mut Vec<Block>, top: &mut Vec<Piece>, piece: Piece| match stack.last_mut() {
                Some(b) => b.body.push(piece),
                None => top.push(piece),
            };
        if at.start > text_from {
            into(&mut stack, &mut top, text);
        }
        text_from = at.end;
        match marker {
            Marker::Open { form, condition } => stack.push(Block {
                form,
                condition: Condition::parse(&html[condition]),
                open: at,
                body: Vec::new(),
                close: None,
            }),
            Marker::Close => match stack.pop() {
                Some(mut b) => {
                    b.close = Some(at);
                    into(&mut stack, &mut top, Piece::Block(b));
                }
                None => top.push(Piece::StrayClose(at)),
            },
        }
    }
    if html.len() > text_from {
        let text = Piece::Text(text_from..html.len());
        match stack.last_mut() {
            Some(b) => b.body.push(text),
            None => top.push(text),
        }
    }
    // Blocks left open run to the end of the document.
    while let Some(b) = stack.pop() {
        match stack.last_mut() {
            Some(outer) => outer.body.push(Piece::Block(b)),
            None => top.push(Piece::Block(b)),
        }
    }
    top
}

enum Marker {
    Open { form: Form, condition: Range<usize> },
    Close,
}

struct Scanner<'a> {
    src: &'a str,
    pos: usize,
}

impl Scanner<'_> {
    /// The next marker from `pos` on: its whole extent and what it is.
    fn next_marker(&mut self) -> Option<(Range<usize>, Marker)> {
        while let Some(rel) = self.src[self.pos..].find("<!") {
            let at = self.pos + rel;
            self.pos = at + 2;
            if let Some((end, marker)) = self.marker_at(at) {
                self.pos = end;
                return Some((at..end, marker));
            }
        }
        self.pos = self.src.len();
        None
    }

    /// The marker starting at `at`, if one does: where it ends and what it is.
    fn marker_at(&self, at: usize) -> Option<(usize, Marker)> {
        let rest = &self.src[at..];
        for (opening, form) in [(OPEN_HIDDEN, Form::Hidden), (OPEN_REVEALED, Form::Revealed)] {
            if let Some(after) = rest.strip_prefix(opening) {
                // `<!--[iffy` is not a conditional; the condition ends at the first `]>`.
                if !after.starts_with(|c: char| c.is_ascii_whitespace() || c == '(' || c == '!') {
                    return None;
                }
                let close = after.find("]>")?;
                if after[..close].contains(['<', '>']) {
                    return None;
                }
                let condition = at + opening.len()..at + opening.len() + close;
                let mut end = condition.end + 2;
                let mut form = form;
                if form == Form::Hidden {
                    // `<!--[if !mso]><!-->`: the comment is closed at once, the content revealed.
                    for reveal in ["<!-->", "<!-- -->"] {
                        if self.src[end..].starts_with(reveal) {
                            end += reveal.len();
                            form = Form::Revealed;
                            break;
                        }
                    }
                }
                return Some((end, Marker::Open { form, condition }));
            }
        }
        // `<!--<![endif]-->` (also `<!-- <![endif]-->`): the `<!--` belongs to the closing.
        let closing = match rest.strip_prefix("<!--") {
            Some(after) => {
                let trimmed = after.trim_start_matches([' ', '\t', '\r', '\n']);
                let skipped = rest.len() - trimmed.len();
                trimmed
                    .starts_with(CLOSE_HIDDEN)
                    .then_some(skipped + CLOSE_HIDDEN.len())
            }
            None if rest.starts_with(CLOSE_HIDDEN) => Some(CLOSE_HIDDEN.len()),
            None if rest.starts_with(CLOSE_REVEALED) => Some(CLOSE_REVEALED.len()),
            None => None,
        }?;
        Some((at + closing, Marker::Close))
    }
}

/// Where every block opens in `html`, in document order (nested ones included).
pub fn openings(html: &str) -> Vec<usize> {
    fn walk(pieces: &[Piece], out: &mut Vec<usize>) {
        for p in pieces {
            if let Piece::Block(b) = p {
                out.push(b.open.start);
                walk(&b.body, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&parse(html), &mut out);
    out
}

/// The HTML the Word engine of `mso` reads: the content of each block whose condition holds, as
/// markup, and nothing of the others nor of any marker. Returns it with the number of blocks.
pub fn activate(html: &str, mso: Mso) -> (String, usize) {
    activate_with(html, mso, false)
}

/// [`activate`], with every removed piece replaced by its line breaks, so that each kept line
/// stays on its line number in the submitted HTML (for the code analysis).
pub fn activate_keeping_lines(html: &str, mso: Mso) -> String {
    activate_with(html, mso, true).0
}

fn activate_with(html: &str, mso: Mso, keep_lines: bool) -> (String, usize) {
    struct Out<'a> {
        html: &'a str,
        text: String,
        keep_lines: bool,
        blocks: usize,
    }
    impl Out<'_> {
        fn drop(&mut self, r: &Range<usize>) {
            if self.keep_lines {
                let breaks = self.html[r.clone()].matches('\n').count();
                self.text.extend(std::iter::repeat_n('\n', breaks));
            }
        }
        fn pieces(&mut self, pieces: &[Piece], mso: Mso, shown: bool) {
            for p in pieces {
                match p {
                    Piece::Text(r) if shown => self.text.push_str(&self.html[r.clone()]),
                    Piece::Text(r) | Piece::StrayClose(r) => self.drop(r),
                    Piece::Block(b) => {
                        self.blocks += 1;
                        self.drop(&b.open);
                        let holds = b.condition.as_ref().is_some_and(|c| c.holds(mso));
                        self.pieces(&b.body, mso, shown && holds);
                        if let Some(close) = &b.close {
                            self.drop(close);
                        }
                    }
                }
            }
        }
    }
    let mut out = Out {
        html,
        text: String::with_capacity(html.len()),
        keep_lines,
        blocks: 0,
    };
    out.pieces(&parse(html), mso, true);
    (out.text, out.blocks)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(f64),
    Not,
    And,
    Or,
    Open,
    Close,
}

/// `None` on a character no condition uses.
fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        let single = match c {
            '!' => Some(Tok::Not),
            '&' => Some(Tok::And),
            '|' => Some(Tok::Or),
            '(' => Some(Tok::Open),
            ')' => Some(Tok::Close),
            _ => None,
        };
        if let Some(t) = single {
            chars.next();
            out.push(t);
            continue;
        }
        let run = |pred: fn(char) -> bool| {
            let len = s[i..].find(|d: char| !pred(d)).unwrap_or(s.len() - i);
            &s[i..i + len]
        };
        if c.is_ascii_whitespace() {
            chars.next();
            continue;
        }
        let word = if c.is_ascii_digit() || c == '.' {
            let n = run(|d| d.is_ascii_digit() || d == '.');
            out.push(Tok::Num(n.parse().ok()?));
            n
        } else if c.is_ascii_alphabetic() {
            let w = run(|d| d.is_ascii_alphanumeric());
            out.push(Tok::Word(w.to_ascii_lowercase()));
            w
        } else {
            return None;
        };
        for _ in 0..word.chars().count() {
            chars.next();
        }
    }
    Some(out)
}

/// Recursive descent over the tokens: `or := and ('|' and)*`, `and := unary ('&' unary)*`,
/// `unary := '!' unary | '(' or ')' | [lt|lte|gt|gte] feature [version] | true | false`.
struct CondParser<'a> {
    tokens: &'a [Tok],
    pos: usize,
}

impl CondParser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        let hit = self.peek() == Some(t);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn or(&mut self) -> Option<Condition> {
        let mut c = self.and()?;
        while self.eat(&Tok::Or) {
            c = Condition::Or(Box::new(c), Box::new(self.and()?));
        }
        Some(c)
    }

    fn and(&mut self) -> Option<Condition> {
        let mut c = self.unary()?;
        while self.eat(&Tok::And) {
            c = Condition::And(Box::new(c), Box::new(self.unary()?));
        }
        Some(c)
    }

    fn unary(&mut self) -> Option<Condition> {
        if self.eat(&Tok::Not) {
            return Some(Condition::Not(Box::new(self.unary()?)));
        }
        if self.eat(&Tok::Open) {
            let c = self.or()?;
            return self.eat(&Tok::Close).then_some(c);
        }
        self.feature()
    }

    fn feature(&mut self) -> Option<Condition> {
        let Some(Tok::Word(first)) = self.peek() else {
            return None;
        };
        let compare = match first.as_str() {
            "lt" => Some(Compare::Lt),
            "lte" => Some(Compare::Lte),
            "gt" => Some(Compare::Gt),
            "gte" => Some(Compare::Gte),
            _ => None,
        };
        if compare.is_some() {
            self.pos += 1;
        }
        let Some(Tok::Word(name)) = self.peek() else {
            return None;
        };
        let name = name.clone();
        self.pos += 1;
        if compare.is_none() && matches!(name.as_str(), "true" | "false") {
            return Some(Condition::Literal(name == "true"));
        }
        let version = match self.peek() {
            Some(Tok::Num(n)) => {
                let n = *n;
                self.pos += 1;
                Some(n)
            }
            _ => None,
        };
        if compare.is_some() && version.is_none() {
            return None;
        }
        Some(Condition::Feature {
            compare,
            name,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const O2013: Mso = Mso { version: 15 };
    const O2016: Mso = Mso { version: 16 };

    fn word(html: &str, mso: Mso) -> String {
        activate(html, mso).0
    }

    #[test]
    fn activation_keeping_lines_leaves_every_kept_line_on_its_number() {
        let html = "a\n<!--[if !mso]><!-->\nhidden\n<!--<![endif]-->\n<!--[if mso]>\nshown\n<![endif]-->\nz";
        let out = activate_keeping_lines(html, Mso { version: 16 });
        let lines: Vec<&str> = out.split('\n').collect();
        let original: Vec<&str> = html.split('\n').collect();
        assert_eq!(lines.len(), original.len(), "{out:?}");
        assert_eq!(lines[5], "shown");
        assert_eq!(lines[7], "z");
        assert!(!out.contains("hidden"), "{out:?}");
    }

    // The examples of Microsoft's documentation of conditional comments (features, values,
    // operators), read by the Word engine: `mso` is its version, it is never IE.
    #[test]
    fn conditions_follow_the_outlook_version() {
        assert!(evaluate("mso", O2016));
        assert!(evaluate("gte mso 9", O2016));
        assert!(evaluate("mso 16", O2016));
        assert!(!evaluate("mso 16", O2013));
        assert!(evaluate("lt mso 16", O2013));
        assert!(!evaluate("lt mso 16", O2016));
        assert!(evaluate("gt mso 15", O2016));
        assert!(!evaluate("gt mso 16", O2016));
        assert!(evaluate("lte mso 15", O2013));
        assert!(!evaluate("lte mso 15", O2016));
        assert!(evaluate("(mso)&(gte mso 12)", O2013));
        assert!(evaluate("mso | IE", O2013));
        assert!(evaluate("(gte mso 9)|(IE)", O2013));
        assert!(!evaluate("IE", O2016));
        assert!(!evaluate("gte IE 7", O2016));
        assert!(!evaluate("!mso", O2016));
        assert!(evaluate("!IE", O2016));
        assert!(evaluate("!(IE 7)", O2016));
        assert!(evaluate("gte vml 1", O2016));
        assert!(evaluate("true", O2016));
        assert!(!evaluate("false", O2016));
        assert!(evaluate("!false & mso", O2016));
        assert!(!evaluate("WindowsEdition 1", O2016));
    }

    #[test]
    fn and_binds_tighter_than_or_and_parentheses_group() {
        // IE | (mso & false): false | false.
        assert!(!evaluate("IE | mso & false", O2016));
        assert!(!evaluate("(IE | mso) & false", O2016));
        assert!(evaluate("mso | IE & false", O2016));
        assert_eq!(
            Condition::parse("!(lt mso 16)"),
            Some(Condition::Not(Box::new(Condition::Feature {
                compare: Some(Compare::Lt),
                name: "mso".into(),
                version: Some(16.0),
            })))
        );
    }

    #[test]
    fn a_condition_that_does_not_parse_is_false() {
        for broken in [
            "", "gte mso", "(mso", "mso)", "mso &", "| mso", "mso ? 9", "gte 9",
        ] {
            assert_eq!(Condition::parse(broken), None, "{broken:?}");
            assert!(!evaluate(broken, O2016), "{broken:?}");
        }
    }

    #[test]
    fn word_engine_shows_mso_blocks_and_hides_revealed_ones() {
        let html = "a<!--[if mso]><b>outlook</b><![endif]-->b<!--[if !mso]><!--><i>web</i><!--<![endif]-->c";
        let (out, n) = activate(html, O2016);
        assert_eq!(out, "a<b>outlook</b>bc");
        assert_eq!(n, 2);
    }

    #[test]
    fn version_specific_blocks_follow_the_profile() {
        let html = "<!--[if gte mso 16]>new<![endif]--><!--[if lt mso 16]>old<![endif]-->";
        assert_eq!(word(html, O2016), "new");
        assert_eq!(word(html, O2013), "old");
    }

    #[test]
    fn the_spaced_revealed_opening_is_understood() {
        let html = "<!--[if !mso]><!-- --><i>web</i><!--<![endif]-->after";
        assert_eq!(word(html, O2016), "after");
    }

    #[test]
    fn the_documented_downlevel_revealed_form_is_evaluated() {
        let html = "<![if !mso]><p>web</p><![endif]><![if mso]><p>word</p><![endif]>";
        assert_eq!(word(html, O2016), "<p>word</p>");
    }

    // mailgun--action.html: an mso-only ghost table opened with `<!--[if mso]>` and closed with
    // `<!--<![endif]-->`. Read as a hidden block closed by `<![endif]-->`, its trailing `<!--` would
    // open a comment that hides the rest of the email.
    #[test]
    fn an_mso_block_closed_the_revealed_way_ends_there_and_leaves_no_comment_open() {
        let html = "<td>\n<!--[if mso]>\n<table><tr><td>\n<!--<![endif]-->\n<p>Confirm</p>\n<!--[if mso]>\n</td></tr></table>\n<!--<![endif]--></td>";
        let out = word(html, O2016);
        assert!(!out.contains("<!--"), "{out}");
        assert_eq!(
            out.split_whitespace().collect::<String>(),
            "<td><table><tr><td><p>Confirm</p></td></tr></table></td>"
        );
    }

    #[test]
    fn blocks_nest_and_each_closing_ends_the_innermost() {
        let html = "<!--[if mso]>a<![if gte mso 16]>b<![endif]>c<!--[if lt mso 16]>d<![endif]-->e<![endif]-->f";
        assert_eq!(word(html, O2016), "abcef");
        assert_eq!(word(html, O2013), "acdef");
        let pieces = parse(html);
        let Some(Piece::Block(outer)) = pieces.first() else {
            panic!("{pieces:?}");
        };
        assert_eq!(
            outer
                .body
                .iter()
                .filter(|p| matches!(p, Piece::Block(_)))
                .count(),
            2
        );
        let at = |m: &str| html.find(m).unwrap_or(usize::MAX);
        assert_eq!(openings(html), vec![0, at("<![if gte"), at("<!--[if lt")]);
    }

    #[test]
    fn an_unclosed_block_runs_to_the_end_and_a_stray_closing_shows_nothing() {
        assert_eq!(word("a<!--[if IE]>b", O2016), "a");
        assert_eq!(word("a<![endif]-->b<![endif]>c", O2016), "abc");
    }

    #[test]
    fn markers_are_read_whatever_their_case_and_ordinary_comments_stay() {
        assert_eq!(
            word("<!--[IF MSO]>x<![ENDIF]--><!-- note --><!--[iffy]>", O2016),
            "x<!-- note --><!--[iffy]>"
        );
    }

    #[test]
    fn the_corpus_spellings_are_all_understood() {
        // Every opening and closing the templates of ../shared/corpus use.
        let html = "<!--[if (gte mso 9)|(IE)]>1<![endif]--><!--[if mso | IE]>2<![endif]--><!--[if lte mso 11]>3<![endif]--><!--[if gte mso 9]>4<![endif]--><!--[if !mso]><!-->5<!--<![endif]-->";
        assert_eq!(word(html, O2016), "124");
        assert_eq!(word(html, Mso { version: 11 }), "1234");
    }
}
