//! Loading and validating rule sets.

use emulate::{EmulateError, RuleBook, Support};

use super::{repo, shipped};

#[test]
fn every_rule_set_the_catalog_names_exists_and_matches_its_family() {
    let (catalog, book) = shipped();
    for c in catalog.clients() {
        let set = book.get(&c.rules).expect("rule set present");
        assert_eq!(set.family, c.family, "{}", c.id);
    }
}

#[test]
fn a_missing_rule_set_is_reported_with_the_client_that_names_it() {
    let (catalog, _) = shipped();
    let dir = tempfile::tempdir().expect("temp dir");
    let only = std::fs::read_to_string(repo().join("data/rules/apple-mail-macos.toml"))
        .expect("rule file readable");
    std::fs::write(dir.path().join("apple-mail-macos.toml"), only).expect("write");
    let book = RuleBook::load_rules(dir.path()).expect("one valid file loads");
    let err = book
        .check_catalog(&catalog)
        .expect_err("most rule sets are missing");
    let msg = err.to_string();
    assert!(matches!(err, EmulateError::Catalog(_)));
    assert!(
        msg.contains("gmail_chrome_web") && msg.contains("gmail-desktop-webmail"),
        "{msg}"
    );
}

#[test]
fn a_rule_file_naming_an_unknown_feature_does_not_load() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = std::fs::read_to_string(repo().join("data/rules/apple-mail-macos.toml"))
        .expect("rule file readable")
        .replace("unsupported = [", "unsupported = [\"css-made-up\", ");
    std::fs::write(dir.path().join("broken.toml"), text).expect("write");
    let err = RuleBook::load_rules(dir.path())
        .expect_err("must fail")
        .to_string();
    assert!(
        err.contains("broken") && err.contains("css-made-up"),
        "{err}"
    );
}

#[test]
fn derived_support_matches_the_reference_tables() {
    let (_, book) = shipped();
    let gmail = book.get("gmail-desktop-webmail").expect("gmail rules");
    assert_eq!(gmail.support("css-position"), Support::No);
    assert_eq!(gmail.support("css-display-flex"), Support::Yes);
    let apple = book.get("apple-mail-macos").expect("apple rules");
    assert_eq!(
        apple.support("css-at-media-prefers-color-scheme"),
        Support::Yes
    );
    assert!(!apple.removes("css-position"));
    let outlook = book.get("outlook-windows").expect("outlook rules");
    assert!(
        outlook.removes("css-max-width"),
        "partial max-width is emulated as unsupported"
    );
}

#[test]
fn rule_files_carry_their_source_and_licence_but_not_upstream_notes() {
    for entry in std::fs::read_dir(repo().join("data/rules")).expect("rules dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        assert!(text.contains("MIT License"), "{}", path.display());
        assert!(
            text.contains("6b086a3483a92078ba5226626e13db6f0a95a113"),
            "{}",
            path.display()
        );
        assert!(!text.contains("notes_by_num"), "{}", path.display());
    }
}

#[test]
fn committed_rule_files_are_exactly_what_derive_rules_writes() {
    use emulate::derive::{render_file, Facts, HandWritten};
    let support =
        std::fs::read_to_string(repo().join("../shared/reference/caniemail/support.json"))
            .expect("reference support.json (../shared/reference/caniemail) readable");
    let facts = Facts::parse(&support).expect("support.json parses");
    let (_, book) = shipped();
    for set in book.sets() {
        let path = repo().join(format!("data/rules/{}.toml", set.name));
        let text = std::fs::read_to_string(&path).expect("rule file readable");
        let hand = HandWritten::from_file(&set.name, &text).expect("hand-written part parses");
        let derived = facts.derive(
            &hand.family,
            &hand.platform,
            hand.policy.fallback_platform.as_deref(),
        );
        let regenerated = render_file(&set.name, &hand, &derived).expect("renders");
        assert_eq!(
            regenerated, text,
            "{} is stale: run cargo run -p emulate --bin derive-rules -- <support.json> data/rules",
            set.name
        );
    }
}
