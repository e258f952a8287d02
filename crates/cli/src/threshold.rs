//! `--max-diff`: the share of a screenshot's pixels that may change before a client counts as
//! changed, written as a percentage (`0.5%`) or a fraction (`0.005`).

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaxDiff(f64);

impl MaxDiff {
    /// From a fraction of the pixels, 0.0 to 1.0.
    pub fn from_fraction(f: f64) -> Result<MaxDiff, String> {
        if f.is_finite() && (0.0..=1.0).contains(&f) {
            Ok(MaxDiff(f))
        } else {
            Err(format!(
                "a pixel share must be between 0% and 100%, not {}",
                percent(f)
            ))
        }
    }

    /// From a fraction read back from a report: out-of-range values are brought into range.
    pub fn saturating(f: f64) -> MaxDiff {
        MaxDiff(if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) })
    }

    pub fn fraction(self) -> f64 {
        self.0
    }

    /// Whether a measured share of changed pixels goes beyond the limit (equal is within).
    pub fn exceeded_by(self, share: f64) -> bool {
        share > self.0
    }
}

impl FromStr for MaxDiff {
    type Err = String;

    fn from_str(s: &str) -> Result<MaxDiff, String> {
        let t = s.trim();
        let (number, scale) = match t.strip_suffix('%') {
            Some(n) => (n.trim(), 100.0),
            None => (t, 1.0),
        };
        let v: f64 = number.parse().map_err(|_| {
            format!(
                "`{s}` is not a pixel share; write a percentage like 0.5% or a fraction like 0.005"
            )
        })?;
        MaxDiff::from_fraction(v / scale)
    }
}

impl fmt::Display for MaxDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&percent(self.0))
    }
}

/// A share as a percentage with at most three decimals: 0.0193 → `1.93%`, 0.0 → `0%`.
pub fn percent(share: f64) -> String {
    let s = format!("{:.3}", share * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    // A share too small for three decimals is still a change; do not print it as none.
    if s == "0" && share > 0.0 {
        return "<0.001%".into();
    }
    format!("{s}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_fractions_parse_to_the_same_share() {
        assert_eq!("0.5%".parse::<MaxDiff>().map(MaxDiff::fraction), Ok(0.005));
        assert_eq!(
            " 0.5 % ".parse::<MaxDiff>().map(MaxDiff::fraction),
            Ok(0.005)
        );
        assert_eq!("0.005".parse::<MaxDiff>().map(MaxDiff::fraction), Ok(0.005));
        assert_eq!("0".parse::<MaxDiff>().map(MaxDiff::fraction), Ok(0.0));
        assert_eq!("100%".parse::<MaxDiff>().map(MaxDiff::fraction), Ok(1.0));
    }

    #[test]
    fn out_of_range_or_malformed_limits_are_refused_with_the_form_to_use() {
        for bad in ["-1%", "101%", "1.5", "abc", "%", "", "NaN", "inf%"] {
            let e = bad.parse::<MaxDiff>().expect_err(bad);
            assert!(e.contains('%'), "{bad}: {e}");
        }
    }

    #[test]
    fn the_limit_itself_is_within() {
        let m: MaxDiff = "0.5%".parse().expect("limit");
        assert!(!m.exceeded_by(0.005));
        assert!(m.exceeded_by(0.0051));
        let zero: MaxDiff = "0%".parse().expect("limit");
        assert!(!zero.exceeded_by(0.0));
        assert!(zero.exceeded_by(1e-9));
    }

    #[test]
    fn shares_print_as_short_percentages() {
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.019345), "1.935%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(1e-7), "<0.001%");
    }
}
