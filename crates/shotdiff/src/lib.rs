//! Visual diff of two screenshots (PNG bytes in, figures and a highlight PNG out). No IO.
//!
//! How pixels are compared:
//! - The two images are aligned at the top-left corner and compared over their common area; the
//!   height (and width) one has beyond the other is reported, not counted as change, because a
//!   longer email pushes its footer down rather than changing what is above it.
//! - Two pixels are the same colour when no RGB channel differs by more than
//!   [`Options::threshold`]. Alpha is ignored: screenshots are opaque.
//! - Anti-aliasing tolerance (the classic check, in a simple form): a differing pixel is noise
//!   when each image's colour lies within the per-channel colour range (± threshold) of the other
//!   image's 3×3 neighbourhood around it. A glyph edge drawn a sub-pixel further, or with another
//!   grey, passes; a filled area that really changed colour does not, because its old
//!   neighbourhood never contained the new colour.
//! - Changed pixels are grouped by square tiles; 8-connected tiles form one region, reported as
//!   the tight box of its changed pixels. When there would be more than [`Options::max_boxes`]
//!   regions, the tiles are doubled in size until there are not.

use std::io::Cursor;

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ExtendedColorType, ImageEncoder, ImageFormat, RgbImage};

/// How strict the comparison is.
#[derive(Clone, Debug)]
pub struct Options {
    /// Largest per-channel difference (0–255) still counted as the same colour.
    pub threshold: u8,
    /// Ignore pixels that differ only by anti-aliasing (see the crate documentation).
    pub ignore_antialiasing: bool,
    /// Side, in pixels, of the tiles changed pixels are grouped by into regions.
    pub tile: u32,
    /// Most regions reported; more are merged by grouping with larger tiles.
    pub max_boxes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            threshold: 24,
            ignore_antialiasing: true,
            tile: 16,
            max_boxes: 20,
        }
    }
}

/// A region in pixels of the screenshots, from the top-left corner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    /// Whether `other` lies entirely inside this region.
    pub fn contains(&self, other: &Rect) -> bool {
        other.x >= self.x
            && other.y >= self.y
            && other.x + other.width <= self.x + self.width
            && other.y + other.height <= self.y + self.height
    }
}

/// What changed between two screenshots.
#[derive(Clone, Debug)]
pub struct Diff {
    /// (width, height) of the old and the new screenshot.
    pub old_size: (u32, u32),
    pub new_size: (u32, u32),
    /// Pixels of the common area that changed (after the anti-aliasing tolerance).
    pub changed_pixels: u64,
    /// Pixels of the common area (the share's denominator).
    pub compared_pixels: u64,
    /// Regions of changed pixels, top to bottom, at most [`Options::max_boxes`].
    pub boxes: Vec<Rect>,
    /// New height minus old height (negative when the new screenshot is shorter).
    pub extra_height: i64,
    /// New width minus old width.
    pub extra_width: i64,
    /// The new screenshot dimmed, changed pixels in magenta, area beyond the old one tinted
    /// orange; PNG.
    pub highlight_png: Vec<u8>,
}

impl Diff {
    /// Share of the common area that changed, 0.0 to 1.0.
    pub fn changed_share(&self) -> f64 {
        if self.compared_pixels == 0 {
            0.0
        } else {
            self.changed_pixels as f64 / self.compared_pixels as f64
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("the {which} screenshot is not a readable PNG ({source}); render the test again")]
    Decode {
        which: &'static str,
        source: image::ImageError,
    },
    #[error("encoding the highlight image failed: {0}")]
    Encode(image::ImageError),
}

/// Compares two PNG screenshots; `new` is the one the highlight image is drawn over.
pub fn diff(old_png: &[u8], new_png: &[u8], opts: &Options) -> Result<Diff, DiffError> {
    let old = decode(old_png, "old")?;
    let new = decode(new_png, "new")?;
    diff_images(&old, &new, opts)
}

fn decode(png: &[u8], which: &'static str) -> Result<RgbImage, DiffError> {
    image::load_from_memory_with_format(png, ImageFormat::Png)
        .map(|d| d.into_rgb8())
        .map_err(|source| DiffError::Decode { which, source })
}

/// Changed pixels' tight bounds within one tile: (min x, min y, max x, max y), inclusive.
type Bounds = (u32, u32, u32, u32);

fn grow(b: &mut Option<Bounds>, (x0, y0, x1, y1): Bounds) {
    *b = Some(match *b {
        None => (x0, y0, x1, y1),
        Some((a0, b0, a1, b1)) => (a0.min(x0), b0.min(y0), a1.max(x1), b1.max(y1)),
    });
}

/// [`diff`] on decoded images.
pub fn diff_images(old: &RgbImage, new: &RgbImage, opts: &Options) -> Result<Diff, DiffError> {
    let w = old.width().min(new.width());
    let h = old.height().min(new.height());
    let thr = i16::from(opts.threshold);
    let tile = opts.tile.max(1);
    let (tiles_x, tiles_y) = (w.div_ceil(tile), h.div_ceil(tile));
    let mut tiles: Vec<Option<Bounds>> = vec![None; (tiles_x as usize) * (tiles_y as usize)];
    let mut out = dimmed(new, old.width(), old.height());
    let mut changed: u64 = 0;
    for y in 0..h {
        for x in 0..w {
            let a = px(old, x, y);
            let b = px(new, x, y);
            if same(a, b, thr) {
                continue;
            }
            if opts.ignore_antialiasing
                && in_neighbourhood(b, old, x, y, thr)
                && in_neighbourhood(a, new, x, y, thr)
            {
                continue;
            }
            changed += 1;
            out.put_pixel(x, y, image::Rgb(CHANGED));
            let t = (y / tile) as usize * tiles_x as usize + (x / tile) as usize;
            grow(&mut tiles[t], (x, y, x, y));
        }
    }
    let boxes = regions(tiles, tiles_x, tiles_y, opts.max_boxes.max(1));
    Ok(Diff {
        old_size: old.dimensions(),
        new_size: new.dimensions(),
        changed_pixels: changed,
        compared_pixels: u64::from(w) * u64::from(h),
        boxes,
        extra_height: i64::from(new.height()) - i64::from(old.height()),
        extra_width: i64::from(new.width()) - i64::from(old.width()),
        highlight_png: encode(&out)?,
    })
}

const CHANGED: [u8; 3] = [255, 0, 255];
const EXTRA_TINT: [u8; 3] = [255, 170, 60];

fn px(img: &RgbImage, x: u32, y: u32) -> [u8; 3] {
    img.get_pixel(x, y).0
}

fn same(a: [u8; 3], b: [u8; 3], thr: i16) -> bool {
    (0..3).all(|i| (i16::from(a[i]) - i16::from(b[i])).abs() <= thr)
}

/// Whether every channel of `c` lies within the range of `img`'s 3×3 neighbourhood at (x, y),
/// widened by `thr`.
fn in_neighbourhood(c: [u8; 3], img: &RgbImage, x: u32, y: u32, thr: i16) -> bool {
    let mut lo = [255i16; 3];
    let mut hi = [0i16; 3];
    for ny in y.saturating_sub(1)..=(y + 1).min(img.height() - 1) {
        for nx in x.saturating_sub(1)..=(x + 1).min(img.width() - 1) {
            let p = px(img, nx, ny);
            for i in 0..3 {
                lo[i] = lo[i].min(i16::from(p[i]));
                hi[i] = hi[i].max(i16::from(p[i]));
            }
        }
    }
    (0..3).all(|i| {
        let v = i16::from(c[i]);
        v >= lo[i] - thr && v <= hi[i] + thr
    })
}

/// The new screenshot faded toward white, so the changed pixels stand out; what lies beyond the
/// old screenshot's area is tinted.
fn dimmed(new: &RgbImage, old_w: u32, old_h: u32) -> RgbImage {
    let mut out = new.clone();
    for (x, y, p) in out.enumerate_pixels_mut() {
        let extra = x >= old_w || y >= old_h;
        for (c, tint) in p.0.iter_mut().zip(EXTRA_TINT) {
            let faded = 255 - (u16::from(255 - *c) * 90 / 256) as u8;
            *c = if extra {
                ((u16::from(faded) + u16::from(tint)) / 2) as u8
            } else {
                faded
            };
        }
    }
    out
}

fn encode(img: &RgbImage) -> Result<Vec<u8>, DiffError> {
    let mut buf = Vec::new();
    PngEncoder::new_with_quality(
        Cursor::new(&mut buf),
        CompressionType::Fast,
        FilterType::Adaptive,
    )
    .write_image(
        img.as_raw(),
        img.width(),
        img.height(),
        ExtendedColorType::Rgb8,
    )
    .map_err(DiffError::Encode)?;
    Ok(buf)
}

/// Groups changed tiles into at most `max` regions: 8-connected tiles form one region; too many
/// regions and the grid is coarsened (2×2 tiles become one) and grouped again.
fn regions(mut tiles: Vec<Option<Bounds>>, mut tx: u32, mut ty: u32, max: usize) -> Vec<Rect> {
    loop {
        let found = components(&tiles, tx, ty);
        if found.len() <= max || (tx <= 1 && ty <= 1) {
            let mut boxes: Vec<Rect> = found
                .into_iter()
                .map(|(x0, y0, x1, y1)| Rect {
                    x: x0,
                    y: y0,
                    width: x1 - x0 + 1,
                    height: y1 - y0 + 1,
                })
                .collect();
            boxes.sort_by_key(|r| (r.y, r.x));
            return boxes;
        }
        let (cx, cy) = (tx.div_ceil(2), ty.div_ceil(2));
        let mut coarse = vec![None; (cx as usize) * (cy as usize)];
        for y in 0..ty {
            for x in 0..tx {
                if let Some(b) = tiles[(y * tx + x) as usize] {
                    grow(&mut coarse[((y / 2) * cx + x / 2) as usize], b);
                }
            }
        }
        (tiles, tx, ty) = (coarse, cx, cy);
    }
}

fn components(tiles: &[Option<Bounds>], tx: u32, ty: u32) -> Vec<Bounds> {
    let mut seen = vec![false; tiles.len()];
    let mut out = Vec::new();
    let mut stack = Vec::new();
    for start in 0..tiles.len() {
        if seen[start] || tiles[start].is_none() {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let mut region: Option<Bounds> = None;
        while let Some(i) = stack.pop() {
            if let Some(b) = tiles[i] {
                grow(&mut region, b);
            }
            let (x, y) = ((i as u32) % tx, (i as u32) / tx);
            for ny in y.saturating_sub(1)..=(y + 1).min(ty - 1) {
                for nx in x.saturating_sub(1)..=(x + 1).min(tx - 1) {
                    let j = (ny * tx + nx) as usize;
                    if !seen[j] && tiles[j].is_some() {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        if let Some(r) = region {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;

    const WHITE: Rgb<u8> = Rgb([255, 255, 255]);

    /// A page-like image: white, a dark "heading" bar with a grey anti-aliased edge, a blue block.
    fn page(w: u32, h: u32) -> RgbImage {
        let mut img = RgbImage::from_pixel(w, h, WHITE);
        fill(&mut img, 10, 10, 60, 8, Rgb([20, 20, 20]));
        for y in 10..18 {
            img.put_pixel(70, y, Rgb([140, 140, 140]));
        }
        fill(&mut img, 10, 30, 40, 20, Rgb([30, 60, 200]));
        img
    }

    fn fill(img: &mut RgbImage, x: u32, y: u32, w: u32, h: u32, c: Rgb<u8>) {
        for yy in y..y + h {
            for xx in x..x + w {
                img.put_pixel(xx, yy, c);
            }
        }
    }

    fn png(img: &RgbImage) -> Vec<u8> {
        encode(img).expect("encode")
    }

    fn decoded(png: &[u8]) -> RgbImage {
        decode(png, "highlight").expect("highlight decodes")
    }

    #[test]
    fn identical_screenshots_have_no_change() {
        let p = png(&page(120, 80));
        let d = diff(&p, &p, &Options::default()).expect("diff");
        assert_eq!(d.changed_pixels, 0);
        assert_eq!(d.changed_share(), 0.0);
        assert!(d.boxes.is_empty());
        assert_eq!((d.extra_height, d.extra_width), (0, 0));
        assert_eq!(d.compared_pixels, 120 * 80);
    }

    #[test]
    fn a_recoloured_block_is_found_as_its_box() {
        let old = page(120, 80);
        let mut new = old.clone();
        fill(&mut new, 10, 30, 40, 20, Rgb([200, 40, 40]));
        let d = diff(&png(&old), &png(&new), &Options::default()).expect("diff");
        assert_eq!(d.changed_pixels, 40 * 20);
        assert_eq!(
            d.boxes,
            vec![Rect {
                x: 10,
                y: 30,
                width: 40,
                height: 20
            }]
        );
        let hl = decoded(&d.highlight_png);
        assert_eq!(hl.get_pixel(20, 40).0, CHANGED);
        // Unchanged pixels are the new screenshot faded, never the highlight colour.
        assert_ne!(hl.get_pixel(20, 12).0, CHANGED);
        assert!(hl.get_pixel(20, 12).0[0] > 150, "dark bar is faded");
    }

    #[test]
    fn anti_aliasing_noise_is_ignored_but_counted_without_the_tolerance() {
        let old = page(120, 80);
        let mut new = old.clone();
        // The heading's edge drawn a pixel further and with another grey, and the block's edge
        // moved by one pixel: what two rasterisations of the same text do.
        for y in 10..18 {
            new.put_pixel(70, y, Rgb([20, 20, 20]));
            new.put_pixel(71, y, Rgb([130, 130, 130]));
        }
        for y in 30..50 {
            new.put_pixel(50, y, Rgb([30, 60, 200]));
        }
        let d = diff(&png(&old), &png(&new), &Options::default()).expect("diff");
        assert_eq!(d.changed_pixels, 0, "boxes: {:?}", d.boxes);
        let strict = Options {
            ignore_antialiasing: false,
            ..Options::default()
        };
        let d = diff(&png(&old), &png(&new), &strict).expect("diff");
        assert!(d.changed_pixels >= 16, "{}", d.changed_pixels);
    }

    #[test]
    fn a_thin_line_that_changed_colour_is_not_taken_for_anti_aliasing() {
        let mut old = RgbImage::from_pixel(50, 50, WHITE);
        fill(&mut old, 5, 20, 40, 1, Rgb([0, 0, 0]));
        let mut new = old.clone();
        fill(&mut new, 5, 20, 40, 1, Rgb([0, 160, 0]));
        let d = diff(&png(&old), &png(&new), &Options::default()).expect("diff");
        assert_eq!(d.changed_pixels, 40);
        assert_eq!(
            d.boxes,
            vec![Rect {
                x: 5,
                y: 20,
                width: 40,
                height: 1
            }]
        );
    }

    #[test]
    fn different_heights_are_aligned_at_the_top() {
        let old = page(120, 80);
        let mut new = RgbImage::from_pixel(120, 110, WHITE);
        image::imageops::replace(&mut new, &old, 0, 0);
        fill(&mut new, 10, 90, 50, 10, Rgb([0, 0, 0]));
        let d = diff(&png(&old), &png(&new), &Options::default()).expect("diff");
        assert_eq!(d.changed_pixels, 0);
        assert_eq!(d.extra_height, 30);
        assert_eq!(d.new_size, (120, 110));
        let hl = decoded(&d.highlight_png);
        assert_eq!(hl.dimensions(), (120, 110));
        // The extra area is tinted, the common area is not.
        assert_ne!(hl.get_pixel(100, 100), hl.get_pixel(100, 60));
        // And the other way round: a shorter new screenshot.
        let d = diff(&png(&new), &png(&old), &Options::default()).expect("diff");
        assert_eq!((d.changed_pixels, d.extra_height), (0, -30));
    }

    #[test]
    fn many_scattered_changes_are_merged_into_a_few_boxes_covering_them_all() {
        let old = RgbImage::from_pixel(400, 400, WHITE);
        let mut new = old.clone();
        let mut spots = Vec::new();
        for i in 0..10 {
            for j in 0..10 {
                let (x, y) = (i * 40 + 5, j * 40 + 5);
                fill(&mut new, x, y, 4, 4, Rgb([0, 0, 0]));
                spots.push(Rect {
                    x,
                    y,
                    width: 4,
                    height: 4,
                });
            }
        }
        let opts = Options::default();
        let d = diff(&png(&old), &png(&new), &opts).expect("diff");
        assert_eq!(d.changed_pixels, 100 * 16);
        assert!(!d.boxes.is_empty() && d.boxes.len() <= opts.max_boxes);
        for s in &spots {
            assert!(d.boxes.iter().any(|b| b.contains(s)), "{s:?} not covered");
        }
    }

    #[test]
    fn an_unreadable_screenshot_says_which_one() {
        let p = png(&page(100, 60));
        let e = diff(&p, b"not a png", &Options::default()).expect_err("refused");
        assert!(e.to_string().contains("new screenshot"), "{e}");
        let e = diff(b"", &p, &Options::default()).expect_err("refused");
        assert!(e.to_string().contains("old screenshot"), "{e}");
    }
}
