//! [`MutexNode`]: a node of mutex mode. Every beat it sends the store one statement that takes
//! or renews the lease row ([`super::store::CLAIM`]); the row's lease is the follower lease F,
//! by the database's clock.
//!
//! # Why two nodes never claim at once (mutex mode)
//! A node reads `t0` (CLOCK_BOOTTIME) *before* it sends the statement. When the statement
//! answers that this node holds the row, the database ran it after `t0` and set the row to
//! expire F after that, by its own clock; no other node can take the row before then. The node
//! claims until `t0 + L`, L the claim lease (F less a fifth by default), through the same
//! [`Lease`] as quorum mode, and every answer it gives meanwhile is a promise to that instant.
//! The margin F − L absorbs the difference between the rates of the node's clock and the
//! database's. What this depends on, and quorum mode does not: **the store**. While it is
//! unreachable, slow or down, the holder's claim ends `L` after its last answered statement
//! (not when a TCP timeout fires) and nobody claims until it answers again; and the database's
//! clock must not jump forward by more than the margin (an NTP step on the database host would
//! expire the row early).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::store::{Row, Store, StoreError};
use crate::clock::{ms, Clock};
use crate::config::Timing;
use crate::counters::Counters;
use crate::engine::{Judged, LoopGuard, Plumbing, ResignError, Running};
use crate::events::EventLog;
use crate::lease::Lease;
use crate::role::{NodeId, Resigned, Role, View};

/// The row as this node last saw it, and until when (BOOTTIME) its holder's lease runs by what
/// the store answered.
#[derive(Clone, Copy, Debug)]
struct Seen {
    holder: NodeId,
    term: u64,
    until_ns: u64,
}

/// A running mutex-mode node.
pub struct MutexNode {
    id: NodeId,
    timing: Timing,
    store: Store,
    clock: Arc<dyn Clock>,
    events: Arc<EventLog>,
    counters: Arc<Counters>,
    lease: Mutex<Lease>,
    seen: Mutex<Option<Seen>>,
    /// After a resignation: no statement before this instant (BOOTTIME), so that the row
    /// expires and another node takes it.
    resigned_until_ns: AtomicU64,
    /// Statements answered, and not answered.
    answered: AtomicU64,
    unanswered: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// The beat runs.
    pub(super) running: Running,
}

impl MutexNode {
    /// Checks that the store lets this node in (a refusal stops the start, naming
    /// `store_url`; an unreachable store does not) and starts the beat.
    pub async fn start(
        id: NodeId,
        timing: Timing,
        store: Store,
        plumbing: Plumbing,
        stop: CancellationToken,
    ) -> Result<Arc<MutexNode>, StoreError> {
        store
            .check(Duration::from_millis(timing.follower_lease_ms))
            .await?;
        let Plumbing {
            transport: _,
            events,
            counters,
            clock,
        } = plumbing;
        let (running, guard) = Running::start();
        let node = Arc::new(MutexNode {
            id,
            timing,
            store,
            lease: Mutex::new(Lease::default()),
            clock,
            events,
            counters,
            seen: Mutex::new(None),
            resigned_until_ns: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            unanswered: AtomicU64::new(0),
            last_error: Mutex::new(None),
            running,
        });
        tokio::spawn(node.clone().beat(stop, guard));
        Ok(node)
    }

    /// Every beat: one statement (unless resigned), then the record of any change of role.
    async fn beat(self: Arc<Self>, stop: CancellationToken, _running: LoopGuard) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.timing.heartbeat_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A statement may take as long as a probe of quorum mode: a third of the follower
        // lease, at least a beat; an answer later than the claim lease could claim nothing.
        let deadline = Duration::from_millis(
            (self.timing.follower_lease_ms / 3).max(self.timing.heartbeat_ms),
        );
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if self.lease.lock().expect("lease").is_closed() {
                return;
            }
            if self.clock.boot_ns() >= self.resigned_until_ns.load(Relaxed) {
                let t0 = self.clock.read();
                let res = self
                    .store
                    .claim(self.id, self.timing.follower_lease_ms, deadline)
                    .await;
                match res {
                    Ok(row) => self.on_row(t0, row),
                    Err(e) => {
                        self.unanswered.fetch_add(1, Relaxed);
                        tracing::debug!(error = %e, "statement not answered");
                        *self.last_error.lock().expect("error") = Some(e.to_string());
                    }
                }
            }
            self.record_view();
        }
    }

    /// The store answered a statement sent at `t0`.
    fn on_row(&self, t0: crate::clock::Reading, row: Row) {
        self.answered.fetch_add(1, Relaxed);
        let now = self.clock.boot_ns();
        let lease_ns = ms(self.timing.effective_lease_ms());
        let mut lease = self.lease.lock().expect("lease");
        if row.mine {
            let took = now.saturating_sub(t0.boot_ns);
            self.counters
                .timings
                .probe_round_trip
                .observe(took as f64 / 1e9);
            let new_term = lease.last().is_none_or(|c| c.term != row.term);
            if lease.grant(row.term, t0, lease_ns) && new_term {
                self.counters.election_started();
            }
        } else {
            // Another node holds the row: whatever this node claimed has ended long ago (its
            // statements went unanswered for more than the row's lease).
            lease.revoke(now);
            self.resigned_until_ns.store(0, Relaxed);
        }
        *self.seen.lock().expect("seen") = Some(Seen {
            holder: row.holder,
            term: row.term,
            until_ns: now + ms(row.left_ms),
        });
    }

    /// The effective role now: leader while the claim holds; else a follower of the holder the
    /// store last named, while its lease runs by what the store said.
    pub(super) fn view(&self) -> Judged {
        let now = self.clock.boot_ns();
        let lease = self.lease.lock().expect("lease");
        let claim = lease.last().and_then(|c| lease.current(c.term, now));
        if let Some(c) = claim {
            return Judged {
                view: View {
                    role: Role::Leader,
                    term: c.term,
                    leader: Some(self.id),
                },
                lease_remaining_ns: Some(c.until_ns - now),
            };
        }
        let seen = *self.seen.lock().expect("seen");
        let term = seen
            .map_or(0, |s| s.term)
            .max(lease.last().map_or(0, |c| c.term));
        let leader = seen
            .filter(|s| s.holder != self.id && now < s.until_ns)
            .map(|s| s.holder);
        Judged::unleased(View {
            role: Role::Follower,
            term,
            leader,
        })
    }

    /// Records an event if (role, term, leader) changed, stamped as quorum mode stamps them.
    fn record_view(&self) {
        self.events.record_leased_view(
            || self.view().view,
            &self.lease,
            &*self.clock,
            &self.counters,
        );
    }

    /// What `/v1/status` shows of the store and the row.
    pub(super) fn status(&self) -> serde_json::Value {
        let now = self.clock.boot_ns();
        let seen = *self.seen.lock().expect("seen");
        serde_json::json!({
            "store": self.store.shown(),
            "row": seen.map(|s| serde_json::json!({
                "holder": s.holder,
                "term": s.term,
                "left_ms": s.until_ns.saturating_sub(now) / 1_000_000,
            })),
            "statements": {
                "answered": self.answered.load(Relaxed),
                "unanswered": self.unanswered.load(Relaxed),
            },
            "last_error": *self.last_error.lock().expect("error"),
        })
    }

    /// Releases the row: the claim ends now and its term is fenced (the promises already
    /// answered still run), and this node sends no statement until the row has expired, so
    /// that another takes it. A named successor cannot be honoured: the next holder is
    /// whichever node takes the row first.
    pub(super) async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        if let Some(n) = to {
            return Err(ResignError::Unsuitable(
                n,
                "mutex mode cannot name a successor: the next holder is whichever node takes \
                 the row first"
                    .into(),
            ));
        }
        let now = self.clock.boot_ns();
        let term = {
            let mut lease = self.lease.lock().expect("lease");
            let Some(c) = lease.last().and_then(|c| lease.current(c.term, now)) else {
                return Err(ResignError::NotLeader(self.id));
            };
            lease.resign(c.term, now);
            c.term
        };
        let row_ns = ms(self.timing.follower_lease_ms + self.timing.heartbeat_ms);
        self.resigned_until_ns.store(now + row_ns, Relaxed);
        self.record_view();
        Ok(Resigned { term, successor: 0 })
    }

    /// Graceful stop: the claim ends for good at once; no statement is sent again.
    pub(super) fn shutdown(&self) {
        self.lease
            .lock()
            .expect("lease")
            .close(self.clock.boot_ns());
        self.record_view();
    }
}
