//! Building the test message we send for the `smtp` and `svc` methods: a MIME multipart/alternative
//! with the caller's HTML and a plain-text part derived from it.

use lettre::message::{Mailbox, MultiPart};

use crate::error::SmtpError;

/// Width the plain-text alternative is wrapped at; 78 is the RFC 5322 recommendation.
const TEXT_WIDTH: usize = 78;

/// Builds a complete RFC 5322 message (Date, Message-ID, MIME-Version, From, To, Subject) whose body
/// is multipart/alternative: a text part derived from `html`, then `html` itself.
///
/// `from` and each `to` may be a bare address or `Name <address>`.
pub fn build_message(
    subject: &str,
    html: &str,
    from: &str,
    to: &[String],
    message_id_domain: &str,
) -> Result<Vec<u8>, SmtpError> {
    let mut builder = lettre::Message::builder()
        .from(parse_mailbox("from", from)?)
        .subject(subject)
        .date_now()
        .message_id(Some(message_id(message_id_domain)));
    for rcpt in to {
        builder = builder.to(parse_mailbox("to", rcpt)?);
    }
    let message = builder
        .multipart(MultiPart::alternative_plain_html(
            html_to_text(html),
            html.to_owned(),
        ))
        .map_err(|err| SmtpError::Build(err.to_string()))?;
    Ok(message.formatted())
}

fn parse_mailbox(field: &'static str, value: &str) -> Result<Mailbox, SmtpError> {
    value
        .parse()
        .map_err(|err: lettre::address::AddressError| SmtpError::Address {
            field,
            value: value.to_owned(),
            reason: err.to_string(),
        })
}

fn message_id(domain: &str) -> String {
    let domain: String = domain
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .collect();
    let domain = if domain.is_empty() {
        "localhost".to_owned()
    } else {
        domain
    };
    format!(
        "<{}.{:016x}@{domain}>",
        chrono::Utc::now().timestamp_millis(),
        rand::random::<u64>()
    )
}

fn html_to_text(html: &str) -> String {
    // html2text only fails on I/O errors of its reader, which a byte slice never has; an empty text
    // part is still a valid alternative if it ever did.
    html2text::from_read(html.as_bytes(), TEXT_WIDTH).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(html: &str) -> String {
        let bytes = build_message(
            "Caf\u{e9} news",
            html,
            "Acme News <news@acme.example>",
            &["jane@example.org".to_owned()],
            "mailproof.example",
        )
        .expect("a valid message builds");
        String::from_utf8(bytes).expect("the built message is ASCII")
    }

    #[test]
    fn message_has_the_headers_receivers_expect() {
        let text = built("<p>Hello</p>");
        let headers = &text[..text.find("\r\n\r\n").expect("a header/body separator")];
        for name in [
            "Date: ",
            "Message-ID: <",
            "MIME-Version: 1.0",
            "From: ",
            "To: ",
            "Subject: ",
        ] {
            assert!(headers.contains(name), "missing {name:?} in:\n{headers}");
        }
        assert!(headers.contains("@mailproof.example>"));
        assert!(headers.contains("multipart/alternative"));
        assert!(
            headers.contains("Subject: =?utf-8?"),
            "non-ASCII subject is encoded: {headers}"
        );
    }

    #[test]
    fn text_alternative_is_derived_from_the_html() {
        let text = built("<html><body><h1>Big sale</h1><p>Everything must go</p></body></html>");
        let plain_at = text.find("Content-Type: text/plain").expect("a text part");
        let html_at = text.find("Content-Type: text/html").expect("an html part");
        assert!(
            plain_at < html_at,
            "text comes first so clients prefer the html"
        );
        let plain_part = &text[plain_at..html_at];
        assert!(plain_part.contains("Everything must go"), "{plain_part}");
        assert!(!plain_part.contains("<p>"));
    }

    #[test]
    fn bad_sender_address_is_an_error_naming_the_field() {
        let err = build_message("s", "<p>x</p>", "not an address", &[], "d.example")
            .expect_err("an invalid From is refused");
        assert!(err.to_string().contains("from"), "{err}");
    }
}
