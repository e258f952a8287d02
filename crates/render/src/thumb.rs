//! Thumbnails of a screenshot: the top of the page at a fixed size, and the whole page narrowed.

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{imageops, ImageEncoder, Rgba, RgbaImage};

use crate::error::RenderError;

/// Size of [`Thumbnails::top`]: a 3:4 portrait card.
pub const THUMBNAIL_WIDTH: u32 = 300;
pub const THUMBNAIL_HEIGHT: u32 = 400;
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

/// Decodes `png` and makes both thumbnails.
pub(crate) fn make(png: &[u8]) -> Result<Thumbnails, RenderError> {
    let page = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| RenderError::Image(format!("the screenshot is not a readable PNG: {e}")))?
        .to_rgba8();
    let (width, height) = page.dimensions();
    if width == 0 || height == 0 {
        return Err(RenderError::Image("the screenshot is empty".into()));
    }

    // Top card: the widest 3:4 window at the top of the page, letterboxed in white when the page
    // is shorter than that window.
    let crop_height =
        ((width as u64 * THUMBNAIL_HEIGHT as u64 / THUMBNAIL_WIDTH as u64) as u32).clamp(1, height);
    let top = imageops::crop_imm(&page, 0, 0, width, crop_height).to_image();
    let scaled_height = ((crop_height as u64 * THUMBNAIL_WIDTH as u64 / width as u64) as u32)
        .clamp(1, THUMBNAIL_HEIGHT);
    let scaled = imageops::thumbnail(&top, THUMBNAIL_WIDTH, scaled_height);
    let mut card = RgbaImage::from_pixel(
        THUMBNAIL_WIDTH,
        THUMBNAIL_HEIGHT,
        Rgba([255, 255, 255, 255]),
    );
    imageops::overlay(&mut card, &scaled, 0, 0);

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
        let t = make(&png_of(1170, 6000)).expect("thumbnails");
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
        let t = make(&png_of(600, 200)).expect("thumbnails");
        let card = image::load_from_memory(&t.top).expect("png").to_rgba8();
        assert_eq!(card.dimensions(), (THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT));
        assert_eq!(*card.get_pixel(150, 390), Rgba([255, 255, 255, 255]));
    }

    #[test]
    fn garbage_is_an_image_error_not_a_panic() {
        assert!(matches!(make(b"not a png"), Err(RenderError::Image(_))));
    }
}
