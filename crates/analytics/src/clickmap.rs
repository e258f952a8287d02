//! The click map's geometry: where each tracked link lies on a real render of the campaign's
//! click-tracking HTML. [`boxes_html`] paints link `n` (numbered as [`crate::rewrite_links`]
//! numbers them) in a colour of its own, and hides everything that could share such a colour;
//! drawn at the same width as the plain render, the painted picture's pixels give each link's box
//! ([`find_boxes`]), and the counts are placed there over the plain picture.
//!
//! Only inline styles are added, so a client's emulation that drops `<style>` keeps them, and
//! nothing changes a box's size: images in links keep their box with the picture moved out of it
//! (`object-position`), other images become invisible (`visibility: hidden`).

use std::cell::Cell;
use std::collections::BTreeMap;

use lol_html::{element, rewrite_str, RewriteStrSettings};

use crate::{web_href, TrackingError, LINK_SELECTOR, MAX_TRACKED_LINKS};

/// Link `n`'s colour: red 255, green 1 or 17 (the high bit of `n`), blue the low byte. Black text
/// on white, and its anti-aliasing, is grey and never has red 255 with a green that low.
pub fn colour_of(n: u32) -> [u8; 3] {
    [255, 1 + 16 * ((n >> 8) & 1) as u8, (n & 0xff) as u8]
}

/// The link a pixel's colour paints, if any.
pub fn link_of(rgb: [u8; 3]) -> Option<u32> {
    let n = match rgb {
        [255, 1, b] => u32::from(b),
        [255, 17, b] => 256 + u32::from(b),
        _ => return None,
    };
    (n >= 1 && n as usize <= MAX_TRACKED_LINKS).then_some(n)
}

fn css(rgb: [u8; 3]) -> String {
    format!("rgb({},{},{})", rgb[0], rgb[1], rgb[2])
}

/// `html` with each tracked link painted in [`colour_of`] its number, text included.
pub fn boxes_html(html: &str) -> Result<String, TrackingError> {
    let count = Cell::new(0u32);
    // The link being inside, if it is tracked (links do not nest).
    let inside = std::rc::Rc::new(Cell::new(None::<u32>));
    let inside_end = inside.clone();
    let inside_img = inside.clone();
    rewrite_str(
        html,
        RewriteStrSettings::new()
            .append_element_content_handler(
            element!(LINK_SELECTOR, move |el| {
                if web_href(el).is_none() || count.get() as usize >= MAX_TRACKED_LINKS {
                    return Ok(());
                }
                count.set(count.get() + 1);
                let colour = css(colour_of(count.get()));
                let style = el.get_attribute("style").unwrap_or_default();
                el.set_attribute(
                    "style",
                    &format!("{style};background:{colour}!important;color:{colour}!important;text-decoration-color:{colour}!important;border-color:{colour}!important"),
                )?;
                inside.set(Some(count.get()));
                let ended = inside_end.clone();
                if let Some(handlers) = el.end_tag_handlers() {
                    handlers.push(Box::new(move |_| {
                        ended.set(None);
                        Ok(())
                    }));
                }
                Ok(())
            }),
            )
            .append_element_content_handler(element!("img", move |el| {
                let style = el.get_attribute("style").unwrap_or_default();
                let added = match inside_img.get() {
                    Some(n) => {
                        let colour = css(colour_of(n));
                        format!("background:{colour}!important;object-position:-100000px 0!important")
                    }
                    None => "visibility:hidden!important".to_string(),
                };
                el.set_attribute("style", &format!("{style};{added}"))?;
                Ok(())
            })),
    )
    .map_err(|e| TrackingError::Html(e.to_string()))
}

/// A link's box on the picture, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkBox {
    pub number: u32,
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// Fewer pixels of a colour than this are an anti-aliased edge, not a link.
const MIN_PIXELS: u32 = 12;

/// The box of every painted link in an RGB picture `width` pixels wide (3 bytes a pixel), in
/// link order; a link drawn in pieces (over two lines) gets the box around all of them.
pub fn find_boxes(rgb: &[u8], width: u32) -> Vec<LinkBox> {
    // number -> (min x, min y, max x, max y, pixels)
    let mut seen: BTreeMap<u32, (u32, u32, u32, u32, u32)> = BTreeMap::new();
    if width == 0 {
        return Vec::new();
    }
    for (i, px) in rgb.chunks_exact(3).enumerate() {
        let Some(n) = link_of([px[0], px[1], px[2]]) else {
            continue;
        };
        let (x, y) = ((i as u32) % width, (i as u32) / width);
        let e = seen.entry(n).or_insert((x, y, x, y, 0));
        e.0 = e.0.min(x);
        e.1 = e.1.min(y);
        e.2 = e.2.max(x);
        e.3 = e.3.max(y);
        e.4 += 1;
    }
    seen.into_iter()
        .filter(|(_, b)| b.4 >= MIN_PIXELS)
        .map(|(number, (x0, y0, x1, y1, _))| LinkBox {
            number,
            x: x0,
            y: y0,
            width: x1 - x0 + 1,
            height: y1 - y0 + 1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_number_has_a_colour_of_its_own_that_reads_back() {
        let mut colours = std::collections::BTreeSet::new();
        for n in 1..=MAX_TRACKED_LINKS as u32 {
            let c = colour_of(n);
            assert_eq!(link_of(c), Some(n));
            assert!(colours.insert(c));
        }
        for grey in [[0, 0, 0], [255, 255, 255], [128, 128, 128], [255, 1, 0]] {
            assert_eq!(link_of(grey), None, "{grey:?}");
        }
    }

    #[test]
    fn links_are_painted_in_rewrite_order_and_other_images_hidden() {
        let html = r#"<p><a href="https://a.example/">A</a> <a href="mailto:x@example.org">m</a>
<a href="https://b.example/" style="color:red"><img src="b.png" width="10" height="10"></a><img src="x.png"></p>"#;
        let out = boxes_html(html).expect("paint");
        let (_, links) =
            crate::rewrite_links(html, "https://t.example/t", "g", None).expect("rewrite");
        assert_eq!(links.len(), 2);
        assert!(
            out.contains(
                r#"<a href="https://a.example/" style=";background:rgb(255,1,1)!important"#
            ),
            "{out}"
        );
        assert!(
            out.contains(r#"style="color:red;background:rgb(255,1,2)!important"#),
            "{out}"
        );
        assert!(out.contains(r#"<img src="b.png" width="10" height="10" style=";background:rgb(255,1,2)!important;object-position:-100000px 0!important">"#), "{out}");
        assert!(
            out.contains(r#"<img src="x.png" style=";visibility:hidden!important">"#),
            "{out}"
        );
        assert!(out.contains(r#"<a href="mailto:x@example.org">m</a>"#));
    }

    #[test]
    fn boxes_are_the_bounds_of_each_colour_and_edges_are_ignored() {
        let (w, h) = (20u32, 10u32);
        let mut rgb = vec![255u8; (w * h * 3) as usize];
        let mut paint = |x: u32, y: u32, c: [u8; 3]| {
            let i = ((y * w + x) * 3) as usize;
            rgb[i..i + 3].copy_from_slice(&c);
        };
        // Link 2 over two lines, link 300 as one block, link 7 as a stray edge pixel.
        for y in 1..3 {
            for x in 10..18 {
                paint(x, y, colour_of(2));
            }
        }
        for y in 3..5 {
            for x in 0..6 {
                paint(x, y, colour_of(2));
            }
        }
        for y in 6..9 {
            for x in 4..9 {
                paint(x, y, colour_of(300));
            }
        }
        paint(19, 9, colour_of(7));
        assert_eq!(
            find_boxes(&rgb, w),
            vec![
                LinkBox {
                    number: 2,
                    x: 0,
                    y: 1,
                    width: 18,
                    height: 4
                },
                LinkBox {
                    number: 300,
                    x: 4,
                    y: 6,
                    width: 5,
                    height: 3
                },
            ]
        );
    }
}
