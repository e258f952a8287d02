//! Outlook conditional comments (`<!--[if mso]>...<![endif]-->` and the downlevel-revealed
//! `<!--[if !mso]><!-->...<!--<![endif]-->`): activated for the Word engine, evaluated against the
//! client's version; other clients see comments and revealed content as any browser does.

/// The Word-engine profile conditionals are evaluated for: `mso` major version (e.g. 16).
#[derive(Clone, Copy, Debug)]
pub struct Mso {
    pub version: u32,
}

/// Rewrites every conditional comment for a Word-engine client: content whose condition holds is
/// kept as markup, the rest removed. Returns the new HTML and how many conditionals were seen.
pub fn activate(html: &str, mso: Mso) -> (String, usize) {
    activate_with(html, mso, false)
}

/// [`activate`], with every removed piece replaced by its line breaks, so that each kept line
/// stays on its line number in the submitted HTML (for the code analysis).
pub fn activate_keeping_lines(html: &str, mso: Mso) -> String {
    activate_with(html, mso, true).0
}

fn activate_with(html: &str, mso: Mso, keep_lines: bool) -> (String, usize) {
    let drop = |out: &mut String, removed: &str| {
        if keep_lines {
            out.extend(removed.chars().filter(|c| *c == '\n'));
        }
    };
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    let mut count = 0;
    while let Some(start) = rest.find("<!--[if") {
        out.push_str(&rest[..start]);
        let after_open = &rest[start + "<!--[if".len()..];
        let Some(close) = after_open.find("]>") else {
            // Not a conditional after all: keep the text and move past it.
            out.push_str("<!--[if");
            rest = after_open;
            continue;
        };
        let condition = &after_open[..close];
        let body_start = &after_open[close + 2..];
        drop(&mut out, condition);
        count += 1;
        let holds = evaluate(condition, mso);
        // Downlevel-revealed form: `<!--[if !mso]><!-->content<!--<![endif]-->` (the opening
        // may also be written `<!--[if !mso]><!-- -->`).
        let revealed = ["<!-->", "<!-- -->"]
            .into_iter()
            .find(|m| body_start.starts_with(m));
        if let Some(marker) = revealed {
            let content = &body_start[marker.len()..];
            let (inner, tail) = split_at_endif(content, &["<!--<![endif]-->", "<![endif]-->"]);
            if holds {
                out.push_str(inner);
            } else {
                drop(&mut out, inner);
            }
            rest = tail;
        } else {
            let (inner, tail) = split_at_endif(body_start, &["<![endif]-->"]);
            if holds {
                out.push_str(inner);
            } else {
                drop(&mut out, inner);
            }
            rest = tail;
        }
    }
    out.push_str(rest);
    (out, count)
}

/// Splits at the first of `ends` (earliest match), returning (content, text after the end). An
/// unterminated conditional runs to the end of the document, as in Outlook.
fn split_at_endif<'a>(text: &'a str, ends: &[&str]) -> (&'a str, &'a str) {
    let found = ends
        .iter()
        .filter_map(|e| text.find(e).map(|i| (i, e.len())))
        .min_by_key(|(i, _)| *i);
    match found {
        Some((i, len)) => (&text[..i], &text[i + len..]),
        None => (text, ""),
    }
}

/// Evaluates a condition such as `mso`, `gte mso 9`, `!mso`, `(mso)&(gte mso 12)`,
/// `mso | IE`, `gte vml 1`. Unknown features are false (as Outlook treats them).
pub fn evaluate(condition: &str, mso: Mso) -> bool {
    let tokens = tokenize(condition);
    let mut p = CondParser {
        tokens: &tokens,
        pos: 0,
        mso,
    };
    let value = p.or();
    // Trailing garbage makes the whole condition unusable; Word then skips the block.
    value && p.pos == tokens.len()
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

fn tokenize(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '!' => {
                chars.next();
                out.push(Tok::Not);
            }
            '&' => {
                chars.next();
                out.push(Tok::And);
            }
            '|' => {
                chars.next();
                out.push(Tok::Or);
            }
            '(' => {
                chars.next();
                out.push(Tok::Open);
            }
            ')' => {
                chars.next();
                out.push(Tok::Close);
            }
            c if c.is_ascii_digit() || c == '.' => {
                let mut n = String::new();
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_digit() || d == '.' {
                        n.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Num(n.parse().unwrap_or(0.0)));
            }
            c if c.is_alphabetic() => {
                let mut w = String::new();
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() {
                        w.push(d.to_ascii_lowercase());
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Word(w));
            }
            _ => {
                chars.next();
            }
        }
    }
    out
}

struct CondParser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    mso: Mso,
}

impl CondParser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn or(&mut self) -> bool {
        let mut v = self.and();
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            let r = self.and();
            v = v || r;
        }
        v
    }

    fn and(&mut self) -> bool {
        let mut v = self.unary();
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            let r = self.unary();
            v = v && r;
        }
        v
    }

    fn unary(&mut self) -> bool {
        match self.peek() {
            Some(Tok::Not) => {
                self.pos += 1;
                !self.unary()
            }
            Some(Tok::Open) => {
                self.pos += 1;
                let v = self.or();
                if self.peek() == Some(&Tok::Close) {
                    self.pos += 1;
                }
                v
            }
            _ => self.comparison(),
        }
    }

    fn comparison(&mut self) -> bool {
        let mut op = None;
        if let Some(Tok::Word(w)) = self.peek() {
            if matches!(w.as_str(), "gt" | "gte" | "lt" | "lte") {
                op = Some(w.clone());
                self.pos += 1;
            }
        }
        let feature = match self.peek() {
            Some(Tok::Word(w)) => w.clone(),
            _ => return false,
        };
        self.pos += 1;
        let version = match self.peek() {
            Some(Tok::Num(n)) => {
                let n = *n;
                self.pos += 1;
                Some(n)
            }
            _ => None,
        };
        // Outlook's Word engine answers to `mso` (its version) and `vml`; it is never IE.
        let actual = match feature.as_str() {
            "mso" => Some(f64::from(self.mso.version)),
            "vml" => Some(1.0),
            "true" => return op.is_none(),
            _ => None,
        };
        let Some(actual) = actual else { return false };
        match (op.as_deref(), version) {
            (None, None) => true,
            (None, Some(v)) => (actual - v).abs() < f64::EPSILON,
            (Some(_), None) => false,
            (Some("gt"), Some(v)) => actual > v,
            (Some("gte"), Some(v)) => actual >= v,
            (Some("lt"), Some(v)) => actual < v,
            (Some(_), Some(v)) => actual <= v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const O2013: Mso = Mso { version: 15 };
    const O2016: Mso = Mso { version: 16 };

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

    #[test]
    fn conditions_follow_the_outlook_version() {
        assert!(evaluate("mso", O2016));
        assert!(evaluate("gte mso 9", O2016));
        assert!(evaluate("mso 16", O2016));
        assert!(!evaluate("mso 16", O2013));
        assert!(evaluate("lt mso 16", O2013));
        assert!(!evaluate("lt mso 16", O2016));
        assert!(evaluate("(mso)&(gte mso 12)", O2013));
        assert!(evaluate("mso | IE", O2013));
        assert!(!evaluate("IE", O2016));
        assert!(!evaluate("!mso", O2016));
        assert!(evaluate("!IE", O2016));
        assert!(evaluate("gte vml 1", O2016));
        assert!(!evaluate("lte mso 15", O2016));
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
        assert_eq!(activate(html, O2016).0, "new");
        assert_eq!(activate(html, O2013).0, "old");
    }

    #[test]
    fn the_spaced_revealed_opening_is_understood() {
        let html = "<!--[if !mso]><!-- --><i>web</i><!--<![endif]-->after";
        assert_eq!(activate(html, O2016).0, "after");
    }
}
