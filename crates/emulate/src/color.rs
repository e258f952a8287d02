//! Forced dark-mode colour changes: parsing the colours an email uses and mapping them the way
//! clients that invert colours do (lightness flipped, hue kept).

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
    fn full_inversion_also_turns_dark_designs_light() {
        let bg = darken(hex("#111111"), Role::Background, DarkMode::FullInvert)
            .expect("dark background changes");
        assert!(bg.luminance() > 0.7);
        assert_eq!(darken(hex("#fff"), Role::Background, DarkMode::Media), None);
    }
}
