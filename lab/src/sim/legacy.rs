//! A deterministic in-memory network simulator for the legacy algorithms, used by the tests.
//!
//! * Time advances in steps of one tick. In each [`Sim::step`] the simulator first delivers every
//!   message (and every delivery-failure notice) that is due, in the order it was sent, then
//!   ticks every live node. Outboxes are drained after every input.
//! * Each message gets a random latency of `latency_min..=latency_max` ticks (default 0..=2)
//!   from a seeded [`StdRng`], so a run is fully determined by its seed. The seed is part of every
//!   error message and is printed when a test panics while a `Sim` is alive.
//! * Dead nodes drop everything. A message to a dead or cut-off node (checked when it is sent
//!   and again when it arrives) yields `delivery_failed` at the sender `ack_timeout` ticks
//!   (default 2) after it was sent; a delivered one yields `delivered`. A notice is dropped if
//!   its sender has died or restarted since. Messages already on the wire when their sender
//!   dies are still delivered.
//! * `partition(&[&[1, 2], &[3, 4, 5]])` cuts the network into groups (a node not listed is
//!   alone), `heal()` joins it again, `kill(id)` stops a node, `restart(id)` gives it a fresh
//!   state machine and calls `start()`.
//! * Every message sent is counted by [`MsgKind::kind`]; every change of view is logged.
//! * Every run loop is bounded by a step count and reports failure instead of spinning.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use electd::legacy::{Algorithm, MsgKind, Ticks};
use electd_client::{NodeId, Role, View};

/// Upper bound on the events handled within one step (protects against zero-latency loops).
const MAX_EVENTS_PER_STEP: usize = 100_000;

enum Event<M> {
    Deliver {
        from: NodeId,
        from_incarnation: u64,
        to: NodeId,
        msg: M,
        sent_at: u64,
    },
    Failed {
        from: NodeId,
        from_incarnation: u64,
        to: NodeId,
        msg: M,
    },
}

struct Slot<A> {
    /// `None` while the node is dead.
    node: Option<A>,
    /// Bumped on every restart so that notices for an earlier life are dropped.
    incarnation: u64,
    /// The epoch the node keeps in stable storage (`legacy-epoch`): what a restart starts from.
    stored_epoch: u64,
}

/// One change of view reported by a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewEvent {
    pub at: u64,
    pub node: NodeId,
    pub view: View,
}

/// The simulated cluster.
pub struct Sim<A: Algorithm>
where
    A::Msg: MsgKind,
{
    seed: u64,
    rng: StdRng,
    now: u64,
    members: Vec<NodeId>,
    ticks: Ticks,
    slots: BTreeMap<NodeId, Slot<A>>,
    /// Partition group of every node, or `None` when the network is whole.
    groups: Option<BTreeMap<NodeId, usize>>,
    /// Pending events keyed by (due tick, sequence number): delivery in send order.
    queue: BTreeMap<(u64, u64), Event<A::Msg>>,
    seq: u64,
    counts: BTreeMap<&'static str, u64>,
    /// The part of `counts` that were periodic announcements (see [`Sim::heartbeat_counts`]).
    heartbeats: BTreeMap<&'static str, u64>,
    log: Vec<ViewEvent>,
    latency_min: u64,
    latency_max: u64,
    ack_timeout: u64,
}

impl<A: Algorithm> Sim<A>
where
    A::Msg: MsgKind,
{
    /// A cluster of `ids` whose nodes are created but not started (passive until started or
    /// reached by a message).
    pub fn new(ids: &[NodeId], ticks: Ticks, seed: u64) -> Self {
        let mut members = ids.to_vec();
        members.sort_unstable();
        members.dedup();
        let slots = members
            .iter()
            .map(|&id| {
                let slot = Slot {
                    node: Some(A::new(id, members.clone(), ticks)),
                    incarnation: 0,
                    stored_epoch: 0,
                };
                (id, slot)
            })
            .collect();
        Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            members,
            ticks,
            slots,
            groups: None,
            queue: BTreeMap::new(),
            seq: 0,
            counts: BTreeMap::new(),
            heartbeats: BTreeMap::new(),
            log: Vec::new(),
            latency_min: 0,
            latency_max: 2,
            ack_timeout: 2,
        }
    }

    /// Sets the latency range (ticks, inclusive).
    pub fn with_latency(mut self, min: u64, max: u64) -> Self {
        self.latency_min = min.min(max);
        self.latency_max = max.max(min);
        self
    }

    /// Sets how long after sending an undeliverable message its sender is told.
    pub fn with_ack_timeout(mut self, ack_timeout: u64) -> Self {
        self.ack_timeout = ack_timeout;
        self
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn members(&self) -> &[NodeId] {
        &self.members
    }

    pub fn is_alive(&self, id: NodeId) -> bool {
        self.slots.get(&id).is_some_and(|s| s.node.is_some())
    }

    pub fn alive(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .copied()
            .filter(|&id| self.is_alive(id))
            .collect()
    }

    pub fn view(&self, id: NodeId) -> Option<View> {
        self.slots.get(&id)?.node.as_ref().map(|n| n.view())
    }

    /// Calls `start()` on node `id` (if alive).
    pub fn start(&mut self, id: NodeId) {
        if let Some(node) = self.slots.get_mut(&id).and_then(|s| s.node.as_mut()) {
            node.start();
            self.drain(id, false);
        }
    }

    /// Starts every live node, in ascending id order, within the same tick.
    pub fn start_all(&mut self) {
        for id in self.members.clone() {
            self.start(id);
        }
    }

    /// Stops node `id`: it drops everything from now on.
    pub fn kill(&mut self, id: NodeId) {
        if let Some(slot) = self.slots.get_mut(&id) {
            // The node stores its epoch before any message names it (the legacy node's
            // `apply`): what it holds at its death is on its disk.
            if let Some(node) = slot.node.take() {
                slot.stored_epoch = slot.stored_epoch.max(node.epoch());
            }
        }
    }

    /// Replaces node `id` by a fresh state machine and starts it.
    pub fn restart(&mut self, id: NodeId) {
        let members = self.members.clone();
        let ticks = self.ticks;
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.incarnation += 1;
            if let Some(node) = slot.node.take() {
                slot.stored_epoch = slot.stored_epoch.max(node.epoch());
            }
            let mut node = A::new(id, members, ticks);
            node.restore_epoch(slot.stored_epoch);
            slot.node = Some(node);
            self.start(id);
        }
    }

    /// Cuts the network into `groups`; a member not listed is alone in its own group.
    pub fn partition(&mut self, groups: &[&[NodeId]]) {
        let mut map = BTreeMap::new();
        for (g, ids) in groups.iter().enumerate() {
            for &id in ids.iter() {
                map.insert(id, g);
            }
        }
        let mut next = groups.len();
        for &id in &self.members {
            map.entry(id).or_insert_with(|| {
                next += 1;
                next
            });
        }
        self.groups = Some(map);
    }

    pub fn heal(&mut self) {
        self.groups = None;
    }

    /// Whether a message from `from` can reach `to` now.
    pub fn reachable(&self, from: NodeId, to: NodeId) -> bool {
        self.is_alive(to)
            && match &self.groups {
                None => true,
                Some(g) => g.get(&from).is_some() && g.get(&from) == g.get(&to),
            }
    }

    fn push_event(&mut self, due: u64, event: Event<A::Msg>) {
        self.seq += 1;
        self.queue.insert((due, self.seq), event);
    }

    /// Takes node `id`'s outbox: sends its messages and logs its changes of view. `heartbeat`
    /// marks the messages as periodic announcements for the counters.
    fn drain(&mut self, id: NodeId, heartbeat: bool) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let incarnation = slot.incarnation;
        let Some(node) = slot.node.as_mut() else {
            return;
        };
        let out = node.take_outbox();
        for view in out.view_changes {
            self.log.push(ViewEvent {
                at: self.now,
                node: id,
                view,
            });
        }
        for (to, msg) in out.msgs {
            *self.counts.entry(msg.kind()).or_insert(0) += 1;
            if heartbeat || msg.periodic() {
                *self.heartbeats.entry(msg.kind()).or_insert(0) += 1;
            }
            if self.reachable(id, to) {
                let latency = self.rng.gen_range(self.latency_min..=self.latency_max);
                let event = Event::Deliver {
                    from: id,
                    from_incarnation: incarnation,
                    to,
                    msg,
                    sent_at: self.now,
                };
                self.push_event(self.now + latency, event);
            } else {
                let event = Event::Failed {
                    from: id,
                    from_incarnation: incarnation,
                    to,
                    msg,
                };
                self.push_event(self.now + self.ack_timeout, event);
            }
        }
    }

    fn node_if(&mut self, id: NodeId, incarnation: u64) -> Option<&mut A> {
        let slot = self.slots.get_mut(&id)?;
        if slot.incarnation != incarnation {
            return None;
        }
        slot.node.as_mut()
    }

    fn handle(&mut self, event: Event<A::Msg>) {
        match event {
            Event::Deliver {
                from,
                from_incarnation,
                to,
                msg,
                sent_at,
            } => {
                if self.reachable(from, to) {
                    if let Some(node) = self.slots.get_mut(&to).and_then(|s| s.node.as_mut()) {
                        node.step(from, msg.clone());
                        self.drain(to, false);
                    }
                    if let Some(node) = self.node_if(from, from_incarnation) {
                        node.delivered(to, &msg);
                        self.drain(from, false);
                    }
                } else {
                    let due = (sent_at + self.ack_timeout).max(self.now);
                    let event = Event::Failed {
                        from,
                        from_incarnation,
                        to,
                        msg,
                    };
                    self.push_event(due, event);
                }
            }
            Event::Failed {
                from,
                from_incarnation,
                to,
                msg,
            } => {
                if let Some(node) = self.node_if(from, from_incarnation) {
                    node.delivery_failed(to, msg);
                    self.drain(from, false);
                }
            }
        }
    }

    /// One tick: deliver what is due, then tick every live node.
    pub fn step(&mut self) {
        self.now += 1;
        for _ in 0..MAX_EVENTS_PER_STEP {
            let due = match self.queue.first_key_value() {
                Some((&(due, _), _)) => due,
                None => break,
            };
            if due > self.now {
                break;
            }
            if let Some((_, event)) = self.queue.pop_first() {
                self.handle(event);
            }
        }
        for id in self.members.clone() {
            if let Some(node) = self.slots.get_mut(&id).and_then(|s| s.node.as_mut()) {
                let before = node.view();
                node.tick();
                // What a leader that stays the same leader sends on a tick is a periodic
                // announcement, not election traffic.
                let heartbeat = before.role == Role::Leader && node.view() == before;
                self.drain(id, heartbeat);
            }
        }
    }

    pub fn run(&mut self, steps: u64) {
        for _ in 0..steps {
            self.step();
        }
    }

    /// Steps until `pred` holds (checked before the first step too); `Some(steps taken)`, or
    /// `None` if it did not hold within `max_steps`.
    pub fn run_until(
        &mut self,
        max_steps: u64,
        mut pred: impl FnMut(&Self) -> bool,
    ) -> Option<u64> {
        for taken in 0..=max_steps {
            if pred(self) {
                return Some(taken);
            }
            if taken < max_steps {
                self.step();
            }
        }
        None
    }

    /// Steps until `f` returns the same `Some` value for `settle` consecutive steps.
    pub fn converge_with<T: Copy + PartialEq + std::fmt::Debug>(
        &mut self,
        max_steps: u64,
        settle: u64,
        f: impl Fn(&Self) -> Option<T>,
    ) -> Result<T, String> {
        let mut streak = 0;
        let mut last = None;
        for _ in 0..max_steps {
            self.step();
            let cur = f(self);
            streak = match cur {
                Some(_) if cur == last => streak + 1,
                Some(_) => 1,
                None => 0,
            };
            last = cur;
            if let Some(v) = cur.filter(|_| streak >= settle) {
                return Ok(v);
            }
        }
        Err(format!(
            "no convergence within {max_steps} steps (seed {}, now {}): {}",
            self.seed,
            self.now,
            self.describe()
        ))
    }

    /// Steps until every live node agrees on one leader for `settle` consecutive steps.
    pub fn converge(&mut self, max_steps: u64, settle: u64) -> Result<NodeId, String> {
        self.converge_with(max_steps, settle, |s| s.agreed_leader())
    }

    /// Runs `steps` more steps; fails if at any step the cluster does not agree on `leader` or
    /// if any node reports any change of view (role, epoch or leader) in that time.
    pub fn check_stable(&mut self, leader: NodeId, steps: u64) -> Result<(), String> {
        let from = self.log.len();
        for _ in 0..steps {
            self.step();
            if self.agreed_leader() != Some(leader) {
                return Err(format!(
                    "lost agreement on {leader} at tick {} (seed {}): {}",
                    self.now,
                    self.seed,
                    self.describe()
                ));
            }
        }
        if self.log.len() != from {
            return Err(format!(
                "changes of view while stable (seed {}): {:?}",
                self.seed,
                &self.log[from..]
            ));
        }
        Ok(())
    }

    /// Live nodes that report `Leader`, ascending.
    pub fn leaders(&self) -> Vec<NodeId> {
        self.alive()
            .into_iter()
            .filter(|&id| self.view(id).is_some_and(|s| s.role == Role::Leader))
            .collect()
    }

    /// `Some(l)` when every live node of `group` reports leader `l`, `l` is a live member of
    /// `group` reporting `Leader`, and every other live node of `group` is a `Follower`.
    pub fn agreed_leader_among(&self, group: &[NodeId]) -> Option<NodeId> {
        let live: Vec<NodeId> = group
            .iter()
            .copied()
            .filter(|&id| self.is_alive(id))
            .collect();
        let leader = self.view(*live.first()?)?.leader?;
        if !live.contains(&leader) {
            return None;
        }
        for &id in &live {
            let s = self.view(id)?;
            let role_ok = if id == leader {
                s.role == Role::Leader
            } else {
                s.role == Role::Follower
            };
            if !role_ok || s.leader != Some(leader) {
                return None;
            }
        }
        Some(leader)
    }

    /// [`Sim::agreed_leader_among`] over all live nodes (meaningful when the network is whole).
    pub fn agreed_leader(&self) -> Option<NodeId> {
        let members = self.members.clone();
        self.agreed_leader_among(&members)
    }

    /// Messages sent so far, by kind.
    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    pub fn count(&self, kind: &str) -> u64 {
        self.counts.get(kind).copied().unwrap_or(0)
    }

    /// The periodic announcements among [`Sim::counts`]: messages sent by a leader on a tick
    /// that left its view unchanged (bully COORDINATOR re-announcements, ring ANNOUNCE).
    pub fn heartbeat_counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.heartbeats
    }

    /// [`Sim::counts`] without the periodic announcements: the election traffic.
    pub fn election_counts(&self) -> BTreeMap<&'static str, u64> {
        let mut c = self.counts.clone();
        for (kind, n) in &self.heartbeats {
            if let Some(v) = c.get_mut(kind) {
                *v -= n;
            }
        }
        c.retain(|_, v| *v > 0);
        c
    }

    pub fn reset_counts(&mut self) {
        self.counts.clear();
        self.heartbeats.clear();
    }

    /// Messages and notices not yet handled.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Every change of view so far.
    pub fn view_log(&self) -> &[ViewEvent] {
        &self.log
    }

    /// One line per node: `id: role/epoch/leader` or `id: dead`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for &id in &self.members {
            match self.view(id) {
                Some(st) => {
                    let _ = write!(s, "[{id}: {:?} e{} l{:?}] ", st.role, st.term, st.leader);
                }
                None => {
                    let _ = write!(s, "[{id}: dead] ");
                }
            }
        }
        if let Some(g) = &self.groups {
            let _ = write!(s, "groups {g:?}");
        }
        s
    }
}

impl<A: Algorithm> Drop for Sim<A>
where
    A::Msg: MsgKind,
{
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "legacy::sim: failing run used seed {} (tick {}): {}",
                self.seed,
                self.now,
                self.describe()
            );
        }
    }
}

/// Who calls the election in [`election_message_counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initiators {
    /// Only the lowest id (bully worst case).
    Lowest,
    /// Only the highest id (bully best case).
    Highest,
    /// Every node, in the same tick.
    All,
}

/// Timeouts used for counting: long enough that no timeout fires during one election.
pub const COUNTING_TICKS: Ticks = Ticks {
    answer_timeout: 10,
    coordinator_timeout: 50,
    failure_timeout: 30,
    announce_interval: 5,
};

/// Messages (by kind) sent for one election on ids `1..=n`, all up, nobody coordinator yet,
/// counted until every node has followed `n` for 20 consecutive ticks. Periodic announcements
/// are excluded (see [`Sim::election_counts`]).
pub fn election_message_counts<A: Algorithm>(
    n: u64,
    who: Initiators,
    seed: u64,
    latency: (u64, u64),
) -> Result<BTreeMap<&'static str, u64>, String>
where
    A::Msg: MsgKind,
{
    let ids: Vec<NodeId> = (1..=n).collect();
    let mut sim = Sim::<A>::new(&ids, COUNTING_TICKS, seed).with_latency(latency.0, latency.1);
    match who {
        Initiators::Lowest => sim.start(1),
        Initiators::Highest => sim.start(n),
        Initiators::All => sim.start_all(),
    }
    let leader = sim
        .converge(1000, 20)
        .map_err(|e| format!("n={n} {who:?}: {e}"))?;
    if leader != n {
        return Err(format!("n={n} {who:?} seed {seed}: leader {leader}"));
    }
    Ok(sim.election_counts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use electd::legacy::{Bully, Invitation, Ring};

    const IDS: [NodeId; 5] = [1, 2, 3, 4, 5];
    const MAX_STEPS: u64 = 3000;
    const SETTLE: u64 = 30;

    /// Seeds every scenario runs with: 1..=20, or 1..=N with `LEGACY_SIM_SEEDS=N`.
    fn seeds() -> std::ops::RangeInclusive<u64> {
        let n = std::env::var("LEGACY_SIM_SEEDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        1..=n
    }

    fn ticks() -> Ticks {
        Ticks::from_timing(50, 300)
    }

    /// Checks the leader `got` against `highest`, the highest live id, and answers it: bully
    /// and ring elect the highest live id; the invitation algorithm elects whichever
    /// coordinator merged the groups last, so only its agreement is checked.
    fn check_leader<A: 'static>(got: NodeId, highest: NodeId, what: &str) -> NodeId {
        if std::any::TypeId::of::<A>() != std::any::TypeId::of::<Invitation>() {
            assert_eq!(got, highest, "{what}");
        }
        got
    }

    fn sim<A: Algorithm>(seed: u64) -> Sim<A>
    where
        A::Msg: MsgKind,
    {
        Sim::new(&IDS, ticks(), seed)
    }

    fn converged<A: Algorithm>(s: &mut Sim<A>, what: &str) -> NodeId
    where
        A::Msg: MsgKind,
    {
        s.converge(MAX_STEPS, SETTLE)
            .unwrap_or_else(|e| panic!("{what}: seed {}: {e}", s.seed()))
    }

    fn highest_wins_from_any_initiator<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            for k in IDS {
                let mut s = sim::<A>(seed);
                s.start(k);
                let l = converged(&mut s, &format!("initiator {k}"));
                check_leader::<A>(l, 5, &format!("seed {seed}, initiator {k}"));
            }
        }
    }

    fn concurrent_initiators_converge<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            let mut s = sim::<A>(seed);
            s.start_all();
            let l = converged(&mut s, "all start");
            check_leader::<A>(l, 5, &format!("seed {seed}"));
        }
    }

    fn coordinator_crash_then_restart<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            let mut s = sim::<A>(seed);
            s.start_all();
            let what = |step: &str| format!("seed {seed}, {step}");
            let l = converged(&mut s, "all start");
            let l = check_leader::<A>(l, 5, &what("all start"));
            s.kill(l);
            let l2 = converged(&mut s, "after killing the leader");
            let l2 = check_leader::<A>(l2, 4, &what("after killing the leader"));
            s.kill(l2);
            let l3 = converged(&mut s, "after killing the next");
            check_leader::<A>(l3, 3, &what("after killing the next"));
            s.restart(l);
            let l4 = converged(&mut s, "after the first restart");
            check_leader::<A>(l4, 5, &what("after the first restart"));
            s.restart(l2);
            let last = converged(&mut s, "after the second restart");
            let last = check_leader::<A>(last, 5, &what("after the second restart"));
            s.check_stable(last, 200)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    fn skips_dead_successors<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        // (dead nodes, initiator, expected leader)
        let cases: [(&[NodeId], NodeId, NodeId); 5] = [
            (&[3], 2, 5),
            (&[3, 4], 2, 5),
            (&[4, 5], 3, 3),
            (&[5, 1], 4, 4),
            (&[1, 2], 5, 5),
        ];
        for seed in seeds() {
            for (dead, initiator, expected) in cases {
                let mut s = sim::<A>(seed);
                for &d in dead {
                    s.kill(d);
                }
                s.start(initiator);
                let l = converged(&mut s, &format!("dead {dead:?}"));
                check_leader::<A>(
                    l,
                    expected,
                    &format!("seed {seed}, dead {dead:?}, initiator {initiator}"),
                );
            }
        }
    }

    fn initiator_dies_mid_election<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            for k in [1, 2, 4] {
                let mut s = sim::<A>(seed);
                s.start(k);
                s.kill(k);
                let l = converged(&mut s, &format!("initiator {k} died"));
                check_leader::<A>(l, 5, &format!("seed {seed}, initiator {k}"));
            }
        }
    }

    fn partition_then_heal<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            let mut s = sim::<A>(seed);
            s.start_all();
            let l = converged(&mut s, "all start");
            check_leader::<A>(l, 5, &format!("seed {seed}"));
            s.partition(&[&[1, 2], &[3, 4, 5]]);
            let both = s.converge_with(MAX_STEPS, SETTLE, |s| {
                Some((
                    s.agreed_leader_among(&[1, 2])?,
                    s.agreed_leader_among(&[3, 4, 5])?,
                ))
            });
            let (left, right) = both.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            check_leader::<A>(left, 2, &format!("seed {seed}: split brain expected"));
            check_leader::<A>(right, 5, &format!("seed {seed}: split brain expected"));
            assert_eq!(
                s.leaders(),
                vec![left, right],
                "seed {seed}: two coordinators"
            );
            s.heal();
            let l = converged(&mut s, "after heal");
            let l = check_leader::<A>(l, 5, &format!("seed {seed}, after heal"));
            s.check_stable(l, 200)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    fn healthy_cluster_is_quiet<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        for seed in seeds() {
            let mut s = sim::<A>(seed);
            s.start_all();
            let l = converged(&mut s, "all start");
            let l = check_leader::<A>(l, 5, &format!("seed {seed}"));
            s.reset_counts();
            s.check_stable(l, 500)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // Only heartbeats: no election traffic in a healthy cluster.
            assert!(
                s.election_counts().is_empty(),
                "seed {seed}: {:?}",
                s.counts()
            );
            assert!(
                !s.heartbeat_counts().is_empty(),
                "seed {seed}: no heartbeats"
            );
        }
    }

    /// Random kills, restarts, partitions (random groups) and heals on `ids`; then everything is
    /// healed and restarted, and the cluster must converge on the highest id and stay quiet.
    fn chaos_then_recovery_on<A: Algorithm + 'static>(
        ids: &[NodeId],
        latency: (u64, u64),
        ack_timeout: u64,
    ) where
        A::Msg: MsgKind,
    {
        let highest = ids.iter().copied().max().unwrap_or(0);
        for seed in seeds() {
            let mut plan = StdRng::seed_from_u64(seed ^ 0xC4A0_5EED);
            let mut s = Sim::<A>::new(ids, ticks(), seed)
                .with_latency(latency.0, latency.1)
                .with_ack_timeout(ack_timeout);
            s.start_all();
            for _ in 0..12 {
                match plan.gen_range(0..4) {
                    0 => s.kill(ids[plan.gen_range(0..ids.len())]),
                    1 => {
                        let dead: Vec<NodeId> =
                            ids.iter().copied().filter(|&i| !s.is_alive(i)).collect();
                        if !dead.is_empty() {
                            s.restart(dead[plan.gen_range(0..dead.len())]);
                        }
                    }
                    2 => {
                        let mut groups: Vec<Vec<NodeId>> = vec![Vec::new(); 3];
                        for &id in ids {
                            groups[plan.gen_range(0..3)].push(id);
                        }
                        let refs: Vec<&[NodeId]> = groups.iter().map(|g| g.as_slice()).collect();
                        s.partition(&refs);
                    }
                    _ => s.heal(),
                }
                let steps = plan.gen_range(0..60);
                s.run(steps);
            }
            s.heal();
            for &id in ids {
                if !s.is_alive(id) {
                    s.restart(id);
                }
            }
            let l = converged(&mut s, "after chaos");
            let l = check_leader::<A>(l, highest, &format!("seed {seed}"));
            s.check_stable(l, 200)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    fn chaos_then_recovery<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        chaos_then_recovery_on::<A>(&IDS, (0, 2), 2);
    }

    /// Nine arbitrary ids on a slower network: latency up to 4 ticks (so the default 3-tick
    /// answer timeout is shorter than a round trip) and a 3-tick transport deadline.
    fn chaos_harsh_network<A: Algorithm + 'static>()
    where
        A::Msg: MsgKind,
    {
        chaos_then_recovery_on::<A>(&[3, 10, 11, 20, 42, 57, 58, 90, 100], (0, 4), 3);
    }

    macro_rules! scenarios {
        ($modname:ident, $alg:ty) => {
            mod $modname {
                use super::*;
                #[test]
                fn highest_wins_from_any_initiator() {
                    super::highest_wins_from_any_initiator::<$alg>();
                }
                #[test]
                fn concurrent_initiators_converge() {
                    super::concurrent_initiators_converge::<$alg>();
                }
                #[test]
                fn coordinator_crash_then_restart() {
                    super::coordinator_crash_then_restart::<$alg>();
                }
                #[test]
                fn skips_dead_successors() {
                    super::skips_dead_successors::<$alg>();
                }
                #[test]
                fn initiator_dies_mid_election() {
                    super::initiator_dies_mid_election::<$alg>();
                }
                #[test]
                fn partition_then_heal() {
                    super::partition_then_heal::<$alg>();
                }
                #[test]
                fn chaos_then_recovery() {
                    super::chaos_then_recovery::<$alg>();
                }
                #[test]
                fn chaos_harsh_network() {
                    super::chaos_harsh_network::<$alg>();
                }
                #[test]
                fn healthy_cluster_is_quiet() {
                    super::healthy_cluster_is_quiet::<$alg>();
                }
            }
        };
    }

    scenarios!(bully, Bully);
    scenarios!(ring, Ring);
    scenarios!(invitation, Invitation);

    #[test]
    fn sim_is_deterministic_per_seed() {
        let run = |seed| {
            let mut s = Sim::<Bully>::new(&IDS, ticks(), seed);
            s.start(1);
            s.run(50);
            (s.counts().clone(), s.view_log().to_vec())
        };
        assert_eq!(run(7), run(7));
    }

    #[test]
    fn sim_reports_delivery_failure_after_ack_timeout() {
        let mut s = Sim::<Ring>::new(&IDS, ticks(), 3)
            .with_latency(1, 1)
            .with_ack_timeout(2);
        s.kill(3);
        s.start(2); // ELECTION to dead 3 at tick 0
        s.step();
        assert_eq!(s.count("election"), 1, "not yet told at tick 1");
        s.step(); // tick 2: failure notice, 2 skips to 4
        assert_eq!(s.count("election"), 2);
    }

    /// Prints messages per election (`cargo test -p electd-lab -- --nocapture message_counts`)
    /// and checks the exact figures of the deterministic runs (fixed latency of one tick)
    /// against the formulas. Long because it is a table: one row per algorithm, size and
    /// initiator, printed and checked in the same order.
    #[test]
    fn message_counts() {
        const RANDOM_SEEDS: u64 = 50;
        let total = |c: &BTreeMap<&'static str, u64>| c.values().sum::<u64>();
        let random_stats = |f: &dyn Fn(u64) -> u64| {
            let v: Vec<u64> = (0..RANDOM_SEEDS).map(f).collect();
            let min = v.iter().copied().min().unwrap_or(0);
            let max = v.iter().copied().max().unwrap_or(0);
            let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
            format!("{mean:6.1} [{min}..{max}]")
        };
        println!();
        println!(
            "Messages per election, ids 1..=n, all up, nobody coordinator yet; periodic announcements excluded."
        );
        println!(
            "'latency 1': every message takes one tick (deterministic); 'random': latency 0..=2 ticks, mean [min..max] over {RANDOM_SEEDS} seeds."
        );
        println!(
            "{:>3} | {:<28} | {:>5} {:>5} {:>5} | {:>5} | {:<36} | {:>19}",
            "n", "case", "elect", "answr", "coord", "total", "formula (textbook)", "random latency"
        );
        println!("{}", "-".repeat(125));
        for n in [5u64, 9, 15] {
            let rows: [(&str, bool, Initiators); 5] = [
                ("bully worst (lowest starts)", true, Initiators::Lowest),
                ("bully best (highest starts)", true, Initiators::Highest),
                ("ring, one initiator (id 1)", false, Initiators::Lowest),
                ("ring, one initiator (id n)", false, Initiators::Highest),
                ("ring, all initiate", false, Initiators::All),
            ];
            for (name, bully, who) in rows {
                let counts = |seed: u64, latency: (u64, u64)| {
                    let r = if bully {
                        election_message_counts::<Bully>(n, who, seed, latency)
                    } else {
                        election_message_counts::<Ring>(n, who, seed, latency)
                    };
                    r.unwrap_or_else(|e| panic!("{e}"))
                };
                let c = counts(0, (1, 1));
                let get = |k: &str| c.get(k).copied().unwrap_or(0);
                let (formula, expected) = match (bully, who) {
                    (true, Initiators::Lowest) => (
                        format!("n(n-1)/2+n(n-1)/2+(n-1) = n²-1 = {}", n * n - 1),
                        n * n - 1,
                    ),
                    (true, _) => (format!("n-1 = {}", n - 1), n - 1),
                    (false, Initiators::All) => {
                        (format!("(2n-1)+(n-1) = 3n-2 = {}", 3 * n - 2), 3 * n - 2)
                    }
                    (false, _) => (
                        format!("n+(n-1) = 2n-1 = {} (2n = {})", 2 * n - 1, 2 * n),
                        2 * n - 1,
                    ),
                };
                let rnd = random_stats(&|seed| total(&counts(seed, (0, 2))));
                println!(
                    "{n:>3} | {name:<28} | {:>5} {:>5} {:>5} | {:>5} | {formula:<36} | {rnd:>19}",
                    get("election"),
                    get("answer"),
                    get("coordinator"),
                    total(&c)
                );
                assert_eq!(total(&c), expected, "n={n} {name}: {c:?}");
                if bully && who == Initiators::Lowest {
                    assert_eq!(
                        get("election"),
                        n * (n - 1) / 2,
                        "ELECTIONs: (n-1) from 1 + (n-1)(n-2)/2"
                    );
                    assert_eq!(get("answer"), n * (n - 1) / 2);
                    assert_eq!(get("coordinator"), n - 1);
                }
                if !bully {
                    assert_eq!(get("coordinator"), n - 1, "COORDINATOR hops");
                }
            }
            println!("{}", "-".repeat(125));
        }
        println!(
            "bully worst: node 1 sends n-1 ELECTIONs, nodes 2..n-1 send (n-1)(n-2)/2 more (the textbook figure), each answered; n sends n-1 COORDINATORs."
        );
        println!(
            "ring: COORDINATOR stops before the node that started its circulation (n-1 hops; textbooks count n)."
        );
        println!(
            "ring all-initiate: the ring ascends by id, so Chang-Roberts dropping kills every ELECTION but n's after one hop: its best case,"
        );
        println!(
            "  2n-1 ELECTION hops (worst case, ids descending along the ring: n(n+1)/2; LeLann without dropping: n²)."
        );
    }
}
