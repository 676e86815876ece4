//! The role events a node's log applied, kept for `GET /v1/roles/watch` (docs/design/roles.md,
//! "API"): each grant, release and revocation the node's table applied ([`RoleChange`]), and
//! each of this node's own claims that lapsed (`lost`: roles/holder.rs, `lapsed`), in order,
//! numbered by a sequence of this node's own (from 1 each time it starts: the events
//! are kept in memory only, the table itself is what is durable). The last [`KEPT`] are kept: a
//! stream resumes from any of them without a gap; one that asks for older events, or for events
//! of before a snapshot replaced the table, is told to read the roles again ([`Since::Reset`]),
//! as an etcd watch on a compacted revision or a Kubernetes watch answered 410 Gone is.
//!
//! [`RoleFeed`] is the I/O-free record; [`RoleEvents`] shares it between the store that
//! applies the log and the streams that read it, with a channel that wakes them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use electd_client::{RoleEvent, RoleEventKind, RoleName, Token};
use tokio::sync::watch;

use super::table::RoleChange;
use crate::role::NodeId;

/// How many role events a node keeps for streams that resume.
pub const KEPT: usize = 4096;

/// What a stream that asks for the events from `seq` on gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Since {
    /// The events from `seq` on, in order (none when it is up to date).
    Events(Vec<RoleEvent>),
    /// Events from `seq` on are no longer kept, or a snapshot replaced the table after it:
    /// the stream reads the roles' state again, then follows from `next`.
    Reset { next: u64 },
}

/// The role events kept, in order.
#[derive(Clone, Debug)]
pub struct RoleFeed {
    events: VecDeque<RoleEvent>,
    kept: usize,
    /// The seq the next event gets (the first is 1).
    next: u64,
    /// The first seq a stream may resume from: events before it are gone, or a snapshot
    /// replaced the table after them.
    valid_from: u64,
}

impl RoleFeed {
    /// A feed that keeps the last `kept` events.
    pub fn new(kept: usize) -> RoleFeed {
        RoleFeed {
            events: VecDeque::new(),
            kept: kept.max(1),
            next: 1,
            valid_from: 1,
        }
    }

    /// The seq of the last event (0 before any).
    pub fn latest(&self) -> u64 {
        self.next - 1
    }

    /// Records what the entry at log index `index` changed.
    pub fn record(&mut self, index: u64, changes: &[RoleChange]) {
        for c in changes {
            let (kind, role, node, token) = match c {
                RoleChange::Granted { role, node, token } => {
                    (RoleEventKind::Granted, role, node, token)
                }
                RoleChange::Released { role, node, token } => {
                    (RoleEventKind::Released, role, node, token)
                }
                RoleChange::Revoked { role, node, token } => {
                    (RoleEventKind::Revoked, role, node, token)
                }
            };
            self.push(kind, role, *node, *token, index);
        }
    }

    /// Records that `node`'s (this node's) claims on `lost` lapsed, its table applied to
    /// `index`.
    pub fn record_lost(&mut self, index: u64, node: NodeId, lost: &[(RoleName, Token)]) {
        for (role, token) in lost {
            self.push(RoleEventKind::Lost, role, node, *token, index);
        }
    }

    fn push(
        &mut self,
        kind: RoleEventKind,
        role: &RoleName,
        node: NodeId,
        token: Token,
        index: u64,
    ) {
        self.events.push_back(RoleEvent {
            seq: self.next,
            kind,
            name: role.clone(),
            node,
            token,
            index,
        });
        self.next += 1;
        if self.events.len() > self.kept {
            self.events.pop_front();
            self.valid_from = self.valid_from.max(self.events[0].seq);
        }
    }

    /// A snapshot replaced the table: what it changed has no events, so every stream reads
    /// the roles again. The reset takes a seq of its own, so that a stream already up to date
    /// (waiting for the next seq) is behind it too.
    pub fn reset(&mut self) {
        self.events.clear();
        self.next += 1;
        self.valid_from = self.next;
    }

    /// The events from seq `from` on, or [`Since::Reset`] when some of them are not kept. A
    /// `from` past the next seq (a resume point of an earlier run of the node) is a reset too.
    pub fn since(&self, from: u64) -> Since {
        if from < self.valid_from || from > self.next {
            return Since::Reset { next: self.next };
        }
        let skip = self.events.iter().take_while(|e| e.seq < from).count();
        Since::Events(self.events.iter().skip(skip).cloned().collect())
    }
}

/// A node's role feed, shared by the store that applies the log and the streams that follow
/// it; each recorded change wakes the streams.
#[derive(Clone)]
pub struct RoleEvents {
    feed: Arc<Mutex<RoleFeed>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Default for RoleEvents {
    fn default() -> Self {
        RoleEvents::new(KEPT)
    }
}

impl RoleEvents {
    /// A feed that keeps the last `kept` events.
    pub fn new(kept: usize) -> RoleEvents {
        RoleEvents {
            feed: Arc::new(Mutex::new(RoleFeed::new(kept))),
            changed: Arc::new(watch::channel(0).0),
        }
    }

    /// Records what the entries applied changed (each with its log index), and wakes the
    /// streams.
    pub fn record(&self, applied: &[(u64, Vec<RoleChange>)]) {
        if applied.iter().all(|(_, c)| c.is_empty()) {
            return;
        }
        self.change(|feed| {
            for (index, changes) in applied {
                feed.record(*index, changes);
            }
        });
    }

    /// This node's claims on `lost` lapsed ([`RoleFeed::record_lost`]); wakes the streams.
    pub fn lost(&self, index: u64, node: NodeId, lost: &[(RoleName, Token)]) {
        if !lost.is_empty() {
            self.change(|feed| feed.record_lost(index, node, lost));
        }
    }

    /// A snapshot replaced the table ([`RoleFeed::reset`]); wakes the streams.
    pub fn reset(&self) {
        self.change(RoleFeed::reset);
    }

    /// `f` changes the feed; then the streams are woken with its latest seq.
    fn change(&self, f: impl FnOnce(&mut RoleFeed)) {
        let latest = {
            let mut feed = self.feed.lock().expect("role feed");
            f(&mut feed);
            feed.latest()
        };
        self.changed.send_replace(latest);
    }

    /// A receiver woken by each change (subscribe before reading, so that none is missed).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The seq of the last event (0 before any).
    pub fn latest(&self) -> u64 {
        self.feed.lock().expect("role feed").latest()
    }

    /// [`RoleFeed::since`].
    pub fn since(&self, from: u64) -> Since {
        self.feed.lock().expect("role feed").since(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use electd_client::RoleName;

    fn granted(role: &str, node: u64, token: u64) -> RoleChange {
        RoleChange::Granted {
            role: RoleName::new(role).unwrap(),
            node,
            token,
        }
    }

    fn seqs(s: Since) -> Vec<u64> {
        match s {
            Since::Events(e) => e.into_iter().map(|e| e.seq).collect(),
            Since::Reset { next } => panic!("a reset to {next}"),
        }
    }

    #[test]
    fn events_are_numbered_in_order_and_resumed_from_any_kept() {
        let mut f = RoleFeed::new(3);
        assert_eq!(f.latest(), 0);
        assert_eq!(seqs(f.since(1)), Vec::<u64>::new());
        f.record(7, &[granted("a", 1, 1), granted("b", 2, 2)]);
        f.record(
            9,
            &[RoleChange::Revoked {
                role: RoleName::new("a").unwrap(),
                node: 1,
                token: 1,
            }],
        );
        assert_eq!(f.latest(), 3);
        assert_eq!(seqs(f.since(1)), vec![1, 2, 3]);
        assert_eq!(seqs(f.since(3)), vec![3]);
        assert_eq!(seqs(f.since(4)), Vec::<u64>::new());
        let Since::Events(e) = f.since(3) else {
            panic!()
        };
        assert_eq!(
            (e[0].kind, e[0].index, e[0].token),
            (RoleEventKind::Revoked, 9, 1)
        );
        // A fourth event pushes the first out: resuming from it is a reset.
        f.record(10, &[granted("a", 3, 3)]);
        assert_eq!(f.since(1), Since::Reset { next: 5 });
        assert_eq!(seqs(f.since(2)), vec![2, 3, 4]);
        // A resume point from an earlier run of the node (past the next seq): a reset.
        assert_eq!(f.since(9), Since::Reset { next: 5 });
    }

    #[test]
    fn a_snapshot_resets_every_stream_behind_it() {
        let mut f = RoleFeed::new(10);
        f.record(3, &[granted("a", 1, 1)]);
        f.reset();
        // Up to date before it (waiting for seq 2) or behind it: read the roles again.
        assert_eq!(f.since(1), Since::Reset { next: 3 });
        assert_eq!(f.since(2), Since::Reset { next: 3 });
        assert_eq!(seqs(f.since(3)), Vec::<u64>::new());
        f.record(12, &[granted("b", 2, 5)]);
        assert_eq!(seqs(f.since(3)), vec![3]);
    }

    #[tokio::test]
    async fn a_recorded_change_wakes_the_streams_and_a_reset_too() {
        let feed = RoleEvents::new(10);
        let mut rx = feed.subscribe();
        feed.record(&[(4, Vec::new())]);
        assert!(!rx.has_changed().unwrap(), "nothing changed, nobody woken");
        feed.record(&[(5, vec![granted("a", 1, 1)])]);
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        feed.reset();
        assert!(rx.has_changed().unwrap());
    }
}
