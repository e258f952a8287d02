//! Reads the email to check: an HTML file, or a whole message (`.eml`) whose subject and HTML
//! part make the test (the raw message is kept for seed spam tests, which send it as it is).

use std::path::Path;

use crate::error::CliError;

pub struct Email {
    pub subject: String,
    pub html: String,
    /// The message as given, for `.eml` inputs.
    pub raw: Option<Vec<u8>>,
    /// The `.eml`'s From address, if it has one.
    pub from: Option<String>,
}

pub fn load(path: &Path, subject: Option<&str>) -> Result<Email, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::io("cannot read the email", path, e))?;
    let is_eml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("eml"));
    let mut email = if is_eml {
        from_eml(&bytes).ok_or_else(|| {
            CliError::Usage(format!(
                "{} is not a MIME message with an HTML or text part; give the HTML file instead",
                path.display()
            ))
        })?
    } else {
        let html = String::from_utf8(bytes).map_err(|_| {
            CliError::Usage(format!(
                "{} is not UTF-8; convert it (e.g. iconv -t utf-8) or give the message as .eml, whose charset is declared",
                path.display()
            ))
        })?;
        Email {
            subject: title(&html).unwrap_or_default(),
            html,
            raw: None,
            from: None,
        }
    };
    if let Some(s) = subject {
        email.subject = s.to_string();
    }
    if email.subject.trim().is_empty() {
        email.subject = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "mailproof check".into());
    }
    Ok(email)
}

fn from_eml(bytes: &[u8]) -> Option<Email> {
    let msg = mail_parser::MessageParser::default().parse(bytes)?;
    // Without an HTML part mail-parser turns the text part into HTML, as a client would show it.
    let html = msg.body_html(0)?.into_owned();
    let from = msg
        .from()
        .and_then(|a| a.first())
        .and_then(|a| a.address())
        .map(str::to_owned);
    Some(Email {
        subject: msg.subject().unwrap_or_default().to_string(),
        html,
        raw: Some(bytes.to_vec()),
        from,
    })
}

/// The text of the first `<title>` element, whitespace collapsed.
fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let text = html[start..end].split_whitespace().collect::<Vec<_>>();
    (!text.is_empty()).then(|| text.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_comes_from_the_title_then_the_file_name() {
        let dir = tempfile::tempdir().expect("dir");
        let p = dir.path().join("news.html");
        std::fs::write(
            &p,
            "<html><head><TITLE> Spring\n sale </TITLE></head><p>x</p>",
        )
        .expect("write");
        let e = load(&p, None).expect("load");
        assert_eq!(e.subject, "Spring sale");
        assert!(e.raw.is_none());
        std::fs::write(&p, "<p>no title</p>").expect("write");
        assert_eq!(load(&p, None).expect("load").subject, "news.html");
        assert_eq!(load(&p, Some("Given")).expect("load").subject, "Given");
    }

    #[test]
    fn an_eml_gives_its_subject_html_part_and_sender() {
        let dir = tempfile::tempdir().expect("dir");
        let p = dir.path().join("m.eml");
        let msg = "From: News <news@example.com>\r\nTo: a@example.com\r\nSubject: =?utf-8?q?Caf=C3=A9?=\r\n\
                   MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n\
                   --b\r\nContent-Type: text/plain\r\n\r\nplain\r\n\
                   --b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>rich</p>\r\n--b--\r\n";
        std::fs::write(&p, msg).expect("write");
        let e = load(&p, None).expect("load");
        assert_eq!(e.subject, "Café");
        assert!(e.html.contains("<p>rich</p>"), "{}", e.html);
        assert_eq!(e.from.as_deref(), Some("news@example.com"));
        assert_eq!(e.raw.as_deref(), Some(msg.as_bytes()));
    }

    #[test]
    fn html_that_is_not_utf8_is_refused_with_a_way_out() {
        let dir = tempfile::tempdir().expect("dir");
        let p = dir.path().join("latin1.html");
        std::fs::write(&p, b"<p>caf\xe9</p>").expect("write");
        let e = load(&p, None).err().expect("refused").to_string();
        assert!(e.contains("not UTF-8") && e.contains(".eml"), "{e}");
    }
}
