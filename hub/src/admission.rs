//! Who may hold a socket open, before anything is known about them: counts of open
//! connections, in total and per client address, of WebSockets not yet authenticated, and
//! of failed authentications per address.
//!
//! Why: before `auth`, a client costs the hub a socket, a task and buffers, and the hub
//! knows nothing but its address. Without these bounds one machine could open sockets
//! until the hub runs out of file descriptors or memory, and guess tokens as fast as the
//! writer answers. Every count is taken under one lock, when a socket is accepted or
//! upgraded (never per frame), and given back by dropping the permit.
//!
//! Addresses are counted by IP (an IPv6 address by its /64, the block one host usually
//! has). Behind a reverse proxy every client has the proxy's address: raise the
//! per-address limits there.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::config::ConnectionLimits;

/// What a client is counted by: its IPv4 address, its IPv6 /64, or, on the hub's local
/// socket, its user (a uid; on Windows a digest of the SID: so one local process failing to
/// authenticate locks out its own user, never every local client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientAddress {
    Ip(IpAddr),
    LocalUser(u64),
}

impl ClientAddress {
    pub fn of(ip: IpAddr) -> ClientAddress {
        match ip {
            IpAddr::V4(v4) => ClientAddress::Ip(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientAddress::Ip(IpAddr::V4(v4)),
                None => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    ClientAddress::Ip(IpAddr::V6(bits.into()))
                }
            },
        }
    }
}

impl std::fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAddress::Ip(IpAddr::V4(v4)) => write!(f, "{v4}"),
            ClientAddress::Ip(IpAddr::V6(v6)) => write!(f, "{v6}/64"),
            ClientAddress::LocalUser(uid) => write!(f, "local user {uid}"),
        }
    }
}

/// Why a socket or an upgrade was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turned {
    /// The hub holds its most connections, in total or from this address.
    Full,
    /// Too many sockets are waiting to authenticate, in total or from this address.
    TooManyUnauthenticated,
    /// This address failed to authenticate too often; it may try again after this long.
    FailedAuths { retry_after: Duration },
}

#[derive(Debug, Default)]
struct PerAddress {
    connections: usize,
    unauthenticated: usize,
}

/// One token bucket per client address: `burst` tokens, one back every `interval`.
/// Addresses are remembered only while their bucket is not full, and at most
/// [`ADDRESSES_REMEMBERED`] of them (past that, the full ones are forgotten, and if that is
/// not enough, all: the bound on memory wins over the limit).
#[derive(Debug)]
pub struct AddressBuckets {
    burst: f64,
    interval: Duration,
    buckets: HashMap<ClientAddress, (f64, Instant)>,
}

/// Addresses one [`AddressBuckets`] remembers at most.
const ADDRESSES_REMEMBERED: usize = 16_384;

impl AddressBuckets {
    pub fn new(burst: u32, interval: Duration) -> AddressBuckets {
        AddressBuckets {
            burst: f64::from(burst.max(1)),
            interval: interval.max(Duration::from_millis(1)),
            buckets: HashMap::default(),
        }
    }

    fn tokens(&self, address: ClientAddress, now: Instant) -> f64 {
        match self.buckets.get(&address) {
            None => self.burst,
            Some((tokens, at)) => {
                let elapsed = now.saturating_duration_since(*at).as_secs_f64();
                (tokens + elapsed / self.interval.as_secs_f64()).min(self.burst)
            }
        }
    }

    /// `Ok` when `address` has a token left; else how long until it has one.
    pub fn check(&self, address: ClientAddress, now: Instant) -> Result<(), Duration> {
        let tokens = self.tokens(address, now);
        if tokens >= 1.0 {
            Ok(())
        } else {
            let wait = (1.0 - tokens) * self.interval.as_secs_f64();
            Err(Duration::from_secs_f64(wait).max(Duration::from_millis(1)))
        }
    }

    /// Takes a token from `address` (none left: it stays at zero).
    pub fn take(&mut self, address: ClientAddress, now: Instant) {
        let tokens = self.tokens(address, now);
        if self.buckets.len() >= ADDRESSES_REMEMBERED && !self.buckets.contains_key(&address) {
            let burst = self.burst;
            let interval = self.interval.as_secs_f64();
            self.buckets.retain(|_, (tokens, at)| {
                *tokens + now.saturating_duration_since(*at).as_secs_f64() / interval < burst
            });
            if self.buckets.len() >= ADDRESSES_REMEMBERED {
                self.buckets.clear();
            }
        }
        self.buckets.insert(address, ((tokens - 1.0).max(0.0), now));
    }

    /// Checks and takes at once.
    pub fn try_take(&mut self, address: ClientAddress, now: Instant) -> Result<(), Duration> {
        self.check(address, now)?;
        self.take(address, now);
        Ok(())
    }
}

#[derive(Debug)]
struct Counts {
    connections: usize,
    unauthenticated: usize,
    per_address: HashMap<ClientAddress, PerAddress>,
    failed_auths: AddressBuckets,
}

/// The counts and their limits, shared by the listener and the sessions.
#[derive(Debug)]
pub struct Admission {
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
}

impl Admission {
    pub fn new(limits: ConnectionLimits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            counts: Mutex::new(Counts {
                connections: 0,
                unauthenticated: 0,
                per_address: HashMap::default(),
                failed_auths: AddressBuckets::new(
                    limits.failed_auth_burst,
                    limits.failed_auth_interval,
                ),
            }),
        })
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a newly accepted connection, or says why not.
    pub fn connect(self: &Arc<Self>, address: ClientAddress) -> Result<ConnectionPermit, Turned> {
        let mut counts = self.lock();
        let from_address = counts
            .per_address
            .get(&address)
            .map_or(0, |per| per.connections);
        if counts.connections >= self.limits.max_connections
            || from_address >= self.limits.max_connections_per_address
        {
            return Err(Turned::Full);
        }
        counts.connections += 1;
        counts.per_address.entry(address).or_default().connections += 1;
        Ok(ConnectionPermit {
            admission: self.clone(),
            address,
        })
    }

    /// Admits a WebSocket that is about to wait for `auth`, or says why not.
    pub fn upgrade(
        self: &Arc<Self>,
        address: ClientAddress,
        now: Instant,
    ) -> Result<UnauthenticatedPermit, Turned> {
        let mut counts = self.lock();
        if let Err(retry_after) = counts.failed_auths.check(address, now) {
            return Err(Turned::FailedAuths { retry_after });
        }
        let from_address = counts
            .per_address
            .get(&address)
            .map_or(0, |per| per.unauthenticated);
        if counts.unauthenticated >= self.limits.max_unauthenticated
            || from_address >= self.limits.max_unauthenticated_per_address
        {
            return Err(Turned::TooManyUnauthenticated);
        }
        counts.unauthenticated += 1;
        counts
            .per_address
            .entry(address)
            .or_default()
            .unauthenticated += 1;
        Ok(UnauthenticatedPermit {
            admission: self.clone(),
            address,
        })
    }

    /// Whether `address` may try a token now (an HTTP gateway's request), or how long until
    /// it may: the same budget of failed authentications as WebSocket upgrades.
    pub fn may_authenticate(&self, address: ClientAddress, now: Instant) -> Result<(), Duration> {
        self.lock().failed_auths.check(address, now)
    }

    /// Records a failed authentication from `address`.
    pub fn auth_failed(&self, address: ClientAddress, now: Instant) {
        self.lock().failed_auths.take(address, now);
    }

    /// Open connections, and WebSockets waiting to authenticate (for tests and metrics).
    pub fn open(&self) -> (usize, usize) {
        let counts = self.lock();
        (counts.connections, counts.unauthenticated)
    }

    fn release(&self, address: ClientAddress, unauthenticated: bool) {
        let mut counts = self.lock();
        let per = counts.per_address.entry(address).or_default();
        if unauthenticated {
            per.unauthenticated = per.unauthenticated.saturating_sub(1);
        } else {
            per.connections = per.connections.saturating_sub(1);
        }
        if per.connections == 0 && per.unauthenticated == 0 {
            counts.per_address.remove(&address);
        }
        if unauthenticated {
            counts.unauthenticated = counts.unauthenticated.saturating_sub(1);
        } else {
            counts.connections = counts.connections.saturating_sub(1);
        }
    }
}

/// One open TCP connection, counted until dropped (a WebSocket keeps it for its life).
#[derive(Debug)]
pub struct ConnectionPermit {
    admission: Arc<Admission>,
    address: ClientAddress,
}

impl ConnectionPermit {
    pub fn address(&self) -> ClientAddress {
        self.address
    }

    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.admission.release(self.address, false);
    }
}

/// One WebSocket waiting for `auth`, counted until dropped (when `auth` is answered).
#[derive(Debug)]
pub struct UnauthenticatedPermit {
    admission: Arc<Admission>,
    address: ClientAddress,
}

impl Drop for UnauthenticatedPermit {
    fn drop(&mut self) {
        self.admission.release(self.address, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 3,
            max_connections_per_address: 2,
            max_unauthenticated: 3,
            max_unauthenticated_per_address: 2,
            header_timeout: Duration::from_secs(1),
            failed_auth_burst: 2,
            failed_auth_interval: Duration::from_secs(10),
        }
    }

    fn ip(text: &str) -> ClientAddress {
        ClientAddress::of(text.parse().unwrap())
    }

    #[test]
    fn connections_are_capped_in_total_and_per_address_and_given_back_on_drop() {
        let admission = Admission::new(limits());
        let a1 = admission.connect(ip("10.0.0.1")).unwrap();
        let _a2 = admission.connect(ip("10.0.0.1")).unwrap();
        assert_eq!(
            admission.connect(ip("10.0.0.1")).unwrap_err(),
            Turned::Full,
            "per address"
        );
        let _b1 = admission.connect(ip("10.0.0.2")).unwrap();
        assert_eq!(
            admission.connect(ip("10.0.0.3")).unwrap_err(),
            Turned::Full,
            "in total"
        );
        drop(a1);
        let _c1 = admission.connect(ip("10.0.0.3")).unwrap();
        assert_eq!(admission.open(), (3, 0));
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        assert_eq!(ip("2001:db8::1"), ip("2001:db8::ffff:1234"));
        assert_ne!(ip("2001:db8::1"), ip("2001:db8:0:1::1"));
        assert_eq!(ip("::ffff:10.0.0.1"), ip("10.0.0.1"));
        let admission = Admission::new(limits());
        let _one = admission.connect(ip("2001:db8::1")).unwrap();
        let _two = admission.connect(ip("2001:db8::2")).unwrap();
        assert!(admission.connect(ip("2001:db8::3")).is_err());
    }

    #[test]
    fn unauthenticated_sockets_are_capped_per_address_and_in_total() {
        let admission = Admission::new(limits());
        let now = Instant::now();
        let a = ip("10.0.0.1");
        let b = ip("10.0.0.2");
        let c = ip("10.0.0.3");
        let first = admission.upgrade(a, now).unwrap();
        let _second = admission.upgrade(a, now).unwrap();
        assert_eq!(
            admission.upgrade(a, now).unwrap_err(),
            Turned::TooManyUnauthenticated
        );
        let _third = admission.upgrade(b, now).unwrap();
        assert_eq!(
            admission.upgrade(c, now).unwrap_err(),
            Turned::TooManyUnauthenticated
        );
        drop(first);
        assert!(admission.upgrade(c, now).is_ok());
    }

    #[test]
    fn a_bucket_per_address_refills_with_time_and_forgets_addresses_past_its_bound() {
        let start = Instant::now();
        let mut buckets = AddressBuckets::new(2, Duration::from_secs(60));
        let a = ip("10.0.0.1");
        assert!(buckets.try_take(a, start).is_ok());
        assert!(buckets.try_take(a, start).is_ok());
        assert_eq!(
            buckets.try_take(a, start),
            Err(Duration::from_secs(60)),
            "empty: a whole interval to wait"
        );
        assert_eq!(
            buckets.check(a, start + Duration::from_secs(45)),
            Err(Duration::from_secs(15))
        );
        assert!(buckets.try_take(a, start + Duration::from_secs(60)).is_ok());
        for n in 0..(ADDRESSES_REMEMBERED as u32 + 10) {
            let other = ClientAddress::of(IpAddr::V4(n.into()));
            buckets.take(other, start);
        }
        assert!(buckets.buckets.len() <= ADDRESSES_REMEMBERED);
    }

    #[test]
    fn failed_auths_past_the_burst_turn_an_address_away_until_the_bucket_refills() {
        let admission = Admission::new(limits());
        let start = Instant::now();
        let a = ip("10.0.0.1");
        let b = ip("10.0.0.2");
        admission.auth_failed(a, start);
        assert!(
            admission.upgrade(a, start).is_ok(),
            "one failure is allowed"
        );
        admission.auth_failed(a, start);
        match admission.upgrade(a, start) {
            Err(Turned::FailedAuths { retry_after }) => {
                assert_eq!(retry_after, Duration::from_secs(10));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(admission.upgrade(b, start).is_ok(), "other addresses go on");
        let later = start + Duration::from_secs(10);
        assert!(admission.upgrade(a, later).is_ok(), "one token back");
        // On the Unix socket, each local user is counted apart.
        let (mallory, dana) = (
            ClientAddress::LocalUser(1001),
            ClientAddress::LocalUser(1000),
        );
        admission.auth_failed(mallory, start);
        admission.auth_failed(mallory, start);
        assert!(admission.upgrade(mallory, start).is_err());
        assert!(
            admission.upgrade(dana, start).is_ok(),
            "another user goes on"
        );
    }
}
