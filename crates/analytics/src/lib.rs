//! Email analytics without IO: the tracking code a sender pastes before `</body>`, the
//! click-tracking rewrite of their links, and what the path of a tracking hit means.
//!
//! Invariants:
//! - The tracking code runs no script: every signal is an image the client fetches, either the
//!   open image or a CSS `background-image` that only applies in the situation it reports (print
//!   media, a forward wrapper, a dark colour scheme, a reading-time step).
//! - Every tracking URL is `<base>/<guid>/<file>` and carries the campaign's merge tag as `d=`,
//!   so an image proxy that fetches each distinct URL once still fetches it once per recipient.
//! - A merge tag is inserted verbatim (the sender's mail service must still recognise it), so only
//!   tags that cannot leave an HTML attribute or a CSS string are accepted ([`check_merge_tag`]).

pub mod clickmap;
pub mod matrix;

use std::cell::RefCell;

pub mod classify;
pub mod egress;
pub mod report;

pub use classify::{classify, Classified, Client, Device, HitFacts, Source};
pub use egress::{EgressError, EgressSet};
pub use report::CampaignReport;

use lol_html::{element, rewrite_str, RewriteStrSettings};

/// Reading time is reported in steps of this many seconds…
pub const READ_STEP_SECS: u32 = 2;
/// …up to this many.
pub const READ_MAX_SECS: u32 = 20;
/// Longest merge tag accepted.
pub const MAX_MERGE_TAG_CHARS: usize = 200;
/// Most links rewritten for click tracking; later links are left as they are.
pub const MAX_TRACKED_LINKS: usize = 500;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TrackingError {
    #[error("`merge_tag` is longer than {MAX_MERGE_TAG_CHARS} characters")]
    MergeTagTooLong,
    #[error(
        "`merge_tag` {0:?} contains a character that would break the tracking code's HTML or CSS \
         (quotes, angle brackets, backslashes, parentheses and control characters are refused)"
    )]
    MergeTagCharacter(String),
    #[error("the click-tracking HTML could not be parsed: {0}")]
    Html(String),
}

/// What a tracking hit reports, as named by the last segment of its path. Stored as its name
/// ([`HitKind::as_str`], the `kind` column) and its [`HitKind::number`] (the `number` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(HitName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantNames),
    strum(serialize_all = "lowercase")
)]
pub enum HitKind {
    Open,
    Print,
    Forward,
    /// The email was still open this many seconds after it was opened.
    Read(u32),
    Dark,
    /// The n-th tracked link (1-based) was clicked.
    Click(u32),
    /// The held-open image: its response is held until the client closes it, which measures
    /// reading time where animations do not run (the seconds are measured, not in the path).
    Hold,
}

impl HitKind {
    /// The last path segment of a hit's URL.
    pub fn file(self) -> String {
        match self {
            HitKind::Open => "o.gif".into(),
            HitKind::Print => "p.gif".into(),
            HitKind::Forward => "f.gif".into(),
            HitKind::Read(s) => format!("r{s}.gif"),
            HitKind::Dark => "dm.gif".into(),
            HitKind::Click(n) => n.to_string(),
            HitKind::Hold => "h.gif".into(),
        }
    }

    /// The kind a path segment names; `None` for anything the tracking code never requests.
    pub fn parse(segment: &str) -> Option<HitKind> {
        match segment {
            "o.gif" => return Some(HitKind::Open),
            "p.gif" => return Some(HitKind::Print),
            "f.gif" => return Some(HitKind::Forward),
            "dm.gif" => return Some(HitKind::Dark),
            "h.gif" => return Some(HitKind::Hold),
            _ => {}
        }
        if let Some(secs) = segment
            .strip_prefix('r')
            .and_then(|s| s.strip_suffix(".gif"))
        {
            let secs: u32 = digits(secs)?;
            let valid = secs > 0 && secs <= READ_MAX_SECS && secs.is_multiple_of(READ_STEP_SECS);
            return valid.then_some(HitKind::Read(secs));
        }
        let n: u32 = digits(segment)?;
        (n >= 1 && n as usize <= MAX_TRACKED_LINKS).then_some(HitKind::Click(n))
    }

    /// The stored name of the kind (`read` and `click` keep their number in another column).
    pub fn as_str(self) -> &'static str {
        HitName::from(self).into()
    }

    /// The kind a stored name and number stand for; `None` for a name no kind has, or a `read` or
    /// `click` whose number does not fit.
    pub fn from_stored(name: &str, number: i64) -> Option<HitKind> {
        let n = || u32::try_from(number).ok();
        Some(match name.parse::<HitName>().ok()? {
            HitName::Open => HitKind::Open,
            HitName::Print => HitKind::Print,
            HitName::Forward => HitKind::Forward,
            HitName::Read => HitKind::Read(n()?),
            HitName::Dark => HitKind::Dark,
            HitName::Click => HitKind::Click(n()?),
            HitName::Hold => HitKind::Hold,
        })
    }

    /// Seconds for `Read`, the link number for `Click`, 0 otherwise (a `Hold` hit's seconds are
    /// measured by whoever answers it).
    pub fn number(self) -> u32 {
        match self {
            HitKind::Read(n) | HitKind::Click(n) => n,
            _ => 0,
        }
    }
}

/// Plain decimal digits only (no sign, no leading `+`), so each kind has one spelling.
fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Is `s` a campaign guid as this service makes them (`8-4-4-4-12` lower-case hex digits)?
pub fn is_guid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// A guid from 16 random bytes (the caller supplies them: this crate does no IO).
pub fn guid_from(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Accepts a merge tag that can stand verbatim inside a double-quoted HTML attribute and a
/// double-quoted CSS `url("…")`.
pub fn check_merge_tag(tag: &str) -> Result<(), TrackingError> {
    if tag.chars().count() > MAX_MERGE_TAG_CHARS {
        return Err(TrackingError::MergeTagTooLong);
    }
    if tag
        .chars()
        .any(|c| c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '\\' | '(' | ')'))
    {
        return Err(TrackingError::MergeTagCharacter(tag.to_string()));
    }
    Ok(())
}

/// The URL of one hit. `base` is the tracking base (e.g. `https://mail.example/t`), without a
/// trailing slash.
pub fn hit_url(base: &str, guid: &str, kind: HitKind, merge_tag: Option<&str>) -> String {
    let mut url = format!("{}/{guid}/{}", base.trim_end_matches('/'), kind.file());
    if let Some(tag) = merge_tag.filter(|t| !t.is_empty()) {
        url.push_str("?d=");
        url.push_str(tag);
    }
    url
}

/// The snippet to paste just before `</body>`.
///
/// - Open: a 1×1 image.
/// - Print: `@media print` gives the carrier a background image.
/// - Forward: the wrappers clients put around a forwarded message (Outlook's
///   `div.OutlookMessageHeader`, Thunderbird's `table.moz-email-headers-table`, a `blockquote`,
///   `#MailContainerBody`) select the forward image.
/// - Reading time: an animation switches a background image every [`READ_STEP_SECS`] seconds up
///   to [`READ_MAX_SECS`]; each step is its own URL, so the last one fetched says how long the
///   email stayed open.
/// - Dark mode: `prefers-color-scheme: dark` selects the dark image.
/// - Held-open image: where animations do not run (Outlook for Windows, many Android apps) the
///   service holds this image's response open until the client closes the email, at most
///   [`READ_MAX_SECS`], and records how long it was held. Proxies get it at once.
///
/// `data-ignore-inlining` and `data-embed` ask CSS inliners (Litmus's, Premailer's, Juice's) to
/// leave the style block alone: inlined, the media queries and keyframes would be lost.
pub fn tracking_code(base: &str, guid: &str, merge_tag: Option<&str>) -> String {
    let url = |kind| hit_url(base, guid, kind, merge_tag);
    let steps = READ_MAX_SECS / READ_STEP_SECS;
    let mut keyframes = String::from("0%,9.9%{background-image:none}");
    for i in 1..=steps {
        let secs = i * READ_STEP_SECS;
        let start = i * 100 / steps;
        // Discrete properties change halfway between two keyframes: holding each value until
        // just before the next step makes the change land on the step itself.
        let frames = if i == steps {
            "100%".to_string()
        } else {
            format!("{start}%,{}.9%", start + 100 / steps - 1)
        };
        keyframes.push_str(&format!(
            "{frames}{{background-image:url(\"{}\")}}",
            url(HitKind::Read(secs))
        ));
    }
    format!(
        "<style data-ignore-inlining data-embed>\n\
         @media print{{#_mp_t{{background-image:url(\"{print}\")}}}}\n\
         div.OutlookMessageHeader,table.moz-email-headers-table,blockquote #_mp_t,#MailContainerBody #_mp_t{{background-image:url(\"{forward}\")}}\n\
         @keyframes _mp_read{{{keyframes}}}\n\
         #_mp_r{{animation:_mp_read {READ_MAX_SECS}s linear 1 forwards}}\n\
         @media (prefers-color-scheme:dark){{#_mp_d{{background-image:url(\"{dark}\")}}}}\n\
         </style>\n\
         <div id=\"_mp_t\" style=\"width:1px;height:1px;overflow:hidden\">\
         <div id=\"_mp_r\" style=\"width:1px;height:1px\"></div>\
         <div id=\"_mp_d\" style=\"width:1px;height:1px\"></div></div>\n\
         <img src=\"{open}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;border:0;width:1px;height:1px\">\n\
         <img src=\"{hold}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:block;border:0;width:1px;height:1px\">\n",
        print = url(HitKind::Print),
        hold = url(HitKind::Hold),
        forward = url(HitKind::Forward),
        dark = url(HitKind::Dark),
        open = url(HitKind::Open),
    )
}

/// `html` with every web link (`<a>` and `<area>` `href`s starting `http://` or `https://`)
/// replaced by its click-tracking URL, and the original URLs in link-number order (link `n` is
/// `links[n - 1]`). Each occurrence is its own link, so clicks can be placed on the layout.
pub fn rewrite_links(
    html: &str,
    base: &str,
    guid: &str,
    merge_tag: Option<&str>,
) -> Result<(String, Vec<String>), TrackingError> {
    let links = RefCell::new(Vec::new());
    let out = rewrite_str(
        html,
        RewriteStrSettings::new().append_element_content_handler(element!(LINK_SELECTOR, |el| {
            let Some(href) = web_href(el) else {
                return Ok(());
            };
            let mut links = links.borrow_mut();
            if links.len() < MAX_TRACKED_LINKS {
                links.push(href);
                let n = u32::try_from(links.len()).unwrap_or(u32::MAX);
                el.set_attribute("href", &hit_url(base, guid, HitKind::Click(n), merge_tag))?;
            }
            Ok(())
        })),
    )
    .map_err(|e| TrackingError::Html(e.to_string()))?;
    Ok((out, links.into_inner()))
}

/// The elements whose `href` click tracking rewrites.
pub(crate) const LINK_SELECTOR: &str = "a[href], area[href]";

/// The decoded `href` of a link click tracking counts: `http://` or `https://` only.
pub(crate) fn web_href(el: &lol_html::html_content::Element) -> Option<String> {
    let href = el.get_attribute("href")?;
    let href = html_escape::decode_html_entities(href.trim()).into_owned();
    let lower = href.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")).then_some(href)
}

/// `url` with Google Analytics campaign parameters added (`utm_source=mailproof`,
/// `utm_medium=email`, `utm_campaign=<campaign>`); parameters the sender already set are kept.
pub fn with_utm(url: &str, campaign: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    let present: Vec<String> = parsed.query_pairs().map(|(k, _)| k.into_owned()).collect();
    {
        let mut pairs = parsed.query_pairs_mut();
        for (k, v) in [
            ("utm_source", "mailproof"),
            ("utm_medium", "email"),
            ("utm_campaign", campaign),
        ] {
            if !present.iter().any(|p| p == k) {
                pairs.append_pair(k, v);
            }
        }
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://mp.example/t";
    const GUID: &str = "0123abcd-0000-4000-8000-00000000beef";

    #[test]
    fn every_url_of_the_code_carries_the_merge_tag() {
        let code = tracking_code(BASE, GUID, Some("*|EMAIL|*"));
        let urls: Vec<&str> = code
            .split(BASE)
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or(""))
            .collect();
        // open, print, forward, dark, held-open and ten reading steps.
        assert_eq!(urls.len(), 15, "{code}");
        for u in &urls {
            assert!(u.starts_with(&format!("/{GUID}/")), "{u}");
            assert!(u.ends_with("?d=*|EMAIL|*"), "{u}");
        }
        for kind in [
            HitKind::Open,
            HitKind::Print,
            HitKind::Forward,
            HitKind::Dark,
            HitKind::Hold,
        ] {
            assert!(code.contains(&hit_url(BASE, GUID, kind, Some("*|EMAIL|*"))));
        }
    }

    #[test]
    fn the_code_has_each_beacon_in_its_own_condition_and_no_script() {
        let code = tracking_code(BASE, GUID, None);
        assert!(!code.to_ascii_lowercase().contains("<script"));
        assert!(code.contains("data-ignore-inlining"));
        let print = code.find("@media print").expect("print rule");
        assert!(code[print..].starts_with(&format!(
            "@media print{{#_mp_t{{background-image:url(\"{BASE}/{GUID}/p.gif\")"
        )));
        assert!(code.contains(&format!(
            "@media (prefers-color-scheme:dark){{#_mp_d{{background-image:url(\"{BASE}/{GUID}/dm.gif\")"
        )));
        for wrapper in [
            "div.OutlookMessageHeader",
            "table.moz-email-headers-table",
            "blockquote #_mp_t",
        ] {
            assert!(code.contains(wrapper), "{wrapper}");
        }
        assert!(code.contains(&format!("<img src=\"{BASE}/{GUID}/o.gif\" width=\"1\"")));
        assert!(!code.contains("?d="), "no merge tag, no d=");
    }

    #[test]
    fn reading_steps_come_every_two_seconds_up_to_twenty() {
        let code = tracking_code(BASE, GUID, None);
        assert!(code.contains("animation:_mp_read 20s linear 1 forwards"));
        assert!(code.contains(&format!(
            "10%,19.9%{{background-image:url(\"{BASE}/{GUID}/r2.gif\")"
        )));
        assert!(code.contains(&format!(
            "50%,59.9%{{background-image:url(\"{BASE}/{GUID}/r10.gif\")"
        )));
        assert!(code.contains(&format!(
            "100%{{background-image:url(\"{BASE}/{GUID}/r20.gif\")"
        )));
        assert!(!code.contains("r22.gif") && !code.contains("r1.gif"));
    }

    /// Every kind, with the ends of the numbered ones' ranges.
    const SOME_KINDS: [HitKind; 9] = [
        HitKind::Open,
        HitKind::Print,
        HitKind::Forward,
        HitKind::Dark,
        HitKind::Read(2),
        HitKind::Read(20),
        HitKind::Click(1),
        HitKind::Click(37),
        HitKind::Hold,
    ];

    #[test]
    fn hit_paths_parse_back_to_their_kind() {
        for kind in SOME_KINDS {
            assert_eq!(HitKind::parse(&kind.file()), Some(kind));
        }
        for bad in [
            "r3.gif", "r22.gif", "r0.gif", "0", "+1", "x.gif", "", "r.gif", "501",
        ] {
            assert_eq!(HitKind::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn hit_kinds_read_back_from_their_stored_name_and_number() {
        use strum::VariantNames;
        assert_eq!(
            HitName::VARIANTS,
            ["open", "print", "forward", "read", "dark", "click", "hold"]
        );
        for kind in SOME_KINDS {
            let number = i64::from(kind.number());
            assert_eq!(HitKind::from_stored(kind.as_str(), number), Some(kind));
        }
        assert_eq!(HitKind::from_stored("hold", 14), Some(HitKind::Hold));
        for (name, number) in [("Open", 0), ("opened", 0), ("", 0), ("click", -1)] {
            assert_eq!(HitKind::from_stored(name, number), None, "{name} {number}");
        }
    }

    #[test]
    fn guids_have_one_form() {
        let g = guid_from([0xab; 16]);
        assert_eq!(g, "abababab-abab-abab-abab-abababababab");
        assert!(is_guid(&g));
        assert!(is_guid(GUID));
        assert!(!is_guid(&g.to_uppercase()));
        assert!(!is_guid("abababab-abab-abab-abab-ababababab"));
        assert!(!is_guid("../../etc"));
    }

    #[test]
    fn merge_tags_that_could_break_out_are_refused() {
        assert!(check_merge_tag("*|EMAIL|*").is_ok());
        assert!(check_merge_tag("{{ contact.email }}").is_ok());
        assert!(check_merge_tag("%%emailaddr%%").is_ok());
        for bad in ["a\"b", "<x>", "a'b", "x\\y", "url(x)", "a\nb"] {
            assert!(check_merge_tag(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_merge_tag(&"x".repeat(201)),
            Err(TrackingError::MergeTagTooLong)
        );
    }

    #[test]
    fn web_links_are_numbered_and_rewritten_others_kept() {
        let html = r##"<p><a href="https://a.example/x?y=1&amp;z=2">A</a>
            <a href="mailto:me@example.org">M</a><a href="#top">T</a>
            <a href=" HTTP://b.example/ ">B</a><a href="https://a.example/x?y=1&amp;z=2">A again</a>
            <map><area href="https://c.example/"></map></p>"##;
        let (out, links) = rewrite_links(html, BASE, GUID, Some("[email]")).expect("rewrite");
        assert_eq!(
            links,
            vec![
                "https://a.example/x?y=1&z=2",
                "HTTP://b.example/",
                "https://a.example/x?y=1&z=2",
                "https://c.example/"
            ]
        );
        for n in 1..=4 {
            assert!(
                out.contains(&format!("href=\"{BASE}/{GUID}/{n}?d=[email]\"")),
                "{n}: {out}"
            );
        }
        assert!(out.contains("href=\"mailto:me@example.org\""));
        assert!(out.contains("href=\"#top\""));
        assert!(!out.contains("a.example"), "{out}");
    }

    #[test]
    fn utm_parameters_are_added_but_never_overwrite_the_senders() {
        assert_eq!(
            with_utm("https://a.example/p?x=1", "Spring sale"),
            "https://a.example/p?x=1&utm_source=mailproof&utm_medium=email&utm_campaign=Spring+sale"
        );
        assert_eq!(
            with_utm("https://a.example/?utm_source=news", "c"),
            "https://a.example/?utm_source=news&utm_medium=email&utm_campaign=c"
        );
        assert_eq!(with_utm("not a url", "c"), "not a url");
    }
}
