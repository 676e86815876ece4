//! [`MutexNode`]: a node of mutex mode. Every beat it sends the store one statement
//! ([`super::store::CLAIM`]) that renews the lease row if this node holds it, takes it if this
//! node has seen it unchanged long enough, and creates it (held by nobody) if it is missing.
//!
//! # Why two nodes never claim at once (mutex mode)
//! The database's clock plays no part; each node judges on its own clock (CLOCK_BOOTTIME), as a
//! Kubernetes Lease's contenders do. Let F be the follower lease and L the claim lease (F less a
//! fifth by default; `Config::validate` keeps F − L at least a tenth of F).
//! 1. A holder reads `t0` *before* it sends the statement that renews the row; the database
//!    writes the new version at some instant `w ≥ t0`. When the answer says it holds the row,
//!    the node claims until `t0 + L`, through the same [`Lease`] as quorum mode; every answer
//!    it gives meanwhile is a promise to that instant. The promises of version v end by
//!    `w + L`.
//! 2. A contender counts from the instant `r` the first answer showing version v *arrived*
//!    (`r ≥ w`: the database wrote v before it answered with it), and asks to take v only once
//!    its own clock has counted v's `wait_ms` (F) since `r`; the take is a compare-and-set on v,
//!    so it fails if the holder wrote any version after v. A take of v therefore happens after
//!    `r + F ≥ w + F > w + L`: after every promise made on v, with F − L to absorb the rate
//!    difference of the two nodes' clocks.
//! 3. A renewal that was in flight when the row was taken finds another holder (or another
//!    instance: two processes with one id draw different instances) and claims nothing.
//! 4. A resigning holder ends its claim and fences its term at once, and writes the row as held
//!    by nobody with a `wait_ms` of what its promises may still run plus the margin (≤ F): a
//!    contender takes it after that wait, counted from its own arrival as in 2. The time left
//!    is the promises' ([`Lease::promises_left_ns`]: up to the latest end any claim reached),
//!    not the claim's, which the resign has just cut to now (`release_wait_ms`). A holder never
//!    renews a fenced term: an answer that renewed one (a resign racing the statement) is
//!    followed by a release.
//! 5. A row that is missing (deleted; a database restored from a backup) is created held by
//!    nobody, with `wait_ms` F and a term above the sequence and above every term the creating
//!    node saw, so terms never go back while the sequence or a node that saw the last term
//!    survives. Nobody takes it before it was seen unchanged for F (2); the old holder's
//!    renewals find no row of its own and its claim ends within L of its last one.
//!
//! What this depends on, and quorum mode does not: **the store's durability**. A renewal the
//! database answered must not be lost, or a contender could take a version the holder already
//! replaced with promises of its own: the session asks for `synchronous_commit = on`, and a
//! server that runs with `fsync = off`, or fails over to an asynchronous standby, can lose it
//! (docs/modes.md). While the store is unreachable, slow or down, the holder's claim ends `L`
//! after its last answered statement (not when a TCP timeout fires) and nobody claims until it
//! answers again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::store::{Ask, BadRow, Row, Store, StoreError, TERM_MAX};
use crate::clock::{ms, Clock};
use crate::config::Timing;
use crate::counters::Counters;
use crate::engine::{Engine, Flaws, Judged, LoopGuard, Plumbing, ResignError, Running};
use crate::events::EventLog;
use crate::lease::Lease;
use crate::role::{NodeId, Resigned, Role, View};

/// The row as this node last saw it, and since when (BOOTTIME, the arrival of the first answer
/// that showed this version) it has seen this version unchanged.
#[derive(Clone, Copy, Debug)]
struct Seen {
    row: Row,
    since_ns: u64,
}

impl Seen {
    /// When the row's version may be taken, by this node's clock (rule 2 of the argument).
    fn takeable_at_ns(&self) -> u64 {
        // wait_ms is at most MAX_FOLLOWER_LEASE_MS (Row::checked): no overflow.
        self.since_ns.saturating_add(ms(self.row.wait_ms))
    }
}

/// A running mutex-mode node.
pub struct MutexNode {
    id: NodeId,
    /// This process, in the row: another process with the same id is another holder.
    instance: i64,
    timing: Timing,
    store: Store,
    clock: Arc<dyn Clock>,
    events: Arc<EventLog>,
    counters: Arc<Counters>,
    lease: Mutex<Lease>,
    seen: Mutex<Option<Seen>>,
    /// The highest term seen in the row (or, at start, in this node's event log).
    max_term: AtomicU64,
    /// After a resignation: no take before this instant (BOOTTIME), so that another node
    /// takes the row.
    resigned_until_ns: AtomicU64,
    /// An answer renewed a term this node had fenced: release the row with the next beat.
    release_due: AtomicBool,
    /// Statements answered, and not answered.
    answered: AtomicU64,
    unanswered: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Deliberate flaws (the lab's; none on a real host).
    flaws: Flaws,
    /// The beat runs.
    pub(super) running: Running,
}

impl MutexNode {
    /// Checks that the store lets this node in (a refusal stops the start, naming
    /// `store_url`; an unreachable store does not) and starts the beat. `seed` draws the
    /// instance; `flaws` are the lab's.
    pub async fn start(
        id: NodeId,
        timing: Timing,
        store: Store,
        plumbing: Plumbing,
        seed: u64,
        flaws: Flaws,
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
        let instance = draw_instance(seed, clock.boot_ns());
        tracing::info!(
            instance = format!("{instance:#x}"),
            "mutex mode: this process's instance"
        );
        let (running, guard) = Running::start();
        let node = Arc::new(MutexNode {
            id,
            instance,
            timing,
            store,
            lease: Mutex::new(Lease::default()),
            // A term past TERM_MAX in the log (recorded by a node before issue 48 from a bad
            // row) is not counted on from: it would make every statement overflow.
            max_term: AtomicU64::new(
                events
                    .last()
                    .map(|v| v.term)
                    .filter(|t| *t <= TERM_MAX)
                    .unwrap_or(0),
            ),
            clock,
            events,
            counters,
            seen: Mutex::new(None),
            resigned_until_ns: AtomicU64::new(0),
            release_due: AtomicBool::new(false),
            answered: AtomicU64::new(0),
            unanswered: AtomicU64::new(0),
            last_error: Mutex::new(None),
            flaws,
            running,
        });
        tokio::spawn(node.clone().beat(stop, guard));
        Ok(node)
    }

    /// A statement may take as long as a probe of quorum mode: a third of the follower lease,
    /// at least a beat; an answer later than the claim lease could claim nothing.
    fn deadline(&self) -> Duration {
        Duration::from_millis((self.timing.follower_lease_ms / 3).max(self.timing.heartbeat_ms))
    }

    /// Every beat: one statement (a release when one is due), then the record of any change of
    /// role.
    async fn beat(self: Arc<Self>, stop: CancellationToken, _running: LoopGuard) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.timing.heartbeat_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if self.lease.lock().expect("lease").is_closed() {
                return;
            }
            if self.release_due.swap(false, Relaxed) {
                self.release().await;
            } else {
                let t0 = self.clock.read();
                let res = self
                    .store
                    .claim(self.ask(t0.boot_ns), self.deadline())
                    .await;
                match res {
                    Ok(row) => self.on_row(t0, row),
                    Err(e) => self.unanswered(e),
                }
            }
            self.record_view();
        }
    }

    /// What this beat's statement asks at `now`: renew unless the claim's term is fenced;
    /// take the version seen unchanged for its wait, unless this node resigned a moment ago.
    fn ask(&self, now: u64) -> Ask {
        let seen = *self.seen.lock().expect("seen");
        let lease = self.lease.lock().expect("lease");
        let held_term = seen.filter(|s| self.holds(&s.row)).map(|s| s.row.term);
        let resigned = now < self.resigned_until_ns.load(Relaxed);
        Ask {
            me: self.id,
            instance: self.instance,
            take: seen
                .filter(|s| !self.holds(&s.row) && !resigned && now >= s.takeable_at_ns())
                .map(|s| (s.row.version, s.row.stored_term)),
            wait_ms: self.timing.follower_lease_ms,
            max_term: self.max_term.load(Relaxed),
            renew: held_term.is_none_or(|t| !lease.is_fenced(t)),
        }
    }

    /// Whether `row` names this process as its holder.
    fn holds(&self, row: &Row) -> bool {
        row.holder == self.id && row.instance == self.instance
    }

    fn unanswered(&self, e: StoreError) {
        self.unanswered.fetch_add(1, Relaxed);
        tracing::debug!(error = %e, "statement not answered");
        *self.last_error.lock().expect("error") = Some(e.to_string());
    }

    /// The store answered a statement sent at `t0`.
    fn on_row(&self, t0: crate::clock::Reading, row: Row) {
        self.answered.fetch_add(1, Relaxed);
        if let Some(bad) = row.bad {
            self.bad_row(bad);
        }
        // A bad term reads 0 (Row::checked): it never raises the highest term seen.
        self.max_term.fetch_max(row.term, Relaxed);
        let now = self.clock.boot_ns();
        let lease_ns = ms(self.timing.effective_lease_ms());
        let mut lease = self.lease.lock().expect("lease");
        if row.mine && row.term == 0 {
            // Held in a term out of range (the sequence was set past TERM_MAX by hand): no
            // claim in it; the next renewal writes another term.
            lease.revoke(now);
        } else if row.mine {
            let took = now.saturating_sub(t0.boot_ns);
            self.counters
                .timings
                .probe_round_trip
                .observe(took as f64 / 1e9);
            let new_term = lease.last().is_none_or(|c| c.term != row.term);
            if lease.grant(row.term, t0, lease_ns) {
                if new_term {
                    self.counters.election_started();
                }
            } else if lease.is_fenced(row.term) {
                // A resign raced this statement: the row was renewed in a term this node gave
                // up. Nobody could take it for a lease: give it up now (rule 4).
                self.release_due.store(true, Relaxed);
            }
        } else if !self.holds(&row) {
            // Another node (or nobody) holds the row: whatever this node claimed has ended
            // (its statements went unanswered for longer than the row's wait).
            lease.revoke(now);
        }
        drop(lease);
        let mut seen = self.seen.lock().expect("seen");
        let since_ns = match *seen {
            Some(s)
                if (s.row.version, s.row.stored_term, s.row.holder)
                    == (row.version, row.stored_term, row.holder) =>
            {
                s.since_ns
            }
            _ => now,
        };
        *seen = Some(Seen { row, since_ns });
    }

    /// The store answered a row with a value out of range (issue 48, item 2): counted by field
    /// (`electd_store_bad_rows_total`), shown as the last error in `/v1/status`, logged.
    fn bad_row(&self, bad: BadRow) {
        self.counters.bad_store_row(bad.field());
        let message = format!("the lease row is bad: {bad}");
        tracing::warn!(store = %self.store.shown(), "{message}");
        *self.last_error.lock().expect("error") = Some(message);
    }

    /// Gives the row up, if this process holds it, with the time its promises may still run
    /// plus the margin as the wait (rule 4).
    async fn release(&self) {
        let now = self.clock.boot_ns();
        let wait_ms = release_wait_ms(
            &self.lease.lock().expect("lease"),
            now,
            &self.timing,
            &self.flaws,
        );
        match self
            .store
            .release(self.id, self.instance, wait_ms, self.deadline())
            .await
        {
            Ok(held) => {
                self.answered.fetch_add(1, Relaxed);
                tracing::info!(held, wait_ms, "released the row");
            }
            Err(e) => self.unanswered(e),
        }
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

    /// Releases the row: the claim ends now and its term is fenced (the promises already
    /// answered still run), the row is written as held by nobody with the time those promises
    /// may still run as its wait, and this node takes nothing until the row's lease has passed,
    /// so that another takes it. A named successor cannot be honoured: the next holder is
    /// whichever node takes the row first.
    async fn resign_row(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
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
        self.release().await;
        Ok(Resigned { term, successor: 0 })
    }
}

/// Mutex mode as the node's [`Engine`]: it has no peer messages (its nodes talk to the store
/// only), so no routes.
impl Engine for MutexNode {
    /// The effective role now: leader while the claim holds; else a follower of the holder the
    /// store last named, until this node could take the version it last saw.
    fn view(&self) -> Judged {
        let now = self.clock.boot_ns();
        let lease = self.lease.lock().expect("lease");
        let claim = lease.last().and_then(|c| lease.current(c.term, now));
        if let Some(c) = claim {
            return Judged::claiming(self.id, &c, now);
        }
        let seen = *self.seen.lock().expect("seen");
        let term = seen
            .map_or(0, |s| s.row.term)
            .max(lease.last().map_or(0, |c| c.term));
        let leader = seen
            .filter(|s| s.row.holder != 0 && !self.holds(&s.row) && now < s.takeable_at_ns())
            .map(|s| s.row.holder)
            .filter(|h| *h != self.id);
        Judged::unleased(View {
            role: Role::Follower,
            term,
            leader,
        })
    }

    fn routes(self: Arc<Self>) -> Router {
        Router::new()
    }

    /// What `/v1/status` shows of the store and the row.
    fn status(&self) -> serde_json::Value {
        let now = self.clock.boot_ns();
        let seen = *self.seen.lock().expect("seen");
        serde_json::json!({
            "store": self.store.shown(),
            "instance": format!("{:#x}", self.instance),
            "store_fsync_off": self.store.fsync_off(),
            "store_synchronous_commit": self.store.synchronous_commit(),
            "row": seen.map(|s| serde_json::json!({
                "holder": s.row.holder,
                "holder_is_this_process": self.holds(&s.row),
                "term": s.row.term,
                "version": s.row.version,
                "wait_ms": s.row.wait_ms,
                "unchanged_ms": now.saturating_sub(s.since_ns) / 1_000_000,
            })),
            "statements": {
                "answered": self.answered.load(Relaxed),
                "unanswered": self.unanswered.load(Relaxed),
            },
            "last_error": *self.last_error.lock().expect("error"),
        })
    }

    fn health(&self) -> Result<(), String> {
        self.running
            .check("the beat (one statement to the store a heartbeat)")
    }

    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(self.resign_row(to))
    }

    /// Graceful stop: the claim ends for good at once; no statement is sent again.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        self.lease
            .lock()
            .expect("lease")
            .close(self.clock.boot_ns());
        self.record_view();
        stop.cancel();
        Box::pin(async {})
    }
}

/// The wait a release at `now_ns` writes into the row (rule 4): how long the promises this
/// process answered may still run, plus the margin F − L for the rate of the clocks, never more
/// than F. Counted from the promises, not from the claim: a resign (and a renewal that raced
/// it) ends the claim before the release is sent, while answers given just before still
/// promise up to L (issue 48, item 1).
fn release_wait_ms(lease: &Lease, now_ns: u64, timing: &Timing, flaws: &Flaws) -> u64 {
    let left_ns = if flaws.release_from_ended_claim() {
        lease.last().map_or(0, |c| c.left_ns(now_ns))
    } else {
        lease.promises_left_ns(now_ns)
    };
    let margin_ms = timing.follower_lease_ms - timing.effective_lease_ms();
    (left_ns.div_ceil(1_000_000) + margin_ms).min(timing.follower_lease_ms)
}

/// This process's instance: a positive number from the node's seed and the boot clock
/// (splitmix64's finaliser over both), so that two processes started with one id differ.
fn draw_instance(seed: u64, now_ns: u64) -> i64 {
    let mut x = seed ^ now_ns.rotate_left(32);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    // Positive and never 0 (0 is "nobody" in the row).
    ((x >> 1) | 1) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Reading;

    /// The default timings: F 150 ms, L 120 ms, a margin of 30 ms.
    fn timing() -> Timing {
        Timing::default()
    }

    fn at(ms_: u64) -> Reading {
        Reading {
            boot_ns: ms(ms_),
            mono_ns: ms(ms_),
        }
    }

    /// Issue 48, item 1: the holder answered at 1,000 ms a promise until 1,120 ms, then
    /// resigned at 1,001 ms. The row it releases must not be takeable before that promise ends
    /// (plus the margin): a wait of 119 + 30 ms. Counted from the claim the resign had just
    /// ended, it was 30 ms, and another node claimed inside the promise.
    #[test]
    fn a_release_after_a_resign_waits_out_the_promises_answered() {
        let t = timing();
        let (l_ms, f_ms) = (t.effective_lease_ms(), t.follower_lease_ms);
        let mut lease = Lease::default();
        assert!(lease.grant(7, at(1_000), ms(l_ms)));
        lease.resign(7, ms(1_001));
        let wait = release_wait_ms(&lease, ms(1_001), &t, &Flaws::default());
        assert_eq!(wait, (l_ms - 1) + (f_ms - l_ms));
        // A contender counts the wait from the release's arrival, no earlier than 1,001 ms:
        // it takes after every promise of the holder ended.
        assert!(1_001 + wait > 1_000 + l_ms);
    }

    /// The wait never passes F (a contender that saw the row before the release counts F from
    /// then at most), and is the margin alone once every promise has run out.
    #[test]
    fn a_release_waits_at_most_a_follower_lease_and_at_least_the_margin() {
        let t = timing();
        let (l_ms, f_ms) = (t.effective_lease_ms(), t.follower_lease_ms);
        let mut lease = Lease::default();
        let none = release_wait_ms(&lease, ms(5), &t, &Flaws::default());
        assert_eq!(none, f_ms - l_ms, "never claimed: the margin");
        assert!(lease.grant(7, at(1_000), ms(l_ms)));
        let fresh = release_wait_ms(&lease, ms(1_000), &t, &Flaws::default());
        assert_eq!(fresh, f_ms, "a promise of the whole lease: F");
        lease.close(ms(1_050));
        let late = release_wait_ms(&lease, ms(2_000), &t, &Flaws::default());
        assert_eq!(late, f_ms - l_ms, "every promise ran out: the margin");
    }

    /// The lab's broken variant computes the old wait (the checkers must catch it on real
    /// processes: lab/tests/broken.rs).
    #[cfg(feature = "flaws")]
    #[test]
    fn the_flawed_release_counts_from_the_ended_claim() {
        let t = timing();
        let mut lease = Lease::default();
        assert!(lease.grant(7, at(1_000), ms(t.effective_lease_ms())));
        lease.resign(7, ms(1_001));
        let flaws = Flaws {
            release_from_ended_claim: true,
            ..Flaws::default()
        };
        let wait = release_wait_ms(&lease, ms(1_001), &t, &flaws);
        assert_eq!(wait, t.follower_lease_ms - t.effective_lease_ms());
    }
}
