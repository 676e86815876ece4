//! Counters shared by every mode: messages sent and received by type, rejected peer requests by
//! reason, elections started, leader changes, and when each peer was last heard from.
//! `/v1/status` serves them as maps and `/metrics` in Prometheus form.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use electd_client::Counters as Snapshot;

use crate::role::NodeId;

#[derive(Default)]
pub struct Counters {
    sent: Mutex<BTreeMap<&'static str, u64>>,
    received: Mutex<BTreeMap<&'static str, u64>>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    last_contact_ns: Mutex<BTreeMap<NodeId, u64>>,
    elections_started: AtomicU64,
    leader_changes: AtomicU64,
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

    /// A peer got a request through to us at `now_ns`.
    pub fn contact(&self, peer: NodeId, now_ns: u64) {
        self.last_contact_ns
            .lock()
            .expect("counters lock")
            .insert(peer, now_ns);
    }

    pub fn last_contact_ns(&self, peer: NodeId) -> Option<u64> {
        self.last_contact_ns
            .lock()
            .expect("counters lock")
            .get(&peer)
            .copied()
    }

    /// A copy of the counters at one moment (`counters` in `/v1/status`).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            elections_started: self.elections_started.load(Ordering::Relaxed),
            leader_changes: self.leader_changes.load(Ordering::Relaxed),
            messages_sent: owned(&self.sent),
            messages_received: owned(&self.received),
            rejected_peer_requests: owned(&self.rejected),
        }
    }
}
