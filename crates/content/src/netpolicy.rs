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
    /// Certificates (PEM) trusted for https besides the public roots: an internal CA whose
    /// endpoints are allow-listed (tests trust their own stub's this way).
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for NetPolicy {
    fn default() -> Self {
        NetPolicy {
            allow: Vec::new(),
            max_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(10),
            max_redirects: 5,
            ca_file: None,
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

impl ResolveError {
    /// What a caller may be told about a host it gave. A name that does not resolve and one that
    /// resolves only to internal addresses get the same words: telling them apart would let a
    /// caller map the names of the service's own network (a name the public internet cannot
    /// resolve, answered differently, exists inside). Both did one lookup, so their times match
    /// too. The variant itself, for the log, still says which.
    pub fn for_caller(&self) -> String {
        match self {
            ResolveError::RefusedAddress { .. } => self.to_string(),
            ResolveError::RefusedHost { host } | ResolveError::Unresolved { host, .. } => format!(
                "refused: {host} has no address on the public internet (it does not resolve, or \
                 only to private, loopback or otherwise internal addresses); give a host on the \
                 public internet"
            ),
        }
    }
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
    match carried_v4(ip) {
        Carried::Plain => {}
        Carried::One(v4) => return is_public_v4(v4),
        Carried::Teredo { server, client } => return is_public_v4(server) && is_public_v4(client),
        Carried::Unknowable => return false,
    }
    let s = ip.segments();
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
}

/// The IPv4 address an IPv6 address leads to, for the forms that carry one: a packet to such an
/// address ends up at the IPv4 host (through the kernel, a translator or a relay), so the IPv6
/// address is only as public as that host.
#[derive(Debug, PartialEq, Eq)]
enum Carried {
    /// No IPv4 address inside: judged as IPv6.
    Plain,
    One(Ipv4Addr),
    /// RFC 4380 §4: the server's address in bits 32–63, the client's in bits 96–127 with every
    /// bit inverted. Traffic goes through the server to the client, so both must be public.
    Teredo {
        server: Ipv4Addr,
        client: Ipv4Addr,
    },
    /// A translation prefix whose layout the operator chooses (RFC 8215's local-use
    /// `64:ff9b:1::/48`, any other length under `64:ff9b::/32`): where the IPv4 address sits
    /// cannot be known, so it is not public.
    Unknowable,
}

fn carried_v4(ip: Ipv6Addr) -> Carried {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let low = v4(s[6], s[7]);
    match s {
        // IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2) and the deprecated IPv4-compatible
        // `::a.b.c.d` (§2.5.5.1; `::` and `::1` stay themselves).
        [0, 0, 0, 0, 0, 0xffff, _, _] => Carried::One(low),
        [0, 0, 0, 0, 0, 0, _, _] if !ip.is_loopback() && !ip.is_unspecified() => Carried::One(low),
        // SIIT's IPv4-translated `::ffff:0:a.b.c.d` (RFC 2765 §2.1, RFC 6052 §2).
        [0, 0, 0, 0, 0xffff, 0, _, _] => Carried::One(low),
        // The NAT64 well-known prefix `64:ff9b::/96` (RFC 6052 §2.1).
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Carried::One(low),
        [0x64, 0xff9b, ..] => Carried::Unknowable,
        // 6to4 `2002:AABB:CCDD::/48` (RFC 3056 §2).
        [0x2002, hi, lo, ..] => Carried::One(v4(hi, lo)),
        // Teredo `2001:0::/32` (RFC 4380 §4).
        [0x2001, 0, hi, lo, ..] => Carried::Teredo {
            server: v4(hi, lo),
            client: v4(!s[6], !s[7]),
        },
        _ => Carried::Plain,
    }
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

    /// The attack's spellings of 127.0.0.1 and each RFC form carrying an IPv4 address, judged by
    /// that address: internal inside is refused, public inside is allowed.
    #[test]
    fn ipv6_forms_carrying_an_ipv4_address_are_judged_by_it() {
        let p = NetPolicy::default();
        for a in [
            "::127.0.0.1",          // IPv4-compatible
            "::10.0.0.1",           //
            "::ffff:127.0.0.1",     // IPv4-mapped
            "::ffff:0:7f00:1",      // SIIT, as the attack spelled it
            "::ffff:0:192.168.1.1", //
            "2002:7f00:1::",        // 6to4 of 127.0.0.1
            "2002:a9fe:a9fe::1",    // 6to4 of 169.254.169.254
            "64:ff9b::127.0.0.1",   // NAT64 well-known prefix
            "64:ff9b::10.1.2.3",    //
            "64:ff9b:1::a00:1",     // RFC 8215 local-use: layout unknowable
            "64:ff9b:1:2:3:4:5:6",  //
            // Teredo: server 65.54.227.120, client 127.0.0.1 stored inverted (80ff:fffe).
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            // Teredo: a private server in front of a public client.
            "2001:0:a00:1:8000:63bf:fefe:fefe",
        ] {
            assert!(!p.permits(ip(a)), "{a} must be refused");
        }
        for a in [
            "::ffff:1.1.1.1",
            "::ffff:0:1.1.1.1",
            "2002:101:101::1",
            "64:ff9b::1.1.1.1",
            // RFC 4380's example layout: server 65.54.227.120, client 1.1.1.1 (fefe:fefe).
            "2001:0:4136:e378:8000:63bf:fefe:fefe",
        ] {
            assert!(p.permits(ip(a)), "{a} must be allowed");
        }
        // The inverted client address is read as RFC 4380 writes it (Wikipedia's example).
        assert_eq!(
            carried_v4(ip6("2001:0:4136:e378:8000:63bf:3fff:fdd2")),
            Carried::Teredo {
                server: Ipv4Addr::new(65, 54, 227, 120),
                client: Ipv4Addr::new(192, 0, 2, 45),
            }
        );
        assert_eq!(carried_v4(ip6("::1")), Carried::Plain);
        assert_eq!(carried_v4(ip6("2606:4700::1111")), Carried::Plain);
    }

    fn ip6(s: &str) -> Ipv6Addr {
        s.parse().expect("test address")
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

    /// The oracle: an internal name and a name that does not exist must read the same to the
    /// caller.
    #[tokio::test]
    async fn callers_cannot_tell_an_internal_name_from_a_missing_one() {
        let p = NetPolicy::default();
        let internal = resolve_permitted("localhost", 25, &p)
            .await
            .expect_err("internal");
        let missing = resolve_permitted("no-such-host.invalid", 25, &p)
            .await
            .expect_err("missing");
        assert!(matches!(internal, ResolveError::RefusedHost { .. }));
        assert!(matches!(missing, ResolveError::Unresolved { .. }));
        let unnamed = |e: &ResolveError, host: &str| e.for_caller().replace(host, "HOST");
        assert_eq!(
            unnamed(&internal, "localhost"),
            unnamed(&missing, "no-such-host.invalid")
        );
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
