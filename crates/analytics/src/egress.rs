//! Apple's relay egress ranges (`https://mask-api.icloud.com/egress-ip-ranges.csv`, one
//! `prefix,country,region,city,` per line, about 287k lines): parsed once into sorted, merged
//! address ranges, so a lookup is one binary search.

use std::net::IpAddr;

use ipnet::IpNet;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EgressError {
    #[error("line {line}: {text:?} is not an address prefix like 172.224.226.0/27 or 2a02:26f7:b3c0:4000::/64")]
    Prefix { line: usize, text: String },
    #[error("the file has no address prefixes")]
    Empty,
}

/// A set of address prefixes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl EgressSet {
    /// Parses the CSV: the first field of each line is a prefix (a bare address is its own
    /// prefix); empty lines and `#` comments are skipped. Any other line is an error naming it, so
    /// a truncated or wrong file is refused rather than half-used.
    pub fn parse(csv: &str) -> Result<EgressSet, EgressError> {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (i, line) in csv.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let field = line.split(',').next().unwrap_or("").trim();
            let net = field
                .parse::<IpNet>()
                .or_else(|_| field.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| EgressError::Prefix {
                    line: i + 1,
                    text: field.chars().take(80).collect(),
                })?;
            match net {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()))),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        if v4.is_empty() && v6.is_empty() {
            return Err(EgressError::Empty);
        }
        Ok(EgressSet {
            v4: merged(v4),
            v6: merged(v6),
        })
    }

    /// Is `ip` in one of the prefixes? An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, as a
    /// dual-stack listener reports it) is looked up as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(a) => within(&self.v4, u32::from(a)),
            IpAddr::V6(a) => within(&self.v6, u128::from(a)),
        }
    }

    /// How many disjoint ranges the prefixes merged into.
    pub fn ranges(&self) -> usize {
        self.v4.len() + self.v6.len()
    }
}

/// Sorted, with overlapping and adjacent ranges joined.
fn merged<T: Ord + Copy + num_like::Succ>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1.succ() => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

fn within<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    let i = ranges.partition_point(|&(start, _)| start <= x);
    i > 0 && x <= ranges[i - 1].1
}

mod num_like {
    /// The next value, saturating: lets `merged` join adjacent ranges.
    pub trait Succ {
        fn succ(self) -> Self;
    }
    impl Succ for u32 {
        fn succ(self) -> Self {
            self.saturating_add(1)
        }
    }
    impl Succ for u128 {
        fn succ(self) -> Self {
            self.saturating_add(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines in the form of Apple's published file.
    const SAMPLE: &str = "172.224.226.0/27,GB,GB-EN,London,\n\
                          172.224.226.32/27,GB,GB-EN,London,\n\
                          104.28.0.20/31,US,US-CA,Los Angeles,\n\
                          2a02:26f7:b3c0:4000::/64,DE,DE-BE,Berlin,\n";

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn addresses_inside_prefixes_are_found_and_others_not() {
        let set = EgressSet::parse(SAMPLE).expect("parse");
        assert_eq!(set.ranges(), 3, "the two adjacent /27s merge");
        for inside in [
            "172.224.226.0",
            "172.224.226.63",
            "104.28.0.21",
            "2a02:26f7:b3c0:4000::1",
            "::ffff:172.224.226.5",
        ] {
            assert!(set.contains(ip(inside)), "{inside}");
        }
        for outside in [
            "172.224.226.64",
            "104.28.0.22",
            "104.28.0.19",
            "2a02:26f7:b3c0:4001::1",
            "127.0.0.1",
        ] {
            assert!(!set.contains(ip(outside)), "{outside}");
        }
    }

    #[test]
    fn a_bad_line_is_refused_with_its_number() {
        assert_eq!(
            EgressSet::parse("17.0.0.0/8,US,,,\nnot-a-prefix,US,,,\n"),
            Err(EgressError::Prefix {
                line: 2,
                text: "not-a-prefix".into()
            })
        );
        assert_eq!(EgressSet::parse("\n# nothing\n"), Err(EgressError::Empty));
        let bare = EgressSet::parse("127.0.0.1,,,,").expect("bare address");
        assert!(bare.contains(ip("127.0.0.1")) && !bare.contains(ip("127.0.0.2")));
    }

    #[test]
    fn nested_and_overlapping_prefixes_merge() {
        let set = EgressSet::parse("10.0.0.0/8\n10.1.0.0/16\n10.255.255.255/32\n11.0.0.0/8\n")
            .expect("parse");
        assert_eq!(set.ranges(), 1);
        assert!(set.contains(ip("11.255.255.255")));
        assert!(!set.contains(ip("12.0.0.0")));
    }
}
