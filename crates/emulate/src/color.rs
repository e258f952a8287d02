//! Forced dark-mode colour changes: parsing the colours an email uses and mapping them the way
//! clients that invert colours do (lightness flipped, hue kept).
//!
//! Two uses. [`darken`] predicts, from the source alone, whether a colour changes (the code
//! analysis). [`DarkPass`] is what the renderer applies to each element's *computed* colours on
//! the loaded page, per client class (data/behaviours.toml): the published models where they
//! exist (roosterjs' `getDarkColor`, Blink's force-dark), measured colour pairs where they do not.

use serde::{Deserialize, Serialize};

use crate::rules::DarkMode;

/// An sRGB colour with alpha in 0..=1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rgba {
    pub r: u8,
    pub g: u8,
    pub b: u8,
    pub a: f32,
}

/// What a colour paints, which decides whether partial inversion touches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Background,
    /// Text, borders and other foreground strokes.
    Foreground,
}

/// Named colours emails commonly use; others are left as written.
const NAMED: &[(&str, [u8; 3])] = &[
    ("white", [255, 255, 255]),
    ("black", [0, 0, 0]),
    ("red", [255, 0, 0]),
    ("green", [0, 128, 0]),
    ("blue", [0, 0, 255]),
    ("yellow", [255, 255, 0]),
    ("gray", [128, 128, 128]),
    ("grey", [128, 128, 128]),
    ("silver", [192, 192, 192]),
    ("navy", [0, 0, 128]),
    ("maroon", [128, 0, 0]),
    ("orange", [255, 165, 0]),
    ("purple", [128, 0, 128]),
    ("teal", [0, 128, 128]),
    ("lightgray", [211, 211, 211]),
    ("lightgrey", [211, 211, 211]),
    ("darkgray", [169, 169, 169]),
    ("darkgrey", [169, 169, 169]),
    ("whitesmoke", [245, 245, 245]),
    ("gainsboro", [220, 220, 220]),
];

/// Parses `#rgb`, `#rrggbb`, `#rrggbbaa`, a named colour, or `rgb()`/`rgba()` with numbers.
pub fn parse(text: &str) -> Option<Rgba> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix('#') {
        return parse_hex(hex);
    }
    let lower = t.to_ascii_lowercase();
    if let Some(args) = lower
        .strip_prefix("rgba(")
        .or_else(|| lower.strip_prefix("rgb("))
        .and_then(|s| s.strip_suffix(')'))
    {
        let parts: Vec<&str> = args
            .split([',', '/', ' '])
            .filter(|p| !p.is_empty())
            .collect();
        if parts.len() < 3 {
            return None;
        }
        let channel = |p: &str| -> Option<u8> {
            if let Some(pct) = p.strip_suffix('%') {
                let v: f32 = pct.parse().ok()?;
                Some((v.clamp(0.0, 100.0) * 2.55).round() as u8)
            } else {
                let v: f32 = p.parse().ok()?;
                Some(v.clamp(0.0, 255.0).round() as u8)
            }
        };
        let a = match parts.get(3) {
            Some(p) => match p.strip_suffix('%') {
                Some(pct) => pct.parse::<f32>().ok()? / 100.0,
                None => p.parse::<f32>().ok()?,
            },
            None => 1.0,
        };
        return Some(Rgba {
            r: channel(parts[0])?,
            g: channel(parts[1])?,
            b: channel(parts[2])?,
            a: a.clamp(0.0, 1.0),
        });
    }
    NAMED
        .iter()
        .find(|(n, _)| *n == lower)
        .map(|(_, [r, g, b])| Rgba {
            r: *r,
            g: *g,
            b: *b,
            a: 1.0,
        })
}

fn parse_hex(hex: &str) -> Option<Rgba> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let digit = |i: usize| u8::from_str_radix(&hex[i..i + 1], 16).ok();
    let pair = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    match hex.len() {
        3 => Some(Rgba {
            r: digit(0)? * 17,
            g: digit(1)? * 17,
            b: digit(2)? * 17,
            a: 1.0,
        }),
        6 | 8 => Some(Rgba {
            r: pair(0)?,
            g: pair(2)?,
            b: pair(4)?,
            a: if hex.len() == 8 {
                f32::from(pair(6)?) / 255.0
            } else {
                1.0
            },
        }),
        _ => None,
    }
}

impl Rgba {
    /// Relative luminance (WCAG), 0 = black, 1 = white.
    pub fn luminance(self) -> f32 {
        let lin = |c: u8| {
            let c = f32::from(c) / 255.0;
            if c <= 0.040_45 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(self.r) + 0.7152 * lin(self.g) + 0.0722 * lin(self.b)
    }

    pub fn to_css(self) -> String {
        if self.a >= 1.0 {
            format!("#{:02x}{:02x}{:02x}", self.r, self.g, self.b)
        } else {
            format!("rgba({}, {}, {}, {:.3})", self.r, self.g, self.b, self.a)
        }
    }

    /// Lightness flipped in HSL, hue and saturation kept; lightness is kept away from pure
    /// black/white the way clients' dark palettes are (backgrounds end near #1e1e1e).
    fn flipped(self) -> Rgba {
        let (h, s, l) = to_hsl(self);
        let l2 = (1.0 - l).clamp(0.07, 0.93);
        let (r, g, b) = from_hsl(h, s, l2);
        Rgba { r, g, b, a: self.a }
    }
}

/// The colour a forced dark mode shows instead of `c`, or `None` when it stays.
pub fn darken(c: Rgba, role: Role, mode: DarkMode) -> Option<Rgba> {
    let lum = c.luminance();
    match mode {
        DarkMode::None | DarkMode::Media => None,
        DarkMode::FullInvert => Some(c.flipped()),
        DarkMode::PartialInvert => {
            let change = match role {
                Role::Background => lum > 0.4,
                Role::Foreground => lum < 0.2,
            };
            change.then(|| c.flipped())
        }
    }
}

/// CIELAB (D65) as the `color-convert` package computes it, the one roosterjs' `getDarkColor`
/// goes through: its published test vectors are reproduced only with these constants.
fn to_lab(c: Rgba) -> [f64; 3] {
    let lin = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v > 0.040_45 {
            ((v + 0.055) / 1.055).powf(2.4)
        } else {
            v / 12.92
        }
    };
    let (r, g, b) = (lin(c.r), lin(c.g), lin(c.b));
    let x = (r * 0.4124 + g * 0.3576 + b * 0.1805) * 100.0 / 95.047;
    let y = r * 0.2126 + g * 0.7152 + b * 0.0722;
    let z = (r * 0.0193 + g * 0.1192 + b * 0.9505) * 100.0 / 108.883;
    let f = |t: f64| {
        if t > 0.008_856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

fn from_lab([l, a, b]: [f64; 3], alpha: f32) -> Rgba {
    let fy = (l + 16.0) / 116.0;
    let fx = a / 500.0 + fy;
    let fz = fy - b / 200.0;
    let inv = |t: f64| {
        let t3 = t * t * t;
        if t3 > 0.008_856 {
            t3
        } else {
            (t - 16.0 / 116.0) / 7.787
        }
    };
    let (x, y, z) = (inv(fx) * 0.950_47, inv(fy), inv(fz) * 1.088_83);
    let gamma = |v: f64| {
        let v = if v > 0.003_130_8 {
            1.055 * v.powf(1.0 / 2.4) - 0.055
        } else {
            v * 12.92
        };
        (v.clamp(0.0, 1.0) * 255.0).round() as u8
    };
    Rgba {
        r: gamma(x * 3.2406 + y * -1.5372 + z * -0.4986),
        g: gamma(x * -0.9689 + y * 1.8758 + z * 0.0415),
        b: gamma(x * 0.0557 + y * -0.2040 + z * 1.0570),
        a: alpha,
    }
}

impl Rgba {
    /// CIELAB lightness, 0 = black, 100 = white.
    pub fn lab_lightness(self) -> f64 {
        to_lab(self)[0]
    }

    /// Perceived brightness 0..=255 (W3C AERT), what Blink's dark-mode classifiers compare.
    pub fn brightness(self) -> f64 {
        (299.0 * f64::from(self.r) + 587.0 * f64::from(self.g) + 114.0 * f64::from(self.b)) / 1000.0
    }

    fn with_lightness(self, l: f64) -> Rgba {
        let [_, a, b] = to_lab(self);
        from_lab([l.clamp(0.0, 100.0), a, b], self.a)
    }
}

/// L\* of `#333333`, the base roosterjs maps white to.
const ROOSTERJS_BASE_L: f64 = 21.247;

/// roosterjs' `getDarkColor` (microsoft/roosterjs, roosterjs-color-utils): lightness inverted in
/// CIELAB into `[L*(#333), 100]`, a\* and b\* kept.
pub fn roosterjs_dark_color(c: Rgba) -> Rgba {
    let l = c.lab_lightness();
    c.with_lightness((100.0 - l) * ((100.0 - ROOSTERJS_BASE_L) / 100.0) + ROOSTERJS_BASE_L)
}

/// Blink's force-dark default (`kInvertLightnessLAB`): L\* becomes 100 − L\*, a\* and b\* kept.
pub fn blink_invert_lightness(c: Rgba) -> Rgba {
    c.with_lightness(100.0 - c.lab_lightness())
}

/// Blink force-dark's default thresholds (dark_mode_settings_builder.cc): text darker than this
/// brightness is inverted...
pub const BLINK_FOREGROUND_THRESHOLD: f64 = 150.0;
/// ...and backgrounds brighter than this.
pub const BLINK_BACKGROUND_THRESHOLD: f64 = 205.0;

/// Outlook for Windows' dark mode as measured (druso/email_darkmode_simulator,
/// `Color_inversion_data.md`): `#ffffff` becomes `#262626` and `#000000` becomes `#f6f6f6`; in
/// between, lightness is inverted linearly in CIELAB, hue kept.
pub fn full_invert(c: Rgba) -> Rgba {
    let lo = Rgba {
        r: 0x26,
        g: 0x26,
        b: 0x26,
        a: 1.0,
    }
    .lab_lightness();
    let hi = Rgba {
        r: 0xf6,
        g: 0xf6,
        b: 0xf6,
        a: 1.0,
    }
    .lab_lightness();
    c.with_lightness(lo + (100.0 - c.lab_lightness()) * (hi - lo) / 100.0)
}

/// The page-side recolouring a dark-mode profile applies after load, one per client class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DarkPass {
    /// Outlook.com, the new Outlook, Outlook iOS/Android/macOS: [`roosterjs_dark_color`] where it
    /// darkens a background or lightens a text colour (dark areas kept); originals kept in
    /// `data-ogsc`/`data-ogsb`/`data-ogac`/`data-ogab`.
    OutlookPartial,
    /// Gmail Android: Blink force-dark, [`blink_invert_lightness`] past its thresholds, small
    /// images inverted.
    BlinkForceDark,
    /// Gmail iOS, Outlook for Windows, Windows Mail: [`full_invert`] on every colour.
    FullInvert,
}

impl DarkPass {
    /// The colour the client paints instead of `c` in this `role`, or `None` when it keeps it.
    pub fn recolour(self, c: Rgba, role: Role) -> Option<Rgba> {
        if c.a <= 0.0 {
            return None;
        }
        let new = match self {
            DarkPass::OutlookPartial => {
                let new = roosterjs_dark_color(c);
                let (l, l2) = (c.lab_lightness(), new.lab_lightness());
                // The map has a fixed point near L* 56: above it backgrounds get darker, below it
                // text gets lighter. The other halves would turn dark designs light, which
                // Outlook does not do (measured: #5a5c5e and #000000 backgrounds unchanged).
                let keeps = match role {
                    Role::Background => l2 >= l,
                    Role::Foreground => l2 <= l,
                };
                (!keeps).then_some(new)?
            }
            DarkPass::BlinkForceDark => {
                let invert = match role {
                    Role::Background => c.brightness() > BLINK_BACKGROUND_THRESHOLD,
                    Role::Foreground => c.brightness() < BLINK_FOREGROUND_THRESHOLD,
                };
                invert.then(|| blink_invert_lightness(c))?
            }
            DarkPass::FullInvert => full_invert(c),
        };
        (new != c).then_some(new)
    }

    /// Whether the client keeps the originals in `data-og*` attributes, which the email's
    /// `[data-ogsc]`/`[data-ogsb]` rules then match.
    pub fn marks_originals(self) -> bool {
        self == DarkPass::OutlookPartial
    }

    /// Whether icon-sized images are inverted (Blink's image classifier).
    pub fn inverts_small_images(self) -> bool {
        self == DarkPass::BlinkForceDark
    }
}

/// Whether the email's CSS opts in to Apple Mail's dark mode: a `color-scheme` (Mail 13 on) or
/// `supported-color-schemes` (Mail 12) declaration that names `dark`. The `<meta>` tags alone do
/// not (email-bugs #104), and the pattern needs the `:` of a declaration, so they do not match.
pub fn apple_opts_in(html: &str) -> bool {
    static DECL: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    DECL.get_or_init(|| {
        regex::Regex::new(r#"(?i)(?:^|[^-\w])(?:supported-)?color-schemes?\s*:[^;}"'<>]*\bdark\b"#)
            .ok()
    })
    .as_ref()
    .is_some_and(|re| re.is_match(html))
}

/// Whether the email is "simple" in Apple Mail's sense, which Mail darkens itself: no CSS, no
/// colour attributes and no image (Litmus: a 2x1 image is enough to stop it).
pub fn is_unstyled(html: &str) -> bool {
    let lower = html.to_ascii_lowercase();
    ![
        "<style",
        "style=",
        "bgcolor=",
        "color=",
        "background=",
        "<img",
        "<svg",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

fn to_hsl(c: Rgba) -> (f32, f32, f32) {
    let r = f32::from(c.r) / 255.0;
    let g = f32::from(c.g) / 255.0;
    let b = f32::from(c.b) / 255.0;
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let l = (max + min) / 2.0;
    if (max - min).abs() < f32::EPSILON {
        return (0.0, 0.0, l);
    }
    let d = max - min;
    let s = if l > 0.5 {
        d / (2.0 - max - min)
    } else {
        d / (max + min)
    };
    let h = if max == r {
        (g - b) / d + if g < b { 6.0 } else { 0.0 }
    } else if max == g {
        (b - r) / d + 2.0
    } else {
        (r - g) / d + 4.0
    };
    (h / 6.0, s, l)
}

fn from_hsl(h: f32, s: f32, l: f32) -> (u8, u8, u8) {
    let to = |v: f32| (v * 255.0).round().clamp(0.0, 255.0) as u8;
    if s == 0.0 {
        return (to(l), to(l), to(l));
    }
    let q = if l < 0.5 {
        l * (1.0 + s)
    } else {
        l + s - l * s
    };
    let p = 2.0 * l - q;
    let hue = |mut t: f32| {
        if t < 0.0 {
            t += 1.0;
        }
        if t > 1.0 {
            t -= 1.0;
        }
        if t < 1.0 / 6.0 {
            p + (q - p) * 6.0 * t
        } else if t < 0.5 {
            q
        } else if t < 2.0 / 3.0 {
            p + (q - p) * (2.0 / 3.0 - t) * 6.0
        } else {
            p
        }
    };
    (to(hue(h + 1.0 / 3.0)), to(hue(h)), to(hue(h - 1.0 / 3.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Rgba {
        parse(s).expect("colour parses")
    }

    #[test]
    fn colours_in_the_forms_emails_use_parse() {
        assert_eq!(hex("#fff"), hex("white"));
        assert_eq!(hex("#FFFFFF").to_css(), "#ffffff");
        assert_eq!(hex("rgb(255, 0, 0)"), hex("red"));
        assert!((hex("rgba(0,0,0,0.5)").a - 0.5).abs() < 1e-6);
        assert_eq!(parse("url(x.png)"), None);
    }

    #[test]
    fn partial_inversion_darkens_light_backgrounds_and_lightens_dark_text_only() {
        let white_bg = darken(hex("#ffffff"), Role::Background, DarkMode::PartialInvert)
            .expect("white background changes");
        assert!(white_bg.luminance() < 0.05, "{white_bg:?}");
        assert_eq!(
            darken(hex("#102030"), Role::Background, DarkMode::PartialInvert),
            None
        );
        let black_text = darken(hex("#000"), Role::Foreground, DarkMode::PartialInvert)
            .expect("black text changes");
        assert!(black_text.luminance() > 0.7);
        assert_eq!(
            darken(hex("#fff"), Role::Foreground, DarkMode::PartialInvert),
            None
        );
    }

    #[test]
    fn roosterjs_get_dark_color_matches_its_published_test_vectors() {
        // microsoft/roosterjs packages/roosterjs-color-utils/test/utils/getDarkColorTest.ts
        for (from, to) in [
            ("#ffffff", "#333333"),
            ("#cccccc", "#535353"),
            ("#999999", "#777777"),
            ("#000000", "#ffffff"),
            ("#ff0000", "#ff2711"),
            ("#0c64c0", "#6da0ff"),
        ] {
            assert_eq!(roosterjs_dark_color(hex(from)).to_css(), to, "{from}");
        }
        let half = roosterjs_dark_color(hex("rgba(255,255,255,0.5)"));
        assert!((half.a - 0.5).abs() < 1e-6);
    }

    #[test]
    fn outlook_partial_darkens_light_backgrounds_lightens_dark_text_and_keeps_dark_areas() {
        let p = DarkPass::OutlookPartial;
        assert_eq!(
            p.recolour(hex("#ffffff"), Role::Background),
            Some(hex("#333333"))
        );
        assert_eq!(p.recolour(hex("#000000"), Role::Background), None);
        assert_eq!(p.recolour(hex("#5a5c5e"), Role::Background), None);
        assert_eq!(
            p.recolour(hex("#000000"), Role::Foreground),
            Some(hex("#ffffff"))
        );
        assert_eq!(p.recolour(hex("#ffffff"), Role::Foreground), None);
        assert_eq!(p.recolour(hex("rgba(0,0,0,0)"), Role::Background), None);
    }

    #[test]
    fn blink_force_dark_inverts_lab_lightness_past_its_thresholds_only() {
        let p = DarkPass::BlinkForceDark;
        assert_eq!(blink_invert_lightness(hex("#ffffff")).to_css(), "#000000");
        assert_eq!(blink_invert_lightness(hex("#000000")).to_css(), "#ffffff");
        let mid = blink_invert_lightness(hex("#777777")).lab_lightness();
        assert!((mid - (100.0 - hex("#777777").lab_lightness())).abs() < 0.6);
        // #dddddd: brightness 221 > 205, inverted; #cccccc (204) kept.
        assert!(p.recolour(hex("#dddddd"), Role::Background).is_some());
        assert_eq!(p.recolour(hex("#cccccc"), Role::Background), None);
        // Text: #959595 (149) inverted, #969696 (150) kept.
        assert!(p.recolour(hex("#959595"), Role::Foreground).is_some());
        assert_eq!(p.recolour(hex("#969696"), Role::Foreground), None);
        assert_eq!(p.recolour(hex("#000000"), Role::Background), None);
    }

    #[test]
    fn full_invert_follows_the_measured_outlook_windows_endpoints_both_ways() {
        assert_eq!(full_invert(hex("#ffffff")).to_css(), "#262626");
        assert_eq!(full_invert(hex("#000000")).to_css(), "#f6f6f6");
        let p = DarkPass::FullInvert;
        let dark_bg = p
            .recolour(hex("#111111"), Role::Background)
            .expect("a dark design is turned light");
        assert!(dark_bg.lab_lightness() > 80.0);
        let red = full_invert(hex("#ff0000"));
        assert!(red.r > red.g && red.r > red.b, "hue kept: {red:?}");
    }

    #[test]
    fn apple_opt_in_needs_a_css_declaration_not_the_meta_tag() {
        assert!(apple_opts_in(
            "<style>:root { color-scheme: light dark; }</style>"
        ));
        assert!(apple_opts_in(
            "<style>:root{supported-color-schemes:light dark}</style>"
        ));
        assert!(!apple_opts_in(
            "<meta name=\"color-scheme\" content=\"light dark\"><meta name=\"supported-color-schemes\" content=\"light dark\">"
        ));
        assert!(!apple_opts_in(
            "<style>:root { color-scheme: light; }</style>"
        ));
        assert!(!apple_opts_in(
            "<style>@media (prefers-color-scheme: dark) { .a { color: red } }</style>"
        ));
        assert!(is_unstyled("<p>Hello</p>"));
        assert!(!is_unstyled("<p style=\"color:red\">Hello</p>"));
        assert!(!is_unstyled("<p>Hi</p><img src=x width=2 height=1>"));
    }

    #[test]
    fn full_inversion_also_turns_dark_designs_light() {
        let bg = darken(hex("#111111"), Role::Background, DarkMode::FullInvert)
            .expect("dark background changes");
        assert!(bg.luminance() > 0.7);
        assert_eq!(darken(hex("#fff"), Role::Background, DarkMode::Media), None);
    }
}
