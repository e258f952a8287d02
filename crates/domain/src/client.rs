//! Who counts as one client for the per-address limits.

use std::net::IpAddr;

/// The key a client address is counted under by every per-address limit: an IPv4 address as
/// itself (also when it arrives IPv4-mapped on an IPv6 socket), an IPv6 address as its /64, the
/// block one subscriber line or host is usually given, so that the 2^64 addresses of one /64
/// count as one client rather than each its own.
pub fn address_group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::from(segments)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::address_group;
    use std::net::IpAddr;

    fn group(s: &str) -> String {
        address_group(s.parse::<IpAddr>().expect("address")).to_string()
    }

    #[test]
    fn one_ipv6_64_is_one_client_and_ipv4_addresses_stay_apart() {
        assert_eq!(group("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::");
        assert_eq!(group("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::");
        assert_ne!(group("2001:db8:1:3::1"), group("2001:db8:1:2::1"));
        assert_eq!(group("192.0.2.7"), "192.0.2.7");
        assert_ne!(group("192.0.2.7"), group("192.0.2.8"));
        assert_eq!(group("::ffff:192.0.2.7"), "192.0.2.7", "IPv4-mapped");
        assert_eq!(group("::1"), "::");
    }
}
