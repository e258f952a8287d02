//! The intake rules as specifications, on the real client catalog.

use domain::{Catalog, Plan};
use store::Account;

use super::*;

fn catalog() -> Catalog {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/clients.toml");
    let text = std::fs::read_to_string(path).expect("the client catalog in data/");
    Catalog::parse(&text).expect("a valid catalog")
}

fn account(plan: Plan) -> Account {
    Account {
        id: 1,
        api_key: "k".into(),
        password_hash: String::new(),
        plan,
        monthly_test_limit: None,
        rate_limit_per_minute: None,
        allowed_clients: None,
        auto_inbox: None,
        default_clients: None,
        created_at: 0,
    }
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Two clients that are not catalog defaults.
fn non_defaults(catalog: &Catalog) -> Vec<String> {
    catalog
        .clients()
        .iter()
        .filter(|c| !c.default)
        .take(2)
        .map(|c| c.id.clone())
        .collect()
}

#[test]
fn a_test_naming_no_clients_gets_the_catalog_defaults() {
    let catalog = catalog();
    let account = account(Plan::Standard);
    let rules = ClientRules::new(&catalog, Some(&account));
    let defaults: Vec<String> = catalog.defaults().map(|c| c.id.clone()).collect();
    for mode in [OnInvalid::Refuse, OnInvalid::Skip] {
        assert_eq!(rules.resolve(&[], false, mode), Ok(defaults.clone()));
    }
}

#[test]
fn a_restricted_account_whose_clients_are_not_defaults_gets_all_of_its_clients_either_way() {
    let catalog = catalog();
    let own = non_defaults(&catalog);
    let mut account = account(Plan::Standard);
    account.allowed_clients = Some(own.clone());
    let rules = ClientRules::new(&catalog, Some(&account));
    assert!(rules.default_list().is_empty(), "GET default shows []");
    for mode in [OnInvalid::Refuse, OnInvalid::Skip] {
        assert_eq!(rules.resolve(&[], false, mode), Ok(own.clone()), "{mode:?}");
    }
}

#[test]
fn unknown_ids_are_refused_by_the_api_and_skipped_by_the_inbox() {
    let catalog = catalog();
    let account = account(Plan::Enterprise);
    let rules = ClientRules::new(&catalog, Some(&account));
    let first = catalog.clients()[0].id.clone();
    let requested = ids(&[&first, "nope", &first]);
    assert_eq!(
        rules.resolve(&requested, false, OnInvalid::Refuse),
        Err(IntakeError::InvalidClient(ids(&["nope"])))
    );
    assert_eq!(
        rules.resolve(&requested, false, OnInvalid::Skip),
        Ok(vec![first])
    );
}

#[test]
fn a_free_test_takes_only_free_clients() {
    let catalog = catalog();
    let account = account(Plan::Enterprise);
    let rules = ClientRules::new(&catalog, Some(&account));
    let paid = catalog
        .clients()
        .iter()
        .find(|c| !c.free)
        .expect("a paid client")
        .id
        .clone();
    assert_eq!(
        rules.resolve(std::slice::from_ref(&paid), true, OnInvalid::Refuse),
        Err(IntakeError::InvalidFreeClient(vec![paid.clone()]))
    );
    let skipped = rules
        .resolve(&[paid], true, OnInvalid::Skip)
        .expect("defaults");
    assert!(!skipped.is_empty());
    assert!(skipped
        .iter()
        .all(|id| catalog.get(id).is_some_and(|c| c.free)));
}

#[test]
fn an_account_without_usable_clients_gets_no_clients() {
    let catalog = catalog();
    let mut account = account(Plan::Free);
    let paid = catalog
        .clients()
        .iter()
        .find(|c| !c.free)
        .expect("a paid client");
    account.allowed_clients = Some(vec![paid.id.clone()]);
    let rules = ClientRules::new(&catalog, Some(&account));
    assert_eq!(
        rules.resolve(&[], true, OnInvalid::Skip),
        Err(IntakeError::NoClients)
    );
}

#[test]
fn ids_are_enterprise_only_bounded_and_required_on_reseller_plans() {
    let id = |s: &str| Some(s.to_owned());
    assert_eq!(
        Tenancy::resolve(None, id("c"), Plan::Standard, None, 0),
        Err(IntakeError::EnterpriseOnly {
            field: "customer_id",
            plan: Plan::Standard
        })
    );
    assert_eq!(
        Tenancy::resolve(id(&"r".repeat(256)), None, Plan::Enterprise, None, 0),
        Err(IntakeError::IdTooLong {
            field: "reference_id"
        })
    );
    assert_eq!(
        Tenancy::resolve(None, id(""), Plan::Reseller, None, 0),
        Err(IntakeError::MissingCustomerId {
            plan: Plan::Reseller
        })
    );
    let mut reseller = account(Plan::Reseller);
    reseller.monthly_test_limit = Some(3);
    // 2026-02-01T00:00:00Z
    let t = Tenancy::resolve(
        None,
        id("c"),
        Plan::Reseller,
        Some(&reseller),
        1_769_904_000,
    )
    .expect("valid");
    assert_eq!(t.monthly_limit, Some((3, "2026-02".to_owned())));
}

#[test]
fn custom_headers_follow_the_x_header_rules() {
    assert_eq!(check_custom_header("X-Campaign", "spring"), Ok(()));
    assert!(matches!(
        check_custom_header("Campaign", "x"),
        Err(IntakeError::HeaderName(_))
    ));
    assert!(matches!(
        check_custom_header("X-SVC-Thing", "x"),
        Err(IntakeError::ReservedHeader(_))
    ));
    assert!(matches!(
        check_custom_header("X-Long", &"y".repeat(991)),
        Err(IntakeError::HeaderTooLong(_))
    ));
    assert_eq!(check_custom_header("X-Long", &"y".repeat(990)), Ok(()));
    assert!(matches!(
        check_custom_header("X-Split", "a\r\nBcc: x"),
        Err(IntakeError::HeaderLineBreak(_))
    ));
    assert!(custom_headers_allowed(Plan::Standard).is_err());
    assert!(custom_headers_allowed(Plan::Reseller).is_ok());
}

#[test]
fn the_html_limit_is_the_renderers() {
    assert_eq!(check_html(&"a".repeat(MAX_HTML_BYTES)), Ok(()));
    assert_eq!(
        check_html(&"a".repeat(MAX_HTML_BYTES + 1)),
        Err(IntakeError::HtmlTooLarge {
            len: MAX_HTML_BYTES + 1
        })
    );
}

#[test]
fn ids_of_existing_v5_libraries_are_accepted_under_their_own_name() {
    let catalog = catalog();
    let mut account = account(Plan::Standard);
    account.allowed_clients = Some(ids(&["outlook2016_win", "iphone15_ios"]));
    let rules = ClientRules::new(&catalog, Some(&account));
    let requested = ids(&["outlook16", "iphone6p_9"]);
    assert_eq!(
        rules.resolve(&requested, false, OnInvalid::Refuse),
        Ok(requested.clone())
    );
    assert_eq!(
        rules.resolve(&ids(&["gmail_chr26_win"]), false, OnInvalid::Refuse),
        Err(IntakeError::InvalidClient(ids(&["gmail_chr26_win"]))),
        "an alias of a client the account may not use is refused"
    );
}

#[test]
fn callback_urls_are_http_with_a_host_and_no_credentials() {
    let public_only = |ip: std::net::IpAddr| !ip.is_loopback() && !ip.is_unspecified();
    assert_eq!(
        check_callback_url(" https://hooks.example.com/mailproof?x=1 ", public_only),
        Ok("https://hooks.example.com/mailproof?x=1".to_owned())
    );
    assert_eq!(
        check_callback_url("http://203.0.113.9:8080/h", public_only),
        Ok("http://203.0.113.9:8080/h".to_owned())
    );
    for (url, says) in [
        ("ftp://hooks.example.com/", "scheme"),
        ("hooks.example.com/h", "not a valid URL"),
        ("https://user:pw@hooks.example.com/", "credentials"),
        ("http://127.0.0.1:9/h", "internal address"),
        ("http://[::1]/h", "internal address"),
        ("http://2130706433/h", "internal address"),
        ("", "not a valid URL"),
    ] {
        match check_callback_url(url, public_only) {
            Err(IntakeError::CallbackUrl(reason)) => {
                assert!(reason.contains(says), "{url}: {reason}")
            }
            other => panic!("{url} was not refused: {other:?}"),
        }
    }
    let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_CALLBACK_URL));
    assert!(matches!(
        check_callback_url(&long, public_only),
        Err(IntakeError::CallbackUrl(reason)) if reason.contains("bytes")
    ));
    // The allow-list decides for addresses: an admitted loopback literal is fine.
    assert!(check_callback_url("http://127.0.0.2:80/h", |_| true).is_ok());
}
