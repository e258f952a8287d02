//! The one way a vocabulary type is read back from a stored or received string: an unknown
//! spelling is an error naming the type, the text and the spellings it knows, never a default.

use std::str::FromStr;

/// A string that names no value of a vocabulary type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a {what} (one of: {known})")]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
    pub known: String,
}

/// A vocabulary enum whose spelling strum derives (`EnumString` + `VariantNames`): the database
/// columns and JSON values it stands for.
pub trait Spelled: FromStr + strum::VariantNames + Sized {
    /// What the type is, for a person reading the error ("queue state").
    const WHAT: &'static str;

    /// The value `s` spells exactly, or an [`UnknownValue`].
    fn parse_known(s: &str) -> Result<Self, UnknownValue> {
        s.parse().map_err(|_| UnknownValue {
            what: Self::WHAT,
            value: s.to_string(),
            known: Self::VARIANTS.join(", "),
        })
    }
}

/// Declares a vocabulary enum with what every one has: the value traits, strum's spelling
/// (`Display`, `AsRefStr`, `IntoStaticStr`, `VariantNames`) and `as_str`. The item adds its own
/// derives (serde, `EnumString`, order) and its `#[strum(...)]` spelling rules.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $vis:vis enum $name:ident $body:tt) => {
        #[derive(
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
            Hash,
            strum::Display,
            strum::AsRefStr,
            strum::IntoStaticStr,
            strum::VariantNames,
        )]
        $(#[$meta])*
        $vis enum $name $body

        impl $name {
            /// The stored and serialised spelling.
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    };
}

pub(crate) use vocabulary;
