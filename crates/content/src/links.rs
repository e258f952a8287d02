//! Link validation: finds every link and image in an email, judges each one's form (https,
//! tracking parameters, `mailto:`/`tel:` syntax, empty links, missing `alt`) and follows web links
//! through their redirects under [`NetPolicy`], with the same client and per-hop checks as the
//! source fetcher, so a link to an internal address is refused without any connection.

use std::cell::RefCell;

use futures::stream::{self, StreamExt};
use lol_html::{element, rewrite_str, RewriteStrSettings};
use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::fetch::{checked_url, client, next_hop, request_error, FetchError};
use crate::netpolicy::NetPolicy;

/// Links checked per email at most; the rest are counted in [`LinkCheck::skipped`]. Real emails
/// have far fewer, and the bound keeps one email from becoming thousands of outbound requests.
pub const MAX_LINKS: usize = 200;
/// Links checked at the same time for one email.
const IN_FLIGHT: usize = 4;

/// What kind of reference a URL in the email is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// An `href` of `<a>` or `<area>`.
    Link,
    /// The `src` of an `<img>`.
    Image,
}

/// A link or image as written in the email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundLink {
    /// The attribute value as written (entities decoded by the parser, whitespace trimmed).
    pub url: String,
    pub kind: LinkKind,
    /// 1-based line of the element in the email source.
    pub line: usize,
    /// The image's `alt` attribute; `None` when it has none (always `None` for links).
    pub alt: Option<String>,
}

/// The outcome for one link or image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub url: String,
    #[serde(rename = "type")]
    pub kind: LinkKind,
    pub line: usize,
    /// Each URL redirected to, in order; the last is where the link ends.
    pub redirects: Vec<String>,
    /// The final HTTP status; `None` when no response was had (not a web link, or an error).
    pub status: Option<u16>,
    /// The final response's media type, without parameters.
    pub mime: Option<String>,
    pub alt: Option<String>,
    /// Every warning, in order.
    pub warnings: Vec<String>,
    /// The warnings as one sentence (`None` without any), the form the issue's wire shape names.
    pub warning: Option<String>,
    /// Why the link does not work, when it does not.
    pub error: Option<String>,
}

/// The reports for one email.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkCheck {
    pub links: Vec<LinkReport>,
    /// Links and images beyond [`MAX_LINKS`], not checked.
    pub skipped: usize,
    /// What the URI blocklists say of the link domains; absent in reports stored before they
    /// were consulted.
    #[serde(default)]
    pub uribl: Option<crate::uribl::UriblReport>,
}

/// Every `<a href>`, `<area href>` and `<img src>` of `html`, in document order.
pub fn extract(html: &str) -> Result<Vec<FoundLink>, String> {
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(html.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_at = |offset: usize| line_starts.partition_point(|&start| start <= offset);
    let found = RefCell::new(Vec::new());
    let handler = element!("a[href], area[href], img", |el| {
        let line = line_at(el.source_location().bytes().start);
        let (kind, url, alt) = if el.tag_name() == "img" {
            let src = el.get_attribute("src").unwrap_or_default();
            (LinkKind::Image, src, el.get_attribute("alt"))
        } else {
            let href = el.get_attribute("href").unwrap_or_default();
            (LinkKind::Link, href, None)
        };
        found.borrow_mut().push(FoundLink {
            url: url.trim().to_owned(),
            kind,
            line,
            alt,
        });
        Ok(())
    });
    rewrite_str(
        html,
        RewriteStrSettings::new().append_element_content_handler(handler),
    )
    .map_err(|e| format!("the email's HTML could not be read for links: {e}"))?;
    Ok(found.into_inner())
}

/// A link as a reader sees it: where it goes and the words it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub href: String,
    /// The link's text (whitespace collapsed) and its images' `alt`, as one string.
    pub text: String,
}

/// Every `<a href>` of `html` with its text, in document order (nested tags' text included).
pub fn anchors(html: &str) -> Result<Vec<Anchor>, String> {
    let found: RefCell<Vec<Anchor>> = RefCell::new(Vec::new());
    rewrite_str(
        html,
        RewriteStrSettings::new()
            .append_element_content_handler(element!("a[href]", |el| {
                found.borrow_mut().push(Anchor {
                    href: el
                        .get_attribute("href")
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                    text: String::new(),
                });
                Ok(())
            }))
            .append_element_content_handler(element!("a[href] img[alt]", |el| {
                if let Some(last) = found.borrow_mut().last_mut() {
                    last.text.push(' ');
                    last.text
                        .push_str(&el.get_attribute("alt").unwrap_or_default());
                }
                Ok(())
            }))
            // Text handlers see the text inside the element, its descendants' included; links
            // do not nest, so the text belongs to the last link opened.
            .append_element_content_handler(lol_html::text!("a[href]", |t| {
                if let Some(last) = found.borrow_mut().last_mut() {
                    last.text.push_str(t.as_str());
                }
                Ok(())
            })),
    )
    .map_err(|e| format!("the email's HTML could not be read for links: {e}"))?;
    Ok(found
        .into_inner()
        .into_iter()
        .map(|a| Anchor {
            // Text chunks come as written: the spaces a reader sees are decoded here.
            text: ["&nbsp;", "&#160;", "&#xa0;", "&#xA0;"]
                .iter()
                .fold(a.text, |t, e| t.replace(e, " "))
                .replace("&amp;", "&")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            href: a.href,
        })
        .collect())
}

/// Query parameters that only identify the reader or the campaign to an analytics service.
const TRACKING_PARAMS: &[&str] = &[
    "fbclid",
    "gclid",
    "dclid",
    "msclkid",
    "yclid",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "vero_id",
    "oly_enc_id",
    "oly_anon_id",
];

/// Placeholders that mail services fill in when they send, as (opening, closing) delimiters:
/// Handlebars/Liquid/Jinja (Mailgun, SendGrid, Postmark, Customer.io), Mailchimp's merge tags,
/// ExactTarget's and Campaign Monitor's, SendGrid's legacy substitutions and ERB-style tags.
const MERGE_TAGS: [(&str, &str); 7] = [
    ("{{", "}}"),
    ("{%", "%}"),
    ("*|", "|*"),
    ("%%", "%%"),
    ("[", "]"),
    ("<%", "%>"),
    ("-", "-"),
];

/// The merge tag a URL starts with (`{{unsubscribe_url}}`, `*|ARCHIVE|*`, `%%view_email_url%%`),
/// if it does. A `-` pair counts only around a name of letters and underscores (`-unsubscribe-`).
fn merge_tag(url: &str) -> Option<&str> {
    let url = url.trim();
    MERGE_TAGS.iter().find_map(|(open, close)| {
        let rest = url.strip_prefix(open)?;
        let end = rest.find(close)?;
        let name = &rest[..end];
        let plausible = !name.trim().is_empty()
            && name.len() <= 100
            && (*open != "-" && *open != "["
                || name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        plausible.then(|| &url[..open.len() + end + close.len()])
    })
}

/// What is wrong with a link's form, without any network access.
pub fn warnings(link: &FoundLink) -> Vec<String> {
    let mut out = Vec::new();
    if link.kind == LinkKind::Image && link.alt.is_none() {
        out.push(
            "the image has no alt attribute: readers with images off or a screen reader get \
             nothing; add alt text (alt=\"\" for decoration)"
                .to_owned(),
        );
    }
    let url = link.url.as_str();
    if let Some(tag) = merge_tag(url) {
        out.push(format!(
            "the {} starts with the merge tag {tag}: your mail service puts the real address there \
             when it sends, so it is not followed here; send yourself the email to check it",
            noun(link.kind)
        ));
        return out;
    }
    if url.is_empty() || url == "#" {
        let what = if url.is_empty() { "empty" } else { "'#'" };
        out.push(format!(
            "the {} is {what}: it goes nowhere when clicked; give it a real URL",
            noun(link.kind)
        ));
        return out;
    }
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = strip_scheme(url, "mailto:") {
        if let Some(problem) = mailto_problem(rest) {
            out.push(format!("the mailto: link is malformed: {problem}"));
        }
        return out;
    }
    if let Some(rest) = strip_scheme(url, "tel:") {
        if let Some(problem) = tel_problem(rest) {
            out.push(format!("the tel: link is malformed: {problem}"));
        }
        return out;
    }
    if lower.starts_with("http://") {
        out.push(format!(
            "the {} uses http, not https: it travels unencrypted and some clients warn; use https",
            noun(link.kind)
        ));
    }
    if let Ok(parsed) = Url::parse(url) {
        let tracking: Vec<String> = parsed
            .query_pairs()
            .map(|(name, _)| name.into_owned())
            .filter(|name| {
                let name = name.to_ascii_lowercase();
                name.starts_with("utm_") || TRACKING_PARAMS.contains(&name.as_str())
            })
            .collect();
        if !tracking.is_empty() {
            out.push(format!(
                "the URL carries tracking parameters ({}); some privacy tools strip or block them",
                tracking.join(", ")
            ));
        }
    }
    out
}

fn noun(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::Link => "link",
        LinkKind::Image => "image source",
    }
}

fn strip_scheme<'a>(url: &'a str, scheme: &str) -> Option<&'a str> {
    let head = url.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| url.get(scheme.len()..))
        .flatten()
}

/// Checks the addresses of a `mailto:` URL (RFC 6068) in a simplified form: each must be
/// `local@domain` with a dotted domain and no spaces.
fn mailto_problem(rest: &str) -> Option<String> {
    let (to, query) = rest.split_once('?').unwrap_or((rest, ""));
    let to = percent_decode(to);
    let has_to_header = query
        .split('&')
        .any(|p| p.to_ascii_lowercase().starts_with("to="));
    if to.trim().is_empty() {
        return (!has_to_header)
            .then(|| "it names no address; write mailto:name@example.com".into());
    }
    for address in to.split(',') {
        let address = address.trim();
        let valid = address.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !local.contains(char::is_whitespace)
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && domain
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '.' || c == '-')
        });
        if !valid {
            return Some(format!(
                "{address:?} is not an email address; write mailto:name@example.com"
            ));
        }
    }
    None
}

/// Checks a `tel:` number (RFC 3966): digits with an optional leading `+`, visual separators
/// `-.()` and spaces, and `;` parameters.
fn tel_problem(rest: &str) -> Option<String> {
    let decoded = percent_decode(rest);
    let number = decoded.split(';').next().unwrap_or_default().trim();
    let digits = number.chars().filter(char::is_ascii_digit).count();
    let body = number.strip_prefix('+').unwrap_or(number);
    let allowed = body
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | '.' | '(' | ')' | ' '));
    if digits == 0 || !allowed {
        return Some(format!(
            "{number:?} is not a phone number; write digits with an optional leading +, e.g. \
             tel:+15551234567"
        ));
    }
    None
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_owned())
}

/// Finds, judges and checks every link and image of `html`: at most [`MAX_LINKS`], a few at a
/// time, each within `policy.timeout`.
pub async fn check_email(html: &str, policy: &NetPolicy) -> Result<LinkCheck, String> {
    let mut found = extract(html)?;
    let skipped = found.len().saturating_sub(MAX_LINKS);
    found.truncate(MAX_LINKS);
    let links = stream::iter(found)
        .map(|link| async move { check_link(&link, policy).await })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    Ok(LinkCheck {
        links,
        skipped,
        uribl: None,
    })
}

/// Judges one link and, for http(s) URLs, follows it: `HEAD` first, `GET` when the server does
/// not answer `HEAD` usefully, every redirect hop checked against `policy` before connecting.
pub async fn check_link(link: &FoundLink, policy: &NetPolicy) -> LinkReport {
    let mut report = LinkReport {
        url: link.url.clone(),
        kind: link.kind,
        line: link.line,
        redirects: Vec::new(),
        status: None,
        mime: None,
        alt: link.alt.clone(),
        warnings: warnings(link),
        warning: None,
        error: None,
    };
    let lower = link.url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        let followed = tokio::time::timeout(policy.timeout, follow(&link.url, policy, &mut report))
            .await
            .unwrap_or_else(|_| {
                Err(FetchError::Timeout {
                    url: link.url.clone(),
                    seconds: policy.timeout.as_secs_f64(),
                })
            });
        if let Err(e) = followed {
            report.error = Some(e.to_string());
        }
        if report.redirects.len() > 1 {
            report.warnings.push(format!(
                "the {} goes through a chain of {} redirects; link to the final URL",
                noun(link.kind),
                report.redirects.len()
            ));
        }
    } else if !(link.url.is_empty()
        || merge_tag(&link.url).is_some()
        || link.url == "#"
        || strip_scheme(&link.url, "mailto:").is_some()
        || strip_scheme(&link.url, "tel:").is_some()
        || (link.kind == LinkKind::Image
            && (strip_scheme(&link.url, "cid:").is_some()
                || strip_scheme(&link.url, "data:").is_some())))
    {
        report.error = Some(match Url::parse(&link.url) {
            Ok(u) => format!(
                "the {}: scheme cannot be followed from an email; use an https:// URL",
                u.scheme()
            ),
            Err(_) => "a relative URL has no base in an email and goes nowhere; give an \
                       absolute https:// URL"
                .to_owned(),
        });
    }
    if !report.warnings.is_empty() {
        report.warning = Some(report.warnings.join("; "));
    }
    report
}

/// Follows `url` hop by hop, recording redirects, the final status and media type in `report`.
async fn follow(url: &str, policy: &NetPolicy, report: &mut LinkReport) -> Result<(), FetchError> {
    let mut current = checked_url(url, policy)?;
    let client = client(policy, &current)?;
    let mut method = Method::HEAD;
    loop {
        let response = client
            .request(method.clone(), current.clone())
            .send()
            .await
            .map_err(|e| request_error(&current, &e, policy))?;
        let status = response.status();
        // Many servers refuse or mishandle HEAD; their answer to GET is what a reader gets.
        if method == Method::HEAD
            && (status == StatusCode::METHOD_NOT_ALLOWED
                || status == StatusCode::NOT_IMPLEMENTED
                || status == StatusCode::FORBIDDEN)
        {
            method = Method::GET;
            continue;
        }
        let followed = u32::try_from(report.redirects.len()).unwrap_or(u32::MAX);
        if let Some(next) = next_hop(url, &current, &response, followed, policy)? {
            report.redirects.push(next.to_string());
            current = next;
            method = Method::HEAD;
            continue;
        }
        report.status = Some(status.as_u16());
        report.mime = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .filter(|v| !v.is_empty());
        // The body is never read: dropping the response closes the connection.
        if !status.is_success() {
            report.error = Some(format!(
                "{current} answered HTTP {status}: the {} is broken; fix or remove it",
                noun(report.kind)
            ));
        } else if report.kind == LinkKind::Image
            && report
                .mime
                .as_deref()
                .is_some_and(|m| !m.starts_with("image/"))
        {
            report.warnings.push(format!(
                "the image source answers with {} rather than an image",
                report.mime.as_deref().unwrap_or_default()
            ));
        }
        return Ok(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_carry_their_text_with_nested_tags_and_image_alts() {
        let html = r#"<p>Read <a href="https://x.example/a">the <b>whole</b>
            story</a>. <a href=" https://x.example/u?id=1 "><img src="u.png" alt="Unsubscribe"></a>
            <a>no href</a> <A HREF="mailto:u@x.example">opt&nbsp;out</A></p>"#;
        let found = anchors(html).expect("parses");
        let pairs: Vec<(&str, &str)> = found
            .iter()
            .map(|a| (a.href.as_str(), a.text.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("https://x.example/a", "the whole story"),
                ("https://x.example/u?id=1", "Unsubscribe"),
                ("mailto:u@x.example", "opt out"),
            ]
        );
    }

    fn link(url: &str) -> FoundLink {
        FoundLink {
            url: url.to_owned(),
            kind: LinkKind::Link,
            line: 1,
            alt: None,
        }
    }

    fn has(warnings: &[String], needle: &str) -> bool {
        warnings.iter().any(|w| w.contains(needle))
    }

    #[test]
    fn extracts_links_and_images_with_lines_and_alt() {
        let html = "<p>\n<a href=\" https://a.example/x \">a</a>\n<img src=\"https://i.example/p.png\">\n<img src=\"q.png\" alt=\"Logo\"><area href=\"#\"><a name=\"top\">t</a>";
        let found = extract(html).expect("parsable");
        assert_eq!(
            found,
            vec![
                FoundLink {
                    url: "https://a.example/x".into(),
                    kind: LinkKind::Link,
                    line: 2,
                    alt: None
                },
                FoundLink {
                    url: "https://i.example/p.png".into(),
                    kind: LinkKind::Image,
                    line: 3,
                    alt: None
                },
                FoundLink {
                    url: "q.png".into(),
                    kind: LinkKind::Image,
                    line: 4,
                    alt: Some("Logo".into())
                },
                FoundLink {
                    url: "#".into(),
                    kind: LinkKind::Link,
                    line: 4,
                    alt: None
                },
            ]
        );
    }

    #[test]
    fn http_is_warned_and_https_is_not() {
        assert!(has(
            &warnings(&link("http://example.com/")),
            "uses http, not https"
        ));
        assert!(warnings(&link("https://example.com/")).is_empty());
        assert!(has(
            &warnings(&link("HTTP://EXAMPLE.COM/")),
            "uses http, not https"
        ));
    }

    #[test]
    fn tracking_parameters_are_named() {
        let w = warnings(&link(
            "https://example.com/?id=3&utm_source=news&UTM_Medium=mail&fbclid=x",
        ));
        assert!(
            has(&w, "tracking parameters (utm_source, UTM_Medium, fbclid)"),
            "{w:?}"
        );
        assert!(warnings(&link("https://example.com/?id=3&utmost=1")).is_empty());
    }

    #[test]
    fn mailto_syntax_is_checked() {
        assert!(warnings(&link("mailto:someone@example.com")).is_empty());
        assert!(warnings(&link("MAILTO:a@example.com,b@example.org?subject=Hi")).is_empty());
        assert!(warnings(&link("mailto:?to=a@example.com")).is_empty());
        assert!(has(
            &warnings(&link("mailto:someone")),
            "mailto: link is malformed"
        ));
        assert!(has(&warnings(&link("mailto:")), "names no address"));
        assert!(has(&warnings(&link("mailto:a b@example.com")), "malformed"));
        assert!(has(&warnings(&link("mailto:a@example")), "malformed"));
    }

    #[test]
    fn tel_syntax_is_checked() {
        assert!(warnings(&link("tel:+1-555-123-4567")).is_empty());
        assert!(warnings(&link("tel:+44%2020%207946%200958")).is_empty());
        assert!(warnings(&link("tel:(555) 123.4567;ext=12")).is_empty());
        assert!(has(
            &warnings(&link("tel:call-us")),
            "tel: link is malformed"
        ));
        assert!(has(&warnings(&link("tel:")), "malformed"));
        assert!(has(&warnings(&link("tel:555+1234")), "malformed"));
    }

    #[test]
    fn empty_and_hash_links_are_warned() {
        assert!(has(&warnings(&link("")), "link is empty"));
        assert!(has(&warnings(&link("#")), "link is '#'"));
        assert!(warnings(&link("#section")).is_empty());
    }

    #[test]
    fn images_without_alt_are_warned_and_empty_alt_is_fine() {
        let mut image = FoundLink {
            url: "https://example.com/a.png".into(),
            kind: LinkKind::Image,
            line: 1,
            alt: None,
        };
        assert!(has(&warnings(&image), "no alt attribute"));
        image.alt = Some(String::new());
        assert!(warnings(&image).is_empty());
    }

    #[tokio::test]
    async fn refused_and_unfollowable_links_report_errors_without_fetching() {
        let policy = NetPolicy::default();
        let loopback = check_link(&link("http://127.0.0.1:9/"), &policy).await;
        assert!(
            loopback
                .error
                .as_deref()
                .is_some_and(|e| e.contains("refused: 127.0.0.1")),
            "{loopback:?}"
        );
        assert_eq!(loopback.status, None);
        let relative = check_link(&link("/path"), &policy).await;
        assert!(relative
            .error
            .as_deref()
            .is_some_and(|e| e.contains("relative URL")));
        let js = check_link(&link("javascript:alert(1)"), &policy).await;
        assert!(js
            .error
            .as_deref()
            .is_some_and(|e| e.contains("javascript: scheme")));
        let mail = check_link(&link("mailto:a@example.com"), &policy).await;
        assert_eq!((mail.error, mail.warning), (None, None));
    }

    #[tokio::test]
    async fn a_merge_tag_link_is_the_mail_services_to_fill_not_a_broken_link() {
        for url in [
            "{{unsubscribe}}",
            "{{ base_url }}/account",
            "*|ARCHIVE|*",
            "%%view_email_url%%",
            "[unsubscribe]",
            "<%asm_group_unsubscribe_raw_url%>",
            "-unsubscribe-",
            "{% unsubscribe_link %}",
        ] {
            let report = check_link(&link(url), &NetPolicy::default()).await;
            assert_eq!(report.error, None, "{url}");
            assert!(
                report.warnings.len() == 1 && report.warnings[0].contains("merge tag"),
                "{url}: {:?}",
                report.warnings
            );
        }
        for url in ["[]", "-", "relative/path", "-not a tag-"] {
            assert!(merge_tag(url).is_none(), "{url}");
        }
        assert_eq!(merge_tag("{{ base_url }}/account"), Some("{{ base_url }}"));
    }
}
