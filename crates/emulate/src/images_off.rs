//! What a client shows in place of a blocked image (the `no_images` variants), as
//! data/behaviours.toml says: Outlook for Windows its own placeholder box, Gmail and Apple Mail
//! the alt text styled by the image's CSS. Clients without such an entry keep the engine's own
//! drawing of a blocked image.
//!
//! Runs on the transformed HTML, so the image's styles are already what the client keeps of them.

use lol_html::html_content::{ContentType, Element};
use lol_html::{element, rewrite_str, RewriteStrSettings};

use crate::behaviours::{Applied, Implementation};
use crate::css::Removed;
use crate::transform::{decode_entities, escape_attr};

/// Alt text longer than this is cut in Outlook's placeholder (client-behaviours.md §9: "~200").
pub const PLACEHOLDER_ALT_CHARS: usize = 200;

/// The line Outlook for Windows writes in the placeholder of an image it did not download.
pub const PLACEHOLDER_MESSAGE: &str = "Right-click or tap and hold here to download pictures. To help protect your privacy, Outlook prevented automatic download of this picture from the Internet.";

/// Outlook's "picture not downloaded" icon: a framed picture crossed by a red X. Its centre,
/// 11 CSS px from the placeholder's top-left corner (1 px border, 2 px padding, 16 px icon), is
/// where the fidelity probe reads the red.
const PLACEHOLDER_ICON: &str = "<svg width=\"16\" height=\"16\" viewBox=\"0 0 16 16\" style=\"display:block;float:left;margin:0 4px 2px 0\"><rect x=\"0.5\" y=\"0.5\" width=\"15\" height=\"15\" fill=\"#ffffff\" stroke=\"#8a8a8a\"/><path d=\"M3 3L13 13M13 3L3 13\" stroke=\"#e81123\" stroke-width=\"3\"/></svg>";

/// Which drawing the client applies to blocked images, if any.
pub(crate) fn implementation(applied: &Applied<'_>) -> Option<Implementation> {
    [
        Implementation::BlockedImagePlaceholder,
        Implementation::BlockedImageAltText,
    ]
    .into_iter()
    .find(|imp| applied.has(*imp))
}

/// Whether an image with this `src` is blocked with remote images: embedded (`cid:`) and inline
/// (`data:`) images are part of the message and always shown.
pub(crate) fn is_remote(src: Option<&str>) -> bool {
    let src = src.unwrap_or_default().trim_start().to_ascii_lowercase();
    !(src.starts_with("cid:") || src.starts_with("data:"))
}

/// `html` with every remote `<img>` drawn as the client draws a blocked image; `html` itself when
/// the client has no documented drawing. Notes the implementation once per image.
pub(crate) fn apply(
    html: &str,
    applied: &Applied<'_>,
    removed: &mut Removed,
) -> Result<String, lol_html::errors::RewritingError> {
    // Without a documented drawing the engine's own is kept, and the behaviour that says so is
    // noted for each blocked image, as the analysis names it.
    let drawing = implementation(applied);
    let noted = match drawing {
        Some(imp) => imp,
        None if applied.has(Implementation::BlockedImageEngineDefault) => {
            Implementation::BlockedImageEngineDefault
        }
        None => return Ok(html.to_string()),
    };
    let count = std::cell::Cell::new(0usize);
    let out = rewrite_str(
        html,
        RewriteStrSettings::new().append_element_content_handler(element!("img", |el| {
            if !is_remote(el.get_attribute("src").as_deref()) {
                return Ok(());
            }
            count.set(count.get() + 1);
            let markup = match drawing {
                Some(Implementation::BlockedImagePlaceholder) => placeholder(el),
                Some(_) => alt_text_box(el),
                None => return Ok(()),
            };
            el.replace(&markup, ContentType::Html);
            Ok(())
        })),
    )?;
    for _ in 0..count.get() {
        removed.note(noted.note_key());
    }
    Ok(out)
}

/// A `width`/`height` attribute as a CSS length: `600` and `600px` are pixels, `100%` stays.
fn attribute_length(value: Option<String>) -> Option<String> {
    let v = value?;
    let v = v.trim();
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return None;
    }
    Some(if v[digits.len()..].trim_start().starts_with('%') {
        format!("{digits}%")
    } else {
        format!("{digits}px")
    })
}

fn escape_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The image's size from its attributes, as declarations.
fn size_css(el: &Element<'_, '_>) -> String {
    let mut css = String::new();
    for a in ["width", "height"] {
        if let Some(len) = attribute_length(el.get_attribute(a)) {
            css.push_str(&format!("{a}:{len};"));
        }
    }
    css
}

/// The attributes carried over from the image: the ones that do not style it (`data-*`, which
/// the fidelity probes locate by), and for the styled alt text `class`, `id` and `title` too.
fn carried_attributes(el: &Element<'_, '_>, styled: bool) -> String {
    el.attributes()
        .iter()
        .filter(|a| {
            let n = a.name();
            n.starts_with("data-") || (styled && matches!(n.as_str(), "class" | "id" | "title"))
        })
        .map(|a| format!(" {}=\"{}\"", a.name(), escape_attr(&a.value())))
        .collect()
}

/// Gmail's and Apple Mail's blocked image: the alt text in a box of the image's size, styled by
/// the image's own CSS (it comes after the defaults, so it wins), without an icon or border.
fn alt_text_box(el: &Element<'_, '_>) -> String {
    let alt = decode_entities(&el.get_attribute("alt").unwrap_or_default());
    let float = match el
        .get_attribute("align")
        .map(|a| a.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some("left") => "float:left;",
        Some("right") => "float:right;",
        _ => "",
    };
    let own = el.get_attribute("style").unwrap_or_default();
    format!(
        "<span data-mailproof-alt-text=\"\"{attrs} style=\"display:inline-block;overflow:hidden;vertical-align:baseline;{float}{size}{own}\">{text}</span>",
        attrs = carried_attributes(el, true),
        size = size_css(el),
        own = escape_attr(&decode_entities(&own)),
        text = escape_text(&alt),
    )
}

/// Outlook for Windows' blocked image: its own box of the image's size with the icon, its
/// message and the alt text in its own font and colours, cut at [`PLACEHOLDER_ALT_CHARS`].
fn placeholder(el: &Element<'_, '_>) -> String {
    let alt = decode_entities(&el.get_attribute("alt").unwrap_or_default());
    let alt: String = alt.chars().take(PLACEHOLDER_ALT_CHARS).collect();
    let block = el.get_attribute("style").is_some_and(|s| {
        s.replace(' ', "")
            .to_ascii_lowercase()
            .contains("display:block")
    });
    format!(
        "<span data-mailproof-blocked-image=\"\"{attrs} style=\"display:{display};overflow:hidden;vertical-align:baseline;box-sizing:border-box;{size}min-width:24px;min-height:24px;border:1px solid #a6a6a6;padding:2px;background:#ffffff;color:#444444;font-family:'Segoe UI',Calibri,Arial,sans-serif;font-size:11px;line-height:14px;font-weight:normal;font-style:normal;text-align:left;text-decoration:none;text-transform:none;letter-spacing:normal\">{PLACEHOLDER_ICON}{PLACEHOLDER_MESSAGE}{sep}{text}</span>",
        attrs = carried_attributes(el, false),
        display = if block { "block" } else { "inline-block" },
        size = size_css(el),
        sep = if alt.is_empty() { "" } else { "<br>" },
        text = escape_text(&alt),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_lengths_are_pixels_or_percentages() {
        assert_eq!(
            attribute_length(Some("600".into())).as_deref(),
            Some("600px")
        );
        assert_eq!(
            attribute_length(Some(" 600px".into())).as_deref(),
            Some("600px")
        );
        assert_eq!(
            attribute_length(Some("100%".into())).as_deref(),
            Some("100%")
        );
        assert_eq!(attribute_length(Some("auto".into())), None);
    }

    #[test]
    fn embedded_and_inline_images_are_not_blocked() {
        assert!(is_remote(Some("https://x.test/a.png")));
        assert!(is_remote(None));
        assert!(!is_remote(Some("cid:logo@x")));
        assert!(!is_remote(Some(" DATA:image/png;base64,AAAA")));
    }
}
