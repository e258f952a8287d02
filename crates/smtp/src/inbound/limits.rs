//! Per-address message budgets: how many messages one client address may start per minute. (How
//! many connections it may hold is `admission`'s, shared with the HTTP listener.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Above this many tracked addresses, full buckets are dropped so the table cannot grow without
/// bound (a dropped entry comes back full, as it was).
const PRUNE_ABOVE: usize = 4096;

struct PerIp {
    /// Token bucket for messages: refills at `messages_per_minute` per minute up to that many.
    tokens: f64,
    refilled_at: Instant,
}

pub(crate) struct Limiter {
    messages_per_minute: u32,
    table: Mutex<HashMap<IpAddr, PerIp>>,
}

impl Limiter {
    pub(crate) fn new(messages_per_minute: u32) -> Self {
        Self {
            messages_per_minute,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one message from `ip`'s budget (an IPv6 /64 counting as one address,
    /// [`domain::address_group`]); false when the budget for this minute is spent.
    pub(crate) fn take_message(&self, ip: IpAddr) -> bool {
        let ip = domain::address_group(ip);
        let now = Instant::now();
        let full = f64::from(self.messages_per_minute);
        // The table holds plain counters; a panic elsewhere cannot leave them inconsistent.
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() > PRUNE_ABOVE {
            table.retain(|_, e| refill(e, now, self.messages_per_minute) < full);
        }
        let entry = table.entry(ip).or_insert_with(|| PerIp {
            tokens: full,
            refilled_at: now,
        });
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
    fn an_ipv6_64_is_one_address_for_messages() {
        let limiter = Limiter::new(3);
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 9, 9, n, 0, 0, n]);
        let taken = (1..=10).filter(|n| limiter.take_message(in_64(*n))).count();
        assert_eq!(taken, 3, "one message budget for the /64");
        assert!(limiter.take_message(IpAddr::from([0x2001, 0xdb8, 9, 10, 0, 0, 0, 1])));
    }

    #[test]
    fn message_budget_runs_out_within_a_minute() {
        let limiter = Limiter::new(3);
        let ip: IpAddr = [127, 0, 0, 1].into();
        let taken = (0..5).filter(|_| limiter.take_message(ip)).count();
        assert_eq!(taken, 3);
    }
}
