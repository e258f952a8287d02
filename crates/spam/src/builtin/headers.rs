//! Header and MIME sanity: required headers, malformed or 8-bit header lines, HTML-only bodies,
//! charsets that do not match the bytes, and the good practice of offering unsubscription.

use mail_parser::{Encoding, HeaderName, Message, MimeHeaders, PartType};

use super::rule;
use crate::report::Rule;

pub(crate) fn check(raw: &[u8], message: &Message<'_>) -> Vec<Rule> {
    let mut rules = Vec::new();
    let header_block = header_block(raw);

    if message.header(HeaderName::Date).is_none() {
        rules.push(rule("MP_MISSING_DATE", 1.5));
    } else if message.date().is_none_or(|d| !d.is_valid()) {
        rules.push(rule("MP_INVALID_DATE", 1.0));
    }
    match message.message_id() {
        None => rules.push(rule("MP_MISSING_MESSAGE_ID", 1.0)),
        Some(id)
            if !id
                .rsplit_once('@')
                .is_some_and(|(_, rhs)| rhs.contains('.')) =>
        {
            rules.push(rule("MP_MESSAGE_ID_NOT_FQDN", 0.5))
        }
        Some(_) => {}
    }
    let from_address = message
        .from()
        .and_then(|a| a.first())
        .and_then(|a| a.address());
    match from_address {
        None => rules.push(rule("MP_MISSING_FROM", 3.0)),
        Some(addr) if !addr.contains('@') => rules.push(rule("MP_FROM_NOT_ADDRESS", 2.0)),
        Some(_) => {}
    }
    if message.to().is_none() && message.cc().is_none() {
        rules.push(rule("MP_MISSING_TO", 0.7));
    }
    if message.subject().is_none_or(|s| s.trim().is_empty()) {
        rules.push(rule("MP_MISSING_SUBJECT", 0.8));
    }
    if message.header(HeaderName::ContentType).is_some()
        && message.header(HeaderName::MimeVersion).is_none()
    {
        rules.push(rule("MP_MISSING_MIME_VERSION", 0.3));
    }
    if malformed_header_lines(header_block) > 0 {
        rules.push(rule("MP_MALFORMED_HEADER", 1.5));
    }
    if header_block.iter().any(|b| *b >= 0x80) {
        rules.push(rule("MP_8BIT_HEADER", 1.0));
    }
    if is_html_only(message) {
        rules.push(rule("MP_HTML_ONLY", 0.7));
    }
    if has_charset_mismatch(raw, message) {
        rules.push(rule("MP_CHARSET_MISMATCH", 1.0));
    }
    if message.header(HeaderName::ListUnsubscribe).is_some() {
        rules.push(rule("MP_LIST_UNSUBSCRIBE", -0.5));
    }
    rules
}

/// The raw header section: everything before the first empty line.
fn header_block(raw: &[u8]) -> &[u8] {
    let crlf = raw.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = raw.windows(2).position(|w| w == b"\n\n");
    let end = match (crlf, lf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(raw.len()),
    };
    &raw[..end]
}

/// Lines that are neither `Name: value` (RFC 5322 field name) nor a folded continuation.
fn malformed_header_lines(block: &[u8]) -> usize {
    block
        .split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
        .filter(|line| {
            if line[0] == b' ' || line[0] == b'\t' {
                return false;
            }
            match line.iter().position(|b| *b == b':') {
                Some(0) | None => true,
                Some(colon) => !line[..colon].iter().all(|b| (33..=126).contains(b)),
            }
        })
        .count()
}

fn is_body_text_part(part: &mail_parser::MessagePart<'_>, subtype: &str) -> bool {
    let is_attachment = part
        .content_disposition()
        .is_some_and(|d| d.is_attachment());
    !is_attachment
        && part.content_type().map_or(subtype == "plain", |ct| {
            ct.ctype().eq_ignore_ascii_case("text")
                && ct
                    .subtype()
                    .is_some_and(|s| s.eq_ignore_ascii_case(subtype))
        })
}

fn is_html_only(message: &Message<'_>) -> bool {
    let has_html = message.parts.iter().any(|p| is_body_text_part(p, "html"));
    let has_plain = message.parts.iter().any(|p| {
        matches!(&p.body, PartType::Text(t) if !t.trim().is_empty())
            && is_body_text_part(p, "plain")
    });
    has_html && !has_plain
}

/// A declared charset the bytes cannot be: 8-bit bytes under us-ascii, invalid UTF-8 under utf-8,
/// or a part mail-parser had to decode with a fallback.
fn has_charset_mismatch(raw: &[u8], message: &Message<'_>) -> bool {
    message.parts.iter().any(|part| {
        if !matches!(part.body, PartType::Text(_) | PartType::Html(_)) {
            return false;
        }
        if part.is_encoding_problem {
            return true;
        }
        if part.encoding != Encoding::None {
            return false;
        }
        let charset = part
            .content_type()
            .and_then(|ct| ct.attribute("charset"))
            .unwrap_or("us-ascii")
            .to_ascii_lowercase();
        let start = (part.offset_body as usize).min(raw.len());
        let end = (part.offset_end as usize).clamp(start, raw.len());
        let bytes = &raw[start..end];
        match charset.as_str() {
            "us-ascii" | "ascii" => bytes.iter().any(|b| *b >= 0x80),
            "utf-8" | "utf8" => std::str::from_utf8(bytes).is_err(),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(raw: &str) -> Vec<String> {
        super::super::fired_rules(raw, check)
    }

    #[test]
    fn a_complete_plain_message_fires_nothing() {
        let fired = names(
            "Date: Mon, 2 Nov 2026 10:00:00 +0000\r\nMessage-ID: <a1@mail.example.com>\r\nFrom: A <a@example.com>\r\nTo: b@example.org\r\nSubject: Minutes\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee you tomorrow.\r\n",
        );
        assert!(fired.is_empty(), "{fired:?}");
    }

    #[test]
    fn missing_headers_are_each_named() {
        let fired = names("Subject: hi\r\n\r\nbody\r\n");
        for rule in [
            "MP_MISSING_DATE",
            "MP_MISSING_MESSAGE_ID",
            "MP_MISSING_FROM",
            "MP_MISSING_TO",
        ] {
            assert!(fired.contains(&rule.to_string()), "{rule} in {fired:?}");
        }
    }

    #[test]
    fn malformed_and_8bit_headers_and_html_only_bodies_are_flagged() {
        let raw = "From: a@example.com\r\nThis line has no colon\r\nSubject: caf\u{e9}\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n";
        let fired = names(raw);
        for rule in [
            "MP_MALFORMED_HEADER",
            "MP_8BIT_HEADER",
            "MP_HTML_ONLY",
            "MP_MISSING_MIME_VERSION",
        ] {
            assert!(fired.contains(&rule.to_string()), "{rule} in {fired:?}");
        }
    }

    #[test]
    fn eight_bit_body_declared_us_ascii_is_a_charset_mismatch() {
        let fired = names(
            "From: a@example.com\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nna\u{ef}ve caf\u{e9}\r\n",
        );
        assert!(
            fired.contains(&"MP_CHARSET_MISMATCH".to_string()),
            "{fired:?}"
        );
    }
}
