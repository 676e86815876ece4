//! How many connections a node serves at once, so that a flood of connections cannot take the
//! descriptors its election needs (issue 30): a node that runs out of file descriptors cannot
//! accept its members' requests nor open its own, and a leader that cannot send its heartbeats
//! loses its claim.
//!
//! - At most `max_connections` connections are served at once, whoever opens them.
//! - Beyond that, a connection from the IP address of a member (the address book, which
//!   follows the membership in quorum mode; a member named by a host name counts by the
//!   addresses it resolved to, looked up again every [`RESOLVE_EVERY`] by
//!   [`Connections::resolve_members`], as a StatefulSet's members are) gets one of
//!   [`MEMBER_RESERVE`] more slots, on
//!   which only peer requests are served (`src/api.rs` refuses anything else with 503 and
//!   closes the connection); a peer request is authenticated as always (the MAC or the
//!   certificate), so an address alone buys nothing but the slot, and only while it is held.
//! - Any other connection beyond the cap is closed at once, without a byte read, and counted
//!   (`electd_connections_refused_total`).
//!
//! `max_connections` is lowered at start to what the process's descriptor limit holds beside
//! the reserve, the node's own outgoing connections and its files ([`fit_to_descriptors`]).
//! Each connection also has a read deadline for its headers and a write deadline
//! (`src/server.rs`), so that a client that stops reading frees its slot.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::wire::AddressBook;

/// Connections from members' addresses served beyond `max_connections`, for peer requests.
pub const MEMBER_RESERVE: usize = 64;
/// Descriptors kept free beyond the connections served and the outgoing connections to the
/// members ([`crate::wire::PEER_POOL_IDLE`] each): the node's data files, its logs, the
/// connections of a request in flight.
pub const DESCRIPTOR_MARGIN: usize = 256;
/// How often the members' host names are looked up again.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(10);

/// The connection slots of one node.
pub struct Connections {
    general: Arc<Semaphore>,
    max: usize,
    reserve: Arc<Semaphore>,
    members: Arc<AddressBook>,
    /// The addresses each member's host name resolved to at its last lookup that answered.
    resolved: Mutex<HashMap<String, Vec<IpAddr>>>,
    refused: AtomicU64,
}

/// A connection's slot, held as long as the connection is open.
#[derive(Debug)]
pub enum Slot {
    /// One of `max_connections`: anything may be asked on it.
    General(OwnedSemaphorePermit),
    /// One of the members' reserve: peer requests only ([`Reserved`]).
    Reserve(OwnedSemaphorePermit),
}

/// On each request of a connection that holds a reserve slot: only peer requests are served.
#[derive(Clone, Copy, Debug)]
pub struct Reserved;

/// On each request of a connection from a member's address (by IP, as the reserve judges it,
/// when the connection was accepted): its peer bodies read before authentication count against
/// the members' share of [`PreAuthBodies`], which no other host can take.
#[derive(Clone, Copy, Debug)]
pub struct FromMemberHost;

/// How many bytes of peer request bodies [`PreAuthBodies`] reads at once from members'
/// addresses before their MAC (or certificate) is checked: room for a leader's appends (up to
/// 512 KiB each) and snapshots (up to 1 MiB) to several followers at once.
pub const PRE_AUTH_MEMBERS: usize = 16 << 20;
/// The same for every other address: a member this node does not know by its address yet (a
/// joining one, a host name not resolved), whose requests are mostly hellos of a few hundred
/// bytes; a snapshot or an append to it still fits.
pub const PRE_AUTH_OTHERS: usize = 4 << 20;
/// How long a body waits for its share before it is refused (503 `busy`).
pub const PRE_AUTH_WAIT: Duration = Duration::from_secs(1);

/// The bytes of peer request bodies read before they are authenticated (issue 48, item 3): a
/// body is read whole before its MAC is checked (the MAC covers it), and the headers that get a
/// request that far (the cluster id, a member's id) are no secret, so without a bound 1,024
/// connections sending bodies of 1 MiB held about 1 GiB. A body takes its announced length
/// (or its path's limit) from its share, in KiB, before a byte of it is read, and gives it back
/// once the request was authenticated or refused. A flood from other hosts fills their share
/// only: the members' requests (appends, votes, snapshots) read from theirs.
pub struct PreAuthBodies {
    members: Arc<Semaphore>,
    others: Arc<Semaphore>,
}

impl Default for PreAuthBodies {
    fn default() -> Self {
        PreAuthBodies {
            members: Arc::new(Semaphore::new(PRE_AUTH_MEMBERS >> 10)),
            others: Arc::new(Semaphore::new(PRE_AUTH_OTHERS >> 10)),
        }
    }
}

impl PreAuthBodies {
    /// `bytes` of the share of members' hosts (`from_member`) or of the others, waiting at
    /// most [`PRE_AUTH_WAIT`]; `None` when it did not come in time.
    pub async fn take(&self, from_member: bool, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let (share, size) = if from_member {
            (&self.members, PRE_AUTH_MEMBERS)
        } else {
            (&self.others, PRE_AUTH_OTHERS)
        };
        let kib = bytes.div_ceil(1024).clamp(1, size >> 10) as u32;
        tokio::time::timeout(PRE_AUTH_WAIT, share.clone().acquire_many_owned(kib))
            .await
            .ok()?
            .ok()
    }
}

/// On each request of a connection whose client is on the node's own host: it came from the
/// address it reached the node on (a local application, a sidecar's neighbour). Such clients
/// are each their own client for the per-client watcher cap, not one address's share
/// (issue 52, item 3: 60 local workers got 16 streams and 44 refusals).
#[derive(Clone, Copy, Debug)]
pub struct LocalClient;

/// On each request: the address of the connection's client (the per-client watcher cap
/// counts by its IP).
#[derive(Clone, Copy, Debug)]
pub struct Remote(pub SocketAddr);

impl Connections {
    pub fn new(max: usize, members: Arc<AddressBook>) -> Connections {
        Connections {
            general: Arc::new(Semaphore::new(max)),
            max,
            reserve: Arc::new(Semaphore::new(MEMBER_RESERVE)),
            members,
            resolved: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
        }
    }

    /// Looks the members' host names up every [`RESOLVE_EVERY`] until `stop`.
    pub async fn resolve_members(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            self.resolve_now().await;
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RESOLVE_EVERY) => {}
            }
        }
    }

    /// Looks up the members' addresses that are host names (an IP address needs no lookup).
    /// A lookup that fails or takes over 2 s keeps what the name resolved to before (a DNS
    /// server in trouble under the load the reserve is for must not take it away); a name no
    /// longer in the book is forgotten.
    pub async fn resolve_now(&self) {
        let names: Vec<String> = self
            .members
            .addrs()
            .into_iter()
            .filter(|a| a.parse::<SocketAddr>().is_err())
            .collect();
        for name in &names {
            let lookup = tokio::net::lookup_host(name.as_str());
            if let Ok(Ok(found)) = tokio::time::timeout(Duration::from_secs(2), lookup).await {
                let ips = found.map(|a| a.ip().to_canonical()).collect();
                self.resolved
                    .lock()
                    .expect("resolved lock")
                    .insert(name.clone(), ips);
            }
        }
        self.resolved
            .lock()
            .expect("resolved lock")
            .retain(|name, _| names.contains(name));
    }

    /// A slot for a connection from `remote`, or `None` (counted): close it.
    pub fn admit(&self, remote: IpAddr) -> Option<Slot> {
        if let Ok(p) = self.general.clone().try_acquire_owned() {
            return Some(Slot::General(p));
        }
        if self.is_member_host(remote) {
            if let Ok(p) = self.reserve.clone().try_acquire_owned() {
                return Some(Slot::Reserve(p));
            }
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Whether some member's address (host:port in the address book) has the IP `ip`, or
    /// resolved to it at the last lookup.
    pub fn is_member_host(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.members.addrs().iter().any(|addr| {
            addr.parse::<SocketAddr>()
                .is_ok_and(|a| a.ip().to_canonical() == ip)
        }) || self
            .resolved
            .lock()
            .expect("resolved lock")
            .values()
            .any(|ips| ips.contains(&ip))
    }

    /// The most connections served at once outside the reserve.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections open now, the reserve's included.
    pub fn open(&self) -> usize {
        (self.max - self.general.available_permits())
            + (MEMBER_RESERVE - self.reserve.available_permits())
    }

    /// Connections closed unserved since the node started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// `max_connections` lowered to what `descriptors` (the process's limit on open files) holds
/// beside the reserve, the outgoing pools to `members` members and [`DESCRIPTOR_MARGIN`];
/// `None` when it fits as it is.
pub fn fit_to_descriptors(
    max_connections: usize,
    descriptors: u64,
    members: usize,
) -> Option<usize> {
    let outgoing = members.saturating_mul(crate::wire::PEER_POOL_IDLE);
    let room = usize::try_from(descriptors)
        .unwrap_or(usize::MAX)
        .saturating_sub(MEMBER_RESERVE + DESCRIPTOR_MARGIN + outgoing);
    (max_connections > room).then_some(room.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48, item 3: the bodies read before authentication are bounded per share, and a
    /// full share of other hosts leaves the members' whole.
    #[tokio::test]
    async fn bodies_before_authentication_are_bounded_per_share() {
        let b = PreAuthBodies::default();
        let mut held = Vec::new();
        for _ in 0..PRE_AUTH_OTHERS >> 20 {
            held.push(
                b.take(false, 1 << 20)
                    .await
                    .expect("the others' share, by MiB"),
            );
        }
        assert!(
            b.take(false, 1).await.is_none(),
            "the others' share is full: refused after the wait"
        );
        assert!(
            b.take(true, 1 << 20).await.is_some(),
            "the members' share is whole"
        );
        drop(held.pop());
        assert!(b.take(false, 1 << 20).await.is_some(), "given back");
        assert!(
            b.take(true, usize::MAX).await.is_some(),
            "a body larger than the share takes the whole share, never more"
        );
    }

    fn book() -> Arc<AddressBook> {
        AddressBook::new([(1, "127.0.0.1:7001".to_string()), (2, "[::1]:7002".into())].into())
    }

    #[test]
    fn beyond_the_cap_only_members_addresses_get_the_reserve() {
        let c = Connections::new(2, book());
        let stranger: IpAddr = "127.0.0.9".parse().unwrap();
        let member: IpAddr = "127.0.0.1".parse().unwrap();
        let a = c.admit(stranger).expect("a general slot");
        let b = c.admit(stranger).expect("a general slot");
        assert!(matches!((&a, &b), (Slot::General(_), Slot::General(_))));
        assert!(c.admit(stranger).is_none(), "a stranger beyond the cap");
        assert_eq!(c.refused(), 1);
        let mut reserved = Vec::new();
        for _ in 0..MEMBER_RESERVE {
            let s = c
                .admit(member)
                .expect("a reserve slot for a member's address");
            assert!(matches!(s, Slot::Reserve(_)));
            reserved.push(s);
        }
        // An IPv6 member is told by its address too.
        assert!(c.is_member_host("::1".parse().unwrap()));
        assert!(c.admit(member).is_none(), "the reserve is bounded");
        assert_eq!(c.open(), 2 + MEMBER_RESERVE);
        drop(a);
        assert!(matches!(c.admit(stranger), Some(Slot::General(_))));
    }

    /// A member named by a host name counts by what the name resolves to (a StatefulSet's
    /// members are named so), once looked up.
    #[tokio::test]
    async fn a_member_named_by_a_host_name_gets_the_reserve() {
        let book = AddressBook::new([(1, "localhost:7001".to_string())].into());
        let c = Connections::new(1, book);
        let member: IpAddr = "127.0.0.1".parse().unwrap();
        let _general = c.admit(member).expect("a general slot");
        assert!(c.admit(member).is_none(), "not looked up yet");
        c.resolve_now().await;
        assert!(matches!(c.admit(member), Some(Slot::Reserve(_))));
        assert!(c.admit("127.0.0.9".parse().unwrap()).is_none());
    }

    #[test]
    fn the_cap_fits_the_descriptor_limit() {
        assert_eq!(fit_to_descriptors(1024, 1 << 20, 5), None);
        assert_eq!(
            fit_to_descriptors(1024, 1024, 0),
            Some(1024 - MEMBER_RESERVE - DESCRIPTOR_MARGIN)
        );
        // Each member's pool of outgoing connections is kept free too.
        assert_eq!(
            fit_to_descriptors(1024, 1024, 31),
            Some(1024 - MEMBER_RESERVE - DESCRIPTOR_MARGIN - 31 * crate::wire::PEER_POOL_IDLE)
        );
        assert_eq!(fit_to_descriptors(1024, 10, 5), Some(1));
    }
}
