//! A campaign's report as a plain typed value (the API serialises it, the web pages draw it), and
//! the pure part of computing it: attributing reading time to opens and bucketing it.
//!
//! Reading time is attributed per recipient and time window: a reading step (`r<n>.gif`) or a
//! held-open measure (`h.gif`) belongs to the latest open of the same merge value at most
//! [`ATTRIBUTION_WINDOW_SECS`] before it. Without a merge tag all opens share one recipient, so
//! two readers opening in the same window are counted as one reading; the tracking code's URLs
//! carry no per-open token because image proxies fetch each distinct URL once.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::classify::{Client, Device, Source};
use crate::READ_MAX_SECS;

/// A reading step or held-open measure belongs to an open at most this many seconds before it:
/// the longest measure plus slack for clock rounding (hit times are whole seconds).
pub const ATTRIBUTION_WINDOW_SECS: i64 = READ_MAX_SECS as i64 + 5;

/// The campaign's engagement thresholds, in seconds the email stayed open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Thresholds {
    pub read: i64,
    pub skim: i64,
    pub delete: i64,
}

/// How long a reader kept the email open, by the campaign's thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    Read,
    Skim,
    Glance,
}

impl Thresholds {
    /// The interface's documented rule: at most `delete` seconds is a glance, more up to `skim`
    /// a skim, more than `skim` a read. (`read` bounds no bucket in the documented rule; it is
    /// kept and reported as the campaign set it.)
    pub fn bucket(&self, seconds: i64) -> Bucket {
        if seconds <= self.delete {
            Bucket::Glance
        } else if seconds <= self.skim {
            Bucket::Skim
        } else {
            Bucket::Read
        }
    }
}

/// One direct-fetch hit that matters for reading time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimingHit {
    pub merge_value: Option<String>,
    /// Unix seconds.
    pub at: i64,
    pub signal: Timing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timing {
    Open,
    /// Still open this many seconds after the open (a reading step or a held-open measure).
    Seconds(u32),
}

/// Reliable opens by engagement: direct opens with a measured time in their bucket, the others
/// (proxied opens, direct opens whose client sent no timing) `not_measurable`, never guessed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Engagement {
    pub read: i64,
    pub skim: i64,
    pub glance: i64,
    pub not_measurable: i64,
}

/// Buckets the direct opens in `hits` by the reading time attributed to each (see the module
/// notes); `proxied_opens` (reliable opens through a proxy that hides timing) are added as not
/// measurable.
pub fn engagement(hits: &[TimingHit], t: &Thresholds, proxied_opens: i64) -> Engagement {
    let mut by_recipient: BTreeMap<Option<&str>, Vec<(i64, Timing)>> = BTreeMap::new();
    for h in hits {
        by_recipient
            .entry(h.merge_value.as_deref())
            .or_default()
            .push((h.at, h.signal));
    }
    let mut out = Engagement {
        not_measurable: proxied_opens,
        ..Engagement::default()
    };
    for mut signals in by_recipient.into_values() {
        // An open sorts before a step recorded in the same second.
        signals.sort_unstable();
        let mut opens: Vec<(i64, Option<u32>)> = Vec::new();
        for (at, signal) in signals {
            match signal {
                Timing::Open => opens.push((at, None)),
                Timing::Seconds(s) => {
                    if let Some((open_at, best)) = opens.last_mut() {
                        if at - *open_at <= ATTRIBUTION_WINDOW_SECS {
                            *best = Some(best.map_or(s, |b| b.max(s)));
                        }
                    }
                }
            }
        }
        for (_, seconds) in opens {
            match seconds.map(|s| t.bucket(i64::from(s))) {
                Some(Bucket::Read) => out.read += 1,
                Some(Bucket::Skim) => out.skim += 1,
                Some(Bucket::Glance) => out.glance += 1,
                None => out.not_measurable += 1,
            }
        }
    }
    out
}

/// Hits and distinct recipients (by merge value; a hit without one is its own recipient).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub hits: i64,
    pub unique: i64,
}

/// Opens, reliable and machine side by side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Opens {
    pub total: Tally,
    /// Direct fetches and the Gmail and Yahoo proxies (which fetch when the reader opens).
    pub reliable: Tally,
    /// Apple's relays and scanners.
    pub machine: Tally,
    /// No user agent, or a bare `Mozilla/5.0` from outside Apple's ranges.
    pub unknown: Tally,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SourceOpens {
    pub source: Source,
    pub opens: Tally,
}

/// Opens in one hour or day (UTC), from `start` (unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Period {
    pub start: i64,
    pub opens: i64,
    pub reliable: i64,
    pub machine: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClientOpens {
    pub client: Client,
    pub opens: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceOpens {
    pub device: Device,
    pub opens: i64,
}

/// Clicks on one tracked link; scanners' clicks are counted apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinkClicks {
    /// 1-based, in the order of the links in the click-tracking HTML.
    pub number: u32,
    pub url: String,
    pub clicks: Tally,
    pub machine: i64,
}

/// How Apple MPP was recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MppBasis {
    /// MPP opens judged on the bare user agent alone, no relay ranges being configured then.
    pub by_agent_only: i64,
    /// Whether relay ranges are configured now (the service's setting when the report is made).
    pub ranges_configured: bool,
}

/// Everything the report of one campaign says. Percentages are left to the reader: every count
/// is over `total_subscribers`, or over `opens.total.unique` for shares.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CampaignReport {
    pub guid: String,
    /// The campaign is still in test mode: these are its test hits.
    pub test_mode: bool,
    pub total_subscribers: i64,
    pub thresholds: Thresholds,
    pub opens: Opens,
    /// Every source class, in a fixed order, with zeros.
    pub sources: Vec<SourceOpens>,
    pub per_hour: Vec<Period>,
    pub per_day: Vec<Period>,
    /// From reliable opens only.
    pub engagement: Engagement,
    /// Reliable opens by client and by device, most first.
    pub clients: Vec<ClientOpens>,
    pub devices: Vec<DeviceOpens>,
    pub prints: Tally,
    pub forwards: Tally,
    /// Recipients whose client asked for the dark-mode image (Apple's relays included, as they
    /// fetch with the device's colour scheme).
    pub dark: Tally,
    /// `dark.unique` over `opens.total.unique`; `None` without opens.
    pub dark_share: Option<f64>,
    /// Every tracked link in order, with zeros.
    pub clicks: Vec<LinkClicks>,
    pub apple_mpp: MppBasis,
}

/// `part / whole`, `None` when nothing is counted.
pub fn share(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Thresholds = Thresholds {
        read: 15,
        skim: 7,
        delete: 2,
    };

    fn hit(merge: &str, at: i64, signal: Timing) -> TimingHit {
        TimingHit {
            merge_value: Some(merge.to_string()),
            at,
            signal,
        }
    }

    #[test]
    fn buckets_follow_the_thresholds() {
        assert_eq!(DEFAULTS.bucket(0), Bucket::Glance);
        assert_eq!(DEFAULTS.bucket(2), Bucket::Glance);
        assert_eq!(DEFAULTS.bucket(4), Bucket::Skim);
        assert_eq!(DEFAULTS.bucket(7), Bucket::Skim);
        assert_eq!(DEFAULTS.bucket(8), Bucket::Read);
        assert_eq!(DEFAULTS.bucket(20), Bucket::Read);
    }

    #[test]
    fn each_open_takes_the_longest_step_of_its_window() {
        let hits = vec![
            hit("a", 100, Timing::Open),
            hit("a", 102, Timing::Seconds(2)),
            hit("a", 110, Timing::Seconds(10)),
            hit("a", 104, Timing::Seconds(4)),
            // b skims, then opens again later and only glances.
            hit("b", 100, Timing::Open),
            hit("b", 106, Timing::Seconds(6)),
            hit("b", 500, Timing::Open),
            hit("b", 502, Timing::Seconds(2)),
            // c's client sent no timing at all: not measurable, not a glance.
            hit("c", 100, Timing::Open),
            // A step far from any open is nobody's.
            hit("d", 100, Timing::Open),
            hit("d", 200, Timing::Seconds(20)),
        ];
        assert_eq!(
            engagement(&hits, &DEFAULTS, 3),
            Engagement {
                read: 1,
                skim: 1,
                glance: 1,
                not_measurable: 2 + 3,
            }
        );
    }

    #[test]
    fn a_step_in_the_opens_second_counts_and_shares_are_safe() {
        let hits = vec![
            hit("a", 100, Timing::Seconds(20)),
            hit("a", 100, Timing::Open),
        ];
        assert_eq!(engagement(&hits, &DEFAULTS, 0).read, 1);
        assert_eq!(share(1, 4), Some(0.25));
        assert_eq!(share(0, 0), None);
    }
}
