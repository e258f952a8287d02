//! Writes the `[derived]` table of every rule set the client catalog names, from caniemail's
//! `support.json`, keeping each file's hand-written part.
//!
//! Usage: `derive-rules <support.json> <rules dir>`; the catalog is `<rules dir>/../clients.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use emulate::derive::{render_file, Facts, HandWritten};
use emulate::features;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [support, dir] = args.as_slice() else {
        eprintln!("usage: derive-rules <support.json> <rules dir>");
        return ExitCode::from(2);
    };
    match run(Path::new(support), Path::new(dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("derive-rules: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(support_path: &Path, dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(support_path)
        .map_err(|e| format!("cannot read {}: {e}", support_path.display()))?;
    let support = Facts::parse(&text).map_err(|e| e.to_string())?;
    let unknown: Vec<&str> = support
        .slugs()
        .filter(|s| features::effect(s).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "features emulate::features does not know (add them first): {unknown:?}"
        ));
    }
    let catalog_path: PathBuf = dir.join("..").join("clients.toml");
    let catalog_text = std::fs::read_to_string(&catalog_path)
        .map_err(|e| format!("cannot read {}: {e}", catalog_path.display()))?;
    let catalog = domain::Catalog::parse(&catalog_text).map_err(|e| e.to_string())?;
    let mut wanted: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for c in catalog.clients() {
        wanted
            .entry(c.rules.as_str())
            .or_insert((c.family.as_str(), c.platform.as_str()));
    }
    for (name, (family, platform)) in wanted {
        let path = dir.join(format!("{name}.toml"));
        let hand = match std::fs::read_to_string(&path) {
            Ok(existing) => HandWritten::from_file(name, &existing).map_err(|e| e.to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let text = default_policy(family, platform);
                eprintln!("{name}: new rule set with a default policy: write its dark-mode source");
                HandWritten::from_file(name, &text).map_err(|e| e.to_string())?
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let derived = support.derive(
            &hand.family,
            &hand.platform,
            hand.policy.fallback_platform.as_deref(),
        );
        if derived.tested == 0 {
            return Err(format!(
                "{name}: caniemail has no facts for {}/{}",
                hand.family, hand.platform
            ));
        }
        let out = render_file(name, &hand, &derived).map_err(|e| e.to_string())?;
        std::fs::write(&path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!(
            "{name}: {} tested, {} unsupported, {} partial, {} unknown, {} from fallback",
            derived.tested,
            derived.unsupported.len(),
            derived.partial.len(),
            derived.unknown.len(),
            derived.from_fallback.len()
        );
    }
    Ok(())
}

/// The hand-written part of a new rule file; the empty source makes loading fail until a person
/// has checked the client's dark-mode behaviour.
fn default_policy(family: &str, platform: &str) -> String {
    format!(
        "family = \"{family}\"\nplatform = \"{platform}\"\n\n[policy]\ndark_mode = \"none\"\ndark_mode_source = \"\"\n"
    )
}
