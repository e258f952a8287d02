//! Client tips: practical advice for one client, generated from its rule set (the features it
//! drops or supports only partly, its hand-written policy) and ranked by how much of a typical
//! email each one breaks. The advice text is per feature or behaviour, never per client: which
//! tips a client gets, and what they say about it, comes from its rule data.

use domain::Client;

use crate::behaviours::Implementation;
use crate::rules::{DarkMode, OnCssError, RuleBook, Support};
use crate::EmulateError;

/// Most tips returned for one client.
pub const MAX_TIPS: usize = 10;

/// One piece of advice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tip {
    pub name: String,
    pub tip: String,
    /// The caniemail slug or behaviour key it comes from.
    pub feature: String,
}

/// Advice for a feature a client lacks: (slug, weight, what is lost, workaround). The weight is
/// how much of a typical email's layout breaks without the feature (100: everything).
const FEATURE_ADVICE: &[(&str, u32, &str, &str)] = &[
    ("html-style", 100, "<style> elements", "inline every style into style attributes (mailproof inlines CSS when you ask it to) and keep layout in tables"),
    ("css-at-media", 90, "@media queries", "build a fluid, mobile-first layout (percentage widths on tables, max-width only as an extra) that works without queries"),
    ("css-max-width", 85, "max-width", "wrap the content in a fixed-width table inside <!--[if mso]> (a \"ghost table\") so it does not stretch"),
    ("css-display-flex", 80, "display:flex", "lay out columns with tables (or inline-block columns inside a ghost table)"),
    ("css-display-grid", 80, "display:grid", "lay out columns with tables"),
    ("css-width", 75, "CSS width on some elements", "set widths with the width attribute on <table>, <td> and <img>"),
    ("css-background-image", 75, "CSS background images", "set a background-color fallback; for Outlook for Windows draw the image with a VML <v:rect> and <v:fill> inside <!--[if mso]>"),
    ("html-background", 70, "the background attribute", "set a bgcolor fallback and use VML for Outlook for Windows"),
    ("css-padding", 70, "padding on some elements", "put padding on <td> cells, not on <div>, <p> or <a>"),
    ("css-margin", 65, "margin on some elements", "space blocks with table cells' padding or empty rows instead of margins"),
    ("css-float", 60, "float", "use align=\"left\"/\"right\" on tables and images, or columns in a table"),
    ("css-position", 60, "position", "avoid overlapping layouts; draw overlays into the image"),
    ("css-linear-gradient", 55, "CSS gradients", "declare a solid background-color before the gradient"),
    ("css-border-radius", 55, "border-radius", "accept square corners, or draw buttons with VML <v:roundrect> for Outlook for Windows"),
    ("css-at-font-face", 50, "web fonts (@font-face)", "end every font-family with a safe fallback stack (Arial, Helvetica, sans-serif)"),
    ("image-svg", 50, "SVG images", "export PNG (or JPEG) instead"),
    ("html-svg", 50, "inline <svg>", "export the graphic as PNG"),
    ("image-webp", 50, "WebP images", "serve PNG, JPEG or GIF"),
    ("image-base64", 45, "data: images", "host images and link them by URL"),
    ("css-variables", 45, "CSS variables", "write literal values (a preprocessor can substitute them)"),
    ("css-box-shadow", 35, "box-shadow", "treat shadows as decoration only, or bake them into images"),
    ("css-rgba", 35, "rgba() colours", "use opaque hex colours"),
    ("css-unit-rem", 35, "rem units", "use px"),
    ("css-opacity", 30, "opacity", "use solid colours or pre-blended images"),
    ("css-pseudo-class-hover", 25, ":hover", "treat hover effects as enhancement only"),
    ("css-selector-attribute", 25, "attribute selectors", "target elements with classes"),
    ("css-important", 25, "!important", "do not rely on !important to win over inline styles"),
];

/// Advice for a documented behaviour (data/behaviours.toml) whose switch is the behaviour entry
/// itself: (implementation, weight, tip name, workaround). Policy-switched behaviours have their
/// tips below, from the policy.
const BEHAVIOUR_ADVICE: &[(Implementation, u32, &str, &str)] = &[
    (Implementation::ClipLongMessage, 92, "Long emails are clipped", "keep the HTML under about 100 KB: inline CSS only where needed, drop comments and repeated styles"),
    (Implementation::StyleNestedAtRuleDropsBlock, 90, "An at-rule inside an at-rule drops the <style>", "never put @font-face, @import or @supports inside @media; keep them at the top level or in a <style> of their own"),
    (Implementation::CompoundSelectorFirstClassOnly, 70, "Compound class selectors never match", "use one class per selector (.a, not .a.b)"),
    (Implementation::AttributeSelectorMangled, 62, "Attribute selectors are rewritten", "do not rely on [attr] .x selectors or [class=...] matching here"),
    (Implementation::MsoConditionalsAsComments, 89, "Outlook conditional comments are ignored", "make the layout work without <!--[if mso]> ghost tables: the <!--[if !mso]><!--> branch is what shows"),
    (Implementation::FirstClassOnly, 66, "Only the first class applies", "put every style an element needs on its first class, or inline it"),
    (Implementation::LineHeightMinimum, 64, "line-height is a minimum", "add mso-line-height-rule: exactly next to every line-height that must hold"),
    (Implementation::SpacerCellOneLine, 63, "Empty cells are one line tall", "give spacer cells font-size and line-height equal to their height"),
    (Implementation::WebFontTimesFallback, 74, "Web fonts fall back to Times New Roman", "start font stacks with a Windows font inside <!--[if mso]>, or set mso-font-alt"),
    (Implementation::HeightToMinHeight, 50, "height becomes min-height", "do not rely on height to crop content; size images and cells to their content"),
    (Implementation::AutoFitWideLayout, 78, "Wide emails are zoomed out", "make the layout fluid (width:100%; max-width:600px) so nothing is wider than the screen, or target the 686 px layout width in media queries"),
    (Implementation::ZoomOutWideEmail, 76, "Wide emails are shrunk to the screen", "make the layout fluid (width:100%; max-width:600px), or add a max-width media query that makes it fit a phone"),
    (Implementation::ZoomOutWideEmailUnlessReformattingDisabled, 76, "Wide emails are shrunk to the screen", "make the layout fluid (width:100%; max-width:600px) or add a max-width media query that makes it fit a phone; <meta name=\"x-apple-disable-message-reformatting\"> turns the scaling off"),
    (Implementation::BlockedImagePlaceholder, 72, "Images are blocked by default and drawn as placeholders", "make the email read without images: put key words and calls to action in live text, and give every image short alt text (the placeholder cuts it at 200 characters and ignores its styles)"),
    (Implementation::BlockedImageAltText, 40, "Alt text shows when images are off", "give every image alt text and style it with the image's font-family, font-size, color and background-color"),
    (Implementation::DataDetectors, 48, "Phone numbers, dates and addresses become links", "style a[x-apple-data-detectors] { color: inherit !important; text-decoration: none !important; } and add <meta name=\"format-detection\" content=\"telephone=no\"> for phones"),
];

/// Advice for a partly supported feature: only the most consequential ones.
const PARTIAL_WEIGHT: u32 = 20;

/// The tips for `client`, most consequential first, at most [`MAX_TIPS`].
pub fn tips(client: &Client, book: &RuleBook) -> Result<Vec<Tip>, EmulateError> {
    let set = book.rule_set_for(client)?;
    let who = &client.display_name;
    let policy = &set.policy;
    let mut out: Vec<(u32, Tip)> = Vec::new();
    let mut add = |weight: u32, feature: &str, name: String, tip: String| {
        out.push((
            weight,
            Tip {
                name,
                tip,
                feature: feature.to_string(),
            },
        ))
    };

    for &(slug, weight, what, workaround) in FEATURE_ADVICE {
        let scoped: Vec<String> = policy
            .scoped_drops
            .iter()
            .filter(|d| {
                crate::features::effect(slug).is_some_and(|e| {
                    matches!(e, crate::features::Effect::Properties(p) if d.properties.iter().any(|x| p.contains(&x.as_str())))
                })
            })
            .map(|d| {
                if d.on.is_empty() {
                    format!("on every element except {}", d.except_on.join(", "))
                } else {
                    format!("on {}", d.on.join(", "))
                }
            })
            .collect();
        if set.removes(slug) || (slug == "html-style" && !policy.style_blocks) {
            add(
                weight,
                slug,
                what.to_string(),
                format!("{who} ignores {what}: {workaround}."),
            );
        } else if !scoped.is_empty() {
            add(
                weight,
                slug,
                what.to_string(),
                format!(
                    "{who} ignores {} {}: {workaround}.",
                    slug.trim_start_matches("css-"),
                    scoped.join("; ")
                ),
            );
        } else if set.support(slug) == Support::Partial && weight >= 50 {
            let note = set
                .derived
                .notes
                .get(slug)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            add(
                weight.min(PARTIAL_WEIGHT + weight / 4),
                slug,
                what.to_string(),
                format!("{who} supports {what} only partly{note}: {workaround}."),
            );
        }
    }

    for b in &book.behaviours().of(client).0 {
        let Some(&(_, weight, name, workaround)) = BEHAVIOUR_ADVICE
            .iter()
            .find(|(imp, ..)| *imp == b.implementation)
        else {
            continue;
        };
        let source = b.sources.first().map(String::as_str).unwrap_or_default();
        add(
            weight,
            &b.id,
            name.to_string(),
            format!("{who}: {} To avoid it: {workaround} ({source}).", b.summary),
        );
    }
    if policy.word_engine {
        add(
            95,
            "mso-conditionals",
            "Conditional comments".into(),
            format!("{who} draws HTML with Microsoft Word and reads <!--[if mso]> conditional comments: give it table-based versions of fluid layouts there, and hide what it cannot draw with <!--[if !mso]><!-->...<!--<![endif]-->."),
        );
    }
    if policy.on_css_error == OnCssError::DropBlock {
        add(
            88,
            "html-style-dropped-on-css-error",
            "One CSS error drops the whole <style>".into(),
            format!("{who} drops a whole <style> element when any of its CSS does not parse: validate the CSS, and keep experimental rules in a separate <style>."),
        );
    }
    if let Some(max) = policy.style_max_bytes {
        add(
            86,
            "html-style-over-size-limit",
            "<style> size limit".into(),
            format!("{who} keeps {max} bytes of CSS in total: the <style> element that passes it, and every later one, is removed; keep all the CSS under that."),
        );
    }
    if !policy.style_in_body && policy.style_blocks {
        add(
            84,
            "html-style-in-body",
            "<style> only in <head>".into(),
            format!("{who} removes <style> elements inside <body>: put them in <head>."),
        );
    }
    match policy.dark_mode {
        DarkMode::FullInvert => add(
            72,
            "dark-mode",
            "Dark mode inverts colours".into(),
            format!("In dark mode {who} inverts every background and text colour, dark designs included: give logos a transparent background with a light outline, avoid text baked into images, and check the dark-mode screenshot."),
        ),
        DarkMode::PartialInvert => add(
            68,
            "dark-mode",
            "Dark mode darkens light colours".into(),
            format!("In dark mode {who} darkens light backgrounds and lightens dark text: give logos a transparent background with a light outline and check the dark-mode screenshot."),
        ),
        DarkMode::Media => add(
            40,
            "dark-mode",
            "Dark mode follows your styles".into(),
            format!("In dark mode {who} leaves colours alone and applies your @media (prefers-color-scheme: dark) rules: add them to control the dark look."),
        ),
        DarkMode::None => {}
    }
    if !policy.class_prefix.is_empty() {
        add(
            58,
            "class-prefix",
            "Class names are rewritten".into(),
            format!("{who} prefixes every class name with {:?} and rewrites selectors to match: use plain .class selectors, not [class=...] attribute selectors.", policy.class_prefix),
        );
    }
    if let Some(width) = policy.pane_width {
        add(
            45,
            "reading-pane",
            "Reading pane width".into(),
            format!("{who} shows the email in a reading pane about {width}px wide: keep the main table at 600px or less and let it shrink."),
        );
    }

    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    Ok(out.into_iter().take(MAX_TIPS).map(|(_, t)| t).collect())
}
