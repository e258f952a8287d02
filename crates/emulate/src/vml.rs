//! VML as the Word engine draws it, turned into HTML a browser draws the same way: shapes
//! (`v:rect`, `v:roundrect`, `v:oval`) become a one-cell table with the shape's size, fill colour
//! or fill image, stroke and corner radius; `v:textbox` content goes into the cell.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use lol_html::html_content::{ContentType, Element};
use lol_html::{element, rewrite_str, RewriteStrSettings};

use crate::css::Removed;
use crate::document::Document;

/// Writes `<v:fill ... />` style self-closing Office elements as start + end tag: HTML parsers
/// ignore the `/` on unknown elements, which would otherwise swallow the following content.
pub fn close_empty_office_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len() + 64);
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let tag = &rest[lt..];
        let name_len = tag[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == ':'))
            .unwrap_or(tag.len() - 1);
        let name = &tag[1..1 + name_len];
        let office = name.len() > 2
            && matches!(
                &name.as_bytes()[..2],
                [b'v' | b'V' | b'o' | b'O' | b'w' | b'W', b':']
            );
        match (office, end_of_tag(tag)) {
            (true, Some(end)) if tag[..end].ends_with('/') => {
                out.push_str(&tag[..=end]);
                out.push_str("</");
                out.push_str(name);
                out.push('>');
                rest = &tag[end + 1..];
            }
            _ => {
                out.push('<');
                rest = &tag[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Index of the `>` closing the tag that starts at 0, skipping quoted attribute values.
fn end_of_tag(tag: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in tag.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            (None, '<') => return None,
            _ => {}
        }
    }
    None
}

#[derive(Default, Clone, Debug)]
struct Shape {
    kind: String,
    attrs: HashMap<String, String>,
    fill: HashMap<String, String>,
    stroke: HashMap<String, String>,
    inset: Option<String>,
    /// Source of a `v:image` this shape is laid over (the backgrounds.cm pattern: an image, then
    /// an absolutely positioned rectangle holding the text on top of it).
    over_image: Option<String>,
}

fn attrs_of(el: &Element<'_, '_>) -> HashMap<String, String> {
    el.attributes()
        .iter()
        .map(|a| (a.name().to_ascii_lowercase(), a.value()))
        .collect()
}

fn is_shape(name: &str) -> bool {
    matches!(name, "v:rect" | "v:roundrect" | "v:oval")
}

/// Converts the VML in `html` (already activated from its conditional comments).
pub fn convert(
    html: &str,
    removed: &mut Removed,
) -> Result<String, lol_html::errors::RewritingError> {
    let html = close_empty_office_tags(html);
    if !html.to_ascii_lowercase().contains("<v:") {
        return Ok(html);
    }
    // First pass: collect each shape with its fill, stroke and textbox inset, in document order.
    let shapes: Rc<RefCell<Vec<Shape>>> = Rc::default();
    let open: Rc<RefCell<Vec<usize>>> = Rc::default();
    // `v:image` elements in order, and which of them a following shape absorbs.
    let absorbed: Rc<RefCell<Vec<bool>>> = Rc::default();
    {
        let shapes = shapes.clone();
        let open = open.clone();
        let absorbed = absorbed.clone();
        let pending_image: RefCell<Option<(usize, String)>> = RefCell::new(None);
        rewrite_str(
            &html,
            RewriteStrSettings::new().append_element_content_handler(element!("*", move |el| {
                let name = el.tag_name().to_ascii_lowercase();
                if name == "v:image" {
                    let mut a = absorbed.borrow_mut();
                    a.push(false);
                    let src = el.get_attribute("src").unwrap_or_default();
                    *pending_image.borrow_mut() = Some((a.len() - 1, src));
                    return Ok(());
                }
                if is_shape(&name) {
                    let attrs = attrs_of(el);
                    let absolute = attrs.get("style").is_some_and(|s| {
                        s.to_ascii_lowercase()
                            .replace(' ', "")
                            .contains("position:absolute")
                    });
                    let mut over_image = None;
                    if let Some((img, src)) = pending_image.borrow_mut().take() {
                        if absolute {
                            absorbed.borrow_mut()[img] = true;
                            over_image = Some(src);
                        }
                    }
                    let idx = {
                        let mut s = shapes.borrow_mut();
                        s.push(Shape {
                            kind: name.clone(),
                            attrs,
                            over_image,
                            ..Shape::default()
                        });
                        s.len() - 1
                    };
                    open.borrow_mut().push(idx);
                    let open = open.clone();
                    if let Some(handlers) = el.end_tag_handlers() {
                        handlers.push(Box::new(move |_end| {
                            open.borrow_mut().pop();
                            Ok(())
                        }));
                    }
                    return Ok(());
                }
                let Some(&top) = open.borrow().last() else {
                    return Ok(());
                };
                let mut s = shapes.borrow_mut();
                match name.as_str() {
                    "v:fill" => s[top].fill = attrs_of(el),
                    "v:stroke" => s[top].stroke = attrs_of(el),
                    "v:textbox" => s[top].inset = el.get_attribute("inset"),
                    _ => {}
                }
                Ok(())
            })),
        )?;
    }
    let shapes = shapes.borrow().clone();
    let absorbed = absorbed.borrow().clone();
    let next_image = RefCell::new(0usize);
    let next = Rc::new(RefCell::new(0usize));
    let converted = Rc::new(RefCell::new(0usize));
    let out = {
        let converted = converted.clone();
        rewrite_str(
            &html,
            RewriteStrSettings::new().append_element_content_handler(element!("*", move |el| {
                let name = el.tag_name().to_ascii_lowercase();
                if is_shape(&name) {
                    let idx = {
                        let mut n = next.borrow_mut();
                        *n += 1;
                        *n - 1
                    };
                    if let Some(shape) = shapes.get(idx) {
                        el.before(&shape_open(shape), ContentType::Html);
                        el.after("</td></tr></table>", ContentType::Html);
                        *converted.borrow_mut() += 1;
                    }
                    el.remove_and_keep_content();
                } else if name == "v:textbox" {
                    el.remove_and_keep_content();
                } else if name == "v:image" {
                    let idx = {
                        let mut n = next_image.borrow_mut();
                        *n += 1;
                        *n - 1
                    };
                    if absorbed.get(idx).copied().unwrap_or(false) {
                        el.remove();
                        return Ok(());
                    }
                    let src = el.get_attribute("src").unwrap_or_default();
                    let style = size_style(&el.get_attribute("style").unwrap_or_default());
                    el.replace(
                        &format!(
                            "<img src=\"{}\" style=\"{}display:block;\" alt=\"\">",
                            escape_attr(&src),
                            style
                        ),
                        ContentType::Html,
                    );
                } else if name.starts_with("v:") {
                    el.remove_and_keep_content();
                }
                Ok(())
            })),
        )?
    };
    let n = *converted.borrow();
    for _ in 0..n {
        removed.note("vml-shape-drawn-as-html");
    }
    Ok(out)
}

/// Word reads its private markup (`<xml>` settings blocks such as `o:OfficeDocumentSettings`,
/// `o:`/`w:` elements), inside `<noscript>` or not, as settings and never draws it; a browser
/// would print its text ("96" of `o:PixelsPerInch`). None of those settings is modelled, so all
/// of it goes; VML (`v:`) is converted before.
pub fn hide_office_islands(doc: &mut Document, removed: &mut Removed) {
    let n = doc.remove_elements(crate::branch::is_office_xml);
    if n > 0 {
        removed.0.insert("office-xml-hidden".into(), n);
    }
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

/// `url(…)` of `src`, unquoted: the declaration goes into a double-quoted `style` attribute, where
/// a double quote would end the attribute and a single one reads as Word ignoring CSS images.
fn css_url(src: &str) -> String {
    let mut out = String::from("url(");
    for c in src.trim().chars() {
        match c {
            '"' => out.push_str("%22"),
            '\'' => out.push_str("%27"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            ' ' => out.push_str("%20"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out.push(')');
    out
}

/// `width`/`height` taken from a VML `style`, as CSS.
fn size_style(style: &str) -> String {
    let mut out = String::new();
    for decl in style.split(';') {
        let Some((k, v)) = decl.split_once(':') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        if matches!(k.as_str(), "width" | "height") && is_length(v) {
            out.push_str(&format!("{k}:{v};"));
        }
    }
    out
}

fn is_length(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '%')
}

fn px(v: &str) -> Option<f32> {
    let v = v.trim();
    if let Some(n) = v.strip_suffix("px") {
        return n.trim().parse().ok();
    }
    if let Some(n) = v.strip_suffix("pt") {
        return n.trim().parse::<f32>().ok().map(|p| p * 96.0 / 72.0);
    }
    v.parse().ok()
}

fn safe_colour(v: &str) -> Option<String> {
    // VML colours may carry a trailing index ("#ff0000 [2]"); keep the CSS part only.
    let c = v.split_whitespace().next()?;
    crate::color::parse(c).map(|c| c.to_css())
}

fn truthy(v: Option<&String>, default: bool) -> bool {
    match v.map(|s| s.trim().to_ascii_lowercase()) {
        None => default,
        Some(s) => !matches!(s.as_str(), "f" | "false" | "0" | "off"),
    }
}

/// The opening markup standing for `shape`.
fn shape_open(shape: &Shape) -> String {
    let style_attr = shape.attrs.get("style").cloned().unwrap_or_default();
    let size = size_style(&style_attr);
    let mut td = String::new();
    let filled = truthy(shape.attrs.get("filled"), true) && truthy(shape.fill.get("on"), true);
    if filled {
        let colour = shape
            .fill
            .get("color")
            .or_else(|| shape.attrs.get("fillcolor"))
            .and_then(|c| safe_colour(c));
        let transparent = shape
            .fill
            .get("opacity")
            .is_some_and(|o| matches!(o.trim(), "0" | "0%" | "0.0" | "0f"));
        if let (Some(c), false) = (colour, transparent) {
            td.push_str(&format!("background-color:{c};"));
        }
        if let Some(src) = &shape.over_image {
            td.push_str(&format!(
                "background-image:{};background-repeat:no-repeat;background-size:cover;",
                css_url(src)
            ));
        }
        if let Some(src) = shape.fill.get("src") {
            let kind = shape
                .fill
                .get("type")
                .map(|t| t.to_ascii_lowercase())
                .unwrap_or_default();
            td.push_str(&format!("background-image:{};", css_url(src)));
            match kind.as_str() {
                "tile" => td.push_str("background-repeat:repeat;"),
                _ => td.push_str("background-repeat:no-repeat;background-size:cover;"),
            }
        }
    }
    let stroked = truthy(shape.attrs.get("stroke"), true) && truthy(shape.stroke.get("on"), true);
    if stroked {
        let colour = shape
            .stroke
            .get("color")
            .or_else(|| shape.attrs.get("strokecolor"))
            .and_then(|c| safe_colour(c))
            .unwrap_or_else(|| "#000000".into());
        let weight = shape
            .stroke
            .get("weight")
            .or_else(|| shape.attrs.get("strokeweight"))
            .and_then(|w| px(w))
            .unwrap_or(1.0);
        td.push_str(&format!("border:{weight:.1}px solid {colour};"));
    }
    let w = size_value(&style_attr, "width");
    let h = size_value(&style_attr, "height");
    match shape.kind.as_str() {
        "v:roundrect" => {
            let arc = shape
                .attrs
                .get("arcsize")
                .and_then(|a| {
                    let a = a.trim();
                    match a.strip_suffix('%') {
                        Some(p) => p.parse::<f32>().ok().map(|p| p / 100.0),
                        // VML also writes fractions as 16.16 fixed point ("3277f").
                        None => a
                            .strip_suffix('f')
                            .and_then(|f| f.parse::<f32>().ok())
                            .map(|f| f / 65536.0),
                    }
                })
                .unwrap_or(0.2);
            let shorter = match (w, h) {
                (Some(w), Some(h)) => w.min(h),
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => 40.0,
            };
            td.push_str(&format!("border-radius:{:.1}px;", arc * shorter / 2.0));
        }
        "v:oval" => td.push_str("border-radius:50%;"),
        _ => {}
    }
    if style_attr
        .to_ascii_lowercase()
        .contains("v-text-anchor:middle")
    {
        td.push_str("vertical-align:middle;");
    } else {
        td.push_str("vertical-align:top;");
    }
    if let Some(inset) = &shape.inset {
        let parts: Vec<String> = inset
            .split(',')
            .map(|p| {
                px(p)
                    .map(|v| format!("{v:.0}px"))
                    .unwrap_or_else(|| "0".into())
            })
            .collect();
        if parts.len() == 4 {
            // VML inset is left, top, right, bottom.
            td.push_str(&format!(
                "padding:{} {} {} {};",
                parts[1], parts[2], parts[3], parts[0]
            ));
        }
    }
    if shape.kind == "v:roundrect" {
        td.push_str("text-align:center;");
    }
    format!(
        "<table role=\"presentation\" data-vml=\"{kind}\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"border-collapse:separate;{size}\"><tr><td style=\"{td}{size}\">",
        kind = &shape.kind[2..],
    )
}

fn size_value(style: &str, key: &str) -> Option<f32> {
    style.split(';').find_map(|d| {
        let (k, v) = d.split_once(':')?;
        (k.trim().eq_ignore_ascii_case(key))
            .then(|| px(v))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_closing_office_tags_get_an_end_tag() {
        assert_eq!(
            close_empty_office_tags(r#"<v:fill type="tile" src="a>b.png" /><w:anchorlock/><br/>"#),
            r#"<v:fill type="tile" src="a>b.png" /></v:fill><w:anchorlock/></w:anchorlock><br/>"#
        );
    }

    #[test]
    fn a_bulletproof_button_becomes_a_filled_rounded_cell_with_its_label() {
        let html = r##"<v:roundrect xmlns:v="urn:schemas-microsoft-com:vml" href="http://x" style="height:40px;v-text-anchor:middle;width:200px;" arcsize="10%" strokecolor="#1e3650" fillcolor="#556270"><w:anchorlock/><center style="color:#ffffff;">Show me the button!</center></v:roundrect>"##;
        let mut r = Removed::default();
        let mut doc = Document::parse(&convert(html, &mut r).expect("converts"));
        hide_office_islands(&mut doc, &mut r);
        let out = doc.serialize().expect("serialises");
        assert!(out.contains("background-color:#556270"), "{out}");
        assert!(out.contains("border:1.0px solid #1e3650"), "{out}");
        assert!(out.contains("border-radius:2.0px"), "{out}");
        assert!(out.contains("Show me the button!"), "{out}");
        assert!(!out.contains("v:roundrect"), "{out}");
        assert!(!out.contains("anchorlock"), "{out}");
    }

    #[test]
    fn a_background_image_rect_becomes_a_cell_with_that_image_around_the_textbox() {
        let html = r##"<td><v:rect xmlns:v="urn:schemas-microsoft-com:vml" fill="true" stroke="false" style="width:600px;height:300px;"><v:fill type="tile" src="https://i.test/bg.png" color="#7bceeb" /><v:textbox inset="0,0,0,0"><div>Hello</div></v:textbox></v:rect></td>"##;
        let mut r = Removed::default();
        let out = convert(html, &mut r).expect("converts");
        assert!(
            out.contains("background-image:url(https://i.test/bg.png)"),
            "{out}"
        );
        assert!(out.contains("background-color:#7bceeb"), "{out}");
        assert!(!out.contains("border:"), "{out}");
        assert!(out.contains("<div>Hello</div></td></tr></table>"), "{out}");
    }

    #[test]
    fn an_image_under_an_absolute_rect_becomes_the_cells_background() {
        let html = r##"<v:image xmlns:v="urn:schemas-microsoft-com:vml" fill="true" stroke="false" style="width: 680px; height: 180px;" src="https://i.test/hero.png" /><v:rect xmlns:v="urn:schemas-microsoft-com:vml" fill="true" stroke="false" style="position: absolute; width: 680px; height: 180px;"><v:fill opacity="0%" color="#222222" /><div>Text on the image</div></v:fill></v:rect></v:image>"##;
        let mut r = Removed::default();
        let out = convert(html, &mut r).expect("converts");
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains("background-image:url(https://i.test/hero.png)"),
            "{out}"
        );
        assert!(!out.contains("background-color"), "transparent fill: {out}");
        assert!(out.contains("Text on the image"), "{out}");
    }

    #[test]
    fn office_settings_blocks_do_not_print_inside_noscript_or_not() {
        for html in [
            "<head><xml><o:OfficeDocumentSettings><o:PixelsPerInch>96</o:PixelsPerInch></o:OfficeDocumentSettings></xml></head><p>x</p>",
            "<head> <noscript><xml><o:OfficeDocumentSettings><o:AllowPNG/><o:PixelsPerInch>96</o:PixelsPerInch></o:OfficeDocumentSettings></xml></noscript></head><p>x</p>",
        ] {
            let mut r = Removed::default();
            let mut doc = Document::parse(&convert(html, &mut r).expect("converts"));
            hide_office_islands(&mut doc, &mut r);
            assert_eq!(doc.texts(), vec!["x"], "{html}");
            assert_eq!(r.0.get("office-xml-hidden"), Some(&1), "{html}");
        }
    }
}
