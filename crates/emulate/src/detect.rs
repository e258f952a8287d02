//! iOS Mail's data detectors: phone numbers, dates and times, and street addresses in the text of
//! an email become links carrying `x-apple-data-detectors` (data/behaviours.toml,
//! ios-data-detectors). Apple's recognisers are not public; these patterns cover the common
//! English forms the sources show.

use std::sync::LazyLock;

use regex::Regex;

/// What a detector recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    Phone,
    Date,
    Address,
}

impl Detected {
    /// The name the analysis shows.
    pub fn name(self) -> &'static str {
        match self {
            Detected::Phone => "phone number",
            Detected::Date => "date",
            Detected::Address => "address",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Detected::Phone => "telephone",
            Detected::Date => "calendar-event",
            Detected::Address => "address",
        }
    }
}

const MONTH: &str = "(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)";

static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
    let address = r"(?P<address>\b\d{1,5}(?:\s+[A-Z][A-Za-z]+){1,3}\s+(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|Square|Sq)\b\.?(?:,\s*[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)?(?:,?\s*[A-Z]{2}\s+\d{5})?)";
    let date = format!(
        r"(?P<date>(?i:\b(?:(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?,?\s+)?{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH}\.?(?:\s+\d{{4}})?\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b\d{{1,2}}:\d{{2}}\s?(?:am|pm)\b))"
    );
    let phone =
        r"(?P<phone>(?:\+\d{1,3}[ .\-]?)?(?:\(\d{1,4}\)[ .\-]?)?\d{2,4}(?:[ .\-]\d{2,5}){1,4})";
    // Leftmost-first: an address or a date starting at the same place wins over a phone number.
    Regex::new(&format!("{address}|{date}|{phone}")).unwrap_or_else(|e| {
        // The pattern is a constant: a failure here is a programming error caught by the tests.
        panic!("data detector pattern does not compile: {e}")
    })
});

/// Whether a `<meta>` with these `name` and `content` attributes turns phone links off
/// (`<meta name="format-detection" content="telephone=no">`).
pub fn stops_phone_links(name: Option<String>, content: Option<String>) -> bool {
    name.is_some_and(|n| n.eq_ignore_ascii_case("format-detection"))
        && content.is_some_and(|c| {
            c.to_ascii_lowercase()
                .replace(' ', "")
                .contains("telephone=no")
        })
}

/// Every detection in `text`: (byte range, what).
pub fn find(text: &str, phones: bool) -> Vec<(std::ops::Range<usize>, Detected)> {
    PATTERN
        .captures_iter(text)
        .filter_map(|c| {
            if let Some(m) = c.name("address") {
                Some((m.range(), Detected::Address))
            } else if let Some(m) = c.name("date") {
                Some((m.range(), Detected::Date))
            } else {
                let m = c.name("phone")?;
                let digits = m.as_str().chars().filter(char::is_ascii_digit).count();
                (phones && (7..=15).contains(&digits)).then(|| (m.range(), Detected::Phone))
            }
        })
        .collect()
}

/// `text` (HTML text content) with every detection wrapped in a link as iOS Mail injects it, and
/// how many were linked. `phones_off`: `format-detection: telephone=no` was declared.
pub fn link(text: &str, phones_off: bool) -> (String, usize) {
    let found = find(text, !phones_off);
    if found.is_empty() {
        return (text.to_string(), 0);
    }
    let mut out = String::with_capacity(text.len() + found.len() * 120);
    let mut at = 0;
    for (i, (range, what)) in found.iter().enumerate() {
        let matched = &text[range.clone()];
        let href = match what {
            Detected::Phone => {
                let dial: String = matched
                    .chars()
                    .filter(|c| c.is_ascii_digit() || *c == '+')
                    .collect();
                format!("tel:{dial}")
            }
            _ => format!("x-apple-data-detectors://{i}"),
        };
        out.push_str(&text[at..range.start]);
        out.push_str(&format!(
            "<a href=\"{href}\" x-apple-data-detectors=\"true\" x-apple-data-detectors-type=\"{}\" x-apple-data-detectors-result=\"{i}\">{matched}</a>",
            what.kind()
        ));
        at = range.end;
    }
    out.push_str(&text[at..]);
    (out, found.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, Detected)> {
        find(text, true)
            .into_iter()
            .map(|(r, d)| (text[r].to_string(), d))
            .collect()
    }

    #[test]
    fn phones_dates_and_addresses_are_recognised() {
        let found = kinds(
            "Call (555) 123-4567 by November 26, 2026 or visit 1 Infinite Loop Dr, Cupertino.",
        );
        assert_eq!(
            found,
            vec![
                ("(555) 123-4567".to_string(), Detected::Phone),
                ("November 26, 2026".to_string(), Detected::Date),
                (
                    "1 Infinite Loop Dr, Cupertino".to_string(),
                    Detected::Address
                ),
            ]
        );
    }

    #[test]
    fn prices_sizes_and_short_numbers_are_not_phones() {
        assert!(kinds("Save 20% on 600 px, code 1234, now $19.99").is_empty());
        assert!(kinds("Marketing 5 tips").is_empty());
    }

    #[test]
    fn format_detection_stops_phone_links_only() {
        let (html, n) = link("Call +1 555 123 4567 on Dec 3", true);
        assert_eq!(n, 1, "{html}");
        assert!(
            html.contains(">Dec 3</a>") && !html.contains("tel:"),
            "{html}"
        );
        let (html, n) = link("Call +1 555 123 4567 on Dec 3", false);
        assert_eq!(n, 2);
        assert!(html.contains("href=\"tel:+15551234567\""), "{html}");
    }
}
