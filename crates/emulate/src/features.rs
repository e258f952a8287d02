//! What each caniemail feature slug means for the transformation: the HTML or CSS a client that
//! lacks the feature removes. The support letters come from the rule files; this table is the
//! interpretation, kept in code so that it is reviewed with the code that applies it.

/// One thing a client without a feature does to the email.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Declarations of these properties are removed.
    Properties(&'static [&'static str]),
    /// Declarations `property: value` (value as a keyword, case-insensitive) are removed.
    PropertyValues(&'static str, &'static [&'static str]),
    /// Declarations whose value calls one of these functions are removed.
    Functions(&'static [&'static str]),
    /// Declarations whose value uses one of these keywords are removed.
    Keywords(&'static [&'static str]),
    /// Declarations whose value uses one of these units are removed.
    Unit(&'static str),
    /// `!important` is stripped (the declaration stays, without its priority).
    Important,
    /// At-rules of this name (without `@`) are removed with their content.
    AtRule(&'static str),
    /// `@media` rules whose query mentions one of these media features are removed.
    MediaFeatures(&'static [&'static str]),
    /// Selectors using this construct are removed from their rule.
    Selector(SelectorPart),
    /// Elements of this name are removed; `keep_content` keeps what is inside.
    Element {
        name: &'static str,
        keep_content: bool,
    },
    /// `<input type=...>` of these types are removed.
    InputTypes(&'static [&'static str]),
    /// Attributes of these names are removed from every element.
    Attributes(&'static [&'static str]),
    /// `<img>` whose source has one of these file extensions do not load (alt text shows).
    ImageFormat(&'static [&'static str]),
    /// `<img src="data:...">` does not load.
    DataImages,
    /// Every `<style>` element is removed.
    StyleElement,
    /// Not emulated: the feature has no effect we can reproduce by rewriting HTML/CSS
    /// (interaction, accessibility, sending infrastructure, or already the engine's behaviour).
    NotEmulated,
}

/// Selector constructs a client may not understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorPart {
    PseudoClass(&'static str),
    PseudoElement(&'static str),
    /// `+`, `~` or `>`.
    Combinator(char),
    Descendant,
    Attribute,
    Class,
    Id,
    Universal,
    Type,
    /// `a, b`: the whole rule is dropped when it has more than one selector.
    Grouping,
    /// `.a.b` or `td.a`: more than one simple selector in a compound.
    Chaining,
}

/// The effect of lacking `slug`, or `None` for a slug this table does not know (the derive tool
/// reports those so that a new caniemail feature is noticed).
pub fn effect(slug: &str) -> Option<Effect> {
    use Effect::*;
    use SelectorPart as S;
    let e = match slug {
        "amp" | "bimi" => NotEmulated,
        // --- at-rules and media features
        "css-at-font-face" => AtRule("font-face"),
        "css-at-import" => AtRule("import"),
        "css-at-keyframes" => AtRule("keyframes"),
        "css-at-media" => AtRule("media"),
        "css-at-supports" => AtRule("supports"),
        "css-at-media-device-pixel-ratio" => MediaFeatures(&[
            "-webkit-device-pixel-ratio",
            "-webkit-min-device-pixel-ratio",
            "-webkit-max-device-pixel-ratio",
            "min-resolution",
            "max-resolution",
            "resolution",
        ]),
        "css-at-media-hover" => MediaFeatures(&["hover", "any-hover"]),
        "css-at-media-orientation" => MediaFeatures(&["orientation"]),
        "css-at-media-prefers-color-scheme" => MediaFeatures(&["prefers-color-scheme"]),
        "css-at-media-prefers-reduced-motion" => MediaFeatures(&["prefers-reduced-motion"]),
        // --- values: functions, units, keywords
        "css-conic-gradient" => Functions(&["conic-gradient", "repeating-conic-gradient"]),
        "css-linear-gradient" => Functions(&["linear-gradient", "repeating-linear-gradient"]),
        "css-radial-gradient" => Functions(&["radial-gradient", "repeating-radial-gradient"]),
        "css-function-clamp" => Functions(&["clamp"]),
        "css-function-light-dark" => Functions(&["light-dark"]),
        "css-function-max" => Functions(&["max"]),
        "css-function-min" => Functions(&["min"]),
        "css-unit-calc" => Functions(&["calc"]),
        "css-variables" => Functions(&["var"]),
        "css-rgb" => Functions(&["rgb"]),
        "css-rgba" => Functions(&["rgba"]),
        "css-modern-color" => Functions(&["lch", "oklch", "lab", "oklab"]),
        "css-unit-ch" => Unit("ch"),
        "css-unit-cm" => Unit("cm"),
        "css-unit-em" => Unit("em"),
        "css-unit-ex" => Unit("ex"),
        "css-unit-in" => Unit("in"),
        "css-unit-mm" => Unit("mm"),
        "css-unit-pc" => Unit("pc"),
        "css-unit-percent" => Unit("%"),
        "css-unit-pt" => Unit("pt"),
        "css-unit-px" => Unit("px"),
        "css-unit-rem" => Unit("rem"),
        "css-unit-vh" => Unit("vh"),
        "css-unit-vw" => Unit("vw"),
        "css-unit-vmax" => Unit("vmax"),
        "css-unit-vmin" => Unit("vmin"),
        "css-unit-initial" => Keywords(&["initial"]),
        "css-important" => Important,
        "css-display-flex" => PropertyValues("display", &["flex", "inline-flex"]),
        "css-display-grid" => PropertyValues("display", &["grid", "inline-grid"]),
        "css-display-none" => PropertyValues("display", &["none"]),
        "css-flex-direction" => PropertyValues("flex-direction", &["column", "column-reverse"]),
        "css-flex-wrap" => PropertyValues("flex-wrap", &["wrap", "wrap-reverse"]),
        "css-intrinsic-size" => Functions(&["fit-content"]),
        "css-sytem-ui" => Keywords(&[
            "system-ui",
            "ui-serif",
            "ui-sans-serif",
            "ui-rounded",
            "ui-monospace",
        ]),
        // --- properties whose name is not the slug's
        "css-background" => Properties(&["background"]),
        "css-block-inline-size" => Properties(&["block-size", "inline-size"]),
        "css-border" => Properties(&[
            "border",
            "border-top",
            "border-right",
            "border-bottom",
            "border-left",
            "border-width",
            "border-style",
            "border-color",
        ]),
        "css-border-inline-block" => Properties(&["border-inline", "border-block"]),
        "css-border-inline-block-individual" => Properties(&[
            "border-inline-start",
            "border-inline-end",
            "border-block-start",
            "border-block-end",
        ]),
        "css-border-inline-block-longhand" => Properties(&[
            "border-inline-width",
            "border-inline-style",
            "border-inline-color",
            "border-block-width",
            "border-block-style",
            "border-block-color",
        ]),
        "css-border-radius" => Properties(&[
            "border-radius",
            "border-top-left-radius",
            "border-top-right-radius",
            "border-bottom-left-radius",
            "border-bottom-right-radius",
        ]),
        "css-border-radius-logical" => Properties(&[
            "border-start-start-radius",
            "border-start-end-radius",
            "border-end-start-radius",
            "border-end-end-radius",
        ]),
        "css-column-layout-properties" => Properties(&[
            "columns",
            "column-width",
            "column-rule",
            "column-span",
            "column-fill",
        ]),
        "css-gap" => Properties(&["gap", "column-gap", "row-gap"]),
        "css-grid-template" => Properties(&[
            "grid-template",
            "grid-template-columns",
            "grid-template-rows",
            "grid-template-areas",
        ]),
        "css-font" => Properties(&["font"]),
        "css-left-right-top-bottom" => Properties(&["left", "right", "top", "bottom"]),
        "css-list-style" => Properties(&["list-style"]),
        "css-margin" => Properties(&[
            "margin",
            "margin-top",
            "margin-right",
            "margin-bottom",
            "margin-left",
        ]),
        "css-margin-block-start-end" => Properties(&["margin-block-start", "margin-block-end"]),
        "css-margin-inline-block" => Properties(&["margin-inline", "margin-block"]),
        "css-margin-inline-start-end" => Properties(&["margin-inline-start", "margin-inline-end"]),
        "css-padding" => Properties(&[
            "padding",
            "padding-top",
            "padding-right",
            "padding-bottom",
            "padding-left",
        ]),
        "css-padding-block-start-end" => Properties(&["padding-block-start", "padding-block-end"]),
        "css-padding-inline-block" => Properties(&["padding-inline", "padding-block"]),
        "css-padding-inline-start-end" => {
            Properties(&["padding-inline-start", "padding-inline-end"])
        }
        "css-scroll-snap" => Properties(&["scroll-snap-type", "scroll-snap-align"]),
        "css-transition" => Properties(&[
            "transition",
            "transition-property",
            "transition-duration",
            "transition-delay",
            "transition-timing-function",
        ]),
        "css-animation" => Properties(&["animation", "animation-name"]),
        "css-text-decoration" => Properties(&["text-decoration"]),
        "css-white-space-collapse" => Properties(&["white-space-collapse"]),
        "css-word-wrap" => Properties(&["word-wrap"]),
        "css-overflow" => Properties(&["overflow", "overflow-x", "overflow-y"]),
        "css-comments"
        | "css-color-scheme"
        | "css-display"
        | "css-inert-attribute"
        | "css-nesting" => NotEmulated,
        // --- selectors
        "css-pseudo-class-active" => Selector(S::PseudoClass("active")),
        "css-pseudo-class-checked" => Selector(S::PseudoClass("checked")),
        "css-pseudo-class-default" => Selector(S::PseudoClass("default")),
        "css-pseudo-class-first-child" => Selector(S::PseudoClass("first-child")),
        "css-pseudo-class-first-of-type" => Selector(S::PseudoClass("first-of-type")),
        "css-pseudo-class-focus-visible" => Selector(S::PseudoClass("focus-visible")),
        "css-pseudo-class-focus-within" => Selector(S::PseudoClass("focus-within")),
        "css-pseudo-class-focus" => Selector(S::PseudoClass("focus")),
        "css-pseudo-class-has" => Selector(S::PseudoClass("has")),
        "css-pseudo-class-hover" => Selector(S::PseudoClass("hover")),
        "css-pseudo-class-lang" => Selector(S::PseudoClass("lang")),
        "css-pseudo-class-last-child" => Selector(S::PseudoClass("last-child")),
        "css-pseudo-class-last-of-type" => Selector(S::PseudoClass("last-of-type")),
        "css-pseudo-class-link" => Selector(S::PseudoClass("link")),
        "css-pseudo-class-not" => Selector(S::PseudoClass("not")),
        "css-pseudo-class-nth-child" => Selector(S::PseudoClass("nth-child")),
        "css-pseudo-class-nth-last-child" => Selector(S::PseudoClass("nth-last-child")),
        "css-pseudo-class-nth-last-of-type" => Selector(S::PseudoClass("nth-last-of-type")),
        "css-pseudo-class-nth-of-type" => Selector(S::PseudoClass("nth-of-type")),
        "css-pseudo-class-only-child" => Selector(S::PseudoClass("only-child")),
        "css-pseudo-class-only-of-type" => Selector(S::PseudoClass("only-of-type")),
        "css-pseudo-class-target" => Selector(S::PseudoClass("target")),
        "css-pseudo-class-visited" => Selector(S::PseudoClass("visited")),
        "css-pseudo-element-after" => Selector(S::PseudoElement("after")),
        "css-pseudo-element-before" => Selector(S::PseudoElement("before")),
        "css-pseudo-element-first-letter" => Selector(S::PseudoElement("first-letter")),
        "css-pseudo-element-first-line" => Selector(S::PseudoElement("first-line")),
        "css-pseudo-element-marker" => Selector(S::PseudoElement("marker")),
        "css-pseudo-element-placeholder" => Selector(S::PseudoElement("placeholder")),
        "css-selector-adjacent-sibling" => Selector(S::Combinator('+')),
        "css-selector-general-sibling" => Selector(S::Combinator('~')),
        "css-selector-child" => Selector(S::Combinator('>')),
        "css-selector-descendant" => Selector(S::Descendant),
        "css-selector-attribute" => Selector(S::Attribute),
        "css-selector-class" => Selector(S::Class),
        "css-selector-id" => Selector(S::Id),
        "css-selector-universal" => Selector(S::Universal),
        "css-selector-type" => Selector(S::Type),
        "css-selector-grouping" => Selector(S::Grouping),
        "css-selector-chaining" => Selector(S::Chaining),
        // --- HTML elements
        "html-abbr" => Element {
            name: "abbr",
            keep_content: true,
        },
        "html-acronym" => Element {
            name: "acronym",
            keep_content: true,
        },
        "html-address" => Element {
            name: "address",
            keep_content: true,
        },
        "html-audio" => Element {
            name: "audio",
            keep_content: false,
        },
        "html-base" => Element {
            name: "base",
            keep_content: false,
        },
        "html-bdi" => Element {
            name: "bdi",
            keep_content: true,
        },
        "html-blockquote" => Element {
            name: "blockquote",
            keep_content: true,
        },
        "html-code" => Element {
            name: "code",
            keep_content: true,
        },
        "html-del" => Element {
            name: "del",
            keep_content: true,
        },
        "html-dfn" => Element {
            name: "dfn",
            keep_content: true,
        },
        "html-dialog" => Element {
            name: "dialog",
            keep_content: false,
        },
        "html-form" => Element {
            name: "form",
            keep_content: true,
        },
        "html-link" => Element {
            name: "link",
            keep_content: false,
        },
        "html-marquee" => Element {
            name: "marquee",
            keep_content: true,
        },
        "html-meter" => Element {
            name: "meter",
            keep_content: true,
        },
        "html-object" => Element {
            name: "object",
            keep_content: false,
        },
        "html-picture" => Element {
            name: "picture",
            keep_content: true,
        },
        "html-progress" => Element {
            name: "progress",
            keep_content: true,
        },
        "html-select" => Element {
            name: "select",
            keep_content: false,
        },
        "html-svg" => Element {
            name: "svg",
            keep_content: false,
        },
        "html-textarea" => Element {
            name: "textarea",
            keep_content: false,
        },
        "html-video" => Element {
            name: "video",
            keep_content: false,
        },
        "html-wbr" => Element {
            name: "wbr",
            keep_content: false,
        },
        "html-button-reset" | "html-button-submit" => Element {
            name: "button",
            keep_content: true,
        },
        "html-input-checkbox" => InputTypes(&["checkbox"]),
        "html-input-hidden" => InputTypes(&["hidden"]),
        "html-input-radio" => InputTypes(&["radio"]),
        "html-input-reset" => InputTypes(&["reset"]),
        "html-input-submit" => InputTypes(&["submit"]),
        "html-input-text" => InputTypes(&["text"]),
        "html-style" => StyleElement,
        // --- HTML attributes
        "html-background" => Attributes(&["background"]),
        "html-srcset" => Attributes(&["srcset", "sizes"]),
        "html-hidden" => Attributes(&["hidden"]),
        "html-popover" => Attributes(&["popover"]),
        "html-loading-attribute" => Attributes(&["loading"]),
        "html-dir" => Attributes(&["dir"]),
        "html-cellpadding" => Attributes(&["cellpadding"]),
        "html-cellspacing" => Attributes(&["cellspacing"]),
        "html-align" => Attributes(&["align"]),
        "html-valign" => Attributes(&["valign"]),
        "html-width" => Attributes(&["width"]),
        "html-height" => Attributes(&["height"]),
        // Accessibility, interaction and structure that a screenshot does not show.
        "html-anchor-links"
        | "html-aria-describedby"
        | "html-aria-hidden"
        | "html-aria-label"
        | "html-aria-labelledby"
        | "html-aria-live"
        | "html-body"
        | "html-comments"
        | "html-div"
        | "html-doctype"
        | "html-h1-h6"
        | "html-hr"
        | "html-image-maps"
        | "html-img"
        | "html-lang"
        | "html-lists"
        | "html-mailto-links"
        | "html-meta-color-scheme"
        | "html-p"
        | "html-pre"
        | "html-required"
        | "html-role"
        | "html-rp"
        | "html-rt"
        | "html-ruby"
        | "html-semantics"
        | "html-small"
        | "html-span"
        | "html-strike"
        | "html-strong"
        | "html-table"
        | "html-target" => NotEmulated,
        // --- images
        "image-apng" => ImageFormat(&["apng"]),
        "image-avif" => ImageFormat(&["avif"]),
        "image-base64" => DataImages,
        "image-bmp" => ImageFormat(&["bmp"]),
        "image-gif" => ImageFormat(&["gif"]),
        "image-hdr" => ImageFormat(&["hdr"]),
        "image-heif" => ImageFormat(&["heif", "heic"]),
        "image-ico" => ImageFormat(&["ico"]),
        "image-jpg" => ImageFormat(&["jpg", "jpeg"]),
        "image-mp4" => ImageFormat(&["mp4"]),
        "image-png" => ImageFormat(&["png"]),
        "image-svg" => ImageFormat(&["svg"]),
        "image-tiff" => ImageFormat(&["tif", "tiff"]),
        "image-webp" => ImageFormat(&["webp"]),
        other => {
            // Every remaining `css-<property>` slug names its property.
            let prop = other.strip_prefix("css-")?;
            Properties(property_name(prop)?)
        }
    };
    Some(e)
}

/// The `css-<property>` slugs that name exactly one property.
fn property_name(prop: &str) -> Option<&'static [&'static str]> {
    const SIMPLE: &[&str] = &[
        "accent-color",
        "align-items",
        "aspect-ratio",
        "backdrop-filter",
        "background-blend-mode",
        "background-clip",
        "background-color",
        "background-image",
        "background-origin",
        "background-position",
        "background-repeat",
        "background-size",
        "border-collapse",
        "border-image",
        "border-spacing",
        "box-shadow",
        "box-sizing",
        "caption-side",
        "clear",
        "clip-path",
        "column-count",
        "cursor",
        "direction",
        "empty-cells",
        "filter",
        "float",
        "font-kerning",
        "font-size-adjust",
        "font-size",
        "font-stretch",
        "font-weight",
        "height",
        "hyphenate-character",
        "hyphenate-limit-chars",
        "hyphens",
        "inline-size",
        "inset",
        "justify-content",
        "letter-spacing",
        "line-height",
        "list-style-image",
        "list-style-position",
        "list-style-type",
        "mask-image",
        "max-block-size",
        "max-height",
        "max-inline-size",
        "max-width",
        "min-block-size",
        "min-height",
        "min-inline-size",
        "min-width",
        "mix-blend-mode",
        "object-fit",
        "object-position",
        "opacity",
        "orphans",
        "outline-offset",
        "outline",
        "overflow-wrap",
        "position",
        "resize",
        "shape-margin",
        "shape-outside",
        "tab-size",
        "table-layout",
        "text-align-last",
        "text-align",
        "text-decoration-color",
        "text-decoration-line",
        "text-decoration-skip-ink",
        "text-decoration-style",
        "text-decoration-thickness",
        "text-emphasis-position",
        "text-emphasis",
        "text-indent",
        "text-justify",
        "text-orientation",
        "text-overflow",
        "text-shadow",
        "text-transform",
        "text-underline-offset",
        "text-underline-position",
        "text-wrap",
        "transform",
        "user-select",
        "vertical-align",
        "visibility",
        "white-space",
        "widows",
        "width",
        "word-break",
        "word-spacing",
        "writing-mode",
        "z-index",
    ];
    let i = SIMPLE.iter().position(|p| *p == prop)?;
    Some(std::slice::from_ref(&SIMPLE[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_caniemail_slug_of_the_reference_copy_has_an_effect() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/reference/caniemail/support.json"
        );
        let text = std::fs::read_to_string(path).expect("reference support.json readable");
        let json: serde_json::Value = serde_json::from_str(&text).expect("valid json");
        let features = json["features"].as_array().expect("features array");
        let unknown: Vec<&str> = features
            .iter()
            .filter_map(|f| f["slug"].as_str())
            .filter(|s| effect(s).is_none())
            .collect();
        assert!(unknown.is_empty(), "slugs without an effect: {unknown:?}");
    }

    #[test]
    fn simple_property_slugs_name_their_property() {
        assert_eq!(
            effect("css-position"),
            Some(Effect::Properties(&["position"]))
        );
        assert_eq!(effect("css-not-a-thing"), None);
    }
}
