//! Email client emulation: turns the submitted HTML into what a given client would draw, following
//! that client's rule set (caniemail support facts plus hand-written per-family policy).

pub mod analyze;
pub mod behaviours;
pub mod branch;
pub mod color;
pub mod conditional;
pub mod css;
pub mod derive;
pub mod detect;
pub mod document;
pub mod features;
pub mod images_off;
pub mod probes;
pub mod rules;
pub mod tips;
pub mod transform;
pub mod vml;

pub use analyze::{analyze, Analysis, Finding, Severity};
pub use behaviours::{Behaviour, Behaviours, Implementation};
pub use rules::{DarkMode, RuleBook, RuleSet, Support};
pub use tips::{tips, Tip};
pub use transform::{transform, transform_variant, Transformed, ZoomToFit};

/// Everything that can go wrong loading rule sets or transforming an email.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    #[error("cannot read rule data at {path}: {source}")]
    RuleIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("rule set {name:?} is not valid TOML: {message}")]
    RuleSyntax { name: String, message: String },
    #[error("rule set {name:?} is invalid: {message}")]
    RuleInvalid { name: String, message: String },
    #[error(
        "client catalog and rule sets disagree: {0} (add the rule file or fix data/clients.toml)"
    )]
    Catalog(String),
    #[error("deriving rules: {0}")]
    Derive(String),
    #[error("client {client:?} names rule set {rules:?}, which the rule book does not have")]
    UnknownRuleSet { client: String, rules: String },
    #[error("email HTML is {len} bytes, more than the {max} bytes emulation accepts")]
    TooLarge { len: usize, max: usize },
    #[error("HTML rewriting failed for client {client:?}: {message}")]
    Rewrite { client: String, message: String },
}
