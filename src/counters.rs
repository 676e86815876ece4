//! Counters shared by every mode: messages sent and received by type, rejected peer requests by
//! reason, elections started, leader changes, and when each peer was last heard from.
//! `/v1/status` serves them as maps and `/metrics` in Prometheus form; [`Timings`], the
//! distributions of how long things took, only `/metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use electd_client::Counters as Snapshot;
use prometheus_client::metrics::histogram::Histogram;

use crate::lease::ClaimEnd;
use crate::role::{NodeId, Role, View};

/// How long things took, in seconds (`/metrics` histograms, docs/operations.md, "Metrics").
#[derive(Clone)]
pub struct Timings {
    /// From a probe's send to the quorum's acknowledgement (quorum), or from a statement's send
    /// to the store's answer that this node holds the row (mutex).
    pub probe_round_trip: Histogram,
    /// From the instant this node lost its leader (its follower lease ended, or it began to
    /// campaign) to its own claim.
    pub election: Histogram,
    /// Each stretch of time this node knew no leader, observed when it knows one again.
    pub leaderless: Histogram,
    /// The same stretches in follower leases of this node (unitless): what alert rules read,
    /// so that one threshold ("over 3 follower leases") holds for every timing profile.
    pub leaderless_follower_leases: Histogram,
    /// From an event's record to its write into a `/v1/watch` stream.
    pub watch_lag: Histogram,
}

impl Default for Timings {
    fn default() -> Self {
        let ms = |b: &[f64]| Histogram::new(b.iter().map(|ms| ms / 1000.0));
        Timings {
            probe_round_trip: ms(&[
                0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
            ]),
            election: ms(&[
                1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 10_000.0,
            ]),
            leaderless: ms(&[
                10.0, 50.0, 100.0, 150.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10_000.0, 60_000.0,
            ]),
            leaderless_follower_leases: Histogram::new([
                0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0,
            ]),
            watch_lag: ms(&[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 50.0, 250.0, 1000.0]),
        }
    }
}

#[derive(Default)]
pub struct Counters {
    pub timings: Timings,
    /// Since when (event stamp, ns) this node has known no leader.
    leaderless_since_ns: Mutex<Option<u64>>,
    /// This node's follower lease (ns; 0 until the node sets it): the unit of
    /// [`Timings::leaderless_follower_leases`].
    follower_lease_ns: AtomicU64,
    sent: Mutex<BTreeMap<&'static str, u64>>,
    received: Mutex<BTreeMap<&'static str, u64>>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    last_contact_ns: Mutex<BTreeMap<NodeId, u64>>,
    /// When each peer last answered a request of ours (MONOTONIC): what a leader hears of a
    /// member at the address it sends to, whatever that member sends itself.
    last_answer_ns: Mutex<BTreeMap<NodeId, u64>>,
    /// How far each peer's wall clock was from ours (ms, + ahead) in its last request.
    clock_offset_ms: Mutex<BTreeMap<NodeId, i64>>,
    elections_started: AtomicU64,
    leader_changes: AtomicU64,
    /// This node's claims that ended, by cause ([`crate::lease::ClaimEnd`]).
    claims_ended: Mutex<BTreeMap<&'static str, u64>>,
    /// Mutex mode: answers of the store whose lease row held a value out of range, by the
    /// first such field (`mutex/store.rs`, `BadRow`).
    bad_store_rows: Mutex<BTreeMap<&'static str, u64>>,
    /// Quorum mode: vote requests refused before openraft saw them, by reason.
    votes_refused: Mutex<BTreeMap<&'static str, u64>>,
    /// Quorum mode: joins of non-voters judged, by outcome.
    nonvoter_joins: Mutex<BTreeMap<&'static str, u64>>,
    /// Quorum mode: non-voters removed as absent.
    nonvoters_removed: AtomicU64,
}

/// The process's figures as `/proc/self` gives them (Linux), each `None` when unreadable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessFigures {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
}

/// Reads this process's figures (`process_*` in `/metrics`).
pub fn process_figures() -> ProcessFigures {
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let page = rustix::param::page_size() as u64;
    // /proc/self/stat: `pid (comm) state …`; utime and stime are the 12th and 13th fields after
    // the comm's closing parenthesis (comm may hold spaces).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let field = |i: usize| after.get(i).and_then(|v| v.parse::<u64>().ok());
    let cpu_seconds = match (field(11), field(12)) {
        (Some(u), Some(s)) if ticks > 0.0 => Some((u + s) as f64 / ticks),
        _ => None,
    };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut pages = statm.split_whitespace().map(|v| v.parse::<u64>().ok());
    let virtual_bytes = pages.next().flatten().map(|p| p * page);
    let resident_bytes = pages.next().flatten().map(|p| p * page);
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    ProcessFigures {
        cpu_seconds,
        resident_bytes,
        virtual_bytes,
        open_fds,
        max_fds,
    }
}

/// A copy of a counter map with owned keys, as the wire form has them.
fn owned(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<String, u64> {
    map.lock()
        .expect("counters lock")
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect()
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, key: &'static str) {
    *map.lock().expect("counters lock").entry(key).or_default() += 1;
}

impl Counters {
    /// A peer message of type `kind` is being sent (counted once, whatever becomes of it).
    pub fn sent(&self, kind: &'static str) {
        bump(&self.sent, kind);
    }

    /// A peer message of type `kind` was accepted from a peer.
    pub fn received(&self, kind: &'static str) {
        bump(&self.received, kind);
    }

    /// A peer request was refused (bad cluster, bad proof, unknown peer, bad body…).
    pub fn rejected(&self, reason: &'static str) {
        bump(&self.rejected, reason);
    }

    pub fn election_started(&self) {
        self.elections_started.fetch_add(1, Ordering::Relaxed);
    }

    pub fn leader_changed(&self) {
        self.leader_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// A claim of this node ended, for `cause`.
    pub fn claim_ended(&self, cause: ClaimEnd) {
        bump(&self.claims_ended, cause.as_str());
    }

    /// Mutex mode: the store answered a lease row whose `field` was out of range.
    pub fn bad_store_row(&self, field: &'static str) {
        bump(&self.bad_store_rows, field);
    }

    /// Quorum mode: a vote request refused before openraft saw it, for `reason` (`promise`,
    /// `unconfirmed`).
    pub fn vote_refused(&self, reason: &'static str) {
        bump(&self.votes_refused, reason);
    }

    /// Quorum mode: a join of a non-voter judged, with `outcome` (`added`, `member`,
    /// `not_leader`, or a refusal's code).
    pub fn nonvoter_join(&self, outcome: &'static str) {
        bump(&self.nonvoter_joins, outcome);
    }

    /// Quorum mode: `n` non-voters removed as absent.
    pub fn nonvoters_removed(&self, n: u64) {
        self.nonvoters_removed.fetch_add(n, Ordering::Relaxed);
    }

    /// A peer got a request through to us at `now_ns`.
    pub fn contact(&self, peer: NodeId, now_ns: u64) {
        self.last_contact_ns
            .lock()
            .expect("counters lock")
            .insert(peer, now_ns);
    }

    /// A peer answered a request of ours at `now_ns` (contact too).
    pub fn answered(&self, peer: NodeId, now_ns: u64) {
        self.contact(peer, now_ns);
        self.last_answer_ns
            .lock()
            .expect("counters lock")
            .insert(peer, now_ns);
    }

    pub fn last_answer_ns(&self, peer: NodeId) -> Option<u64> {
        self.last_answer_ns
            .lock()
            .expect("counters lock")
            .get(&peer)
            .copied()
    }

    pub fn last_contact_ns(&self, peer: NodeId) -> Option<u64> {
        self.last_contact_ns
            .lock()
            .expect("counters lock")
            .get(&peer)
            .copied()
    }

    /// `peer`'s last request showed its wall clock `offset_ms` ahead of ours (negative:
    /// behind); gives back the offset it showed before.
    pub fn clock_offset(&self, peer: NodeId, offset_ms: i64) -> Option<i64> {
        self.clock_offset_ms
            .lock()
            .expect("counters lock")
            .insert(peer, offset_ms)
    }

    pub fn clock_offset_ms(&self, peer: NodeId) -> Option<i64> {
        self.clock_offset_ms
            .lock()
            .expect("counters lock")
            .get(&peer)
            .copied()
    }

    /// Counters of a node of timing `t`: its follower lease is the unit stretches without a
    /// leader are also counted in.
    pub fn for_timing(t: &crate::config::Timing) -> Counters {
        let c = Counters::default();
        c.follower_lease_ns.store(
            t.follower_lease_ms.saturating_mul(1_000_000),
            Ordering::Relaxed,
        );
        c
    }

    /// `view` follows `prev` at `t_ns` (event stamps) on node `me`: a stretch without a leader
    /// starts or ends, and an election this node won is timed from the start of the stretch.
    pub fn view_changed(&self, me: NodeId, prev: View, view: View, t_ns: u64) {
        let mut since = self.leaderless_since_ns.lock().expect("counters lock");
        match (view.leader, *since) {
            (None, None) => *since = Some(t_ns),
            (Some(leader), Some(from)) => {
                let took = t_ns.saturating_sub(from) as f64 / 1e9;
                self.timings.leaderless.observe(took);
                let lease_ns = self.follower_lease_ns.load(Ordering::Relaxed);
                if lease_ns > 0 {
                    self.timings
                        .leaderless_follower_leases
                        .observe(took * 1e9 / lease_ns as f64);
                }
                if leader == me && view.role == Role::Leader && prev.leader != Some(me) {
                    self.timings.election.observe(took);
                }
                *since = None;
            }
            _ => {}
        }
    }

    /// A copy of the counters at one moment (`counters` in `/v1/status`).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            elections_started: self.elections_started.load(Ordering::Relaxed),
            leader_changes: self.leader_changes.load(Ordering::Relaxed),
            messages_sent: owned(&self.sent),
            messages_received: owned(&self.received),
            rejected_peer_requests: owned(&self.rejected),
            claims_ended: owned(&self.claims_ended),
            bad_store_rows: owned(&self.bad_store_rows),
            votes_refused: owned(&self.votes_refused),
            nonvoter_joins: owned(&self.nonvoter_joins),
            nonvoters_removed: self.nonvoters_removed.load(Ordering::Relaxed),
        }
    }
}
