//! Test kinds, screenshot variants and states (spec §2.4, §2.5, §3).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use strum::EnumString;

use crate::spelling::{vocabulary, Spelled, UnknownValue};
use crate::{ColorScheme, TestId};

vocabulary! {
    #[derive(Serialize, Deserialize, EnumString)]
    pub enum TestKind {
        #[serde(rename = "email-test")]
        #[strum(serialize = "email-test")]
        Email,
        #[serde(rename = "spam-test")]
        #[strum(serialize = "spam-test")]
        Spam,
    }
}

impl Spelled for TestKind {
    const WHAT: &'static str = "test kind";
}

impl TestKind {
    pub fn parse(s: &str) -> Option<TestKind> {
        s.parse().ok()
    }
}

vocabulary! {
    /// One picture of a client's rendering (spec §2.5 `screenshots` keys).
    #[derive(PartialOrd, Ord, Serialize, Deserialize, EnumString)]
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum Variant {
        Default,
        NoImages,
        Horizontal,
        HorizontalNoImages,
    }
}

impl Spelled for Variant {
    const WHAT: &'static str = "screenshot variant";
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Default,
        Variant::NoImages,
        Variant::Horizontal,
        Variant::HorizontalNoImages,
    ];

    pub fn parse(s: &str) -> Option<Variant> {
        s.parse().ok()
    }

    pub fn blocks_images(self) -> bool {
        matches!(self, Variant::NoImages | Variant::HorizontalNoImages)
    }

    pub fn is_rotated(self) -> bool {
        matches!(self, Variant::Horizontal | Variant::HorizontalNoImages)
    }

    /// The variant's name for a person, as every page shows it.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Default => "Default",
            Variant::NoImages => "Images off",
            Variant::Horizontal => "Landscape",
            Variant::HorizontalNoImages => "Landscape, images off",
        }
    }

    /// The variants a client gets in a test, per the §2.5 rules.
    pub fn for_client(
        test_blocks_images: bool,
        client_blocks_images: bool,
        rotate: bool,
    ) -> Vec<Variant> {
        let no_images = test_blocks_images && client_blocks_images;
        let mut v = vec![Variant::Default];
        if no_images {
            v.push(Variant::NoImages);
        }
        if rotate {
            v.push(Variant::Horizontal);
        }
        if no_images && rotate {
            v.push(Variant::HorizontalNoImages);
        }
        v
    }
}

/// One image file of a client's rendering in a test: a variant's screenshot, a thumbnail of the
/// default one, or the highlight image of a visual diff. Its [`Picture::name`] is the file name
/// (without `.png`) in storage and in the screenshot URLs (spec §2.5), made and read only here so
/// that the renderer that writes a file and the pages and API that link to it name it alike.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Picture {
    Shot(Variant),
    /// The top of the default screenshot, small (`thumbnail`).
    Thumbnail,
    /// The whole default screenshot, narrowed (`full_thumbnail`, since v5.0.1).
    FullThumbnail,
    /// The top of another variant's screenshot (`thumbnail-<variant>`; stored for `no_images`,
    /// the gallery's images-off view); not in the spec's results.
    ThumbnailOf(Variant),
    /// Another variant's whole screenshot, narrowed (`full_thumbnail-<variant>`).
    FullThumbnailOf(Variant),
    /// The highlight image of the diff of test `base`'s `variant` screenshot against the same
    /// screenshot of the test it is stored beside: `diff-<base>-<variant>`.
    Diff {
        base: String,
        variant: Variant,
    },
    /// The picture of an inbox row (`inbox-<row>-<scheme>`: a row id of data/inbox-rows.toml),
    /// stored under the test's [`INBOX_ROWS_CLIENT`] rather than a client, since one row stands
    /// for every client of a family.
    InboxRow {
        row: String,
        scheme: ColorScheme,
    },
}

/// Where a test's inbox-row pictures are kept in place of a client id (no client id is this).
pub const INBOX_ROWS_CLIENT: &str = "inbox";

impl Picture {
    const THUMBNAIL: &'static str = "thumbnail";
    const FULL_THUMBNAIL: &'static str = "full_thumbnail";
    const DIFF_PREFIX: &'static str = "diff-";
    const INBOX_PREFIX: &'static str = "inbox-";

    /// The top card of `variant`'s screenshot: the spec's `thumbnail` for the default one.
    pub fn thumbnail(variant: Variant) -> Picture {
        match variant {
            Variant::Default => Picture::Thumbnail,
            v => Picture::ThumbnailOf(v),
        }
    }

    /// `variant`'s whole screenshot narrowed: the spec's `full_thumbnail` for the default one.
    pub fn full_thumbnail(variant: Variant) -> Picture {
        match variant {
            Variant::Default => Picture::FullThumbnail,
            v => Picture::FullThumbnailOf(v),
        }
    }

    /// The file name without `.png`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The picture a file name (without `.png`) names; `None` for anything this service never
    /// stores, such as a diff whose base is not a test id.
    pub fn parse(name: &str) -> Option<Picture> {
        match name {
            Picture::THUMBNAIL => return Some(Picture::Thumbnail),
            Picture::FULL_THUMBNAIL => return Some(Picture::FullThumbnail),
            _ => {}
        }
        for (prefix, full) in [(Picture::THUMBNAIL, false), (Picture::FULL_THUMBNAIL, true)] {
            if let Some(variant) = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('-'))
            {
                let variant = Variant::parse(variant).filter(|v| *v != Variant::Default)?;
                return Some(if full {
                    Picture::FullThumbnailOf(variant)
                } else {
                    Picture::ThumbnailOf(variant)
                });
            }
        }
        if let Some(rest) = name.strip_prefix(Picture::DIFF_PREFIX) {
            let (base, variant) = rest.split_once('-')?;
            TestId::parse(base)?;
            return Some(Picture::Diff {
                base: base.to_string(),
                variant: Variant::parse(variant)?,
            });
        }
        if let Some(rest) = name.strip_prefix(Picture::INBOX_PREFIX) {
            let (row, scheme) = rest.rsplit_once('-')?;
            let scheme = match scheme {
                "light" => ColorScheme::Light,
                "dark" => ColorScheme::Dark,
                _ => return None,
            };
            let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
            if row.is_empty() || row.len() > 64 || !row.chars().all(plain) {
                return None;
            }
            return Some(Picture::InboxRow {
                row: row.to_string(),
                scheme,
            });
        }
        Variant::parse(name).map(Picture::Shot)
    }
}

impl fmt::Display for Picture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Picture::Shot(v) => f.write_str(v.as_str()),
            Picture::Thumbnail => f.write_str(Picture::THUMBNAIL),
            Picture::FullThumbnail => f.write_str(Picture::FULL_THUMBNAIL),
            Picture::ThumbnailOf(v) => write!(f, "{}-{v}", Picture::THUMBNAIL),
            Picture::FullThumbnailOf(v) => write!(f, "{}-{v}", Picture::FULL_THUMBNAIL),
            Picture::Diff { base, variant } => {
                write!(f, "{}{base}-{variant}", Picture::DIFF_PREFIX)
            }
            Picture::InboxRow { row, scheme } => {
                let scheme = match scheme {
                    ColorScheme::Light => "light",
                    ColorScheme::Dark => "dark",
                };
                write!(f, "{}{row}-{scheme}", Picture::INBOX_PREFIX)
            }
        }
    }
}

vocabulary! {
    /// A client's screenshot state within an email test (spec §3).
    #[derive(Serialize, Deserialize, EnumString)]
    pub enum ScreenshotStatus {
        Pending,
        Processing,
        Complete,
        Bounced,
    }
}

impl Spelled for ScreenshotStatus {
    const WHAT: &'static str = "screenshot status";
}

impl ScreenshotStatus {
    pub fn parse(s: &str) -> Option<ScreenshotStatus> {
        s.parse().ok()
    }

    /// Complete or Bounced: nothing more will happen without a reprocess.
    pub fn is_final(self) -> bool {
        matches!(self, ScreenshotStatus::Complete | ScreenshotStatus::Bounced)
    }
}

vocabulary! {
    /// One filter's answer about a message (spec §2.8 `spam`: 1 spam, 0 neutral, −1 not spam).
    /// The wire integer is read and written only through [`SpamVerdict::from_wire`] and
    /// [`SpamVerdict::wire`], so the API, the webhooks and the pages cannot disagree on its meaning.
    /// Its strum spelling is a stable name for styles and scripts.
    #[strum(serialize_all = "kebab-case")]
    pub enum SpamVerdict {
        Spam,
        Neutral,
        NotSpam,
    }
}

impl SpamVerdict {
    pub const ALL: [SpamVerdict; 3] = [
        SpamVerdict::Spam,
        SpamVerdict::Neutral,
        SpamVerdict::NotSpam,
    ];

    /// The verdict a §2.8 integer (as stored) stands for; any other number is refused, so a
    /// score written where a verdict belongs is found rather than read as a verdict.
    pub fn from_wire(n: i64) -> Result<SpamVerdict, UnknownValue> {
        SpamVerdict::ALL
            .into_iter()
            .find(|v| v.wire() == n)
            .ok_or_else(|| UnknownValue {
                what: "spam verdict",
                value: n.to_string(),
                known: "1, 0, -1".into(),
            })
    }

    pub fn wire(self) -> i64 {
        match self {
            SpamVerdict::Spam => 1,
            SpamVerdict::Neutral => 0,
            SpamVerdict::NotSpam => -1,
        }
    }

    /// What a person reads.
    pub fn label(self) -> &'static str {
        match self {
            SpamVerdict::Spam => "Spam",
            SpamVerdict::Neutral => "Neutral",
            SpamVerdict::NotSpam => "Not spam",
        }
    }
}

impl Serialize for SpamVerdict {
    /// As the §2.8 integer, the only form a verdict has in JSON.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(self.wire())
    }
}

vocabulary! {
    /// A spam filter profile's type (spec §2.7 `type`): `b2b` is typical of corporate systems, `b2c`
    /// of personal accounts.
    #[derive(Serialize, Deserialize, EnumString)]
    #[serde(rename_all = "lowercase")]
    #[strum(serialize_all = "lowercase")]
    pub enum FilterType {
        B2b,
        B2c,
    }
}

impl Spelled for FilterType {
    const WHAT: &'static str = "spam filter type";
}

vocabulary! {
    /// How a spam test's message reaches the filters (spec §1). Read leniently from callers
    /// ([`FromStr`]); stored and shown in its lower-case spelling.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    #[strum(serialize_all = "lowercase")]
    pub enum SpamMethod {
        Seed,
        Smtp,
        Svc,
    }
}

impl Spelled for SpamMethod {
    const WHAT: &'static str = "spam method";
}

impl FromStr for SpamMethod {
    type Err = ();

    fn from_str(s: &str) -> Result<SpamMethod, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "seed" => Ok(SpamMethod::Seed),
            "smtp" => Ok(SpamMethod::Smtp),
            // `eoa` is the older name of the service's own sending method (spec §2.1).
            "svc" | "eoa" => Ok(SpamMethod::Svc),
            _ => Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantNames;

    use super::*;

    #[test]
    fn spam_verdicts_keep_the_section_2_8_meaning_both_ways() {
        assert_eq!(SpamVerdict::from_wire(1), Ok(SpamVerdict::Spam));
        assert_eq!(SpamVerdict::from_wire(0), Ok(SpamVerdict::Neutral));
        assert_eq!(SpamVerdict::from_wire(-1), Ok(SpamVerdict::NotSpam));
        assert_eq!(SpamVerdict::NotSpam.label(), "Not spam");
        assert_eq!(SpamVerdict::NotSpam.as_str(), "not-spam");
        for v in SpamVerdict::ALL {
            assert_eq!(SpamVerdict::from_wire(v.wire()), Ok(v));
            assert_eq!(serde_json::to_value(v).ok(), Some(v.wire().into()));
        }
    }

    #[test]
    fn a_stored_number_that_is_no_verdict_is_refused() {
        let err = SpamVerdict::from_wire(5).expect_err("a score is not a verdict");
        assert_eq!(
            err.to_string(),
            "\"5\" is not a spam verdict (one of: 1, 0, -1)"
        );
    }

    #[test]
    fn stored_spellings_read_back_and_stay_what_the_database_and_spec_hold() {
        let kinds: Vec<&str> = TestKind::VARIANTS.to_vec();
        assert_eq!(kinds, ["email-test", "spam-test"]);
        assert_eq!(
            Variant::VARIANTS,
            ["default", "no_images", "horizontal", "horizontal_no_images"]
        );
        assert_eq!(
            ScreenshotStatus::VARIANTS,
            ["Pending", "Processing", "Complete", "Bounced"]
        );
        assert_eq!(FilterType::VARIANTS, ["b2b", "b2c"]);
        assert_eq!(SpamMethod::VARIANTS, ["seed", "smtp", "svc"]);
        for k in [TestKind::Email, TestKind::Spam] {
            assert_eq!(TestKind::parse_known(k.as_str()), Ok(k));
            assert_eq!(serde_json::to_value(k).ok(), Some(k.as_str().into()));
        }
        for v in Variant::ALL {
            assert_eq!(Variant::parse_known(v.as_str()), Ok(v));
            assert_eq!(serde_json::to_value(v).ok(), Some(v.as_str().into()));
        }
        for s in ScreenshotStatus::VARIANTS {
            let status = ScreenshotStatus::parse_known(s).expect("known");
            assert_eq!(status.to_string(), *s);
            assert_eq!(serde_json::to_value(status).ok(), Some((*s).into()));
        }
        for f in [FilterType::B2b, FilterType::B2c] {
            assert_eq!(FilterType::parse_known(f.as_str()), Ok(f));
            assert_eq!(serde_json::to_value(f).ok(), Some(f.as_str().into()));
        }
        for m in [SpamMethod::Seed, SpamMethod::Smtp, SpamMethod::Svc] {
            assert_eq!(SpamMethod::parse_known(m.as_str()), Ok(m));
        }
    }

    #[test]
    fn unknown_stored_spellings_are_refused_with_the_type_named() {
        let err = ScreenshotStatus::parse_known("complete").expect_err("case matters");
        assert_eq!(
            err.to_string(),
            "\"complete\" is not a screenshot status (one of: Pending, Processing, Complete, Bounced)"
        );
        assert_eq!(
            FilterType::parse_known("B2B").map_err(|e| e.what),
            Err("spam filter type")
        );
        assert!(Variant::parse_known("no-images").is_err());
        assert!(TestKind::parse_known("email").is_err());
    }

    #[test]
    fn picture_names_read_back_and_refuse_what_is_never_stored() {
        let base = TestId::generate().to_string();
        let pictures = [
            Picture::Shot(Variant::Default),
            Picture::Shot(Variant::HorizontalNoImages),
            Picture::Thumbnail,
            Picture::FullThumbnail,
            Picture::ThumbnailOf(Variant::NoImages),
            Picture::FullThumbnailOf(Variant::HorizontalNoImages),
            Picture::InboxRow {
                row: "gmail_web".into(),
                scheme: ColorScheme::Dark,
            },
            Picture::Diff {
                base: base.clone(),
                variant: Variant::NoImages,
            },
        ];
        for p in pictures {
            assert_eq!(Picture::parse(&p.name()), Some(p));
        }
        assert_eq!(Picture::Thumbnail.name(), "thumbnail");
        assert_eq!(Picture::FullThumbnail.name(), "full_thumbnail");
        assert_eq!(Picture::thumbnail(Variant::Default), Picture::Thumbnail);
        assert_eq!(
            Picture::thumbnail(Variant::NoImages).name(),
            "thumbnail-no_images"
        );
        assert_eq!(
            Picture::full_thumbnail(Variant::Horizontal).name(),
            "full_thumbnail-horizontal"
        );
        assert_eq!(
            Picture::Diff {
                base: base.clone(),
                variant: Variant::NoImages
            }
            .name(),
            format!("diff-{base}-no_images")
        );
        for name in [
            "",
            "thumb",
            "Default",
            "diff-../../x-default",
            &format!("diff-{base}-sideways"),
            &format!("diff-{base}"),
            "thumbnail-default",
            "thumbnail-",
            "full_thumbnail-sideways",
            "inbox-gmail_web",
            "inbox-gmail_web-dusk",
            "inbox-../x-light",
            "inbox--light",
        ] {
            assert_eq!(Picture::parse(name), None, "{name:?}");
        }
    }

    #[test]
    fn variants_follow_the_screenshot_key_rules() {
        assert_eq!(
            Variant::for_client(false, true, false),
            vec![Variant::Default]
        );
        assert_eq!(
            Variant::for_client(true, false, true),
            vec![Variant::Default, Variant::Horizontal]
        );
        assert_eq!(
            Variant::for_client(true, true, true),
            vec![
                Variant::Default,
                Variant::NoImages,
                Variant::Horizontal,
                Variant::HorizontalNoImages
            ]
        );
    }
}
