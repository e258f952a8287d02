//! Thumbnails of a screenshot: the top of the page at a fixed size, and the whole page narrowed.
//!
//! The top card of a phone's page is the page's whole width (a 412 px screen at 300 px keeps
//! text at 73% of its size). A desktop or web client's window is 1,024 px wide or more: narrowed
//! to a card, its text would be 3 px high, so its card is the top of the email's own column
//! instead, [`WIDE_CROP_CSS`] CSS px wide around where the drawn content is.

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{imageops, ImageEncoder, Rgba, RgbaImage};

use crate::error::RenderError;

/// Size of [`Thumbnails::top`]: a 3:4 portrait card.
pub const THUMBNAIL_WIDTH: u32 = 300;
pub const THUMBNAIL_HEIGHT: u32 = 400;
/// A page wider than this (in CSS px) is a desktop or web client's window: its top card is a crop.
pub const WIDE_PAGE_CSS: u32 = 700;
/// Width of the crop of a wide page, in CSS px: an email's column (most are 600 px or narrower,
/// so this loses at most their margins). A gallery card is at least 340 px wide, so text in it
/// stays above 60% of its size.
pub const WIDE_CROP_CSS: u32 = 560;
/// Size of a wide page's top card (4:3).
pub const WIDE_THUMBNAIL_WIDTH: u32 = 448;
pub const WIDE_THUMBNAIL_HEIGHT: u32 = 336;

/// Width of [`Thumbnails::full`]; its height follows the page, up to [`FULL_THUMBNAIL_MAX_HEIGHT`].
pub const FULL_THUMBNAIL_WIDTH: u32 = 300;
pub const FULL_THUMBNAIL_MAX_HEIGHT: u32 = 6000;

pub(crate) struct Thumbnails {
    pub width: u32,
    pub height: u32,
    /// Every pixel of the screenshot has one colour: nothing was drawn on the background.
    pub blank: bool,
    pub top: Vec<u8>,
    pub full: Vec<u8>,
}

/// The size of the top card of a page `css_width` CSS px wide.
pub fn thumbnail_size(css_width: u32) -> (u32, u32) {
    if css_width > WIDE_PAGE_CSS {
        (WIDE_THUMBNAIL_WIDTH, WIDE_THUMBNAIL_HEIGHT)
    } else {
        (THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT)
    }
}

/// Decodes `png`, drawn at device `scale`, and makes both thumbnails.
pub(crate) fn make(png: &[u8], scale: f32) -> Result<Thumbnails, RenderError> {
    let page = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| RenderError::Image(format!("the screenshot is not a readable PNG: {e}")))?
        .to_rgba8();
    let (width, height) = page.dimensions();
    if width == 0 || height == 0 {
        return Err(RenderError::Image("the screenshot is empty".into()));
    }

    let card = top_card(&page, scale);

    let full_height = ((height as u64 * FULL_THUMBNAIL_WIDTH as u64 / width as u64) as u32)
        .clamp(1, FULL_THUMBNAIL_MAX_HEIGHT);
    let full = imageops::thumbnail(&page, FULL_THUMBNAIL_WIDTH, full_height);

    Ok(Thumbnails {
        width,
        height,
        blank: one_colour(&page),
        top: encode(&card)?,
        full: encode(&full)?,
    })
}

/// The top card: the widest window of the card's shape at the top of the page (a wide page's
/// around its content), letterboxed in white when the page is shorter than that window.
fn top_card(page: &RgbaImage, scale: f32) -> RgbaImage {
    let (width, height) = page.dimensions();
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let css_width = (width as f32 / scale).round() as u32;
    let (card_w, card_h) = thumbnail_size(css_width);
    let crop_width = if css_width > WIDE_PAGE_CSS {
        ((WIDE_CROP_CSS as f32 * scale).round() as u32).clamp(1, width)
    } else {
        width
    };
    let crop_height = ((crop_width as u64 * card_h as u64 / card_w as u64) as u32).clamp(1, height);
    let x = if crop_width < width {
        content_left(page, crop_width, crop_height)
    } else {
        0
    };
    let top = imageops::crop_imm(page, x, 0, crop_width, crop_height).to_image();
    let scaled_height =
        ((crop_height as u64 * card_w as u64 / crop_width as u64) as u32).clamp(1, card_h);
    let scaled = imageops::thumbnail(&top, card_w, scaled_height);
    let mut card = RgbaImage::from_pixel(card_w, card_h, Rgba([255, 255, 255, 255]));
    imageops::overlay(&mut card, &scaled, 0, 0);
    card
}

/// The left edge of a `crop_width` window over the top `rows` of `page` centred on what is drawn
/// there: the columns holding a pixel unlike the page's top-left one (its background). A page
/// with nothing drawn is cut in its middle.
fn content_left(page: &RgbaImage, crop_width: u32, rows: u32) -> u32 {
    let (width, _) = page.dimensions();
    let background = *page.get_pixel(0, 0);
    let drawn = |x: u32| (0..rows).any(|y| *page.get_pixel(x, y) != background);
    let first = (0..width).find(|&x| drawn(x));
    let last = (0..width).rev().find(|&x| drawn(x));
    let centre = match (first, last) {
        (Some(a), Some(b)) => (a + b) / 2,
        _ => width / 2,
    };
    centre
        .saturating_sub(crop_width / 2)
        .min(width.saturating_sub(crop_width))
}

/// Whether every pixel equals the first: any drawn text, border or image breaks that at once
/// (anti-aliasing alone does), so the scan usually ends within the first rows that hold content.
pub(crate) fn one_colour(page: &RgbaImage) -> bool {
    let mut pixels = page.pixels();
    match pixels.next() {
        Some(first) => pixels.all(|p| p == first),
        None => true,
    }
}

/// A white picture of `png`'s size: what an engine that drew nothing would return.
pub(crate) fn blank_like(png: &[u8]) -> Result<Vec<u8>, RenderError> {
    let page = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| RenderError::Image(format!("the screenshot is not a readable PNG: {e}")))?;
    encode(&RgbaImage::from_pixel(
        page.width(),
        page.height(),
        Rgba([255, 255, 255, 255]),
    ))
}

/// `png` scaled down to `width` pixels wide, its height in proportion.
pub(crate) fn narrow(png: &[u8], width: u32) -> Result<Vec<u8>, RenderError> {
    let page = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| RenderError::Image(format!("the screenshot is not a readable PNG: {e}")))?
        .to_rgba8();
    let (w, h) = page.dimensions();
    if w == 0 || h == 0 || width == 0 {
        return Err(RenderError::Image("the screenshot is empty".into()));
    }
    let height = ((h as u64 * width as u64 / w as u64) as u32).max(1);
    encode(&imageops::resize(
        &page,
        width,
        height,
        imageops::FilterType::Triangle,
    ))
}

fn encode(image: &RgbaImage) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
        .write_image(
            image.as_raw(),
            image.width(),
            image.height(),
            image::ExtendedColorType::Rgba8,
        )
        .map_err(|e| RenderError::Image(format!("encoding a thumbnail: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_of(width: u32, height: u32) -> Vec<u8> {
        let mut img = RgbaImage::from_pixel(width, height, Rgba([0, 0, 255, 255]));
        // A red band at the very top, so the card must show the top of the page.
        for x in 0..width {
            for y in 0..(height / 20).max(1) {
                img.put_pixel(x, y, Rgba([255, 0, 0, 255]));
            }
        }
        encode(&img).expect("encode")
    }

    #[test]
    fn narrowing_keeps_the_proportions_and_the_colours() {
        let png = encode(&RgbaImage::from_pixel(300, 600, Rgba([255, 0, 0, 255]))).expect("png");
        let out = narrow(&png, 200).expect("narrows");
        let img = image::load_from_memory(&out).expect("png").to_rgba8();
        assert_eq!(img.dimensions(), (200, 400));
        assert_eq!(img.get_pixel(100, 200).0, [255, 0, 0, 255]);
    }

    #[test]
    fn the_card_has_a_fixed_size_and_shows_the_top_of_a_tall_page() {
        let t = make(&png_of(1170, 6000), 3.0).expect("thumbnails");
        assert_eq!((t.width, t.height), (1170, 6000));
        let card = image::load_from_memory(&t.top).expect("png").to_rgba8();
        assert_eq!(card.dimensions(), (THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT));
        assert_eq!(card.get_pixel(150, 2)[0], 255, "top band is red");
        let full = image::load_from_memory(&t.full).expect("png").to_rgba8();
        assert_eq!(full.width(), FULL_THUMBNAIL_WIDTH);
        assert_eq!(full.height(), 6000 * FULL_THUMBNAIL_WIDTH / 1170);
    }

    #[test]
    fn a_short_page_is_letterboxed_in_white() {
        let t = make(&png_of(600, 200), 1.0).expect("thumbnails");
        let card = image::load_from_memory(&t.top).expect("png").to_rgba8();
        assert_eq!(card.dimensions(), (THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT));
        assert_eq!(*card.get_pixel(150, 390), Rgba([255, 255, 255, 255]));
    }

    #[test]
    fn garbage_is_an_image_error_not_a_panic() {
        assert!(matches!(
            make(b"not a png", 1.0),
            Err(RenderError::Image(_))
        ));
    }

    /// A white 1280 px window at `scale` with a black 600 x 200 CSS px block at `left` CSS px.
    fn window(left: u32, scale: u32) -> RgbaImage {
        let mut page = RgbaImage::from_pixel(1280 * scale, 900 * scale, Rgba([255, 255, 255, 255]));
        for y in 100 * scale..300 * scale {
            for x in left * scale..(left + 600) * scale {
                page.put_pixel(x, y, Rgba([0, 0, 0, 255]));
            }
        }
        page
    }

    #[test]
    fn a_wide_windows_card_is_its_emails_column_at_a_readable_size() {
        for scale in [1, 2] {
            let card = top_card(&window(340, scale), scale as f32);
            assert_eq!(
                card.dimensions(),
                (WIDE_THUMBNAIL_WIDTH, WIDE_THUMBNAIL_HEIGHT)
            );
            // The centred block fills the card's width but for the crop's cut of its margins.
            let row = 200 * WIDE_THUMBNAIL_WIDTH / WIDE_CROP_CSS;
            assert_eq!(
                *card.get_pixel(2, row),
                Rgba([0, 0, 0, 255]),
                "scale {scale}"
            );
            assert_eq!(
                *card.get_pixel(WIDE_THUMBNAIL_WIDTH - 3, row),
                Rgba([0, 0, 0, 255])
            );
        }
        // 1 CSS px of the email is 0.8 px of the card.
        assert_eq!(WIDE_THUMBNAIL_WIDTH * 10 / WIDE_CROP_CSS, 8);
        // An email drawn at the left is followed there.
        let card = top_card(&window(0, 1), 1.0);
        assert_eq!(*card.get_pixel(2, 200), Rgba([0, 0, 0, 255]));
        // A phone's card is still the page's whole width.
        let phone = RgbaImage::from_pixel(412 * 3, 900 * 3, Rgba([255, 255, 255, 255]));
        assert_eq!(
            top_card(&phone, 3.0).dimensions(),
            (THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT)
        );
    }
}
