//! Test access to the shared corpus of real-world email templates, read in place.

use std::path::{Path, PathBuf};

/// Every `*.html` template in `<repo>/../shared/corpus`, with its text. Panics (failing the test)
/// when the corpus is missing, so a test over it can never pass vacuously.
pub(crate) fn templates() -> Vec<(PathBuf, String)> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let entries = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("the shared corpus must exist at {}: {e}", corpus.display()));
    let mut templates: Vec<(PathBuf, String)> = entries
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "html"))
        .map(|path| {
            let html = std::fs::read_to_string(&path).expect("corpus templates are UTF-8");
            (path, html)
        })
        .collect();
    templates.sort();
    assert!(
        !templates.is_empty(),
        "no templates in {}",
        corpus.display()
    );
    templates
}
