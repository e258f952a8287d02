//! Turning a message sent to an auto-inbox address into an email test (spec §4.6): subject, HTML
//! part, the `X-SVC-*` control headers and, on enterprise plans, the other `X-` headers.

use std::collections::BTreeMap;

use domain::{Catalog, Plan, TestId, TestKind};
use intake::{ClientRules, OnInvalid, Tenancy, MAX_CUSTOM_HEADERS, MAX_HEADER_LINE};
use mail_parser::{Message, MessageParser};
use store::{Account, NewTest};

/// Why auto-inbox mail did not become a test; logged, and the message is not retried.
pub(crate) type NotCreated = String;

/// The email test for `raw`, sent to `account`'s auto-inbox (with `address_customer` after the `+`).
///
/// The rules are the API's (the `intake` crate); mail cannot be answered with an error, so what
/// may be passed over is: invalid `X-SVC-CLIENTS` ids and X-headers are skipped, and ids and
/// X-headers below an enterprise plan are ignored as if absent. What cannot (a reseller message
/// without a customer, no usable client, an email over the size limit) makes no test.
pub(crate) fn build_test(
    raw: &[u8],
    account: &Account,
    address_customer: Option<&str>,
    catalog: &Catalog,
    reprocess_quota: i64,
    now: i64,
) -> Result<NewTest, NotCreated> {
    let message = MessageParser::default()
        .parse(raw)
        .ok_or_else(|| "the message has no header or body mail-parser can read".to_owned())?;
    let headers = XHeaders::read(&message);
    let plan = account.plan;
    let enterprise = plan.is_enterprise();
    let free = plan == Plan::Free;

    let (reference_id, customer_id) = if enterprise {
        (
            headers.reference_id.clone(),
            headers
                .user_guid
                .clone()
                .or_else(|| address_customer.map(str::to_owned)),
        )
    } else {
        (None, None)
    };
    let tenancy = Tenancy::resolve(reference_id, customer_id, plan, Some(account), now)
        .map_err(|e| e.to_string())?;

    let rules = ClientRules::new(catalog, Some(account));
    let requested: Vec<String> = headers
        .clients
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect();
    let clients = rules
        .resolve(&requested, free, OnInvalid::Skip)
        .map_err(|e| e.to_string())?;
    let html = html(&message);
    intake::check_html(&html).map_err(|e| e.to_string())?;
    Ok(NewTest {
        id: TestId::generate().to_string(),
        account_id: account.id,
        kind: TestKind::Email,
        subject: subject(&message),
        html,
        created_at: now,
        reference_id: tenancy.reference_id,
        customer_id: tenancy.customer_id,
        headers: if enterprise {
            headers.custom
        } else {
            BTreeMap::new()
        },
        image_blocking: false,
        free_test: free,
        source_url: None,
        clients: rules.test_clients(&clients, false),
        spam_method: None,
        seed_key: None,
        spam_from_address: None,
        spam_filters: Vec::new(),
        reprocesses: reprocess_quota,
        monthly_limit: tenancy.monthly_limit,
        // Mail carries no callback URL; the account's default applies.
        callback_url: None,
        text_part: Some(has_text_part(&message)),
        sender: sender(&message),
    })
}

/// The `X-` headers of the top-level header block.
#[derive(Debug, Default)]
struct XHeaders {
    /// `X-SVC-CLIENTS`, when present on a line of legal length.
    clients: Option<String>,
    user_guid: Option<String>,
    reference_id: Option<String>,
    /// Every other `X-` header (not `X-SVC*`), by its name as written.
    custom: BTreeMap<String, String>,
}

impl XHeaders {
    fn read(message: &Message<'_>) -> XHeaders {
        let raw = message.raw_message.as_ref();
        let mut out = XHeaders::default();
        for header in message.headers() {
            let name = header.name.as_str();
            let lower = name.to_ascii_lowercase();
            if !lower.starts_with("x-") {
                continue;
            }
            let field = raw
                .get(header.offset_field as usize..header.offset_end as usize)
                .unwrap_or_default();
            let too_long = field
                .split(|&b| b == b'\n')
                .any(|line| line.strip_suffix(b"\r").unwrap_or(line).len() > MAX_HEADER_LINE);
            if too_long {
                tracing::info!(
                    header = name,
                    "auto-inbox: header line over 998 characters skipped"
                );
                continue;
            }
            let value = header
                .value
                .as_text()
                .map(|t| t.trim().to_owned())
                .unwrap_or_else(|| {
                    let raw_value = raw
                        .get(header.offset_start as usize..header.offset_end as usize)
                        .unwrap_or_default();
                    unfold(&String::from_utf8_lossy(raw_value))
                });
            match lower.as_str() {
                "x-svc-clients" => out.clients = Some(value),
                "x-svc-user-guid" => out.user_guid = Some(value),
                "x-svc-reference-id" => out.reference_id = Some(value),
                _ if lower.starts_with("x-svc") => {}
                _ => {
                    let room =
                        out.custom.len() < MAX_CUSTOM_HEADERS || out.custom.contains_key(name);
                    if room && intake::check_custom_header(name, &value).is_ok() {
                        out.custom.insert(name.to_owned(), value);
                    }
                }
            }
        }
        out
    }
}

/// A header value on one line: folding line breaks removed, outer space trimmed.
fn unfold(value: &str) -> String {
    value
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn subject(message: &Message<'_>) -> String {
    let subject = message.subject().map(str::trim).unwrap_or_default();
    if subject.is_empty() {
        return "(no subject)".to_owned();
    }
    subject.chars().take(MAX_HEADER_LINE).collect()
}

/// The message's first `From` as an inbox row names it: `Name <address>` (or either alone),
/// bounded like a header line.
fn sender(message: &Message<'_>) -> Option<String> {
    let from = message.from()?.first()?;
    let name = from.name().map(str::trim).filter(|n| !n.is_empty());
    let address = from.address().map(str::trim).filter(|a| !a.is_empty());
    let shown = match (name, address) {
        (Some(n), Some(a)) => format!("\"{}\" <{a}>", n.replace('"', "")),
        (Some(n), None) => n.to_string(),
        (None, Some(a)) => a.to_string(),
        (None, None) => return None,
    };
    Some(shown.chars().take(MAX_HEADER_LINE).collect())
}

/// The first HTML body part; a text-only message is wrapped in minimal, escaped HTML.
fn html(message: &Message<'_>) -> String {
    let html_part = (0..message.html_body_count() as u32)
        .filter_map(|i| message.html_part(i))
        .find(|p| p.is_text_html());
    if let Some(part) = html_part {
        if let Some(text) = part.text_contents() {
            return text.to_owned();
        }
    }
    let text = message.body_text(0).unwrap_or_default();
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body><pre style=\"white-space:pre-wrap;font-family:inherit\">{}</pre></body></html>\n",
        escape(&text)
    )
}

/// Whether the message carries a real text/plain body part (mail-parser also lists an HTML-only
/// message's HTML part among its text bodies, converted; that one does not count).
fn has_text_part(message: &Message<'_>) -> bool {
    (0..message.text_body_count() as u32)
        .filter_map(|i| message.text_part(i))
        .any(|p| p.is_text() && !p.is_text_html())
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/clients.toml");
        let text = std::fs::read_to_string(path).expect("the client catalog in data/");
        Catalog::parse(&text).expect("a valid catalog")
    }

    fn account(plan: Plan) -> Account {
        Account {
            id: 7,
            api_key: "k".into(),
            password_hash: String::new(),
            plan,
            monthly_test_limit: None,
            rate_limit_per_minute: None,
            allowed_clients: None,
            auto_inbox: Some("team".into()),
            default_clients: None,
            created_at: 0,
        }
    }

    fn two_client_ids(catalog: &Catalog) -> (String, String) {
        let ids: Vec<&str> = catalog.clients().iter().map(|c| c.id.as_str()).collect();
        (ids[0].to_owned(), ids[1].to_owned())
    }

    #[test]
    fn svc_headers_choose_clients_customer_and_reference_and_x_headers_are_kept() {
        let catalog = catalog();
        let (a, b) = two_client_ids(&catalog);
        let raw = format!(
            "From: a@example.org\r\nSubject: =?utf-8?q?Caf=C3=A9_launch?=\r\nX-SVC-CLIENTS: {a}, not a client!,{b},nope_unknown\r\nX-SVC-USER-GUID: cust-9\r\nX-SVC-REFERENCE-ID: ref-1\r\nX-Campaign: spring\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello</p>\r\n"
        );
        let test = build_test(
            raw.as_bytes(),
            &account(Plan::Enterprise),
            None,
            &catalog,
            5,
            1,
        )
        .expect("a test");
        let ids: Vec<&str> = test.clients.iter().map(|c| c.client_id.as_str()).collect();
        assert_eq!(ids, [a.as_str(), b.as_str()]);
        assert_eq!(test.subject, "Caf\u{e9} launch");
        assert!(test.html.contains("<p>Hello</p>"));
        assert_eq!(test.customer_id.as_deref(), Some("cust-9"));
        assert_eq!(test.reference_id.as_deref(), Some("ref-1"));
        assert_eq!(
            test.headers.get("X-Campaign").map(String::as_str),
            Some("spring")
        );
        assert!(test
            .headers
            .keys()
            .all(|k| !k.to_ascii_lowercase().starts_with("x-svc")));
        assert_eq!(test.reprocesses, 5);
        assert_eq!(test.text_part, Some(false), "an HTML-only message");
    }

    #[test]
    fn a_text_plain_alternative_is_recorded() {
        let raw = "Subject: s\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nHello\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>Hello</p>\r\n--b--\r\n";
        let test = build_test(
            raw.as_bytes(),
            &account(Plan::Enterprise),
            None,
            &catalog(),
            0,
            1,
        )
        .expect("a test");
        assert_eq!(test.text_part, Some(true));
        assert!(test.html.contains("<p>Hello</p>"));
    }

    #[test]
    fn without_valid_clients_the_catalog_defaults_are_used_and_long_lines_are_skipped() {
        let catalog = catalog();
        let (a, _) = two_client_ids(&catalog);
        let long = format!("{a},{}", "x".repeat(1000));
        let raw = format!(
            "Subject: s\r\nX-SVC-CLIENTS: {long}\r\nX-Long: {}\r\n\r\nplain <text> & more\r\n",
            "y".repeat(1000)
        );
        let test = build_test(
            raw.as_bytes(),
            &account(Plan::Enterprise),
            Some("from-address"),
            &catalog,
            0,
            1,
        )
        .expect("a test");
        let defaults: Vec<String> = catalog.defaults().map(|c| c.id.clone()).collect();
        let ids: Vec<String> = test.clients.iter().map(|c| c.client_id.clone()).collect();
        assert_eq!(ids, defaults);
        assert!(!test.headers.contains_key("X-Long"));
        assert_eq!(test.customer_id.as_deref(), Some("from-address"));
        assert!(
            test.html.contains("plain &lt;text&gt; &amp; more"),
            "{}",
            test.html
        );
        assert!(test.html.starts_with("<!DOCTYPE html>"));
    }

    #[test]
    fn x_headers_and_ids_are_ignored_below_enterprise_and_free_plans_get_free_clients() {
        let catalog = catalog();
        let raw = "Subject: s\r\nX-SVC-USER-GUID: c\r\nX-Campaign: spring\r\n\r\n<p>x</p>\r\n";
        let test =
            build_test(raw.as_bytes(), &account(Plan::Free), None, &catalog, 0, 1).expect("a test");
        assert!(test.headers.is_empty() && test.customer_id.is_none());
        assert!(test.free_test);
        assert!(test
            .clients
            .iter()
            .all(|c| catalog.get(&c.client_id).is_some_and(|cl| cl.free)));
    }

    #[test]
    fn a_restricted_account_whose_clients_are_not_defaults_gets_all_of_them_as_over_the_api() {
        let catalog = catalog();
        let own: Vec<String> = catalog
            .clients()
            .iter()
            .filter(|c| !c.default)
            .take(2)
            .map(|c| c.id.clone())
            .collect();
        let mut restricted = account(Plan::Standard);
        restricted.allowed_clients = Some(own.clone());
        let raw = b"Subject: s\r\n\r\n<p>x</p>\r\n";
        let test = build_test(raw, &restricted, None, &catalog, 0, 1).expect("a test");
        let ids: Vec<String> = test.clients.iter().map(|c| c.client_id.clone()).collect();
        assert_eq!(ids, own);
    }

    #[test]
    fn an_email_over_the_size_limit_is_not_made_into_a_test() {
        let catalog = catalog();
        let raw = format!(
            "Subject: s\r\nContent-Type: text/html\r\n\r\n<p>{}</p>\r\n",
            "x".repeat(intake::MAX_HTML_BYTES)
        );
        let refused = build_test(
            raw.as_bytes(),
            &account(Plan::Enterprise),
            None,
            &catalog,
            0,
            1,
        );
        assert!(refused.is_err_and(|e| e.contains("limit")));
    }

    #[test]
    fn a_reseller_message_without_customer_is_not_made_into_a_test() {
        let catalog = catalog();
        let raw = b"Subject: s\r\n\r\n<p>x</p>\r\n";
        assert!(build_test(raw, &account(Plan::Reseller), None, &catalog, 0, 1).is_err());
        assert!(build_test(raw, &account(Plan::Reseller), Some("c1"), &catalog, 0, 1).is_ok());
    }
}
