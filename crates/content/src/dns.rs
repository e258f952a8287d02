//! How mailproof reaches DNS for the lookups it makes itself (SPF/DKIM/DMARC in the built-in spam
//! filter, URI blocklists): the system resolvers, one named server, or none at all.
//!
//! One setting for every lookup, so a deployment that points mailproof at its own caching resolver
//! (which the URI blocklists require: most refuse queries from public resolvers) does it once.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::system_conf::read_system_conf;

/// Tries per DNS query: a lost UDP answer costs one short timeout, not the whole check.
pub const ATTEMPTS: usize = 2;

/// Where lookups go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsMode {
    /// The resolvers of `/etc/resolv.conf`, [`ATTEMPTS`] tries of `timeout` per query.
    System { timeout: Duration },
    /// One name server (UDP, then TCP for truncated answers), e.g. a local caching resolver.
    Server { addr: SocketAddr, timeout: Duration },
    /// No lookups at all.
    Disabled,
}

impl Default for DnsMode {
    fn default() -> DnsMode {
        DnsMode::System {
            timeout: Duration::from_millis(500),
        }
    }
}

impl DnsMode {
    /// The timeout of one query; zero when lookups are disabled.
    pub fn timeout(&self) -> Duration {
        match self {
            DnsMode::System { timeout } | DnsMode::Server { timeout, .. } => *timeout,
            DnsMode::Disabled => Duration::ZERO,
        }
    }

    /// The resolver configuration for this mode, or why there is none (lookups disabled, or no
    /// usable system configuration).
    pub fn resolver_parts(&self) -> Result<(ResolverConfig, ResolverOpts), String> {
        let (config, mut opts) = match self {
            DnsMode::Disabled => return Err("DNS lookups are disabled in the configuration".into()),
            DnsMode::System { .. } => {
                let (config, opts) =
                    read_system_conf().map_err(|e| format!("cannot read /etc/resolv.conf: {e}"))?;
                if config.name_servers().is_empty() {
                    return Err("/etc/resolv.conf lists no name server".into());
                }
                (config, opts)
            }
            DnsMode::Server { addr, .. } => {
                let connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
                    .into_iter()
                    .map(|mut c| {
                        c.port = addr.port();
                        c
                    })
                    .collect();
                let server = NameServerConfig::new(addr.ip(), true, connections);
                (
                    ResolverConfig::from_name_servers(vec![server]),
                    ResolverOpts::default(),
                )
            }
        };
        opts.timeout = self.timeout();
        opts.attempts = ATTEMPTS;
        // Most lookups are of names with no record (senders without SPF, domains on no list), and
        // answers without an SOA would otherwise not be cached at all: every scan would ask again.
        opts.negative_min_ttl = Some(Duration::from_secs(60));
        Ok((config, opts))
    }
}
