//! Which network addresses the service may reach on a caller's behalf.
//!
//! A URL source or an image in an email is chosen by the caller, so fetching it must not become a
//! way into the service's own network (SSRF). Only public unicast addresses are reachable, unless
//! the operator's allow-list admits more (tests admit loopback this way).
//!
//! [`resolve_permitted`] is the one place where a caller-given host becomes addresses to connect
//! to: the URL fetcher and the SMTP sender both connect only to what it returns.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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

/// Why a caller-given host may not be connected to. The messages name the host and say what the
/// caller can do; they never depend on whether anything listens there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The host is an IP address literal the policy does not permit.
    #[error(
        "refused: {host} is a private, loopback or otherwise internal address; give a host on \
         the public internet"
    )]
    RefusedAddress { host: String },
    /// The host is a name (or a numeric spelling only the resolver understands, such as
    /// `2130706433`) whose every address the policy refuses.
    #[error(
        "refused: {host} resolves only to private, loopback or otherwise internal addresses; give \
         a host on the public internet"
    )]
    RefusedHost { host: String },
    #[error("the host name {host} could not be resolved ({reason}); check the host name")]
    Unresolved { host: String, reason: String },
}

/// Resolves `host` (a name, an IP literal, or a bracketed IPv6 literal such as `[::1]`) the way the
/// system resolver does and keeps only the addresses `policy` permits, each with `port`.
///
/// Connecting to exactly the returned addresses (never resolving `host` again) is what closes the
/// gap between the check and the connection (DNS rebinding). An IP literal is judged without any
/// lookup; everything else goes through `getaddrinfo`, which also turns the odd IPv4 spellings
/// (`127.1`, `2130706433`, `0x7f000001`) into the address they denote, so they are judged too.
pub async fn resolve_permitted(
    host: &str,
    port: u16,
    policy: &NetPolicy,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse::<IpAddr>();
    if let Ok(ip) = literal {
        return if policy.permits(ip) {
            Ok(vec![SocketAddr::new(ip, port)])
        } else {
            Err(ResolveError::RefusedAddress {
                host: ip.to_string(),
            })
        };
    }
    let unresolved = |reason: String| ResolveError::Unresolved {
        host: host.to_owned(),
        reason,
    };
    if host.is_empty() {
        return Err(unresolved("it is empty".to_owned()));
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| unresolved(e.to_string()))?
        .collect();
    let permitted: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|addr| policy.permits(addr.ip()))
        .collect();
    if permitted.is_empty() {
        if found.is_empty() {
            return Err(unresolved("it has no addresses".to_owned()));
        }
        tracing::info!(%host, ?found, "refused host resolving to internal addresses");
        return Err(ResolveError::RefusedHost {
            host: host.to_owned(),
        });
    }
    Ok(permitted)
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

    fn loopback_allowed() -> NetPolicy {
        NetPolicy {
            allow: vec![
                "127.0.0.1/32".parse().expect("net"),
                "::1/128".parse().expect("net"),
            ],
            ..NetPolicy::default()
        }
    }

    #[tokio::test]
    async fn every_spelling_of_an_internal_address_is_refused_before_connecting() {
        let p = NetPolicy::default();
        for host in [
            "127.0.0.1",
            "[::1]",
            "::1",
            "[::ffff:127.0.0.1]",
            "10.0.0.1",
        ] {
            let e = resolve_permitted(host, 25, &p).await.expect_err(host);
            assert!(
                matches!(e, ResolveError::RefusedAddress { .. }),
                "{host}: {e}"
            );
            assert!(e.to_string().starts_with("refused: "), "{e}");
        }
        // Spellings only the system resolver understands are judged by what they resolve to.
        for host in ["127.1", "2130706433", "0x7f000001", "localhost"] {
            let e = resolve_permitted(host, 25, &p).await.expect_err(host);
            assert_eq!(
                e,
                ResolveError::RefusedHost {
                    host: host.to_owned()
                },
                "{host}"
            );
        }
    }

    #[tokio::test]
    async fn only_permitted_addresses_are_returned_with_the_port() {
        let p = loopback_allowed();
        for host in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f000001",
            "localhost",
        ] {
            let addrs = resolve_permitted(host, 2525, &p).await.expect(host);
            assert!(!addrs.is_empty(), "{host}");
            assert!(
                addrs
                    .iter()
                    .all(|a| a.port() == 2525 && p.permits(a.ip()) && a.ip().is_loopback()),
                "{host}: {addrs:?}"
            );
        }
        let addrs = resolve_permitted("[::1]", 25, &p).await.expect("[::1]");
        assert_eq!(addrs, vec!["[::1]:25".parse().expect("addr")]);
        // The allow-list admits 127.0.0.1 only, not the rest of 127.0.0.0/8.
        let e = resolve_permitted("127.0.0.2", 25, &p)
            .await
            .expect_err("127.0.0.2");
        assert!(matches!(e, ResolveError::RefusedAddress { .. }), "{e}");
    }

    #[tokio::test]
    async fn unresolvable_and_empty_hosts_are_reported() {
        let p = NetPolicy::default();
        for host in ["no-such-host.invalid", ""] {
            let e = resolve_permitted(host, 25, &p).await.expect_err(host);
            assert!(matches!(e, ResolveError::Unresolved { .. }), "{host}: {e}");
        }
    }
}
