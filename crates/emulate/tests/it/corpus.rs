//! Every real-world template of the shared corpus goes through every profile.

use emulate::transform;

use super::{repo, shipped};

#[test]
fn every_corpus_template_transforms_through_every_profile() {
    let (catalog, book) = shipped();
    let dir = repo().join("../shared/corpus");
    let mut templates = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus dir (../shared/corpus) readable") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("html") {
            continue;
        }
        let html = std::fs::read_to_string(&path).expect("template readable");
        templates += 1;
        for c in catalog.clients() {
            let out = transform(&html, c, &book)
                .unwrap_or_else(|e| panic!("{} through {}: {e}", path.display(), c.id));
            assert!(
                !out.html.trim().is_empty(),
                "{} through {}",
                path.display(),
                c.id
            );
            assert!(
                !out.html.contains("<script"),
                "{} through {}",
                path.display(),
                c.id
            );
        }
    }
    assert!(
        templates >= 20,
        "expected the shared corpus, found {templates} templates"
    );
}
