//! Which network addresses the service may reach on a caller's behalf.
//!
//! A URL source or an image in an email is chosen by the caller, so fetching it must not become a
//! way into the service's own network (SSRF). Only public unicast addresses are reachable, unless
//! the operator's allow-list admits more (tests admit loopback this way).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

/// The operator's settings for outbound fetches.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetPolicy {
    /// Networks reachable although they are not public (e.g. `127.0.0.1/32` in tests).
    pub allow: Vec<IpNet>,
    /// Largest body accepted from one fetch, in bytes.
    pub max_bytes: u64,
    /// Time allowed for one fetch, connection included.
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// Redirects followed before giving up.
    pub max_redirects: u32,
}

impl Default for NetPolicy {
    fn default() -> Self {
        NetPolicy {
            allow: Vec::new(),
            max_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(10),
            max_redirects: 5,
        }
    }
}

impl NetPolicy {
    /// May the service open a connection to `ip`?
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_public(ip) || self.allow.iter().any(|net| net.contains(&ip))
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are judged as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// True for globally routable unicast addresses; false for loopback, private, link-local,
/// shared (CGNAT), documentation, multicast, broadcast and unspecified ranges.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 shared address space
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24 protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 benchmarking
        || o[0] >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0064 && s[1] == 0xff9b)) // NAT64 can reach private IPv4 space
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        if !(secs > 0.0 && secs <= 600.0) {
            return Err(serde::de::Error::custom(
                "timeout must be between 0 and 600 seconds",
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn internal_ranges_are_refused_by_default() {
        let p = NetPolicy::default();
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!p.permits(ip(a)), "{a} must be refused");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        let p = NetPolicy::default();
        for a in ["93.184.215.14", "1.1.1.1", "2606:4700::1111"] {
            assert!(p.permits(ip(a)), "{a} must be allowed");
        }
    }

    #[test]
    fn the_allow_list_admits_what_it_names_and_nothing_else() {
        let p = NetPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("net")],
            ..NetPolicy::default()
        };
        assert!(p.permits(ip("127.0.0.1")));
        assert!(!p.permits(ip("127.0.0.2")));
        assert!(!p.permits(ip("10.0.0.1")));
    }
}
