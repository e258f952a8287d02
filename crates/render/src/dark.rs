//! Forced dark mode, computed on the rendered page: the document is loaded in Chromium (the
//! engine that knows each element's real colours once the cascade, inheritance and the email's
//! own `prefers-color-scheme` rules are resolved), a probe in an isolated world reads every
//! element's computed colours, and each colour the client's class changes
//! ([`emulate::color::DarkPass`]) is written back inline, with the originals in `data-og*`
//! attributes where the client keeps them. The recoloured document is then drawn by the
//! profile's own engine like any other.

use emulate::color::{self, DarkPass, Role};
use lol_html::{element, rewrite_str, RewriteStrSettings};
use serde::Deserialize;

use crate::error::RenderError;

/// Images at most this wide and tall (CSS px) count as icons for Blink's image classifier, which
/// inverts icon-like images and leaves larger ones alone (measure-sh PR #3965). Blink also looks
/// at the image's colours; that part is not modelled.
const SMALL_IMAGE_CSS_PX: f64 = 64.0;

/// Reads the computed colours of every drawn element, tags each with `data-mp-dark="<index>"`
/// and returns them with the tagged document. The email's own dark rules (inside a
/// `prefers-color-scheme: dark` block that applies) are its dark design: the properties they set
/// are marked so that they are kept. `[data-og*]` rules are left out of the scan: they are the
/// hooks the recolouring itself triggers.
pub(crate) const PROBE: &str = r#"(() => {
  const declared = new Map();
  const mark = (el, key) => {
    let m = declared.get(el);
    if (!m) { m = {}; declared.set(el, m); }
    m[key] = true;
  };
  const scan = (rules, inDark) => {
    for (const r of rules) {
      if (r instanceof CSSMediaRule) {
        const dark = /prefers-color-scheme\s*:\s*dark/i.test(r.media.mediaText);
        if (matchMedia(r.media.mediaText).matches) scan(r.cssRules, inDark || dark);
      } else if (r instanceof CSSStyleRule) {
        if (/\[data-og/i.test(r.selectorText)) continue;
        const s = r.style;
        const fg = s.getPropertyValue('color') !== '';
        const bg = s.getPropertyValue('background-color') !== '';
        if (!fg && !bg) continue;
        let els = [];
        try { els = document.querySelectorAll(r.selectorText); } catch (e) { continue; }
        for (const el of els) {
          if (fg) mark(el, inDark ? 'darkFg' : 'fg');
          if (bg) mark(el, inDark ? 'darkBg' : 'bg');
          if (fg && s.getPropertyPriority('color') === 'important') mark(el, 'fgImportant');
          if (bg && s.getPropertyPriority('background-color') === 'important') mark(el, 'bgImportant');
        }
      } else if (r.cssRules) {
        scan(r.cssRules, inDark);
      }
    }
  };
  for (const sheet of document.styleSheets) {
    try { scan(sheet.cssRules, false); } catch (e) { /* a cross-origin sheet: not readable */ }
  }
  const transparent = (c) => c === 'transparent' || /^rgba\(.*,\s*0\)$/.test(c);
  const root = document.documentElement;
  const body = document.body;
  const skip = new Set(['HEAD', 'STYLE', 'SCRIPT', 'TITLE', 'META', 'LINK', 'BASE', 'NOSCRIPT', 'TEMPLATE']);
  const items = [];
  for (const el of document.querySelectorAll('*')) {
    if (skip.has(el.tagName) || (el.closest('head') && el !== root)) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none') continue;
    const m = declared.get(el) || {};
    const parent = el.parentElement;
    const pcs = parent ? getComputedStyle(parent) : null;
    const item = { i: items.length };
    const ownFg = el === root || (pcs && cs.color !== pcs.color) || m.fg || el.hasAttribute('color') || el.style.color !== '';
    if (ownFg && !m.darkFg) item.fg = cs.color;
    let bg = cs.backgroundColor;
    // The canvas: a page that paints no background of its own shows the view's white.
    if (el === root && transparent(bg) && (!body || transparent(getComputedStyle(body).backgroundColor))) {
      bg = 'rgb(255, 255, 255)';
    }
    if (!transparent(bg) && !m.darkBg) item.bg = bg;
    if (el.tagName === 'IMG') {
      const r = el.getBoundingClientRect();
      item.w = r.width; item.h = r.height;
    }
    if (item.fg === undefined && item.bg === undefined && item.w === undefined) continue;
    item.fgImportant = el.style.getPropertyPriority('color') === 'important' || !!m.fgImportant;
    item.bgImportant = el.style.getPropertyPriority('background-color') === 'important' || !!m.bgImportant;
    item.fgAttr = el.hasAttribute('color') && el.style.color === '';
    item.bgAttr = el.hasAttribute('bgcolor') && el.style.backgroundColor === '';
    el.setAttribute('data-mp-dark', String(item.i));
    items.push(item);
  }
  const d = document.doctype;
  const doctype = d ? '<!DOCTYPE ' + d.name + (d.publicId ? ' PUBLIC "' + d.publicId + '"' : '') +
    (d.systemId ? (d.publicId ? '' : ' SYSTEM') + ' "' + d.systemId + '"' : '') + '>' : '';
  return { items, html: doctype + root.outerHTML };
})()"#;

/// What the probe reports of one element.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Item {
    i: usize,
    /// Computed text colour, when the element sets its own (not only inherited).
    fg: Option<String>,
    /// Computed background colour, when not transparent (the canvas white for the root).
    bg: Option<String>,
    /// Rendered size of an `<img>`, CSS px.
    w: Option<f64>,
    h: Option<f64>,
    #[serde(default)]
    fg_important: bool,
    #[serde(default)]
    bg_important: bool,
    /// The colour comes from a `color` attribute (`<font color>`), not from CSS.
    #[serde(default)]
    fg_attr: bool,
    /// The background comes from a `bgcolor` attribute.
    #[serde(default)]
    bg_attr: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Probed {
    items: Vec<Item>,
    html: String,
}

/// What one element gets: declarations appended to its `style`, attributes set.
#[derive(Debug, Default, PartialEq)]
struct Change {
    style: Vec<String>,
    attrs: Vec<(&'static str, String)>,
}

fn change(item: &Item, pass: DarkPass) -> Change {
    let mut out = Change::default();
    let important = |yes: bool| if yes { " !important" } else { "" };
    let mut one = |value: &Option<String>, role: Role, imp: bool, attr: bool| {
        let Some(text) = value else { return };
        let Some(c) = color::parse(text) else { return };
        let Some(new) = pass.recolour(c, role) else {
            return;
        };
        let property = match role {
            Role::Foreground => "color",
            Role::Background => "background-color",
        };
        out.style
            .push(format!("{property}: {}{}", new.to_css(), important(imp)));
        if pass.marks_originals() {
            let name = match (role, attr) {
                (Role::Foreground, false) => "data-ogsc",
                (Role::Foreground, true) => "data-ogac",
                (Role::Background, false) => "data-ogsb",
                (Role::Background, true) => "data-ogab",
            };
            out.attrs.push((name, text.clone()));
        }
    };
    one(&item.fg, Role::Foreground, item.fg_important, item.fg_attr);
    one(&item.bg, Role::Background, item.bg_important, item.bg_attr);
    if pass.inverts_small_images() {
        if let (Some(w), Some(h)) = (item.w, item.h) {
            if w > 0.0 && h > 0.0 && w <= SMALL_IMAGE_CSS_PX && h <= SMALL_IMAGE_CSS_PX {
                // Lightness inverted, hue kept, as Blink's filter does for the image.
                out.style
                    .push("filter: invert(1) hue-rotate(180deg)".to_string());
            }
        }
    }
    out
}

/// The probe's tagged document with every change of `pass` applied and the tags removed.
pub(crate) fn apply(probed: Probed, pass: DarkPass) -> Result<String, RenderError> {
    let changes: Vec<Change> = {
        let mut by_index: Vec<Change> = Vec::new();
        by_index.resize_with(probed.items.len(), Change::default);
        for item in &probed.items {
            if let Some(slot) = by_index.get_mut(item.i) {
                *slot = change(item, pass);
            }
        }
        by_index
    };
    rewrite_str(
        &probed.html,
        RewriteStrSettings::new().append_element_content_handler(element!(
            "[data-mp-dark]",
            |el| {
                let index = el
                    .get_attribute("data-mp-dark")
                    .and_then(|v| v.parse::<usize>().ok());
                el.remove_attribute("data-mp-dark");
                let Some(c) = index.and_then(|i| changes.get(i)) else {
                    return Ok(());
                };
                if !c.style.is_empty() {
                    let old = el.get_attribute("style").unwrap_or_default();
                    let old = old.trim().trim_end_matches(';');
                    let added = c.style.join("; ");
                    let style = if old.is_empty() {
                        added
                    } else {
                        format!("{old}; {added}")
                    };
                    el.set_attribute("style", &style)?;
                }
                for (name, value) in &c.attrs {
                    el.set_attribute(name, value)?;
                }
                Ok(())
            }
        )),
    )
    .map_err(|e| RenderError::Document(format!("recolouring the page for dark mode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(fg: Option<&str>, bg: Option<&str>) -> Item {
        Item {
            i: 0,
            fg: fg.map(str::to_string),
            bg: bg.map(str::to_string),
            w: None,
            h: None,
            fg_important: false,
            bg_important: false,
            fg_attr: false,
            bg_attr: false,
        }
    }

    #[test]
    fn outlook_rewrites_inline_and_keeps_the_originals_in_data_og_attributes() {
        let mut it = item(Some("rgb(0, 0, 0)"), Some("rgb(255, 255, 255)"));
        it.bg_attr = true;
        let c = change(&it, DarkPass::OutlookPartial);
        assert_eq!(c.style, ["color: #ffffff", "background-color: #333333"]);
        assert_eq!(
            c.attrs,
            [
                ("data-ogsc", "rgb(0, 0, 0)".to_string()),
                ("data-ogab", "rgb(255, 255, 255)".to_string())
            ]
        );
        // A dark design is kept, and marks nothing.
        let kept = change(
            &item(Some("rgb(255, 255, 255)"), Some("rgb(0, 0, 0)")),
            DarkPass::OutlookPartial,
        );
        assert_eq!(kept, Change::default());
        // Full inversion does not mark.
        let full = change(&it, DarkPass::FullInvert);
        assert!(full.attrs.is_empty() && full.style.len() == 2, "{full:?}");
    }

    #[test]
    fn an_important_declaration_is_overridden_with_important_and_small_images_invert_in_blink_only()
    {
        let mut it = item(Some("rgb(0, 0, 0)"), None);
        it.fg_important = true;
        assert_eq!(
            change(&it, DarkPass::BlinkForceDark).style,
            ["color: #ffffff !important"]
        );
        let mut icon = item(None, None);
        (icon.w, icon.h) = (Some(24.0), Some(24.0));
        assert_eq!(change(&icon, DarkPass::BlinkForceDark).style.len(), 1);
        assert!(change(&icon, DarkPass::FullInvert).style.is_empty());
        (icon.w, icon.h) = (Some(600.0), Some(300.0));
        assert!(change(&icon, DarkPass::BlinkForceDark).style.is_empty());
    }

    #[test]
    fn apply_writes_the_changes_and_removes_the_tags() {
        let probed = Probed {
            items: vec![item(Some("rgb(0, 0, 0)"), None)],
            html: "<html><body><p data-mp-dark=\"0\" style=\"margin:0;\">x</p></body></html>"
                .into(),
        };
        let out = apply(probed, DarkPass::OutlookPartial).expect("rewrites");
        assert_eq!(
            out,
            "<html><body><p style=\"margin:0; color: #ffffff\" data-ogsc=\"rgb(0, 0, 0)\">x</p></body></html>"
        );
    }
}
