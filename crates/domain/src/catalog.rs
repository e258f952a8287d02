//! The email client catalog (spec §2.6) plus what each profile needs to draw an email the way that
//! client does: engine, viewport, scale, colour scheme and the rule set that transforms the HTML.
//!
//! The catalog is data (`data/clients.toml`), parsed and validated here at start-up: a bad entry
//! stops the service with a message naming the entry, never a half-loaded catalog.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Category {
    Application,
    Mobile,
    Web,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Application => "Application",
            Category::Mobile => "Mobile",
            Category::Web => "Web",
        }
    }
}

/// The browser engine that draws a profile's screenshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Chromium, driven over the Chrome DevTools Protocol.
    Blink,
    /// Firefox ESR, driven over WebDriver BiDi.
    Gecko,
    /// WebKitGTK.
    Webkit,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Blink, Engine::Gecko, Engine::Webkit];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Blink => "blink",
            Engine::Gecko => "gecko",
            Engine::Webkit => "webkit",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ColorScheme {
    #[default]
    Light,
    Dark,
}

/// The viewport a profile renders at, in CSS pixels (portrait orientation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

/// One client profile: the §2.6 fields, then the emulation fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    // --- spec §2.6 -------------------------------------------------------------------------
    pub id: String,
    /// Client name (§2.6 `client`).
    pub client: String,
    /// Presentable name (§2.5 `display_name`).
    pub display_name: String,
    pub os: String,
    pub category: Category,
    /// Only for browser-based (webmail) clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<String>,
    #[serde(default)]
    pub rotate: bool,
    #[serde(default)]
    pub image_blocking: bool,
    #[serde(default)]
    pub free: bool,
    #[serde(default)]
    pub default: bool,

    // --- emulation -------------------------------------------------------------------------
    /// caniemail family key (e.g. `gmail`, `outlook`, `apple-mail`): where the support facts come from.
    pub family: String,
    /// caniemail platform key (e.g. `desktop-webmail`, `ios`, `windows`).
    pub platform: String,
    pub engine: Engine,
    pub viewport: Viewport,
    /// Device scale factor: screenshot pixel width = viewport width x scale.
    #[serde(default = "one")]
    pub scale: f32,
    /// A touch device (a phone or tablet). Not a layout switch: every profile lays the email out
    /// at its screen's width, as a mail app's view does (`jobs::render_request`); Chromium's
    /// mobile emulation, which honours an email's viewport meta and lays a page without one out
    /// 980 px wide, is not used for screenshots.
    #[serde(default)]
    pub mobile: bool,
    #[serde(default)]
    pub color_scheme: ColorScheme,
    /// Name of the rule set (a file under `data/rules/`) that turns the submitted HTML into what
    /// this client draws.
    pub rules: String,
    /// Client version the rules are evaluated against, e.g. `16` for Outlook 2016's
    /// `<!--[if gte mso 16]>` conditionals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The client's default body font stack, used where the email names none.
    pub default_font: String,

    // --- compatibility -----------------------------------------------------------------------
    /// Other ids this profile answers to: the ids existing v5 client libraries ship as their
    /// defaults (`outlook16`, `iphone6p_9`, ...), mapped to the closest profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Set on the entry an alias resolves to: the id of the profile it copies.
    #[serde(skip)]
    pub alias_of: Option<String>,
}

fn one() -> f32 {
    1.0
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("client catalog is not valid TOML: {0}")]
    Syntax(#[from] toml::de::Error),
    #[error("client catalog: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    client: Vec<Client>,
}

/// The validated client catalog, in file order.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The profiles, then one entry per alias (a copy of its profile under the alias id, never a
    /// default). `profiles` of them are profiles.
    entries: Vec<Client>,
    profiles: usize,
    by_id: BTreeMap<String, usize>,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl Catalog {
    pub fn parse(toml_text: &str) -> Result<Catalog, CatalogError> {
        let file: CatalogFile = toml::from_str(toml_text)?;
        let mut problems = Vec::new();
        let mut seen = HashSet::new();
        for c in &file.client {
            for id in std::iter::once(&c.id).chain(&c.aliases) {
                if !valid_id(id) {
                    problems.push(format!(
                        "client id {id:?} must be 1-64 characters of a-z, 0-9 and _"
                    ));
                }
                if !seen.insert(id.clone()) {
                    problems.push(format!("client id {id:?} appears twice"));
                }
            }
            if !(200..=2560).contains(&c.viewport.width)
                || !(200..=4096).contains(&c.viewport.height)
            {
                problems.push(format!(
                    "client {:?}: viewport {}x{} is outside 200..2560 x 200..4096",
                    c.id, c.viewport.width, c.viewport.height
                ));
            }
            if !(c.scale >= 1.0 && c.scale <= 4.0) {
                problems.push(format!(
                    "client {:?}: scale {} is outside 1..4",
                    c.id, c.scale
                ));
            }
            if c.category == Category::Web && c.browser.is_none() {
                problems.push(format!("client {:?}: a Web client names its browser", c.id));
            }
            if c.rules.is_empty() || c.family.is_empty() || c.platform.is_empty() {
                problems.push(format!(
                    "client {:?}: rules, family and platform must be set",
                    c.id
                ));
            }
        }
        if file.client.is_empty() {
            problems.push("no clients".to_string());
        } else if !file.client.iter().any(|c| c.default) {
            problems.push("no client is marked default".to_string());
        }
        if !problems.is_empty() {
            return Err(CatalogError::Invalid(problems.join("; ")));
        }
        let profiles = file.client.len();
        let aliases: Vec<Client> = file
            .client
            .iter()
            .flat_map(|c| {
                c.aliases.iter().map(|alias| Client {
                    id: alias.clone(),
                    default: false,
                    aliases: Vec::new(),
                    alias_of: Some(c.id.clone()),
                    ..c.clone()
                })
            })
            .collect();
        let mut entries = file.client;
        entries.extend(aliases);
        let by_id = entries
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.clone(), i))
            .collect();
        Ok(Catalog {
            entries,
            profiles,
            by_id,
        })
    }

    /// The profile with this id, or the entry for an alias (the profile under the alias id).
    pub fn get(&self, id: &str) -> Option<&Client> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    /// The clients named by `ids`, in their order, or every client for `None`: the tools'
    /// `--clients id,id` choice. An unknown id is refused by name.
    pub fn chosen(&self, ids: Option<&[String]>) -> Result<Vec<Client>, String> {
        match ids {
            None => Ok(self.clients().to_vec()),
            Some(ids) => ids
                .iter()
                .map(|id| {
                    self.get(id)
                        .cloned()
                        .ok_or_else(|| format!("unknown client {id}"))
                })
                .collect(),
        }
    }

    /// The profiles, without aliases: what the client list shows and "all clients" means.
    pub fn clients(&self) -> &[Client] {
        &self.entries[..self.profiles]
    }

    /// The profiles, then one entry per alias: every id a caller may send, as the client list
    /// shows them so that tools which keep only listed ids still use their built-in ones.
    pub fn entries(&self) -> &[Client] {
        &self.entries
    }

    pub fn defaults(&self) -> impl Iterator<Item = &Client> {
        self.clients().iter().filter(|c| c.default)
    }

    /// The rule set names the catalog refers to, so that start-up can check each one exists.
    pub fn rule_sets(&self) -> impl Iterator<Item = &str> {
        self.clients().iter().map(|c| c.rules.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[client]]
id = "gmail_web"
client = "Gmail"
display_name = "Gmail (Chrome)"
os = "Web"
category = "Web"
browser = "Chrome"
image_blocking = true
free = true
default = true
family = "gmail"
platform = "desktop-webmail"
engine = "blink"
viewport = { width = 1280, height = 800 }
rules = "gmail-desktop-webmail"
default_font = "Arial, sans-serif"
"#;

    #[test]
    fn a_minimal_catalog_parses() {
        let cat = Catalog::parse(ONE).expect("valid catalog");
        let c = cat.get("gmail_web").expect("client present");
        assert_eq!(c.engine, Engine::Blink);
        assert_eq!(c.scale, 1.0);
        assert!(!c.rotate);
    }

    #[test]
    fn an_alias_answers_under_its_own_id_with_its_profile_and_is_never_listed_or_default() {
        let cat = Catalog::parse(&ONE.replace(
            "default_font = \"Arial, sans-serif\"",
            "default_font = \"Arial, sans-serif\"\naliases = [\"gmail_chr26_win\"]",
        ))
        .expect("valid catalog");
        let alias = cat.get("gmail_chr26_win").expect("alias resolves");
        assert_eq!(alias.id, "gmail_chr26_win");
        assert_eq!(alias.alias_of.as_deref(), Some("gmail_web"));
        assert_eq!(alias.rules, "gmail-desktop-webmail");
        assert!(!alias.default);
        let listed: Vec<&str> = cat.clients().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(listed, ["gmail_web"]);
        assert_eq!(cat.defaults().count(), 1);
        let clash = ONE.replace(
            "default_font = \"Arial, sans-serif\"",
            "default_font = \"Arial, sans-serif\"\naliases = [\"gmail_web\"]",
        );
        let err = Catalog::parse(&clash).expect_err("an alias may not repeat an id");
        assert!(err.to_string().contains("appears twice"), "{err}");
    }

    #[test]
    fn duplicate_ids_and_bad_viewports_are_reported_together() {
        let twice = format!("{ONE}{}", ONE.replace("1280", "20"));
        let err = Catalog::parse(&twice).expect_err("must fail").to_string();
        assert!(err.contains("appears twice"), "{err}");
        assert!(err.contains("viewport 20x800"), "{err}");
    }

    #[test]
    fn the_shipped_catalog_is_valid() {
        let text = include_str!("../../../data/clients.toml");
        let cat = Catalog::parse(text).expect("data/clients.toml must be valid");
        assert!(
            cat.clients().len() >= 40,
            "issue 5 asks for at least 40 clients"
        );
    }
}
