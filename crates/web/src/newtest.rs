//! The new-test form: pasted HTML, an uploaded `.eml`/`.html` file or a URL, clients from the
//! catalog by category with the account's defaults preselected, image blocking and an optional
//! spam test. The form becomes a §2.1 request body and goes through the API's own creation code,
//! so its rules and messages are the API's; each error is shown beside the field it is about.

use std::collections::HashSet;

use app::ErrorName;
use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};

use crate::pages::CATEGORIES;
use crate::session::Viewer;
use crate::{layout, page, WebState};

/// What the person typed, to show the form again with an error.
#[derive(Default)]
struct Draft {
    subject: String,
    html: String,
    url: String,
    clients: Option<HashSet<String>>,
    image_blocking: bool,
    spam: bool,
    spam_method: String,
    csrf: String,
    file_name: String,
}

/// Which field an API error is about.
fn field_of(name: ErrorName) -> &'static str {
    match name {
        ErrorName::NoSubject => "subject",
        ErrorName::NoSource | ErrorName::InvalidUrl | ErrorName::BadRequest => "source",
        ErrorName::NoClients | ErrorName::InvalidClient | ErrorName::InvalidFreeClient => "clients",
        ErrorName::InvalidSpamType | ErrorName::SmtpError | ErrorName::SmtpAuthenticationError => {
            "spam"
        }
        _ => "form",
    }
}

/// One problem of the form: the field it is about and what to do, in plain words.
type FieldError = (&'static str, String);

fn error_for<'a>(errs: &'a [FieldError], field: &str) -> Option<&'a str> {
    errs.iter()
        .find(|(f, _)| *f == field)
        .map(|(_, m)| m.as_str())
}

/// An API message as a sentence for a person: the API quotes field names in backticks.
fn plain(message: &str) -> String {
    message.replace('`', "")
}

/// Everything wrong with the form that can be told before asking the API, all at once.
fn form_errors(d: &Draft, has_upload: bool, clients_ticked: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if d.subject.trim().is_empty() {
        errs.push((
            "subject",
            "Give the email a subject (or upload an .eml file that has one).".to_string(),
        ));
    }
    let has_html = has_upload || !d.html.trim().is_empty();
    let has_url = !d.url.trim().is_empty();
    if has_html && has_url {
        errs.push((
            "source",
            "Give the email either as HTML (pasted or uploaded) or as a URL, not both: clear one of them.".to_string(),
        ));
    } else if !has_html && !has_url {
        errs.push((
            "source",
            "Paste the email's HTML, upload an .eml or .html file, or give a URL to fetch."
                .to_string(),
        ));
    } else if has_url && app::create::check_source_url(d.url.trim()).is_err() {
        errs.push((
            "source",
            format!(
                "“{}” is not a web address: give a full http:// or https:// URL, e.g. https://example.com/email.html.",
                d.url.trim()
            ),
        ));
    }
    if !clients_ticked {
        errs.push(("clients", "Pick at least one client.".to_string()));
    }
    errs
}

fn form_markup(state: &WebState, viewer: &Viewer, d: &Draft, errs: &[FieldError]) -> Markup {
    let rules = intake::ClientRules::new(&state.app.catalog, viewer.caller.account());
    let defaults: HashSet<String> = rules.default_list().into_iter().collect();
    let usable: Vec<&domain::Client> = state
        .app
        .catalog
        .clients()
        .iter()
        .filter(|c| rules.usable(c))
        .collect();
    // An empty default list means every client (spec §4.3).
    let checked = |id: &str| match &d.clients {
        Some(set) => set.contains(id),
        None => defaults.is_empty() || defaults.contains(id),
    };
    // The checkbox that takes the focus when the clients are in error: the first one shown.
    let first_client = CATEGORIES
        .iter()
        .find_map(|cat| usable.iter().find(|c| c.category == *cat))
        .map(|c| c.id.as_str());
    let e = |f: &str| error_for(errs, f);
    let invalid = |f: &str| e(f).map(|_| "true");
    let described = |f: &str| e(f).map(|_| format!("err-{f}"));
    html! {
        h1 { "New email test" }
        @if !errs.is_empty() {
            div.error-summary role="alert" {
                p { @if errs.len() == 1 { "One thing to fix:" } @else { (errs.len()) " things to fix:" } }
                ul { @for (f, m) in errs { li { a href={ "#err-" (f) } { (m) } } } }
            }
        }
        @if let Some(m) = e("form") { p.error id="err-form" { (m) } }
        form.stack method="post" action="/tests/new" enctype="multipart/form-data" novalidate {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label for="subject" { "Subject" }
            input id="subject" name="subject" type="text" value=(d.subject)
                aria-invalid=[e("subject").map(|_| "true")] aria-describedby=[described("subject")];
            @if let Some(m) = e("subject") { p.error id="err-subject" { (m) } }
            fieldset aria-describedby=[described("source")] {
                legend { "Email source (one of these)" }
                label for="html" { "Paste HTML" }
                textarea id="html" name="html" rows="8" aria-invalid=[invalid("source")] { (d.html) }
                label for="file" { "or upload an .eml or .html file" }
                input id="file" name="file" type="file" accept=".eml,.html,.htm,message/rfc822,text/html";
                @if !d.file_name.is_empty() { p.help { "Uploaded before: " (d.file_name) " (choose it again to resend)" } }
                label for="url" { "or give a URL to fetch" }
                input id="url" name="url" type="url" value=(d.url)
                    aria-invalid=[(invalid("source").is_some() && !d.url.trim().is_empty()).then_some("true")];
                @if let Some(m) = e("source") { p.error id="err-source" { (m) } }
            }
            fieldset.clients aria-describedby=[described("clients")] {
                legend { "Clients" }
                p.help { "Your account's defaults are preselected." }
                div.select-all {
                    button type="button" data-select="all" hidden { "Select all" }
                    button type="button" data-select="none" hidden { "Select none" }
                    span id="clients-count" role="status" {}
                }
                @if let Some(m) = e("clients") { p.error id="err-clients" { (m) } }
                // Folded: the defaults are usually what is wanted, and 57 checkboxes would be 57
                // Tab stops on the way to "Create test". Open when the clients are in error.
                details.client-list open[e("clients").is_some()] {
                summary { "Choose clients (" (usable.len()) ")" }
                @for cat in CATEGORIES {
                    @let in_cat: Vec<&&domain::Client> = usable.iter().filter(|c| c.category == cat).collect();
                    @if !in_cat.is_empty() {
                        fieldset {
                            legend { (cat.as_str()) }
                            div.select-all {
                                button type="button" data-select="all" hidden { "All" span.vh { " " (cat.as_str()) " clients" } }
                                button type="button" data-select="none" hidden { "None" span.vh { " of the " (cat.as_str()) " clients" } }
                            }
                            ul.checks {
                                @for c in in_cat {
                                    li {
                                        input type="checkbox" name="clients" value=(c.id) id={ "cl-" (c.id) } checked[checked(&c.id)]
                                            aria-invalid=[(Some(c.id.as_str()) == first_client).then(|| invalid("clients")).flatten()];
                                        label for={ "cl-" (c.id) } { (c.display_name) }
                                    }
                                }
                            }
                        }
                    }
                }
                }
            }
            div.check {
                input type="checkbox" id="image_blocking" name="image_blocking" value="1" checked[d.image_blocking];
                label for="image_blocking" { "Also take screenshots with images blocked" }
            }
            fieldset aria-describedby=[described("spam")] {
                legend { "Spam test" }
                div.check {
                    input type="checkbox" id="spam" name="spam" value="1" checked[d.spam] aria-invalid=[invalid("spam")];
                    label for="spam" { "Run the spam filters too" }
                }
                label for="spam_method" { "Method" }
                select id="spam_method" name="spam_method" {
                    option value="svc" selected[d.spam_method != "seed"] { "Sent by mailproof (svc)" }
                    option value="seed" selected[d.spam_method == "seed"] { "I send it to seed addresses (seed)" }
                }
                @if let Some(m) = e("spam") { p.error id="err-spam" { (m) } }
            }
            button type="submit" { "Create test" }
        }
    }
}

pub async fn form(State(state): State<WebState>, viewer: Viewer) -> Response {
    let main = form_markup(&state, &viewer, &Draft::default(), &[]);
    page(
        StatusCode::OK,
        layout("New test", crate::pages_chrome(&viewer), None, main),
    )
}

/// What an upload that is not an email looks like, from its first bytes: a person who picked the
/// wrong file is told which file they picked.
fn binary_kind(bytes: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 8] = [
        (b"%PDF-", "a PDF document"),
        (b"\x89PNG", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"GIF8", "a GIF image"),
        (b"PK\x03\x04", "a ZIP archive (or a Word or Excel file)"),
        (b"\xd0\xcf\x11\xe0", "an Outlook .msg or old Office file"),
        (b"RIFF", "a media file"),
        (b"\x1f\x8b", "a gzip archive"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|(_, kind)| *kind)
        .or_else(|| {
            bytes
                .iter()
                .take(8_192)
                .any(|b| *b == 0)
                .then_some("a binary file")
        })
}

/// Subject and HTML of an uploaded file: an `.eml` is parsed as MIME (its first HTML part, or its
/// text wrapped in HTML); an `.html` or `.htm` file is taken as HTML; anything else is refused, with
/// what it looks like.
fn from_upload(name: &str, bytes: &[u8]) -> Result<(Option<String>, String), String> {
    let lower = name.to_ascii_lowercase();
    let shown = if name.is_empty() { "The file" } else { name };
    if let Some(kind) = binary_kind(bytes) {
        return Err(format!(
            "{shown} is {kind}, not an email: upload the email as an .eml message or an .html file, or paste its HTML."
        ));
    }
    let extension = lower.rsplit_once('.').map(|(_, e)| e);
    if !matches!(extension, None | Some("eml" | "html" | "htm")) {
        return Err(format!(
            "{shown} is not an .eml or .html file: upload the email as an .eml message or an .html file, or paste its HTML."
        ));
    }
    if lower.ends_with(".eml") {
        let msg = mail_parser::MessageParser::default()
            .parse(bytes)
            .ok_or_else(|| format!("{name} is not a readable email message (.eml)"))?;
        let subject = msg
            .subject()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let html = match msg.body_html(0) {
            Some(h) => h.into_owned(),
            None => {
                let text = msg.body_text(0).unwrap_or_default();
                format!(
                    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body><pre style=\"white-space:pre-wrap\">{}</pre></body></html>",
                    maud::html! { (text) }.into_string()
                )
            }
        };
        return Ok((subject, html));
    }
    String::from_utf8(bytes.to_vec())
        .map(|h| (None, h))
        .map_err(|_| format!("{name} is not UTF-8 text; save it as UTF-8 HTML and upload it again"))
}

pub async fn submit(State(state): State<WebState>, viewer: Viewer, mut mp: Multipart) -> Response {
    let mut d = Draft {
        clients: Some(HashSet::new()),
        ..Draft::default()
    };
    let mut upload: Option<(String, Vec<u8>)> = None;
    let mut client_order: Vec<String> = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                return crate::page_error(
                    StatusCode::BAD_REQUEST,
                    "Form not read",
                    &format!("The form could not be read ({e}); the file may be too large. Try a smaller file or paste the HTML."),
                )
            }
        };
        let name = field.name().unwrap_or("").to_string();
        if name == "file" {
            let file_name = field.file_name().unwrap_or("").to_string();
            match field.bytes().await {
                Ok(b) if !b.is_empty() => upload = Some((file_name, b.to_vec())),
                Ok(_) => {}
                Err(e) => {
                    return crate::page_error(
                        StatusCode::BAD_REQUEST,
                        "File not read",
                        &format!("The uploaded file could not be read ({e}); it may be too large."),
                    )
                }
            }
            continue;
        }
        let value = field.text().await.unwrap_or_default();
        match name.as_str() {
            "csrf" => d.csrf = value,
            "subject" => d.subject = value,
            "html" => d.html = value,
            "url" => d.url = value,
            "clients" => {
                client_order.push(value.clone());
                if let Some(s) = d.clients.as_mut() {
                    s.insert(value);
                }
            }
            "image_blocking" => d.image_blocking = true,
            "spam" => d.spam = true,
            "spam_method" => d.spam_method = value,
            _ => {}
        }
    }
    if let Err(r) = viewer.check_csrf(&d.csrf) {
        return r;
    }
    let show = |d: &Draft, errs: Vec<FieldError>| {
        page(
            StatusCode::BAD_REQUEST,
            layout(
                "New test",
                crate::pages_chrome(&viewer),
                None,
                form_markup(&state, &viewer, d, &errs),
            ),
        )
    };
    let mut subject = d.subject.trim().to_string();
    let mut html_src = (!d.html.trim().is_empty()).then(|| d.html.clone());
    let mut upload_error = None;
    if let Some((file_name, bytes)) = &upload {
        d.file_name = file_name.clone();
        match from_upload(file_name, bytes) {
            Ok((file_subject, h)) => {
                if subject.is_empty() {
                    subject = file_subject.unwrap_or_default();
                    d.subject = subject.clone();
                }
                html_src = html_src.or(Some(h));
            }
            Err(m) => upload_error = Some(m),
        }
    }
    let mut errs = form_errors(&d, upload.is_some(), !client_order.is_empty());
    if let Some(m) = upload_error {
        // The file's problem is the source's problem; the others are told with it.
        errs.retain(|(f, _)| *f != "source");
        errs.push(("source", m));
    }
    if !errs.is_empty() {
        return show(&d, errs);
    }
    let spam = if d.spam {
        let method = if d.spam_method.is_empty() {
            "svc"
        } else {
            d.spam_method.as_str()
        };
        match method.parse::<domain::SpamMethod>() {
            Ok(method) => Some(app::create::SpamRequest {
                method,
                ..app::create::SpamRequest::default()
            }),
            Err(()) => {
                let m = format!("spam method {method:?} is not one of svc, smtp, seed");
                return show(&d, vec![(field_of(ErrorName::InvalidSpamType), m)]);
            }
        }
    } else {
        None
    };
    let url = d.url.trim();
    let req = app::create::TestRequest {
        subject: Some(subject),
        url: (html_src.is_none() && !url.is_empty()).then(|| url.to_string()),
        html: html_src,
        // Never empty here: an empty list means "my defaults", a form with nothing ticked means
        // none, and form_errors said so.
        clients: client_order.clone(),
        image_blocking: d.image_blocking,
        spam,
        ..app::create::TestRequest::default()
    };
    match app::create::create_test(&state.app, &viewer.caller, domain::TestKind::Email, req).await {
        Ok(created) => {
            let id = created.id.as_str();
            if !created.stored {
                let main = html! {
                    h1 { "Checked, not stored" }
                    p role="status" { "The sandbox accepted this test (it would have the id " code { (id) } "), but nothing was stored: sign in with your account to run tests." }
                    p { a href="/tests/new" { "Back to the form" } }
                };
                return page(
                    StatusCode::OK,
                    layout("Checked", crate::pages_chrome(&viewer), None, main),
                );
            }
            Redirect::to(&format!("/tests/{id}")).into_response()
        }
        Err(e) => show(&d, vec![(field_of(e.name), plain(&e.message))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eml_upload_gives_its_subject_and_html_part() {
        let eml = b"Subject: Spring sale\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nplain\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>Hello <b>sale</b></p>\r\n--b--\r\n";
        let (subject, html) = from_upload("mail.EML", eml).expect("parsed");
        assert_eq!(subject.as_deref(), Some("Spring sale"));
        assert!(html.contains("<b>sale</b>"), "{html}");
        let (subject, html) = from_upload("page.html", b"<p>x</p>").expect("html");
        assert_eq!((subject, html.as_str()), (None, "<p>x</p>"));
        assert!(from_upload("bad.html", &[0xff, 0xfe]).is_err());
    }

    #[test]
    fn a_file_that_is_not_an_email_is_refused_saying_what_it_is() {
        let pdf =
            from_upload("invoice.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj").expect_err("a PDF");
        assert!(
            pdf.starts_with("invoice.pdf is a PDF document, not an email"),
            "{pdf}"
        );
        // The name does not hide what the file is.
        let renamed = from_upload("email.html", b"%PDF-1.4 ...").expect_err("a PDF");
        assert!(renamed.contains("a PDF document"), "{renamed}");
        let png = from_upload("shot.png", b"\x89PNG\r\n\x1a\n....").expect_err("a PNG");
        assert!(png.contains("a PNG image"), "{png}");
        let text = from_upload("notes.txt", b"hello").expect_err("a text file");
        assert!(text.contains("not an .eml or .html file"), "{text}");
        assert!(from_upload("email.htm", b"<p>x</p>").is_ok());
    }

    #[test]
    fn a_bad_url_is_told_with_the_other_problems() {
        let d = Draft {
            url: "example.com/email".into(),
            ..Draft::default()
        };
        let errs = form_errors(&d, false, false);
        let fields: Vec<&str> = errs.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["subject", "source", "clients"]);
        assert!(errs[1].1.contains("is not a web address"), "{errs:?}");
    }

    #[test]
    fn every_form_error_is_told_at_once_in_plain_words() {
        let empty = Draft::default();
        let fields: Vec<&str> = form_errors(&empty, false, false)
            .iter()
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(fields, ["subject", "source", "clients"]);
        let both = Draft {
            subject: "S".into(),
            html: "<p>x</p>".into(),
            url: "https://example.com/".into(),
            ..Draft::default()
        };
        let errs = form_errors(&both, false, true);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].0, "source");
        assert!(errs[0].1.contains("not both"), "{}", errs[0].1);
        let upload_and_url = Draft {
            url: "https://example.com/".into(),
            ..both
        };
        assert_eq!(form_errors(&upload_and_url, true, true).len(), 1);
        assert_eq!(plain("send `clients`: an array"), "send clients: an array");
    }

    #[test]
    fn api_errors_land_next_to_their_field() {
        assert_eq!(field_of(ErrorName::NoSubject), "subject");
        assert_eq!(field_of(ErrorName::InvalidUrl), "source");
        assert_eq!(field_of(ErrorName::InvalidClient), "clients");
        assert_eq!(field_of(ErrorName::ServerError), "form");
    }
}
