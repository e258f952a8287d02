//! Connection admission for mailproof's listeners (HTTP in `listener`, SMTP in `smtp`): one
//! [`Admission`] per listener holds its open connections ([`Place`]s), at most `max` of them and
//! at most `per_group` from one client ([`domain::address_group`]: an IPv4 address, an IPv6 /64).
//!
//! Per-client caps alone do not keep a listener open to everyone: at the default limits 32
//! addresses × 64 connections fill HTTP's 2048 places (32 × 8 fill SMTP's 256), and everybody
//! else waits. So when every place is taken, a connection from a client below its fair share
//! (`max / clients holding places`, the newcomer included) that holds at least two fewer
//! connections than the largest holder takes the place of one of the largest holder's
//! connections, which is told to close ("pushed out", counted in
//! `mailproof_connections_pushed_out_total{listener}`). A client at or above its fair share
//! pushes out nobody; the two-fewer rule adds the case of more clients than places, one each,
//! where newcomers would otherwise close one another's connections in turn.
//!
//! The connection pushed out is the holder's oldest one that is not busy ([`Place::busy`]: no
//! answer in progress; a held-open tracking image, [`HeldOpen`], does not count as one), else
//! its oldest: cutting an idle connection loses nothing in flight, and the oldest has had the
//! longest use of its place.
//!
//! Connections from trusted proxies ([`Admission::admit`]'s `exempt`) count in `max` but belong
//! to no client: many clients share such an address, so they are never pushed out and push out
//! nobody.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// Which listener an [`Admission`] serves, the `listener` label of its metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    Http,
    Smtp,
}

impl Listener {
    pub fn as_str(self) -> &'static str {
        match self {
            Listener::Http => "http",
            Listener::Smtp => "smtp",
        }
    }
}

/// Why a connection gets no place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its client already holds `per_group` connections.
    ClientFull,
    /// Every place is taken and this client may push out nobody.
    Full,
}

/// A response extension: this answer's body is held open on purpose (the held-open tracking
/// image) and nothing the client waits for is in flight, so its connection is pushed out as
/// readily as an idle one.
#[derive(Clone, Copy, Debug)]
pub struct HeldOpen;

/// The places of one listener; cheap to clone (all clones share them).
#[derive(Clone)]
pub struct Admission {
    shared: Arc<Shared>,
}

struct Shared {
    listener: Listener,
    max: usize,
    per_group: usize,
    table: Mutex<Table>,
    /// Woken whenever a place is given back, for [`Admission::admit_or_wait`].
    freed: Notify,
}

#[derive(Default)]
struct Table {
    /// Places taken, exempt ones included.
    open: usize,
    next_id: u64,
    /// Each client's connections by admission order (ids only grow, so the first is the oldest).
    /// Entries exist only for clients with connections: the table stays bounded by `max`.
    groups: HashMap<IpAddr, BTreeMap<u64, Arc<Conn>>>,
}

struct Conn {
    /// Answers in progress that should not be cut ([`Place::busy`]).
    busy: AtomicUsize,
    pushed: watch::Sender<bool>,
}

/// One connection's place; given back when dropped.
pub struct Place {
    shared: Arc<Shared>,
    group: Option<IpAddr>,
    id: u64,
    conn: Arc<Conn>,
}

/// An answer in progress on a connection (see [`Place::busy`]); ends when dropped.
pub struct Busy(Arc<Conn>);

impl Admission {
    /// At most `max` connections in all and `per_group` from one client (both at least 1).
    pub fn new(listener: Listener, max: usize, per_group: usize) -> Admission {
        Admission {
            shared: Arc::new(Shared {
                listener,
                max: max.max(1),
                per_group: per_group.max(1),
                table: Mutex::new(Table::default()),
                freed: Notify::new(),
            }),
        }
    }

    /// Places taken now.
    pub fn open(&self) -> usize {
        self.shared.lock().open
    }

    /// The most places there are.
    pub fn max(&self) -> usize {
        self.shared.max
    }

    /// A place for a connection from `peer`, pushing out one of the largest holder's
    /// connections when every place is taken and `peer`'s client may (see the crate's
    /// documentation). `exempt`: `peer` is a trusted proxy, outside every client's share.
    pub fn admit(&self, peer: IpAddr, exempt: bool) -> Result<Place, Refusal> {
        let shared = &self.shared;
        let group = (!exempt).then(|| domain::address_group(peer));
        let mut table = shared.lock();
        let held = group
            .and_then(|g| table.groups.get(&g))
            .map_or(0, BTreeMap::len);
        if group.is_some() && held >= shared.per_group {
            return Err(Refusal::ClientFull);
        }
        if table.open < shared.max {
            table.open += 1;
            return Ok(self.place(&mut table, group));
        }
        let Some(newcomer) = group else {
            return Err(Refusal::Full);
        };
        let clients = table.groups.len() + usize::from(held == 0);
        let fair_share = (shared.max / clients.max(1)).max(1);
        if held >= fair_share {
            return Err(Refusal::Full);
        }
        let Some((largest, count)) = table
            .groups
            .iter()
            .filter(|(g, _)| **g != newcomer)
            .map(|(g, conns)| (*g, conns.len()))
            .max_by_key(|(_, n)| *n)
        else {
            return Err(Refusal::Full);
        };
        if held + 1 >= count {
            return Err(Refusal::Full);
        }
        let Some(conns) = table.groups.get_mut(&largest) else {
            return Err(Refusal::Full);
        };
        let victim = conns
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::SeqCst) == 0)
            .or_else(|| conns.iter().next())
            .map(|(id, _)| *id);
        let Some(conn) = victim.and_then(|id| conns.remove(&id)) else {
            return Err(Refusal::Full);
        };
        let was_busy = conn.busy.load(Ordering::SeqCst) > 0;
        if conns.is_empty() {
            table.groups.remove(&largest);
        }
        // The victim's place passes to the newcomer: `open` stays as it is, and the victim's
        // own drop finds nothing left to give back.
        conn.pushed.send_replace(true);
        telemetry::global().connection_pushed_out(shared.listener.as_str());
        tracing::info!(
            listener = shared.listener.as_str(),
            holder = %largest,
            holding = count,
            busy = was_busy,
            newcomer = %newcomer,
            "listener full: one connection of the largest holder pushed out for a newcomer"
        );
        Ok(self.place(&mut table, group))
    }

    /// [`Admission::admit`], but when the listener is full and `peer` may push out nobody,
    /// waits up to `wait` for a place to be given back. The caller bounds how many wait.
    pub async fn admit_or_wait(
        &self,
        peer: IpAddr,
        exempt: bool,
        wait: Duration,
    ) -> Result<Place, Refusal> {
        match self.admit(peer, exempt) {
            Err(Refusal::Full) => {}
            decided => return decided,
        }
        let shared = &self.shared;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before looking, so a place given back in between is not missed.
            let freed = shared.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.admit(peer, exempt) {
                Err(Refusal::Full) => {}
                decided => return decided,
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(Refusal::Full);
            }
        }
    }

    fn place(&self, table: &mut Table, group: Option<IpAddr>) -> Place {
        let id = table.next_id;
        table.next_id += 1;
        let (pushed, _) = watch::channel(false);
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            pushed,
        });
        if let Some(g) = group {
            table.groups.entry(g).or_default().insert(id, conn.clone());
        }
        Place {
            shared: self.shared.clone(),
            group,
            id,
            conn,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Table> {
        // Plain counters and maps changed under the lock in one step each: a panic elsewhere
        // cannot leave them inconsistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Place {
    /// Marks an answer in progress until the guard is dropped: while any is, the connection is
    /// pushed out only if all of its client's connections are busy.
    pub fn busy(&self) -> Busy {
        self.conn.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.conn.clone())
    }

    /// Completes when this connection has been pushed out; the caller then closes it.
    pub async fn pushed_out(&self) {
        let mut pushed = self.pushed_signal();
        // The sender lives as long as `self`: this wait ends only by a push.
        let _ = pushed.wait_for(|p| *p).await;
    }

    /// The push-out signal (true once pushed out), for a task that does not hold the place.
    pub fn pushed_signal(&self) -> watch::Receiver<bool> {
        self.conn.pushed.subscribe()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut table = self.shared.lock();
        let given_back = match self.group {
            None => true,
            Some(g) => match table.groups.get_mut(&g) {
                Some(conns) => {
                    let removed = conns.remove(&self.id).is_some();
                    if conns.is_empty() {
                        table.groups.remove(&g);
                    }
                    removed
                }
                None => false,
            },
        };
        if given_back {
            table.open = table.open.saturating_sub(1);
            drop(table);
            self.shared.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    fn pushed(p: &Place) -> bool {
        *p.pushed_signal().borrow()
    }

    /// Two clients fill a listener of 8 (4 each, their cap); a third client gets a place by
    /// pushing out one of them, and so does a fourth, but a client already at its fair share
    /// (8 / 4 = 2) does not.
    #[test]
    fn a_newcomer_pushes_out_the_largest_holder_until_its_fair_share() {
        let a = Admission::new(Listener::Http, 8, 4);
        let one: Vec<_> = (0..4).filter_map(|_| a.admit(ip(1), false).ok()).collect();
        let two: Vec<_> = (0..4).filter_map(|_| a.admit(ip(2), false).ok()).collect();
        assert_eq!((one.len(), two.len(), a.open()), (4, 4, 8));
        assert_eq!(a.admit(ip(1), false).err(), Some(Refusal::ClientFull));
        let three: Vec<_> = (0..2).filter_map(|_| a.admit(ip(3), false).ok()).collect();
        assert_eq!(
            three.len(),
            2,
            "below its share (8 / 3 = 2) the third client gets in"
        );
        assert_eq!(a.admit(ip(3), false).err(), Some(Refusal::Full));
        let four = a.admit(ip(4), false);
        assert!(four.is_ok(), "a fourth client still gets in");
        let gone = one.iter().chain(&two).filter(|p| pushed(p)).count();
        assert_eq!((gone, a.open()), (3, 8));
        drop(one);
        drop(two);
        assert_eq!(a.open(), 3, "pushed-out places are not given back twice");
    }

    /// A client is an IPv6 /64, and places come back when dropped.
    #[test]
    fn an_ipv6_64_holds_the_connections_of_one_client() {
        let a = Admission::new(Listener::Http, 100, 3);
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 5, 5, n, n, 0, 1]);
        let open: Vec<_> = (1..=10)
            .filter_map(|n| a.admit(in_64(n), false).ok())
            .collect();
        assert_eq!(open.len(), 3, "ten addresses of one /64");
        assert!(a
            .admit(IpAddr::from([0x2001, 0xdb8, 5, 6, 0, 0, 0, 1]), false)
            .is_ok());
        drop(open);
        assert!(a.admit(in_64(11), false).is_ok(), "places come back");
    }

    /// The place taken is the oldest idle one; when all are busy, the oldest.
    #[test]
    fn idle_connections_go_first_then_the_oldest() {
        let a = Admission::new(Listener::Smtp, 3, 3);
        let holder: Vec<_> = (0..3).filter_map(|_| a.admit(ip(1), false).ok()).collect();
        let _busy = [holder[0].busy(), holder[1].busy()];
        let _first = a.admit(ip(2), false).expect("a place");
        assert_eq!(
            holder.iter().map(pushed).collect::<Vec<_>>(),
            [false, false, true]
        );
        let _third = holder[2].busy();
        let _second = a.admit(ip(3), false).expect("a place");
        assert_eq!(
            holder.iter().map(pushed).collect::<Vec<_>>(),
            [true, false, true],
            "all busy: the oldest"
        );
    }

    /// Two clients one connection apart do not take a place back and forth, and trusted
    /// proxies' connections are never pushed out and push out nobody.
    #[test]
    fn near_equals_and_proxies_push_out_nobody() {
        let a = Admission::new(Listener::Http, 3, 3);
        let _one: Vec<_> = (0..2).filter_map(|_| a.admit(ip(1), false).ok()).collect();
        let _two = a.admit(ip(2), false).expect("a place");
        assert_eq!(a.admit(ip(2), false).err(), Some(Refusal::Full));
        // More clients than places, one each: a newcomer would only start a round of
        // connections closing one another.
        let c = Admission::new(Listener::Http, 2, 2);
        let ones = [c.admit(ip(1), false), c.admit(ip(2), false)];
        assert_eq!(c.admit(ip(3), false).err(), Some(Refusal::Full));
        assert!(!ones.iter().flatten().any(pushed));
        let b = Admission::new(Listener::Http, 2, 2);
        let proxied: Vec<_> = (0..2).filter_map(|_| b.admit(ip(9), true).ok()).collect();
        assert_eq!(proxied.len(), 2);
        assert_eq!(b.admit(ip(1), false).err(), Some(Refusal::Full));
        assert_eq!(b.admit(ip(9), true).err(), Some(Refusal::Full));
        assert!(!proxied.iter().any(pushed));
    }

    /// A waiting connection gets the first place given back.
    #[tokio::test]
    async fn a_waiting_connection_gets_a_place_given_back() {
        let a = Admission::new(Listener::Http, 1, 1);
        let first = a.admit(ip(9), true).expect("a place");
        let waiter = {
            let a = a.clone();
            tokio::spawn(async move {
                a.admit_or_wait(ip(9), true, Duration::from_secs(30))
                    .await
                    .is_ok()
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert!(waiter.await.unwrap_or(false));
        let b = Admission::new(Listener::Http, 1, 1);
        let _held = b.admit(ip(9), true).expect("a place");
        let waited = b
            .admit_or_wait(ip(9), true, Duration::from_millis(50))
            .await;
        assert_eq!(
            waited.err(),
            Some(Refusal::Full),
            "nothing given back in time"
        );
    }

    /// The metric counts each push-out under its listener's label.
    #[test]
    fn pushed_out_connections_are_counted() {
        let before = telemetry::encode(telemetry::global(), &[], 0).unwrap_or_default();
        let count = |text: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(r#"mailproof_connections_pushed_out_total{listener="smtp"} "#)
                })
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let a = Admission::new(Listener::Smtp, 2, 2);
        let _held: Vec<_> = (0..2).filter_map(|_| a.admit(ip(1), false).ok()).collect();
        let _new = a.admit(ip(2), false).expect("a place");
        let after = telemetry::encode(telemetry::global(), &[], 0).unwrap_or_default();
        assert!(count(&after) > count(&before), "{after}");
    }
}
