//! CSS as a client sees it: style sheets and `style` attributes are parsed with cssparser and
//! re-emitted without the rules, selectors, declarations and at-rules the client drops, with its
//! class/id prefixes, and with forced dark-mode colours.

use std::collections::BTreeMap;

use cssparser::{
    AtRuleParser, CowRcStr, DeclarationParser, ParseError, Parser, ParserInput, ParserState,
    QualifiedRuleParser, RuleBodyItemParser, RuleBodyParser, StyleSheetParser, Token,
};

use crate::color::{self, Role};
use crate::features::{Effect, SelectorPart};
use crate::rules::{DarkMode, ScopedDrop};

/// Deepest nesting of blocks and at-rules followed; deeper content is dropped.
const MAX_DEPTH: usize = 16;

/// What the client does to CSS.
#[derive(Clone, Copy)]
pub struct CssContext<'a> {
    pub effects: &'a [(String, Effect)],
    pub class_prefix: &'a str,
    pub id_prefix: &'a str,
    /// Forced colour change applied to every colour outside `prefers-color-scheme` rules.
    pub dark: DarkMode,
    /// Element-specific drops, applied when `element` is known (style attributes).
    pub scoped: &'a [ScopedDrop],
    pub element: Option<&'a str>,
    /// The client's documented CSS behaviours (data/behaviours.toml).
    pub quirks: Quirks,
}

/// CSS behaviours of a client beyond what it drops (see [`crate::behaviours::Implementation`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    /// A sheet with an at-rule inside an at-rule is dropped whole.
    pub nested_at_rule_drops_sheet: bool,
    /// Only the first class of a compound selector gets the class prefix.
    pub first_class_prefixed_only: bool,
    /// A leading attribute-only compound (`[owa] .a`) is removed from the selector.
    pub attribute_selector_mangled: bool,
    /// `line-height` is a minimum unless `mso-line-height-rule: exactly`.
    pub line_height_minimum: bool,
    /// A font stack starting with a family Windows lacks becomes Times New Roman (or
    /// `mso-font-alt`).
    pub web_font_fallback: bool,
    /// `height` is written as `min-height`.
    pub height_to_min_height: bool,
}

impl Quirks {
    pub fn of(applied: &crate::behaviours::Applied<'_>) -> Quirks {
        use crate::behaviours::Implementation as I;
        Quirks {
            nested_at_rule_drops_sheet: applied.has(I::StyleNestedAtRuleDropsBlock),
            first_class_prefixed_only: applied.has(I::CompoundSelectorFirstClassOnly),
            attribute_selector_mangled: applied.has(I::AttributeSelectorMangled),
            line_height_minimum: applied.has(I::LineHeightMinimum),
            web_font_fallback: applied.has(I::WebFontTimesFallback),
            height_to_min_height: applied.has(I::HeightToMinHeight),
        }
    }
}

/// How tall Word makes a line at least, as a factor of the font size: a browser's usual `normal`
/// line height (Word's own figure depends on the font; not published).
const WORD_MIN_LINE: &str = "1.2em";

/// Font families Windows has (or substitutes, as Helvetica by Arial), and the generic families:
/// a stack starting with one of these keeps its first family in the Word engine.
const WINDOWS_FONTS: &[&str] = &[
    "arial",
    "arial black",
    "aptos",
    "bahnschrift",
    "calibri",
    "cambria",
    "candara",
    "comic sans ms",
    "consolas",
    "constantia",
    "corbel",
    "courier",
    "courier new",
    "franklin gothic medium",
    "gabriola",
    "georgia",
    "helvetica",
    "impact",
    "lucida console",
    "lucida sans unicode",
    "microsoft sans serif",
    "palatino linotype",
    "segoe print",
    "segoe script",
    "segoe ui",
    "sitka",
    "sylfaen",
    "symbol",
    "tahoma",
    "times",
    "times new roman",
    "trebuchet ms",
    "verdana",
    "webdings",
    "wingdings",
    "serif",
    "sans-serif",
    "monospace",
    "cursive",
    "fantasy",
];

/// Counts of what was removed, keyed by caniemail slug or a short reason.
#[derive(Debug, Default)]
pub struct Removed(pub BTreeMap<String, usize>);

impl Removed {
    pub fn note(&mut self, what: &str) {
        *self.0.entry(what.to_string()).or_default() += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Parsed form: enough structure to filter, with every value kept as its source text.

#[derive(Debug)]
struct Decl {
    name: String,
    value: String,
    important: bool,
    /// 0-based line in the parsed text, for the code analysis.
    line: u32,
}

#[derive(Debug)]
enum Rule {
    Style {
        selectors: String,
        decls: Vec<Decl>,
        /// 0-based line where the selector list starts.
        line: u32,
    },
    At {
        name: String,
        prelude: String,
        body: AtBody,
        line: u32,
    },
}

#[derive(Debug)]
enum AtBody {
    None,
    Rules(Vec<Rule>),
    Decls(Vec<Decl>),
    Raw(String),
}

fn consume_all<'i>(input: &mut Parser<'i, '_>) -> &'i str {
    let start = input.position();
    while input.next_including_whitespace_and_comments().is_ok() {}
    input.slice_from(start)
}

struct SheetParser {
    errors: usize,
    depth: usize,
}

impl<'i> QualifiedRuleParser<'i> for SheetParser {
    type Prelude = String;
    type QualifiedRule = Rule;
    type Error = ();

    fn parse_prelude<'t>(
        &mut self,
        input: &mut Parser<'i, 't>,
    ) -> Result<String, ParseError<'i, ()>> {
        Ok(consume_all(input).trim().to_string())
    }

    fn parse_block<'t>(
        &mut self,
        selectors: String,
        start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<Rule, ParseError<'i, ()>> {
        let decls = parse_decls(input, &mut self.errors);
        Ok(Rule::Style {
            selectors,
            decls,
            line: start.source_location().line,
        })
    }
}

impl<'i> AtRuleParser<'i> for SheetParser {
    type Prelude = (String, String);
    type AtRule = Rule;
    type Error = ();

    fn parse_prelude<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
    ) -> Result<(String, String), ParseError<'i, ()>> {
        Ok((
            name.to_ascii_lowercase(),
            consume_all(input).trim().to_string(),
        ))
    }

    fn rule_without_block(
        &mut self,
        (name, prelude): (String, String),
        start: &ParserState,
    ) -> Result<Rule, ()> {
        Ok(Rule::At {
            name,
            prelude,
            body: AtBody::None,
            line: start.source_location().line,
        })
    }

    fn parse_block<'t>(
        &mut self,
        (name, prelude): (String, String),
        start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<Rule, ParseError<'i, ()>> {
        let body = match name.as_str() {
            "media" | "supports" | "document" | "-moz-document" | "container" | "layer" => {
                if self.depth >= MAX_DEPTH {
                    self.errors += 1;
                    consume_all(input);
                    AtBody::Rules(Vec::new())
                } else {
                    self.depth += 1;
                    let rules = parse_rules(input, self);
                    self.depth -= 1;
                    AtBody::Rules(rules)
                }
            }
            "font-face" | "page" | "viewport" | "-ms-viewport" => {
                AtBody::Decls(parse_decls(input, &mut self.errors))
            }
            _ => AtBody::Raw(consume_all(input).to_string()),
        };
        Ok(Rule::At {
            name,
            prelude,
            body,
            line: start.source_location().line,
        })
    }
}

fn parse_rules(input: &mut Parser<'_, '_>, parser: &mut SheetParser) -> Vec<Rule> {
    let mut rules = Vec::new();
    let mut errors = 0;
    for r in StyleSheetParser::new(input, parser) {
        match r {
            Ok(rule) => rules.push(rule),
            Err(_) => errors += 1,
        }
    }
    parser.errors += errors;
    rules
}

struct DeclParser;

impl<'i> DeclarationParser<'i> for DeclParser {
    type Declaration = Decl;
    type Error = ();

    fn parse_value<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
        start: &ParserState,
    ) -> Result<Decl, ParseError<'i, ()>> {
        let raw = consume_all(input).trim();
        let (value, important) = split_important(raw);
        if value.is_empty() {
            return Err(input.new_custom_error(()));
        }
        Ok(Decl {
            name: name.to_ascii_lowercase(),
            value: value.to_string(),
            important,
            line: start.source_location().line,
        })
    }
}

impl<'i> AtRuleParser<'i> for DeclParser {
    type Prelude = ();
    type AtRule = Decl;
    type Error = ();
}

impl<'i> QualifiedRuleParser<'i> for DeclParser {
    type Prelude = ();
    type QualifiedRule = Decl;
    type Error = ();
}

impl<'i> RuleBodyItemParser<'i, Decl, ()> for DeclParser {
    fn parse_declarations(&self) -> bool {
        true
    }
    fn parse_qualified(&self) -> bool {
        false
    }
}

fn split_important(raw: &str) -> (&str, bool) {
    if let Some(bang) = raw.rfind('!') {
        if raw[bang + 1..].trim().eq_ignore_ascii_case("important") {
            return (raw[..bang].trim_end(), true);
        }
    }
    (raw, false)
}

fn parse_decls(input: &mut Parser<'_, '_>, errors: &mut usize) -> Vec<Decl> {
    let mut out = Vec::new();
    let mut p = DeclParser;
    for d in RuleBodyParser::new(input, &mut p) {
        match d {
            Ok(d) => out.push(d),
            Err(_) => *errors += 1,
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Values.

#[derive(Default)]
struct ValueInfo {
    functions: Vec<String>,
    units: Vec<String>,
    idents: Vec<String>,
    /// Byte ranges of colours in the value, with the parsed colour.
    colors: Vec<(usize, usize, color::Rgba)>,
}

fn scan_value(value: &str) -> ValueInfo {
    let mut info = ValueInfo::default();
    let mut pi = ParserInput::new(value);
    let mut p = Parser::new(&mut pi);
    scan_tokens(&mut p, value, &mut info, 0);
    info
}

fn scan_tokens(p: &mut Parser<'_, '_>, src: &str, info: &mut ValueInfo, depth: usize) {
    loop {
        let start = p.position().byte_index();
        let Ok(tok) = p.next() else { break };
        match tok.clone() {
            Token::Function(name) => {
                let name = name.to_ascii_lowercase();
                info.functions.push(name.clone());
                if depth < MAX_DEPTH {
                    let _ = p.parse_nested_block(|inner| -> Result<(), ParseError<'_, ()>> {
                        scan_tokens(inner, src, info, depth + 1);
                        Ok(())
                    });
                }
                let end = p.position().byte_index();
                if name == "rgb" || name == "rgba" {
                    if let Some(c) = src.get(start..end).and_then(color::parse) {
                        info.colors.push((start, end, c));
                    }
                }
            }
            Token::UnquotedUrl(_) => info.functions.push("url".into()),
            Token::Dimension { unit, .. } => info.units.push(unit.to_ascii_lowercase()),
            Token::Percentage { .. } => info.units.push("%".into()),
            Token::Ident(i) => {
                let end = p.position().byte_index();
                if let Some(c) = color::parse(&i) {
                    info.colors.push((start, end, c));
                }
                info.idents.push(i.to_ascii_lowercase());
            }
            Token::Hash(_) | Token::IDHash(_) => {
                let end = p.position().byte_index();
                if let Some(c) = src.get(start..end).and_then(color::parse) {
                    info.colors.push((start, end, c));
                }
            }
            Token::ParenthesisBlock | Token::SquareBracketBlock | Token::CurlyBracketBlock
                if depth < MAX_DEPTH =>
            {
                let _ = p.parse_nested_block(|inner| -> Result<(), ParseError<'_, ()>> {
                    scan_tokens(inner, src, info, depth + 1);
                    Ok(())
                });
            }
            _ => {}
        }
    }
}

/// The slug of the first effect that removes this declaration.
fn removing_effect<'e>(
    decl: &Decl,
    info: &ValueInfo,
    effects: &'e [(String, Effect)],
) -> Option<&'e str> {
    decl_hits(&decl.name, info, effects)
        .next()
        .map(|(slug, _)| slug)
}

/// Every effect that removes a declaration `name: <value of info>`, with what matched (the
/// property, `property:value`, `function()`, unit or keyword) as the code analysis shows it.
fn decl_hits<'e, 'a>(
    name: &'a str,
    info: &'a ValueInfo,
    effects: &'e [(String, Effect)],
) -> impl Iterator<Item = (&'e str, String)> + 'a
where
    'e: 'a,
{
    effects.iter().filter_map(move |(slug, e)| {
        let label = match e {
            Effect::Properties(names) => names.contains(&name).then(|| name.to_string()),
            Effect::PropertyValues(prop, values) if name == *prop => info
                .idents
                .iter()
                .find(|i| values.contains(&i.as_str()))
                .map(|v| format!("{prop}:{v}")),
            Effect::Functions(fns) => info
                .functions
                .iter()
                .find(|f| fns.contains(&f.as_str()))
                .map(|f| format!("{f}()")),
            Effect::Keywords(kw) => info
                .idents
                .iter()
                .find(|i| kw.contains(&i.as_str()))
                .cloned(),
            Effect::Unit(u) => info
                .units
                .iter()
                .any(|x| x == u)
                .then(|| format!("{u} unit")),
            _ => None,
        };
        label.map(|l| (slug.as_str(), l))
    })
}

fn color_role(property: &str) -> Option<Role> {
    match property {
        "background" | "background-color" => Some(Role::Background),
        "color"
        | "border"
        | "border-top"
        | "border-right"
        | "border-bottom"
        | "border-left"
        | "border-color"
        | "border-top-color"
        | "border-right-color"
        | "border-bottom-color"
        | "border-left-color"
        | "outline"
        | "outline-color"
        | "text-decoration-color" => Some(Role::Foreground),
        _ => None,
    }
}

fn recolor(value: &str, info: &ValueInfo, role: Role, mode: DarkMode) -> String {
    let mut out = value.to_string();
    for (start, end, c) in info.colors.iter().rev() {
        if let Some(new) = color::darken(*c, role, mode) {
            out.replace_range(*start..*end, &new.to_css());
        }
    }
    out
}

/// Filters one declaration; `None` when the client drops it.
fn filter_decl(
    mut decl: Decl,
    cx: &CssContext<'_>,
    dark: DarkMode,
    removed: &mut Removed,
) -> Option<Decl> {
    let mut info = scan_value(&decl.value);
    // A client without CSS background images still paints the colour of a `background`
    // shorthand that also names an image.
    let images_gone = cx.effects.iter().any(|(s, _)| s == "css-background-image");
    if images_gone && decl.name == "background" && info.functions.iter().any(|f| f == "url") {
        removed.note("css-background-image");
        let (s, e, _) = *info.colors.first()?;
        decl.value = decl.value[s..e].to_string();
        info = scan_value(&decl.value);
    }
    if cx.quirks.height_to_min_height && decl.name == "height" {
        decl.name = "min-height".into();
        removed.note(crate::Implementation::HeightToMinHeight.note_key());
    }
    if let Some(slug) = removing_effect(&decl, &info, cx.effects) {
        removed.note(slug);
        return None;
    }
    if let Some(element) = cx.element {
        if cx.scoped.iter().any(|d| d.drops(&decl.name, element)) {
            removed.note(&format!("{} on {element}", decl.name));
            return None;
        }
    }
    if decl.important && cx.effects.iter().any(|(_, e)| *e == Effect::Important) {
        decl.important = false;
        removed.note("css-important");
    }
    if let Some(role) = color_role(&decl.name) {
        if !info.colors.is_empty() {
            decl.value = recolor(&decl.value, &info, role, dark);
        }
    }
    Some(decl)
}

/// A change a documented behaviour makes to one declaration of a block, described once: the
/// transformation applies it ([`apply_block`]) and the code analysis reports it
/// ([`inspect_block`]), so the two cannot disagree on where it happens.
struct BlockChange {
    /// `None` for a change the email asked for (Word taking the `mso-font-alt` it names), which
    /// is applied but is not the client's behaviour showing.
    behaviour: Option<crate::Implementation>,
    /// Index of the declaration in the block.
    index: usize,
    /// The construct as the analysis names it.
    label: String,
    value: String,
}

/// The Word engine's reading of one declaration block, as the client keeps it: `line-height` as
/// a minimum unless `mso-line-height-rule: exactly`, and a first font family Windows lacks
/// replaced by `mso-font-alt` or Times New Roman.
fn block_changes<D: std::borrow::Borrow<Decl>>(decls: &[D], quirks: Quirks) -> Vec<BlockChange> {
    let decls: Vec<&Decl> = decls.iter().map(|d| d.borrow()).collect();
    use crate::Implementation as I;
    let mut out = Vec::new();
    if quirks.line_height_minimum && !is_exact_line_height(decls.iter().copied()) {
        for (index, d) in decls.iter().enumerate() {
            if d.name != "line-height" {
                continue;
            }
            if let Some(value) = minimum_line_height(&d.value) {
                out.push(BlockChange {
                    behaviour: Some(I::LineHeightMinimum),
                    index,
                    label: format!("line-height: {}", d.value),
                    value,
                });
            }
        }
    }
    if quirks.web_font_fallback {
        let alt = decls
            .iter()
            .find(|d| d.name == "mso-font-alt")
            .map(|d| d.value.clone());
        for (index, d) in decls.iter().enumerate() {
            if d.name != "font-family" {
                continue;
            }
            if let Some(first) = missing_first_family(&d.value) {
                out.push(BlockChange {
                    behaviour: alt.is_none().then_some(I::WebFontTimesFallback),
                    index,
                    label: format!("font-family: {first}"),
                    value: alt.clone().unwrap_or_else(|| "\"Times New Roman\"".into()),
                });
            }
        }
    }
    out
}

/// Applies [`block_changes`] to a block the client keeps.
fn apply_block(decls: &mut [Decl], quirks: Quirks, removed: &mut Removed) {
    for change in block_changes(decls, quirks) {
        if let Some(b) = change.behaviour {
            removed.note(b.note_key());
        }
        if let Some(d) = decls.get_mut(change.index) {
            d.value = change.value;
        }
    }
}

fn is_exact_line_height<'d>(mut decls: impl Iterator<Item = &'d Decl>) -> bool {
    decls.any(|d| d.name == "mso-line-height-rule" && d.value.eq_ignore_ascii_case("exactly"))
}

/// `line-height: V` as "at least V": `max(V, 1.2em)`; `None` for keywords and values that are
/// already as tall as a line.
fn minimum_line_height(value: &str) -> Option<String> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    if lower.is_empty()
        || lower
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        || lower.contains("var(")
    {
        return None;
    }
    let as_length = if v.parse::<f64>().is_ok() {
        format!("{v}em")
    } else {
        v.to_string()
    };
    Some(format!("max({as_length}, {WORD_MIN_LINE})"))
}

/// The first family of a `font-family` value when Windows does not have it.
pub(crate) fn missing_first_family(value: &str) -> Option<String> {
    let first = value.split(',').next()?.trim();
    let name = first.trim_matches(['"', '\'']).trim().to_ascii_lowercase();
    // CSS-wide keywords name no font: the family is the parent's.
    let keyword = matches!(name.as_str(), "inherit" | "initial" | "unset" | "revert");
    if name.is_empty()
        || keyword
        || WINDOWS_FONTS.contains(&name.as_str())
        || name.starts_with("var(")
    {
        return None;
    }
    Some(first.to_string())
}

fn write_decls(decls: &[Decl], out: &mut String) {
    for (i, d) in decls.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&d.name);
        out.push_str(": ");
        out.push_str(&d.value);
        if d.important {
            out.push_str(" !important");
        }
        out.push(';');
    }
}

// ---------------------------------------------------------------------------------------------
// Selectors.

/// One selector of a selector list, analysed.
struct SelectorInfo {
    parts: Vec<SelectorPart>,
    /// Byte offsets (in the selector list text) where a class name starts.
    class_at: Vec<usize>,
    /// For each of `class_at`: whether it is the first class of its compound.
    class_first: Vec<bool>,
    /// Byte offsets where an id name starts (after `#`).
    id_at: Vec<usize>,
}

/// Splits a selector list at its top-level commas: (start, end) byte ranges.
fn split_selectors(list: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pi = ParserInput::new(list);
    let mut p = Parser::new(&mut pi);
    let mut start = 0;
    loop {
        let before = p.position().byte_index();
        match p.next_including_whitespace_and_comments() {
            Ok(Token::Comma) => {
                out.push((start, before));
                start = p.position().byte_index();
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    out.push((start, list.len()));
    out
}

fn analyse_selector(text: &str, offset: usize) -> SelectorInfo {
    let mut info = SelectorInfo {
        parts: Vec::new(),
        class_at: Vec::new(),
        class_first: Vec::new(),
        id_at: Vec::new(),
    };
    let mut pi = ParserInput::new(text);
    let mut p = Parser::new(&mut pi);
    analyse_tokens(&mut p, offset, &mut info, 0);
    info
}

fn analyse_tokens(p: &mut Parser<'_, '_>, offset: usize, info: &mut SelectorInfo, depth: usize) {
    // Whether the current compound has started, and how many class/id parts it has.
    let mut in_compound = false;
    let mut named_parts = 0usize;
    let mut classes = 0usize;
    let mut pending_space = false;
    let mut after_combinator = true;
    loop {
        let start = p.position().byte_index();
        let Ok(tok) = p.next_including_whitespace_and_comments() else {
            break;
        };
        let tok = tok.clone();
        let starts_compound = !matches!(
            tok,
            Token::WhiteSpace(_) | Token::Comment(_) | Token::Delim('>' | '+' | '~')
        );
        if starts_compound && pending_space && !after_combinator {
            info.parts.push(SelectorPart::Descendant);
            in_compound = false;
            named_parts = 0;
            classes = 0;
        }
        if starts_compound {
            pending_space = false;
            after_combinator = false;
        }
        match tok {
            Token::WhiteSpace(_) => {
                if in_compound {
                    pending_space = true;
                }
            }
            Token::Comment(_) => {}
            Token::Delim(c @ ('>' | '+' | '~')) => {
                info.parts.push(SelectorPart::Combinator(c));
                in_compound = false;
                named_parts = 0;
                classes = 0;
                pending_space = false;
                after_combinator = true;
            }
            Token::Delim('.') => {
                let name_at = p.position().byte_index();
                if let Ok(Token::Ident(_)) = p.next_including_whitespace_and_comments() {
                    info.parts.push(SelectorPart::Class);
                    info.class_at.push(offset + name_at);
                    info.class_first.push(classes == 0);
                    classes += 1;
                    named_parts += 1;
                }
                in_compound = true;
            }
            Token::IDHash(_) => {
                info.parts.push(SelectorPart::Id);
                info.id_at.push(offset + start + 1);
                named_parts += 1;
                in_compound = true;
            }
            Token::Delim('*') => {
                info.parts.push(SelectorPart::Universal);
                in_compound = true;
            }
            Token::Ident(_) => {
                if !in_compound {
                    info.parts.push(SelectorPart::Type);
                }
                in_compound = true;
            }
            Token::SquareBracketBlock => {
                info.parts.push(SelectorPart::Attribute);
                in_compound = true;
            }
            Token::Colon => {
                in_compound = true;
                let double = p.try_parse(|p| p.expect_colon().map(|_| ())).is_ok();
                let name_tok = p.next_including_whitespace_and_comments().cloned();
                let (name, is_fn) = match name_tok {
                    Ok(Token::Ident(n)) => (n.to_ascii_lowercase(), false),
                    Ok(Token::Function(n)) => (n.to_ascii_lowercase(), true),
                    _ => continue,
                };
                let part = if double || is_legacy_pseudo_element(&name) {
                    SelectorPart::PseudoElement(leak_known(&name))
                } else {
                    SelectorPart::PseudoClass(leak_known(&name))
                };
                info.parts.push(part);
                if is_fn && depth < MAX_DEPTH {
                    let _ = p.parse_nested_block(|inner| -> Result<(), ParseError<'_, ()>> {
                        analyse_tokens(inner, offset, info, depth + 1);
                        Ok(())
                    });
                }
            }
            _ => {
                in_compound = true;
            }
        }
        if named_parts >= 2 && !info.parts.contains(&SelectorPart::Chaining) {
            info.parts.push(SelectorPart::Chaining);
        }
    }
}

fn is_legacy_pseudo_element(name: &str) -> bool {
    matches!(name, "before" | "after" | "first-line" | "first-letter")
}

/// Pseudo names as `'static` strings so they compare with the feature table; names the table
/// does not know map to a fixed placeholder that no effect names.
fn leak_known(name: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "active",
        "checked",
        "default",
        "first-child",
        "first-of-type",
        "focus-visible",
        "focus-within",
        "focus",
        "has",
        "hover",
        "lang",
        "last-child",
        "last-of-type",
        "link",
        "not",
        "nth-child",
        "nth-last-child",
        "nth-last-of-type",
        "nth-of-type",
        "only-child",
        "only-of-type",
        "target",
        "visited",
        "after",
        "before",
        "first-letter",
        "first-line",
        "marker",
        "placeholder",
    ];
    KNOWN
        .iter()
        .find(|k| **k == name)
        .copied()
        .unwrap_or("other")
}

/// The selector list as the client keeps it, or `None` when no selector survives.
fn filter_selectors(list: &str, cx: &CssContext<'_>, removed: &mut Removed) -> Option<String> {
    let ranges = split_selectors(list);
    if let Some(slug) = grouping_dropped(ranges.len(), cx.effects) {
        removed.note(slug);
        return None;
    }
    let mut kept = Vec::new();
    for (s, e) in ranges {
        let text = &list[s..e];
        if let Some(why) = selector_dropped(text, cx.effects, cx.quirks) {
            removed.note(why);
            continue;
        }
        kept.push(prefix_names(text.trim(), cx, removed));
    }
    (!kept.is_empty()).then(|| kept.join(", "))
}

/// The effect that drops a rule with a list of `count` selectors, when the client cannot read
/// selector lists.
fn grouping_dropped(count: usize, effects: &[(String, Effect)]) -> Option<&str> {
    effects
        .iter()
        .find(|(_, e)| *e == Effect::Selector(SelectorPart::Grouping))
        .filter(|_| count > 1)
        .map(|(slug, _)| slug.as_str())
}

/// Why the client drops one selector of a list (an effect's slug or a behaviour's note key);
/// `None` when it keeps it. Shared by the transformation and the analysis's behaviour hits.
fn selector_dropped<'e>(
    text: &str,
    effects: &'e [(String, Effect)],
    quirks: Quirks,
) -> Option<&'e str> {
    let info = analyse_selector(text, 0);
    // Where only the first class of a compound gets the prefix, that is what happens to a
    // chained selector, rather than caniemail's "unsupported".
    let first_class_only = quirks.first_class_prefixed_only;
    let hit = selector_hits(&info, effects)
        .find(|(slug, _)| !(first_class_only && *slug == "css-selector-chaining"));
    if let Some((slug, _)) = hit {
        return Some(slug);
    }
    (quirks.attribute_selector_mangled && class_with_attribute(text))
        .then(|| crate::Implementation::AttributeSelectorMangled.note_key())
}

/// Whether the client keeps any selector of `list`, so that the rule's declarations apply.
fn rule_kept(list: &str, effects: &[(String, Effect)], quirks: Quirks) -> bool {
    let ranges = split_selectors(list);
    grouping_dropped(ranges.len(), effects).is_none()
        && ranges
            .into_iter()
            .any(|(s, e)| selector_dropped(&list[s..e], effects, quirks).is_none())
}

/// Every selector effect that removes a selector, with the construct as the analysis shows it.
fn selector_hits<'e, 'a>(
    info: &'a SelectorInfo,
    effects: &'e [(String, Effect)],
) -> impl Iterator<Item = (&'e str, String)> + 'a
where
    'e: 'a,
{
    effects.iter().filter_map(move |(slug, e)| match e {
        Effect::Selector(part) if info.parts.contains(part) => {
            Some((slug.as_str(), selector_label(*part)))
        }
        _ => None,
    })
}

fn selector_label(part: SelectorPart) -> String {
    match part {
        SelectorPart::PseudoClass(n) => format!(":{n}"),
        SelectorPart::PseudoElement(n) => format!("::{n}"),
        SelectorPart::Combinator(c) => format!("{c} combinator"),
        SelectorPart::Descendant => "descendant selector".into(),
        SelectorPart::Attribute => "[attribute] selector".into(),
        SelectorPart::Class => ".class selector".into(),
        SelectorPart::Id => "#id selector".into(),
        SelectorPart::Universal => "* selector".into(),
        SelectorPart::Type => "type selector".into(),
        SelectorPart::Grouping => "selector list (a, b)".into(),
        SelectorPart::Chaining => "chained selector (.a.b)".into(),
    }
}

/// Whether a compound of `selector` has both a class and an attribute selector (`.a[class]`),
/// which Outlook.com's rewriting never matches (caniemail css-selector-attribute note 1).
pub(crate) fn class_with_attribute(selector: &str) -> bool {
    let mut pi = ParserInput::new(selector);
    let mut p = Parser::new(&mut pi);
    let (mut class, mut attribute) = (false, false);
    while let Ok(tok) = p.next_including_whitespace_and_comments() {
        match tok {
            Token::WhiteSpace(_) | Token::Delim('>' | '+' | '~') => {
                class = false;
                attribute = false;
            }
            Token::Delim('.') => class = true,
            Token::SquareBracketBlock => attribute = true,
            _ => {}
        }
        if class && attribute {
            return true;
        }
    }
    false
}

/// Inserts the client's class and id prefixes into one selector.
fn prefix_names(selector: &str, cx: &CssContext<'_>, removed: &mut Removed) -> String {
    if cx.class_prefix.is_empty() && cx.id_prefix.is_empty() {
        return selector.to_string();
    }
    let info = analyse_selector(selector, 0);
    let first_only = cx.quirks.first_class_prefixed_only;
    if first_only && info.class_first.iter().any(|f| !f) {
        removed.note(crate::Implementation::CompoundSelectorFirstClassOnly.note_key());
    }
    let mut inserts: Vec<(usize, &str)> = info
        .class_at
        .iter()
        .zip(&info.class_first)
        .filter(|(_, first)| **first || !first_only)
        .map(|(&i, _)| (i, cx.class_prefix))
        .chain(info.id_at.iter().map(|&i| (i, cx.id_prefix)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let mut out = selector.to_string();
    for (at, prefix) in inserts {
        if out.is_char_boundary(at) {
            out.insert_str(at, prefix);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Sheets.

/// Why a whole `<style>` element is dropped.
#[derive(Debug, PartialEq, Eq)]
pub enum SheetDropped {
    /// The CSS has syntax errors and the client drops the element on any error.
    SyntaxError,
    /// An at-rule inside an at-rule: (outer, inner) names, without `@`.
    NestedAtRule(String, String),
}

/// The first at-rule nested in another at-rule (`@media { @font-face {} }`): (outer, inner names,
/// 0-based line of the inner one). `@media` inside `@media` does not count (see
/// data/behaviours.toml, gmail-style-nested-at-rule).
fn nested_at_rule(rules: &[Rule]) -> Option<(String, String, u32)> {
    rules.iter().find_map(|r| match r {
        Rule::At {
            name,
            body: AtBody::Rules(inner),
            ..
        } => inner.iter().find_map(|i| match i {
            Rule::At { name: n, line, .. } if !(name == "media" && n == "media") => {
                Some((name.clone(), n.clone(), *line))
            }
            _ => None,
        }),
        _ => None,
    })
}

/// For the code analysis: the first at-rule nested in another in `css`, as
/// (outer, inner, 0-based line of the inner one).
pub fn find_nested_at_rule(css: &str) -> Option<(String, String, u32)> {
    let mut pi = ParserInput::new(css);
    let mut p = Parser::new(&mut pi);
    let mut sp = SheetParser {
        errors: 0,
        depth: 0,
    };
    nested_at_rule(&parse_rules(&mut p, &mut sp))
}

/// The style sheet as the client keeps it. With `drop_on_error`, a sheet with any syntax error is
/// dropped whole.
pub fn filter_sheet(
    css: &str,
    cx: &CssContext<'_>,
    drop_on_error: bool,
    removed: &mut Removed,
) -> Result<String, SheetDropped> {
    let mut pi = ParserInput::new(css);
    let mut p = Parser::new(&mut pi);
    let mut sp = SheetParser {
        errors: 0,
        depth: 0,
    };
    let rules = parse_rules(&mut p, &mut sp);
    if cx.quirks.nested_at_rule_drops_sheet {
        if let Some((outer, inner, _)) = nested_at_rule(&rules) {
            return Err(SheetDropped::NestedAtRule(outer, inner));
        }
    }
    // Gmail's parser rejects the space-separated rgb() syntax (caniemail css-rgb), as an error.
    if drop_on_error && space_separated_rgb(css).is_some() {
        return Err(SheetDropped::SyntaxError);
    }
    if sp.errors > 0 {
        if drop_on_error {
            return Err(SheetDropped::SyntaxError);
        }
        removed.0.insert(
            "css-syntax-error".into(),
            removed.0.get("css-syntax-error").copied().unwrap_or(0) + sp.errors,
        );
    }
    let mut out = String::with_capacity(css.len());
    write_rules(rules, cx, cx.dark, removed, &mut out);
    Ok(out)
}

/// A `style` attribute as the client keeps it.
pub fn filter_inline(style: &str, cx: &CssContext<'_>, removed: &mut Removed) -> String {
    let mut pi = ParserInput::new(style);
    let mut p = Parser::new(&mut pi);
    let mut errors = 0;
    let decls = parse_decls(&mut p, &mut errors);
    if errors > 0 {
        removed.note("css-syntax-error");
    }
    let mut kept: Vec<Decl> = decls
        .into_iter()
        .filter_map(|d| filter_decl(d, cx, cx.dark, removed))
        .collect();
    apply_block(&mut kept, cx.quirks, removed);
    let mut out = String::new();
    write_decls(&kept, &mut out);
    out
}

/// Whether a `style` attribute sets the size of its text (`font-size`, `line-height` or `font`).
pub fn sets_text_size(style: &str) -> bool {
    let mut pi = ParserInput::new(style);
    let mut p = Parser::new(&mut pi);
    let mut errors = 0;
    parse_decls(&mut p, &mut errors)
        .iter()
        .any(|d| matches!(d.name.as_str(), "font-size" | "line-height" | "font"))
}

/// Whether a `style` attribute contains `mso-hide: all` (Word does not draw the element).
pub fn hides_from_word(style: &str) -> bool {
    let mut pi = ParserInput::new(style);
    let mut p = Parser::new(&mut pi);
    let mut errors = 0;
    parse_decls(&mut p, &mut errors)
        .iter()
        .any(|d| d.name == "mso-hide" && d.value.eq_ignore_ascii_case("all"))
}

/// Which colour roles of a `style` attribute a forced dark mode changes: (text, background).
pub fn recoloured_roles(style: &str, mode: DarkMode) -> (bool, bool) {
    let mut pi = ParserInput::new(style);
    let mut p = Parser::new(&mut pi);
    let mut errors = 0;
    let mut roles = (false, false);
    for d in parse_decls(&mut p, &mut errors) {
        let Some(role) = color_role(&d.name) else {
            continue;
        };
        let changed = scan_value(&d.value)
            .colors
            .iter()
            .any(|(_, _, c)| color::darken(*c, role, mode).is_some());
        match role {
            Role::Foreground if d.name == "color" => roles.0 |= changed,
            Role::Background => roles.1 |= changed,
            Role::Foreground => {}
        }
    }
    roles
}

fn media_dropped<'e>(prelude: &str, effects: &'e [(String, Effect)]) -> Option<&'e str> {
    media_hits(prelude, effects).next().map(|(slug, _)| slug)
}

/// Every effect that removes a `@media` rule with this prelude, with what matched.
fn media_hits<'e>(
    prelude: &str,
    effects: &'e [(String, Effect)],
) -> impl Iterator<Item = (&'e str, String)> {
    let idents = scan_value(prelude).idents;
    effects.iter().filter_map(move |(slug, e)| match e {
        Effect::AtRule("media") => Some((slug.as_str(), "@media".to_string())),
        Effect::MediaFeatures(fs) => idents
            .iter()
            .find(|i| fs.contains(&i.as_str()))
            .map(|f| (slug.as_str(), format!("@media ({f})"))),
        _ => None,
    })
}

fn at_rule_dropped<'e>(name: &str, effects: &'e [(String, Effect)]) -> Option<&'e str> {
    at_rule_hits(name, effects).next()
}

fn at_rule_hits<'e>(name: &str, effects: &'e [(String, Effect)]) -> impl Iterator<Item = &'e str> {
    let bare = name
        .strip_prefix("-webkit-")
        .or_else(|| name.strip_prefix("-moz-"))
        .unwrap_or(name)
        .to_string();
    effects.iter().filter_map(move |(slug, e)| match e {
        Effect::AtRule(n) if *n == bare => Some(slug.as_str()),
        _ => None,
    })
}

fn write_rules(
    rules: Vec<Rule>,
    cx: &CssContext<'_>,
    dark: DarkMode,
    removed: &mut Removed,
    out: &mut String,
) {
    for rule in rules {
        match rule {
            Rule::Style {
                selectors, decls, ..
            } => {
                let Some(selectors) = filter_selectors(&selectors, cx, removed) else {
                    continue;
                };
                let mut decls: Vec<Decl> = decls
                    .into_iter()
                    .filter_map(|d| filter_decl(d, cx, dark, removed))
                    .collect();
                apply_block(&mut decls, cx.quirks, removed);
                out.push_str(&selectors);
                out.push_str(" { ");
                write_decls(&decls, out);
                out.push_str(" }\n");
            }
            Rule::At {
                name,
                prelude,
                body,
                ..
            } => {
                if let Some(slug) = at_rule_dropped(&name, cx.effects) {
                    removed.note(slug);
                    continue;
                }
                let mut inner_dark = dark;
                if name == "media" {
                    if let Some(slug) = media_dropped(&prelude, cx.effects) {
                        removed.note(slug);
                        continue;
                    }
                    // The email's own dark styles are what the client shows in dark mode; they
                    // are not inverted a second time.
                    if scan_value(&prelude)
                        .idents
                        .iter()
                        .any(|i| i == "prefers-color-scheme")
                    {
                        inner_dark = DarkMode::None;
                    }
                }
                out.push('@');
                out.push_str(&name);
                if !prelude.is_empty() {
                    out.push(' ');
                    out.push_str(&prelude);
                }
                match body {
                    AtBody::None => out.push_str(";\n"),
                    AtBody::Rules(rules) => {
                        out.push_str(" {\n");
                        write_rules(rules, cx, inner_dark, removed, out);
                        out.push_str("}\n");
                    }
                    AtBody::Decls(decls) => {
                        out.push_str(" { ");
                        write_decls(&decls, out);
                        out.push_str(" }\n");
                    }
                    AtBody::Raw(raw) => {
                        out.push_str(" {");
                        out.push_str(&raw);
                        out.push_str("}\n");
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inspection, for the code analysis: what a list of effects matches, with line numbers, through
// the same matching the filtering above applies.

/// Why a construct is reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HitKind {
    /// An effect of the list, by slug.
    Effect(String),
    /// The scoped drop at this index of [`Inspect::scoped`].
    Scoped(usize),
    /// A colour the forced dark mode of [`Inspect::dark`] changes.
    Dark,
    /// A documented client behaviour of [`Inspect::quirks`] applies here.
    Behaviour(crate::Implementation),
}

/// One construct of the email's CSS that is reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    pub kind: HitKind,
    /// What matched, as the analysis shows it (`display:flex`, `:hover`, `@font-face`...).
    pub label: String,
    /// 0-based line within the inspected text.
    pub line: u32,
}

/// What to look for.
#[derive(Clone, Copy)]
pub struct Inspect<'a> {
    pub effects: &'a [(String, Effect)],
    /// For a `style` attribute: the element's name, so that scoped drops apply.
    pub element: Option<&'a str>,
    pub scoped: &'a [ScopedDrop],
    /// Colours this forced dark mode changes are reported (outside `prefers-color-scheme`).
    pub dark: DarkMode,
    /// Behaviours reported where they apply.
    pub quirks: Quirks,
    /// The client prefixes class names (for the compound-selector behaviour).
    pub prefixes_classes: bool,
    /// The client's CSS parser rejects space-separated `rgb()` (reported as a syntax error).
    pub strict_rgb: bool,
}

/// Byte offset of the first `rgb()`/`rgba()` written with the space-separated syntax
/// (`rgb(0 128 0)`), which Gmail's CSS parser rejects.
pub fn space_separated_rgb(css: &str) -> Option<usize> {
    static RGB: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\brgba?\(\s*[\d.]+%?\s+[\d.]")
            .unwrap_or_else(|e| panic!("rgb pattern does not compile: {e}"))
    });
    RGB.find(css).map(|m| m.start())
}

/// The result of an inspection.
#[derive(Debug, Default)]
pub struct Inspected {
    pub hits: Vec<Hit>,
    /// Rules or declarations that do not parse.
    pub syntax_errors: usize,
    /// 0-based line of the first syntax error, when there is one.
    pub first_error_line: Option<u32>,
}

/// Inspects a style sheet.
pub fn inspect_sheet(css: &str, ins: &Inspect<'_>) -> Inspected {
    let mut pi = ParserInput::new(css);
    let mut p = Parser::new(&mut pi);
    let mut sp = SheetParser {
        errors: 0,
        depth: 0,
    };
    let mut out = Inspected::default();
    let mut errors_at = Vec::new();
    for r in StyleSheetParser::new(&mut p, &mut sp) {
        match r {
            Ok(rule) => inspect_rules(
                std::slice::from_ref(&rule),
                ins,
                ins.dark,
                true,
                &mut out.hits,
            ),
            Err((e, _)) => errors_at.push(e.location.line),
        }
    }
    if ins.strict_rgb {
        if let Some(at) = space_separated_rgb(css) {
            errors_at.push(newlines(&css[..at]));
        }
    }
    out.syntax_errors = sp.errors + errors_at.len();
    out.first_error_line = errors_at.into_iter().min();
    if out.first_error_line.is_none() && out.syntax_errors > 0 {
        out.first_error_line = Some(0);
    }
    out
}

/// Inspects a `style` attribute.
pub fn inspect_inline(style: &str, ins: &Inspect<'_>) -> Inspected {
    let mut pi = ParserInput::new(style);
    let mut p = Parser::new(&mut pi);
    let mut out = Inspected::default();
    let decls = parse_decls(&mut p, &mut out.syntax_errors);
    for d in &decls {
        inspect_decl(d, ins, ins.dark, &mut out.hits);
    }
    inspect_block(&decls, ins, &mut out.hits);
    out
}

/// Behaviours that read a whole declaration block, on the declarations the client keeps of it
/// (as the transformation applies them: a dropped declaration shows no behaviour).
fn inspect_block(decls: &[Decl], ins: &Inspect<'_>, out: &mut Vec<Hit>) {
    use crate::Implementation as I;
    let kept: Vec<&Decl> = decls.iter().filter(|d| kept_decl(d, ins)).collect();
    for change in block_changes(&kept, ins.quirks) {
        if let (Some(b), Some(d)) = (change.behaviour, kept.get(change.index)) {
            hit(out, HitKind::Behaviour(b), change.label, d.line);
        }
    }
    if ins.quirks.height_to_min_height {
        for d in decls.iter().filter(|d| d.name == "height") {
            let label = format!("height: {}", d.value);
            hit(out, HitKind::Behaviour(I::HeightToMinHeight), label, d.line);
        }
    }
}

/// Whether the client keeps `d`, by the same tests as the transformation's filtering: no effect
/// removes it and no scoped drop applies to its element.
fn kept_decl(d: &Decl, ins: &Inspect<'_>) -> bool {
    let info = scan_value(&d.value);
    let dropped_here = ins
        .element
        .is_some_and(|element| ins.scoped.iter().any(|sd| sd.drops(&d.name, element)));
    removing_effect(d, &info, ins.effects).is_none() && !dropped_here
}

/// `kept`: whether the client keeps the enclosing rules; the behaviours of the declarations
/// inside a dropped rule are not reported, as the transformation never reaches them.
fn inspect_rules(
    rules: &[Rule],
    ins: &Inspect<'_>,
    dark: DarkMode,
    kept: bool,
    out: &mut Vec<Hit>,
) {
    for rule in rules {
        match rule {
            Rule::Style {
                selectors,
                decls,
                line,
            } => {
                let ranges = split_selectors(selectors);
                if ranges.len() > 1 {
                    for (slug, e) in ins.effects {
                        if *e == Effect::Selector(SelectorPart::Grouping) {
                            hit(
                                out,
                                HitKind::Effect(slug.clone()),
                                selector_label(SelectorPart::Grouping),
                                *line,
                            );
                        }
                    }
                }
                for (s, e) in ranges {
                    let text = &selectors[s..e];
                    let lead = text.len() - text.trim_start().len();
                    let at = line + newlines(&selectors[..s + lead]);
                    let info = analyse_selector(text, 0);
                    for (slug, label) in selector_hits(&info, ins.effects) {
                        hit(out, HitKind::Effect(slug.to_string()), label, at);
                    }
                    let q = ins.quirks;
                    let compound = info.class_first.iter().any(|f| !f);
                    if q.first_class_prefixed_only && ins.prefixes_classes && compound {
                        let kind = HitKind::Behaviour(
                            crate::Implementation::CompoundSelectorFirstClassOnly,
                        );
                        hit(out, kind, text.trim().to_string(), at);
                    }
                    if q.attribute_selector_mangled && class_with_attribute(text) {
                        let kind =
                            HitKind::Behaviour(crate::Implementation::AttributeSelectorMangled);
                        hit(out, kind, text.trim().to_string(), at);
                    }
                }
                for d in decls {
                    inspect_decl(d, ins, dark, out);
                }
                if kept && rule_kept(selectors, ins.effects, ins.quirks) {
                    inspect_block(decls, ins, out);
                }
            }
            Rule::At {
                name,
                prelude,
                body,
                line,
            } => {
                let mut inner_dark = dark;
                if name == "media" {
                    for (slug, label) in media_hits(prelude, ins.effects) {
                        hit(out, HitKind::Effect(slug.to_string()), label, *line);
                    }
                    if scan_value(prelude)
                        .idents
                        .iter()
                        .any(|i| i == "prefers-color-scheme")
                    {
                        inner_dark = DarkMode::None;
                    }
                } else {
                    for slug in at_rule_hits(name, ins.effects) {
                        hit(
                            out,
                            HitKind::Effect(slug.to_string()),
                            format!("@{name}"),
                            *line,
                        );
                    }
                }
                match body {
                    AtBody::Rules(inner) => {
                        let inner_kept = kept
                            && at_rule_dropped(name, ins.effects).is_none()
                            && (name != "media" || media_dropped(prelude, ins.effects).is_none());
                        inspect_rules(inner, ins, inner_dark, inner_kept, out);
                    }
                    AtBody::Decls(decls) => {
                        for d in decls {
                            inspect_decl(d, ins, DarkMode::None, out);
                        }
                    }
                    AtBody::None | AtBody::Raw(_) => {}
                }
            }
        }
    }
}

fn hit(out: &mut Vec<Hit>, kind: HitKind, label: String, line: u32) {
    out.push(Hit { kind, label, line });
}

fn inspect_decl(d: &Decl, ins: &Inspect<'_>, dark: DarkMode, out: &mut Vec<Hit>) {
    let info = scan_value(&d.value);
    for (slug, label) in decl_hits(&d.name, &info, ins.effects) {
        hit(out, HitKind::Effect(slug.to_string()), label, d.line);
    }
    let has_url = info.functions.iter().any(|f| f == "url");
    for (slug, e) in ins.effects {
        let background_image = d.name == "background"
            && has_url
            && slug == "css-background-image"
            && matches!(e, Effect::Properties(_));
        if background_image {
            hit(
                out,
                HitKind::Effect(slug.clone()),
                "background-image (in background)".into(),
                d.line,
            );
        }
        if d.important && *e == Effect::Important {
            hit(
                out,
                HitKind::Effect(slug.clone()),
                "!important".into(),
                d.line,
            );
        }
    }
    if let Some(element) = ins.element {
        for (i, sd) in ins.scoped.iter().enumerate() {
            if sd.drops(&d.name, element) {
                hit(
                    out,
                    HitKind::Scoped(i),
                    format!("{} on <{element}>", d.name),
                    d.line,
                );
            }
        }
    }
    if dark != DarkMode::None {
        if let Some(role) = color_role(&d.name) {
            let changed = info
                .colors
                .iter()
                .any(|(_, _, c)| color::darken(*c, role, dark).is_some());
            if changed {
                hit(out, HitKind::Dark, d.name.clone(), d.line);
            }
        }
    }
}

fn newlines(s: &str) -> u32 {
    u32::try_from(s.bytes().filter(|b| *b == b'\n').count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::effect;

    fn effects(slugs: &[&str]) -> Vec<(String, Effect)> {
        slugs
            .iter()
            .map(|s| (s.to_string(), effect(s).expect("known slug")))
            .collect()
    }

    fn cx<'a>(effects: &'a [(String, Effect)]) -> CssContext<'a> {
        CssContext {
            effects,
            class_prefix: "",
            id_prefix: "",
            dark: DarkMode::None,
            scoped: &[],
            element: None,
            quirks: Quirks::default(),
        }
    }

    #[test]
    fn unsupported_properties_go_and_the_rest_stays() {
        let e = effects(&["css-position"]);
        let mut r = Removed::default();
        let out = filter_sheet(
            ".a { position: absolute; color: red; }",
            &cx(&e),
            false,
            &mut r,
        )
        .expect("kept");
        assert_eq!(out, ".a { color: red; }\n");
        assert_eq!(r.0.get("css-position"), Some(&1));
    }

    #[test]
    fn media_queries_go_when_at_media_or_their_feature_is_unsupported() {
        let css = "@media (max-width: 600px) { .a { width: 100%; } }\n\
                   @media (prefers-color-scheme: dark) { .a { color: white; } }";
        let mut r = Removed::default();
        let e = effects(&["css-at-media-prefers-color-scheme"]);
        let out = filter_sheet(css, &cx(&e), false, &mut r).expect("kept");
        assert!(out.contains("max-width"), "{out}");
        assert!(!out.contains("prefers-color-scheme"), "{out}");
        let e = effects(&["css-at-media"]);
        let out = filter_sheet(css, &cx(&e), false, &mut r).expect("kept");
        assert!(!out.contains("@media"), "{out}");
    }

    #[test]
    fn selectors_with_unsupported_parts_are_removed_from_their_list() {
        let e = effects(&["css-selector-attribute", "css-pseudo-class-hover"]);
        let mut r = Removed::default();
        let out = filter_sheet(
            "td[class=x], .b, a:hover { color: red; } .c:hover { color: blue }",
            &cx(&e),
            false,
            &mut r,
        )
        .expect("kept");
        assert_eq!(out, ".b { color: red; }\n");
    }

    #[test]
    fn prefixes_apply_to_classes_and_ids_only() {
        let e = Vec::new();
        let c = CssContext {
            class_prefix: "x_",
            id_prefix: "x_",
            ..cx(&e)
        };
        let mut r = Removed::default();
        let out = filter_sheet("div.a #b, .c:not(.d) > p { margin: 0 }", &c, false, &mut r)
            .expect("kept");
        assert_eq!(out, "div.x_a #x_b, .x_c:not(.x_d) > p { margin: 0; }\n");
    }

    #[test]
    fn a_syntax_error_drops_the_sheet_only_for_clients_that_do_so() {
        let e = Vec::new();
        let mut r = Removed::default();
        let css = ".a { color: red; } .b { color: } .c { color: blue }";
        assert_eq!(
            filter_sheet(css, &cx(&e), true, &mut r),
            Err(SheetDropped::SyntaxError)
        );
        let out = filter_sheet(css, &cx(&e), false, &mut r).expect("kept");
        assert!(out.contains(".c"), "{out}");
    }

    #[test]
    fn inline_styles_lose_unsupported_values_and_keep_background_colour() {
        let e = effects(&["css-display-flex", "css-background-image"]);
        let mut r = Removed::default();
        let out = filter_inline(
            "display:flex; background: #ff0000 url(a.png) no-repeat; color:#000",
            &cx(&e),
            &mut r,
        );
        assert_eq!(out, "background: #ff0000; color: #000;");
    }

    #[test]
    fn forced_dark_mode_recolours_outside_the_emails_own_dark_rules() {
        let e = Vec::new();
        let c = CssContext {
            dark: DarkMode::FullInvert,
            ..cx(&e)
        };
        let mut r = Removed::default();
        let out = filter_sheet(
            ".a { background-color: #ffffff; } @media (prefers-color-scheme: dark) { .a { background-color: #ffffff; } }",
            &c,
            false,
            &mut r,
        )
        .expect("kept");
        assert!(
            out.starts_with(".a { background-color: #121212; }"),
            "{out}"
        );
        assert!(out.contains("{ background-color: #ffffff; }"), "{out}");
    }

    #[test]
    fn mso_hide_all_is_recognised() {
        assert!(hides_from_word("display:none; mso-hide: all"));
        assert!(!hides_from_word("display:none"));
    }
}
