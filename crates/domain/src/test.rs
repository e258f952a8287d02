//! Test kinds, screenshot variants and states (spec §2.4, §2.5, §3).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TestKind {
    #[serde(rename = "email-test")]
    Email,
    #[serde(rename = "spam-test")]
    Spam,
}

impl TestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::Email => "email-test",
            TestKind::Spam => "spam-test",
        }
    }

    pub fn parse(s: &str) -> Option<TestKind> {
        match s {
            "email-test" => Some(TestKind::Email),
            "spam-test" => Some(TestKind::Spam),
            _ => None,
        }
    }
}

/// One picture of a client's rendering (spec §2.5 `screenshots` keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    Default,
    NoImages,
    Horizontal,
    HorizontalNoImages,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Default,
        Variant::NoImages,
        Variant::Horizontal,
        Variant::HorizontalNoImages,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Default => "default",
            Variant::NoImages => "no_images",
            Variant::Horizontal => "horizontal",
            Variant::HorizontalNoImages => "horizontal_no_images",
        }
    }

    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.as_str() == s)
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

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client's screenshot state within an email test (spec §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScreenshotStatus {
    Pending,
    Processing,
    Complete,
    Bounced,
}

impl ScreenshotStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScreenshotStatus::Pending => "Pending",
            ScreenshotStatus::Processing => "Processing",
            ScreenshotStatus::Complete => "Complete",
            ScreenshotStatus::Bounced => "Bounced",
        }
    }

    pub fn parse(s: &str) -> Option<ScreenshotStatus> {
        match s {
            "Pending" => Some(ScreenshotStatus::Pending),
            "Processing" => Some(ScreenshotStatus::Processing),
            "Complete" => Some(ScreenshotStatus::Complete),
            "Bounced" => Some(ScreenshotStatus::Bounced),
            _ => None,
        }
    }

    /// Complete or Bounced: nothing more will happen without a reprocess.
    pub fn is_final(self) -> bool {
        matches!(self, ScreenshotStatus::Complete | ScreenshotStatus::Bounced)
    }
}

/// One filter's answer about a message (spec §2.8 `spam`: 1 spam, 0 neutral, −1 not spam).
/// The wire integer is read and written only through [`SpamVerdict::from_wire`] and
/// [`SpamVerdict::wire`], so the API, the webhooks and the pages cannot disagree on its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpamVerdict {
    Spam,
    Neutral,
    NotSpam,
}

impl SpamVerdict {
    pub const ALL: [SpamVerdict; 3] = [
        SpamVerdict::Spam,
        SpamVerdict::Neutral,
        SpamVerdict::NotSpam,
    ];

    /// The §2.8 value. Any positive number is read as spam and any negative one as not spam,
    /// so a filter that reports a score rather than its sign is still understood.
    pub fn from_wire(n: i64) -> SpamVerdict {
        match n.signum() {
            1 => SpamVerdict::Spam,
            0 => SpamVerdict::Neutral,
            _ => SpamVerdict::NotSpam,
        }
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

    /// A stable name for styles and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            SpamVerdict::Spam => "spam",
            SpamVerdict::Neutral => "neutral",
            SpamVerdict::NotSpam => "not-spam",
        }
    }
}

/// How a spam test's message reaches the filters (spec §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpamMethod {
    Seed,
    Smtp,
    Svc,
}

impl SpamMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            SpamMethod::Seed => "seed",
            SpamMethod::Smtp => "smtp",
            SpamMethod::Svc => "svc",
        }
    }
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
    use super::*;

    #[test]
    fn spam_verdicts_keep_the_section_2_8_meaning_both_ways() {
        assert_eq!(SpamVerdict::from_wire(1), SpamVerdict::Spam);
        assert_eq!(SpamVerdict::from_wire(0), SpamVerdict::Neutral);
        assert_eq!(SpamVerdict::from_wire(-1), SpamVerdict::NotSpam);
        assert_eq!(SpamVerdict::from_wire(-1).label(), "Not spam");
        for v in SpamVerdict::ALL {
            assert_eq!(SpamVerdict::from_wire(v.wire()), v);
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
