//! Integration tests of client emulation against the shipped catalog and rule sets.

mod acceptance;
mod analysis;
mod behaviours;
mod corpus;
mod probes;
mod rulebook;

use std::path::PathBuf;

use domain::Catalog;
use emulate::RuleBook;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shipped catalog and rule book, validated together as start-up does.
fn shipped() -> (Catalog, RuleBook) {
    let text = std::fs::read_to_string(repo().join("data/clients.toml")).expect("catalog readable");
    let catalog = Catalog::parse(&text).expect("catalog valid");
    let book = RuleBook::load(&repo().join("data/rules")).expect("rule book loads");
    book.check_catalog(&catalog)
        .expect("catalog and rules agree");
    (catalog, book)
}

/// Word-engine profiles: Outlook for Windows classic and Windows Mail.
fn is_word_engine(book: &RuleBook, client: &domain::Client) -> bool {
    book.get(&client.rules)
        .expect("rule set exists")
        .policy
        .word_engine
}
