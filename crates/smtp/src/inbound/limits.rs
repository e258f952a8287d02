//! Per-address admission: how many connections one IP may hold and how many messages it may start per
//! minute.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Above this many tracked addresses, idle entries are dropped so the table cannot grow without bound.
const PRUNE_ABOVE: usize = 4096;

struct PerIp {
    connections: usize,
    /// Token bucket for messages: refills at `messages_per_minute` per minute up to that many.
    tokens: f64,
    refilled_at: Instant,
}

pub(crate) struct Limiter {
    max_connections_per_ip: usize,
    messages_per_minute: u32,
    table: Mutex<HashMap<IpAddr, PerIp>>,
}

/// Held while a connection is open; gives its slot back when dropped.
pub(crate) struct ConnectionSlot {
    limiter: Arc<Limiter>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut table = self.limiter.lock();
        if let Some(entry) = table.get_mut(&self.ip) {
            entry.connections = entry.connections.saturating_sub(1);
        }
    }
}

impl Limiter {
    pub(crate) fn new(max_connections_per_ip: usize, messages_per_minute: u32) -> Self {
        Self {
            max_connections_per_ip,
            messages_per_minute,
            table: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, PerIp>> {
        // The table holds plain counters; a panic elsewhere cannot leave them inconsistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection from `ip`, or `None` when that address (an IPv6 /64 counting
    /// as one, [`domain::address_group`]) already holds its share.
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr) -> Option<ConnectionSlot> {
        let ip = domain::address_group(ip);
        let now = Instant::now();
        let mut table = self.lock();
        if table.len() > PRUNE_ABOVE {
            let full = f64::from(self.messages_per_minute);
            table.retain(|_, e| {
                e.connections > 0 || refill(e, now, self.messages_per_minute) < full
            });
        }
        let entry = table.entry(ip).or_insert_with(|| PerIp {
            connections: 0,
            tokens: f64::from(self.messages_per_minute),
            refilled_at: now,
        });
        if entry.connections >= self.max_connections_per_ip {
            return None;
        }
        entry.connections += 1;
        Some(ConnectionSlot {
            limiter: Arc::clone(self),
            ip,
        })
    }

    /// Takes one message from `ip`'s budget; false when the budget for this minute is spent.
    pub(crate) fn take_message(&self, ip: IpAddr) -> bool {
        let ip = domain::address_group(ip);
        let now = Instant::now();
        let mut table = self.lock();
        let Some(entry) = table.get_mut(&ip) else {
            return false;
        };
        if refill(entry, now, self.messages_per_minute) >= 1.0 {
            entry.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn refill(entry: &mut PerIp, now: Instant, per_minute: u32) -> f64 {
    let rate = f64::from(per_minute) / 60.0;
    let elapsed = now
        .saturating_duration_since(entry.refilled_at)
        .as_secs_f64();
    entry.tokens = (entry.tokens + elapsed * rate).min(f64::from(per_minute));
    entry.refilled_at = now;
    entry.tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_slots_are_counted_per_address_and_given_back() {
        let limiter = Arc::new(Limiter::new(2, 10));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = limiter.open(a);
        let second = limiter.open(a);
        assert!(first.is_some() && second.is_some());
        assert!(
            limiter.open(a).is_none(),
            "a third connection from one address is refused"
        );
        assert!(
            limiter.open(b).is_some(),
            "another address has its own share"
        );
        drop(first);
        assert!(
            limiter.open(a).is_some(),
            "a closed connection frees its slot"
        );
    }

    #[test]
    fn an_ipv6_64_is_one_address_for_connections_and_messages() {
        let limiter = Arc::new(Limiter::new(2, 3));
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 9, 9, n, 0, 0, n]);
        let slots: Vec<_> = (1..=10).filter_map(|n| limiter.open(in_64(n))).collect();
        assert_eq!(slots.len(), 2, "ten addresses of one /64");
        let taken = (1..=10).filter(|n| limiter.take_message(in_64(*n))).count();
        assert_eq!(taken, 3, "one message budget for the /64");
        assert!(limiter
            .open(IpAddr::from([0x2001, 0xdb8, 9, 10, 0, 0, 0, 1]))
            .is_some());
    }

    #[test]
    fn message_budget_runs_out_within_a_minute() {
        let limiter = Arc::new(Limiter::new(5, 3));
        let ip: IpAddr = [127, 0, 0, 1].into();
        let _slot = limiter.open(ip);
        let taken = (0..5).filter(|_| limiter.take_message(ip)).count();
        assert_eq!(taken, 3);
    }
}
