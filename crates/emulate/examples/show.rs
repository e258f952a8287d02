//! Prints what one client would draw for one HTML file: `cargo run -p emulate --example show -- <client id> <file.html>`.

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [id, file] = args.as_slice() else {
        return Err("usage: show <client id> <file.html>".into());
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let catalog =
        domain::Catalog::parse(&std::fs::read_to_string(root.join("data/clients.toml"))?)?;
    let book = emulate::RuleBook::load(&root.join("data/rules"))?;
    let client = catalog.get(id).ok_or("no such client")?;
    let out = emulate::transform(&std::fs::read_to_string(file)?, client, &book)?;
    eprintln!(
        "rule set {}, colour scheme {:?}, removed {:?}",
        out.rule_set, out.color_scheme, out.removed
    );
    println!("{}", out.html);
    Ok(())
}
