//! Content heuristics: shouting, money/pharma/urgency phrases, links to bare IPs and shorteners,
//! image-only HTML and hidden text.

use std::net::IpAddr;

use mail_parser::{Message, PartType};

use super::html::{self, truncate_at_char_boundary};
use super::rule;
use crate::report::Rule;

/// Phrase families; one rule per family, stronger when several distinct phrases appear.
const PHRASE_FAMILIES: [(&str, f64, &[&str]); 3] = [
    (
        "MP_PHARMA_PHRASES",
        2.5,
        &[
            "viagra",
            "cialis",
            "levitra",
            "no prescription",
            "without prescription",
            "online pharmacy",
            "erectile",
            "weight loss pill",
            "diet pill",
            "generic meds",
        ],
    ),
    (
        "MP_MONEY_PHRASES",
        1.5,
        &[
            "100% guaranteed",
            "risk-free",
            "risk free",
            "make money fast",
            "earn extra cash",
            "double your income",
            "cash bonus",
            "million dollars",
            "no credit check",
            "lowest price",
            "best price",
            "winner",
            "you have won",
            "$$$",
            "100% free",
            "investment opportunity",
            "wire transfer",
            "claim your prize",
        ],
    ),
    (
        "MP_URGENCY_PHRASES",
        1.0,
        &[
            "act now",
            "limited time",
            "urgent",
            "expires today",
            "order now",
            "buy now",
            "click here now",
            "don't miss out",
            "once in a lifetime",
            "last chance",
            "immediately",
            "while supplies last",
        ],
    ),
];

const URL_SHORTENERS: [&str; 8] = [
    "bit.ly",
    "tinyurl.com",
    "goo.gl",
    "ow.ly",
    "t.co",
    "is.gd",
    "buff.ly",
    "cutt.ly",
];

/// Phrase and case checks read at most this much text: enough to judge, bounded in time.
const MAX_TEXT_BYTES: usize = 512 * 1024;

/// The content rules that fire, and the hosts of every link (for the URI blocklist lookups).
pub(crate) fn check(message: &Message<'_>) -> (Vec<Rule>, Vec<String>) {
    let mut rules = Vec::new();
    let subject = message.subject().unwrap_or_default();
    let facts = html_facts(message);
    let mut text = plain_text(message);
    text.push(' ');
    text.push_str(&facts.visible_text);
    let text = truncate_at_char_boundary(&text, MAX_TEXT_BYTES);

    if is_shouting(subject, 10, 0.6) {
        rules.push(rule("MP_SUBJECT_SHOUTY", 1.5));
    }
    if subject.contains("!!") || subject.matches('!').count() >= 3 {
        rules.push(rule("MP_SUBJECT_EXCLAMATIONS", 0.8));
    }
    if subject.contains(['$', '€', '£']) {
        rules.push(rule("MP_SUBJECT_CURRENCY", 0.5));
    }
    if is_shouting(text, 100, 0.4) {
        rules.push(rule("MP_BODY_SHOUTY", 1.0));
    }

    let haystack = format!("{} {}", subject, text).to_lowercase();
    for (name, base, phrases) in PHRASE_FAMILIES {
        let distinct = phrases.iter().filter(|p| haystack.contains(*p)).count();
        if distinct > 0 {
            // More distinct phrases, more confidence; capped at twice the base.
            let score = (base + 0.5 * (distinct - 1) as f64).min(base * 2.0);
            rules.push(rule(name, score));
        }
    }

    let mut urls: Vec<String> = facts.links.clone();
    urls.extend(urls_in_text(text));
    let hosts: Vec<String> = urls.iter().filter_map(|u| url_host(u)).collect();
    if hosts
        .iter()
        .any(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().is_ok())
    {
        rules.push(rule("MP_LINK_TO_IP", 2.0));
    }
    if hosts.iter().any(|h| URL_SHORTENERS.contains(&h.as_str())) {
        rules.push(rule("MP_URL_SHORTENER", 0.8));
    }

    let visible_letters = text.chars().filter(|c| c.is_alphabetic()).count();
    if facts.images > 0 && visible_letters < 80 {
        rules.push(rule("MP_IMAGE_ONLY", 2.0));
    }
    // Preheaders hide a sentence or two; paragraphs of hidden text are keyword stuffing.
    if facts.hidden_letters >= 200 {
        rules.push(rule("MP_HIDDEN_TEXT", 1.5));
    }
    (rules, hosts)
}

fn html_facts(message: &Message<'_>) -> html::HtmlFacts {
    let mut all = html::HtmlFacts::default();
    for part in &message.parts {
        if let PartType::Html(source) = &part.body {
            let facts = html::scan(source);
            all.visible_text.push_str(&facts.visible_text);
            all.links.extend(facts.links);
            all.images += facts.images;
            all.hidden_letters += facts.hidden_letters;
        }
    }
    all
}

fn plain_text(message: &Message<'_>) -> String {
    let mut text = String::new();
    for part in &message.parts {
        if let PartType::Text(body) = &part.body {
            text.push_str(body);
            text.push(' ');
        }
    }
    text
}

/// Mostly capitals among at least `min_letters` letters.
fn is_shouting(text: &str, min_letters: usize, ratio: f64) -> bool {
    let letters: Vec<char> = text.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() < min_letters {
        return false;
    }
    let upper = letters.iter().filter(|c| c.is_uppercase()).count();
    upper as f64 / letters.len() as f64 >= ratio
}

fn urls_in_text(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '<' || c == '>' || c == '"')
        .filter(|w| {
            let lower = w.to_ascii_lowercase();
            lower.starts_with("http://") || lower.starts_with("https://")
        })
        .map(str::to_string)
        .collect()
}

/// Host part of an http(s) URL, lower-cased, without port or credentials.
fn url_host(url: &str) -> Option<String> {
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
        .or_else(|| lower.strip_prefix("//"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(raw: &str) -> Vec<String> {
        super::super::fired_rules(raw, |_, message| check(message).0)
    }

    #[test]
    fn shouty_pharma_money_mail_with_ip_link_fires_each_family() {
        let fired = names(
            "Subject: CHEAP VIAGRA NOW!!!\r\nContent-Type: text/html\r\n\r\n\
             <p>Online pharmacy, no prescription. 100% guaranteed, risk-free. Act now!</p>\
             <a href=\"http://203.0.113.7/shop\">shop</a>\r\n",
        );
        for rule in [
            "MP_SUBJECT_SHOUTY",
            "MP_SUBJECT_EXCLAMATIONS",
            "MP_PHARMA_PHRASES",
            "MP_MONEY_PHRASES",
            "MP_URGENCY_PHRASES",
            "MP_LINK_TO_IP",
        ] {
            assert!(fired.contains(&rule.to_string()), "{rule} in {fired:?}");
        }
    }

    #[test]
    fn ordinary_newsletter_text_fires_nothing() {
        let fired = names(
            "Subject: Our November notes\r\nContent-Type: text/plain\r\n\r\n\
             Hello Jane, here are this month's notes from the garden club. \
             Read more at https://club.example.com/notes\r\n",
        );
        assert!(fired.is_empty(), "{fired:?}");
    }

    #[test]
    fn an_image_with_almost_no_text_is_image_only() {
        let fired = names(
            "Subject: Look\r\nContent-Type: text/html\r\n\r\n<a href=\"https://bit.ly/x\"><img src=\"https://cdn.example.com/a.png\"></a>\r\n",
        );
        assert!(fired.contains(&"MP_IMAGE_ONLY".to_string()), "{fired:?}");
        assert!(fired.contains(&"MP_URL_SHORTENER".to_string()), "{fired:?}");
    }

    #[test]
    fn url_hosts_drop_ports_and_credentials() {
        assert_eq!(
            url_host("http://user@192.0.2.1:8080/x").as_deref(),
            Some("192.0.2.1")
        );
        assert_eq!(
            url_host("HTTPS://Example.COM?q").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("mailto:a@b"), None);
    }
}
