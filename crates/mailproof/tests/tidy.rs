//! The tree keeps its map true: every source file of a crate says what it is in a `//!` header,
//! and every path or item that ARCHITECTURE.md or a header names in backticks exists. A rename that
//! forgets the map fails here, not in a newcomer's head.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Every file under `dir` (the repository's own: no `target`, no dot directories).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

struct Tree {
    /// Every file, relative to the root, with `/` separators.
    files: Vec<String>,
    /// Each crate's Rust sources, joined.
    sources: BTreeMap<String, String>,
    /// All Rust sources, joined.
    all: String,
}

impl Tree {
    fn read() -> Tree {
        let root = Path::new(ROOT);
        let mut paths = Vec::new();
        for top in ["crates", "data", "scripts", "conformance", "docs", ".ci"] {
            files_under(&root.join(top), &mut paths);
        }
        let files: Vec<String> = paths
            .iter()
            .filter_map(|p| p.strip_prefix(root).ok())
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .chain(
                [
                    "README.md",
                    "ARCHITECTURE.md",
                    "BENCHMARKS.md",
                    "Cargo.toml",
                ]
                .map(String::from),
            )
            .collect();
        let mut sources: BTreeMap<String, String> = BTreeMap::new();
        for f in files.iter().filter(|f| f.ends_with(".rs")) {
            let Some(krate) = f.strip_prefix("crates/").and_then(|r| r.split('/').next()) else {
                continue;
            };
            let text = std::fs::read_to_string(root.join(f)).unwrap_or_default();
            sources
                .entry(krate.to_string())
                .or_default()
                .push_str(&text);
        }
        let all = sources.values().cloned().collect();
        Tree {
            files,
            sources,
            all,
        }
    }

    /// Whether `token` names something that exists, when it looks like a path (a file of a kind
    /// the tree holds, or a directory ending in `/`) or an item (`crate::...::name`). Anything
    /// else (a URL path, a placeholder, a config key) is not judged.
    fn dangling(&self, token: &str) -> Option<String> {
        let t = token.trim_end_matches([',', '.', ':', ')', '(']);
        // URL paths, placeholders, and what lies outside the repository (`../shared`) are not
        // judged.
        if t.starts_with(['/', '.'])
            || t.starts_with("shared/")
            || t.contains(['<', '*', '{', '…', ' ', '$'])
        {
            return None;
        }
        const KINDS: [&str; 9] = [
            ".rs", ".toml", ".md", ".sql", ".sh", ".py", ".js", ".css", ".html",
        ];
        let plain = t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
        if plain && KINDS.iter().any(|k| t.ends_with(k)) {
            let found = self
                .files
                .iter()
                .any(|f| f == t || f.ends_with(&format!("/{t}")));
            return (!found).then(|| format!("no file {t}"));
        }
        if plain && t.ends_with('/') && t.len() > 1 && t[..t.len() - 1].contains('/') {
            let found = self
                .files
                .iter()
                .any(|f| f.starts_with(t) || f.contains(&format!("/{t}")));
            return (!found).then(|| format!("no directory {t}"));
        }
        let (krate, rest) = t.split_once("::")?;
        let source = self.sources.get(krate)?;
        let last = rest
            .trim_end_matches("()")
            .rsplit("::")
            .next()
            .filter(|l| {
                !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })?;
        // The crate's own sources, or (a module of another crate named like this one, such as
        // `store`'s `analytics`) anywhere.
        let named = |text: &str| word_in(text, last);
        (!named(source) && !named(&self.all)).then(|| format!("no item {last} in crate {krate}"))
    }
}

fn word_in(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// The spans between backticks of `text`, code fences left out.
fn backticked(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        out.extend(line.split('`').skip(1).step_by(2));
    }
    out
}

#[test]
fn every_source_file_says_what_it_is() {
    let tree = Tree::read();
    let missing: Vec<&String> = tree
        .files
        .iter()
        .filter(|f| f.starts_with("crates/") && f.contains("/src/") && f.ends_with(".rs"))
        .filter(|f| {
            let text = std::fs::read_to_string(Path::new(ROOT).join(f)).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "source files without a `//!` header saying what they hold: {missing:?}"
    );
}

#[test]
fn the_map_names_only_what_exists() {
    let tree = Tree::read();
    let mut dangling = Vec::new();
    let architecture =
        std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    for token in backticked(&architecture) {
        if let Some(why) = tree.dangling(token) {
            dangling.push(format!("ARCHITECTURE.md: `{token}`: {why}"));
        }
    }
    for f in tree
        .files
        .iter()
        .filter(|f| f.starts_with("crates/") && f.ends_with(".rs"))
    {
        let text = std::fs::read_to_string(Path::new(ROOT).join(f)).unwrap_or_default();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!")))
            .collect();
        for token in backticked(&header) {
            if let Some(why) = tree.dangling(token) {
                dangling.push(format!("{f}: `{token}`: {why}"));
            }
        }
    }
    assert!(
        dangling.is_empty(),
        "names of things that do not exist (renamed or removed: mend the map):\n{}",
        dangling.join("\n")
    );
}

#[test]
fn the_check_itself_catches_a_renamed_file_and_item() {
    let tree = Tree::read();
    assert_eq!(tree.dangling("crates/store/src/queue.rs"), None);
    assert_eq!(tree.dangling("store::queue::Queue"), None);
    assert!(tree.dangling("crates/store/src/queues.rs").is_some());
    // Spelled in two parts, or this file itself would hold the word.
    let missing = format!("store::{}{}", "NoSuch", "Thing");
    assert!(tree.dangling(&missing).is_some());
    assert_eq!(
        tree.dangling("/v5/email/tests"),
        None,
        "a URL is not judged"
    );
}
