//! The model checker on named roles (`electd-lab model --roles`; docs/safety.md, "Roles"):
//! [stateright] explores a small cluster whose nodes are the node's own role types, the
//! [`RoleTable`] applied from a log, a [`Holder`] and a [`Ledger`] (`src/roles/`), stepped as
//! the driver is to step them: a holder asks the leader for a renewal and claims from its
//! answer; the leader renews, plans grants, moves and revocations, and commits them; holders
//! release what they stopped; entries are applied by each node at its own pace.
//!
//! The cluster's own election is taken as the quorum model proves it (`mod.rs`): one leader at
//! a time, whose claim ends before the next leader is elected. A failover here elects any
//! running node once the leader's claim has ended; the old leader's proposals not yet committed
//! are committed by the new one or lost. One clock: the margin F − L that absorbs clock rates is
//! the cluster's (docs/safety.md, "Timings").
//!
//! What can happen ([`RoleAct`]): a renewal asked, answered, lost or delivered in any order; a
//! claim answered on a role; a grant, a planned move, a revocation (a holder found silent, a
//! move overdue, or an operator's removal at any time); a release; a commit; an apply; the
//! leader's claim renewed (or not: it lapses); a failover; a crash and a restart (a new
//! process: no renewal, the table applied again from the log); the clock advanced by 1 ms, a
//! beat or a follower lease.
//!
//! The properties, judged on every state: no node claims a role inside another node's promise
//! on it (each promise, from the answer to its end, is kept past a crash), one node per token,
//! and a role's tokens never go back; and, as reachability, that a role is claimed, by a second
//! node after a move or a revocation, and after a failover. [`RolesVariant`] breaks one rule of
//! the argument each (R2, R3, R4, R5); each must yield a counterexample.

use std::collections::{BTreeMap, BTreeSet};

use electd::roles::holder::{Holder, Renewed};
use electd::roles::ledger::{Ledger, StopReason};
use electd::roles::table::{RoleCommand, RoleTable};
use electd_client::{RoleName, Token};
use stateright::{Model, Property};

pub type NodeId = u64;

const MS: u64 = 1_000_000;

/// The rules as built, or one of them broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum RolesVariant {
    /// As the node runs them.
    Sound,
    /// R3 broken: a new leader grants in its first follower lease (its gate starts F early).
    GrantInFirstLease,
    /// R2 broken: a holder uses an answer before its table applied what the leader took.
    IgnoreTakenAt,
    /// R4 broken: a revoked role is granted again at once (the leader revokes without a stop).
    GrantRevokedAtOnce,
    /// R5 broken: a holder releases a stopped role at once, with its promises still running.
    ReleaseAtOnce,
    /// R1 broken: a holder counts a renewal's claims from its answer's arrival (the node's flaw
    /// `claim-from-receipt`, in every node's holder).
    ClaimFromReceipt,
    /// R6 broken: a grant takes the last token drawn again (the node's flaw `reuse-token`, on
    /// every node's table).
    ReuseToken,
}

impl RolesVariant {
    /// A holder's flaw where this variant is the node's own.
    fn holder_flaw(self) -> Option<electd::roles::RoleFlaw> {
        (self == RolesVariant::ClaimFromReceipt)
            .then_some(electd::roles::RoleFlaw::ClaimFromReceipt)
    }

    /// An empty table, with the node's own flaw where this variant is one.
    fn table(self) -> RoleTable {
        let mut t = RoleTable::default();
        if self == RolesVariant::ReuseToken {
            t.flawed(Some(electd::roles::RoleFlaw::ReuseToken));
        }
        t
    }
}

/// The cluster and the bounds of the search.
#[derive(Clone, Debug)]
pub struct RolesModel {
    pub nodes: u64,
    pub variant: RolesVariant,
    pub beat_ns: u64,
    pub follower_lease_ns: u64,
    pub lease_ns: u64,
    /// No failover past this term.
    pub max_term: u64,
    pub max_crashes: u8,
    /// Messages in flight at most (a send beyond is lost).
    pub max_in_flight: usize,
    /// The clock never passes this (ns from 0).
    pub horizon_ns: u64,
}

impl RolesModel {
    /// The bundled cluster's timings (beat 30 ms, F 150 ms, L 120 ms), one role `a` that every
    /// node stands for.
    pub fn new(nodes: u64, variant: RolesVariant) -> RolesModel {
        RolesModel {
            nodes,
            variant,
            beat_ns: 30 * MS,
            follower_lease_ns: 150 * MS,
            lease_ns: 120 * MS,
            max_term: 3,
            max_crashes: 1,
            max_in_flight: 4,
            horizon_ns: 1_500 * MS,
        }
    }

    fn role() -> RoleName {
        RoleName::new("a").expect("a role name")
    }
}

/// A message between nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RoleMsg {
    /// A renewal asked of `to` by `from`, with its id.
    Ask { from: NodeId, to: NodeId, id: u64 },
    /// The answer to it.
    Answer {
        to: NodeId,
        id: u64,
        taken_at: u64,
        stop: Vec<(RoleName, Token)>,
    },
    /// A release, to the leader.
    Release {
        from: NodeId,
        to: NodeId,
        roles: Vec<(RoleName, Token)>,
    },
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoleNode {
    pub up: bool,
    pub table: RoleTable,
    pub holder: Holder,
    pub ledger: Ledger,
}

/// The leader of the cluster's own election.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lead {
    pub node: NodeId,
    pub term: u64,
    /// Its claim holds while `now < claim_until_ns`.
    pub claim_until_ns: u64,
    /// Its table is ready once it has applied this many entries (the log at its election).
    pub ready_at: usize,
    /// It crashed: it leads no more (its claim ended then), until a failover.
    pub down: bool,
}

/// What the checker keeps beside the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RoleGhost {
    /// Per node, the end of the longest promise it answered on the role, and with which token.
    pub promised: BTreeMap<NodeId, (u64, Token)>,
    /// Which node claimed each token.
    pub token_holder: BTreeMap<Token, NodeId>,
    /// The highest token claimed so far.
    pub last_token: Token,
    pub inside_promise: bool,
    pub token_shared: bool,
    pub token_back: bool,
    /// Nodes that claimed the role; whether one claimed in a term after the first claim's.
    pub claimers: BTreeSet<NodeId>,
    pub first_claim_term: Option<u64>,
    pub claimed_after_failover: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoleState {
    pub now: u64,
    pub nodes: Vec<RoleNode>,
    /// The committed log.
    pub log: Vec<RoleCommand>,
    /// The leader's proposals, not yet committed.
    pub pending: Vec<RoleCommand>,
    pub lead: Option<Lead>,
    pub net: Vec<RoleMsg>,
    pub crashes: u8,
    pub ghost: RoleGhost,
}

/// What can happen in a state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RoleAct {
    Ask(NodeId),
    Deliver(usize),
    Lose(usize),
    Claim(NodeId),
    Grant(NodeId),
    Move,
    Revoke,
    Release(NodeId),
    Commit,
    Apply(NodeId),
    RenewLead,
    Failover { to: NodeId, keep_pending: bool },
    Crash(NodeId),
    Restart(NodeId),
    Advance(u64),
}

impl RoleState {
    fn node(&mut self, id: NodeId) -> &mut RoleNode {
        &mut self.nodes[(id - 1) as usize]
    }

    fn leader(&self) -> Option<NodeId> {
        self.lead.as_ref().map(|l| l.node)
    }

    fn send(&mut self, model: &RolesModel, m: RoleMsg) {
        if self.net.len() < model.max_in_flight {
            self.net.push(m);
            self.net.sort();
        }
    }

    /// Whether the leader's claim holds now.
    fn lead_holds(&self) -> bool {
        self.lead
            .as_ref()
            .is_some_and(|l| self.now < l.claim_until_ns)
    }

    /// The leader proposes `cmd` (its table sees it once committed and applied).
    fn propose(&mut self, cmd: RoleCommand) {
        if !self.pending.contains(&cmd) {
            self.pending.push(cmd);
        }
    }

    /// `n` answered a claim on the role: judged against every other node's promise.
    fn claimed(&mut self, n: NodeId, token: Token, until_ns: u64, term: u64) {
        let now = self.now;
        let g = &mut self.ghost;
        if g.promised.iter().any(|(m, (end, _))| *m != n && *end > now) {
            g.inside_promise = true;
        }
        if g.token_holder.get(&token).is_some_and(|h| *h != n) {
            g.token_shared = true;
        }
        if token < g.last_token {
            g.token_back = true;
        }
        g.last_token = g.last_token.max(token);
        g.token_holder.insert(token, n);
        let p = g.promised.entry(n).or_insert((0, token));
        *p = (p.0.max(until_ns), token);
        g.claimers.insert(n);
        match g.first_claim_term {
            None => g.first_claim_term = Some(term),
            Some(t) if term > t => g.claimed_after_failover = true,
            Some(_) => {}
        }
    }
}

impl Model for RolesModel {
    type State = RoleState;
    type Action = RoleAct;

    fn init_states(&self) -> Vec<RoleState> {
        let role = Self::role();
        let log: Vec<RoleCommand> = (1..=self.nodes)
            .map(|node| RoleCommand::Stand {
                node,
                roles: vec![role.clone()],
            })
            .collect();
        let mut table = self.variant.table();
        for (i, cmd) in log.iter().enumerate() {
            table.apply(i as u64 + 1, cmd);
        }
        let nodes = (1..=self.nodes)
            .map(|id| RoleNode {
                up: true,
                table: table.clone(),
                holder: Holder::new(id, self.lease_ns, 0).flawed(self.variant.holder_flaw()),
                ledger: Ledger::new(self.follower_lease_ns),
            })
            .collect();
        let mut s = RoleState {
            now: 0,
            nodes,
            log,
            pending: Vec::new(),
            lead: None,
            net: Vec::new(),
            crashes: 0,
            ghost: RoleGhost::default(),
        };
        self.elect(&mut s, 1, true);
        // From the first leadership's gate on, its claim renewed: grants may come at once.
        s.now = self.follower_lease_ns;
        if let Some(l) = s.lead.as_mut() {
            l.claim_until_ns = s.now + self.lease_ns;
        }
        vec![s]
    }

    /// Only the actions that change something: a walk's path is replayed by the index of its
    /// action among these, so none may be a no-op.
    fn actions(&self, s: &RoleState, out: &mut Vec<RoleAct>) {
        let mut all = Vec::new();
        self.candidates(s, &mut all);
        out.extend(
            all.into_iter()
                .filter(|a| self.next_state(s, a.clone()).is_some()),
        );
    }

    fn next_state(&self, s: &RoleState, act: RoleAct) -> Option<RoleState> {
        self.step(s, act)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        Self::props()
    }

    fn within_boundary(&self, s: &RoleState) -> bool {
        s.now <= self.horizon_ns
    }
}

impl RolesModel {
    /// Every action that may come in `s`, some of which may change nothing.
    fn candidates(&self, s: &RoleState, out: &mut Vec<RoleAct>) {
        let lead_live = s.lead.as_ref().is_some_and(|l| !l.down);
        let lead_up = lead_live && s.lead_holds();
        for id in 1..=self.nodes {
            let n = &s.nodes[(id - 1) as usize];
            if n.up {
                if s.leader().is_some() {
                    out.push(RoleAct::Ask(id));
                }
                out.push(RoleAct::Claim(id));
                out.push(RoleAct::Release(id));
                if (n.table.applied() as usize) < s.log.len() {
                    out.push(RoleAct::Apply(id));
                }
                if lead_up {
                    out.push(RoleAct::Grant(id));
                }
                if s.crashes < self.max_crashes {
                    out.push(RoleAct::Crash(id));
                }
            } else {
                out.push(RoleAct::Restart(id));
            }
        }
        for i in 0..s.net.len() {
            out.push(RoleAct::Deliver(i));
            out.push(RoleAct::Lose(i));
        }
        if lead_live {
            out.push(RoleAct::RenewLead);
        }
        if lead_up {
            out.extend([RoleAct::Move, RoleAct::Revoke]);
            if !s.pending.is_empty() {
                out.push(RoleAct::Commit);
            }
        }
        let term = s.lead.as_ref().map_or(0, |l| l.term);
        if !s.lead_holds() && term < self.max_term {
            for to in 1..=self.nodes {
                if s.nodes[(to - 1) as usize].up {
                    out.push(RoleAct::Failover {
                        to,
                        keep_pending: true,
                    });
                    if !s.pending.is_empty() {
                        out.push(RoleAct::Failover {
                            to,
                            keep_pending: false,
                        });
                    }
                }
            }
        }
        for step in [MS, self.beat_ns, self.follower_lease_ns] {
            if s.now + step <= self.horizon_ns {
                out.push(RoleAct::Advance(step));
            }
        }
    }

    /// `act` in `s`: the next state, or `None` when it changes nothing.
    fn step(&self, s: &RoleState, act: RoleAct) -> Option<RoleState> {
        let mut s = s.clone();
        match act {
            RoleAct::Ask(id) => {
                let now = s.now;
                let ask = s.node(id).holder.ask(now);
                let to = s.leader()?;
                s.send(
                    self,
                    RoleMsg::Ask {
                        from: id,
                        to,
                        id: ask,
                    },
                );
            }
            RoleAct::Deliver(i) => {
                let m = s.net.remove(i);
                self.deliver(&mut s, m);
            }
            RoleAct::Lose(i) => {
                s.net.remove(i);
            }
            RoleAct::Claim(id) => {
                let now = s.now;
                let term = s.lead.as_ref().map_or(0, |l| l.term);
                let n = s.node(id);
                let c = n.holder.claim(&Self::role(), &n.table, now)?;
                s.claimed(id, c.token, c.until_ns, term);
            }
            RoleAct::Grant(to) => {
                let l = s.leader()?;
                let now = s.now;
                let n = &s.nodes[(l - 1) as usize];
                // One change of the role proposed at a time, as the driver plans from its table.
                if !n.ledger.may_grant(&Self::role(), &n.table, now) || !s.pending.is_empty() {
                    return None;
                }
                s.propose(RoleCommand::Grant {
                    grants: vec![(Self::role(), to)],
                });
            }
            RoleAct::Move | RoleAct::Revoke => {
                let l = s.leader()?;
                let why = if act == RoleAct::Move {
                    StopReason::Move
                } else {
                    StopReason::Revoke
                };
                let n = s.node(l);
                let (_, token) = n.table.holder(&Self::role())?;
                if !(why == StopReason::Revoke && self.variant == RolesVariant::GrantRevokedAtOnce)
                {
                    let table = n.table.clone();
                    n.ledger.stop(&Self::role(), &table, why)?;
                }
                if why == StopReason::Revoke {
                    s.propose(RoleCommand::Revoke {
                        roles: vec![(Self::role(), token)],
                    });
                }
            }
            RoleAct::Release(id) => {
                let now = s.now;
                let n = s.node(id);
                let table = n.table.clone();
                // Released at once: as if every promise had ended.
                let at = if self.variant == RolesVariant::ReleaseAtOnce {
                    u64::MAX
                } else {
                    now
                };
                let roles = n.holder.releasable(&table, at);
                let to = s.leader()?;
                if roles.is_empty() {
                    return None;
                }
                s.send(
                    self,
                    RoleMsg::Release {
                        from: id,
                        to,
                        roles,
                    },
                );
            }
            RoleAct::Commit => {
                let cmd = s.pending.remove(0);
                s.log.push(cmd);
            }
            RoleAct::Apply(id) => self.apply(&mut s, id),
            RoleAct::RenewLead => {
                let now = s.now;
                let l = s.lead.as_mut()?;
                l.claim_until_ns = now + self.lease_ns;
            }
            RoleAct::Failover { to, keep_pending } => {
                if keep_pending {
                    let p = std::mem::take(&mut s.pending);
                    s.log.extend(p);
                } else {
                    s.pending.clear();
                }
                if let Some(old) = s.leader() {
                    s.node(old).ledger.follow();
                }
                self.elect(&mut s, to, false);
            }
            RoleAct::Crash(id) => {
                s.crashes += 1;
                let n = s.node(id);
                n.up = false;
                n.ledger.follow();
                if s.leader() == Some(id) {
                    // A crashed leader's claim is over; its proposals are the failover's.
                    let now = s.now;
                    if let Some(l) = s.lead.as_mut() {
                        l.claim_until_ns = l.claim_until_ns.min(now);
                        l.down = true;
                    }
                }
            }
            RoleAct::Restart(id) => {
                let now = s.now;
                let n = s.node(id);
                n.up = true;
                n.holder = Holder::new(id, self.lease_ns, now + self.lease_ns)
                    .flawed(self.variant.holder_flaw());
                n.table = self.variant.table();
            }
            RoleAct::Advance(step) => s.now += step,
        }
        Some(s)
    }

    fn props() -> Vec<Property<Self>> {
        vec![
            Property::always(
                "no node claims a role inside another node's promise",
                |_, s: &RoleState| !s.ghost.inside_promise,
            ),
            Property::always("one node per token", |_, s: &RoleState| {
                !s.ghost.token_shared
            }),
            Property::always("a role's tokens never go back", |_, s: &RoleState| {
                !s.ghost.token_back
            }),
            Property::sometimes("a role is claimed", |_, s: &RoleState| {
                !s.ghost.claimers.is_empty()
            }),
            Property::sometimes("a second node claims the role", |_, s: &RoleState| {
                s.ghost.claimers.len() >= 2
            }),
            Property::sometimes(
                "the role is claimed after a failover",
                |_, s: &RoleState| s.ghost.claimed_after_failover,
            ),
        ]
    }
}

impl RolesModel {
    /// `to` is elected now, in the next term; its table is ready once it has applied the log
    /// as it stands.
    fn elect(&self, s: &mut RoleState, to: NodeId, first: bool) {
        let term = s.lead.as_ref().map_or(1, |l| l.term + 1);
        let start = if self.variant == RolesVariant::GrantInFirstLease && !first {
            s.now.saturating_sub(self.follower_lease_ns)
        } else {
            s.now
        };
        let ready_at = s.log.len();
        s.lead = Some(Lead {
            node: to,
            term,
            claim_until_ns: s.now + self.lease_ns,
            ready_at,
            down: false,
        });
        let n = s.node(to);
        n.ledger.lead(term, start);
        self.check_ready(s);
    }

    /// The leader's ledger is ready once its table has applied the log of its election.
    fn check_ready(&self, s: &mut RoleState) {
        if let Some(l) = s.lead.clone() {
            let n = s.node(l.node);
            if n.table.applied() as usize >= l.ready_at {
                n.ledger.ready();
            }
        }
    }

    fn apply(&self, s: &mut RoleState, id: NodeId) {
        let now = s.now;
        let is_leader = s.leader() == Some(id);
        let index = s.nodes[(id - 1) as usize].table.applied() as usize;
        let cmd = s.log[index].clone();
        let n = s.node(id);
        let changes = n.table.apply(index as u64 + 1, &cmd);
        if is_leader {
            let table = n.table.clone();
            n.ledger.applied(&changes, &table, now);
        }
        self.check_ready(s);
    }

    fn deliver(&self, s: &mut RoleState, m: RoleMsg) {
        let now = s.now;
        let holds = s.lead_holds();
        match m {
            RoleMsg::Ask { from, to, id } => {
                let n = s.node(to);
                if !n.up {
                    return;
                }
                let table = n.table.clone();
                if let Some(ans) = n.ledger.renew(from, &table, holds, now) {
                    let taken_at = ans.taken_at;
                    s.send(
                        self,
                        RoleMsg::Answer {
                            to: from,
                            id,
                            taken_at,
                            stop: ans.stop,
                        },
                    );
                }
            }
            RoleMsg::Answer {
                to,
                id,
                taken_at,
                stop,
            } => {
                let taken_at = if self.variant == RolesVariant::IgnoreTakenAt {
                    0
                } else {
                    taken_at
                };
                let n = s.node(to);
                if n.up {
                    let table = n.table.clone();
                    // As the node's steward: the arrival told to the holder (which only the
                    // flaw `claim-from-receipt` counts from).
                    if n.holder.answered(id, &Renewed { taken_at, stop }, &table) {
                        n.holder.received(now);
                    }
                }
            }
            RoleMsg::Release { from, to, roles } => {
                if s.leader() == Some(to) && s.nodes[(to - 1) as usize].up {
                    s.propose(RoleCommand::Release { node: from, roles });
                }
            }
        }
    }
}

/// The walks' choices: one step in four is a choice of the schedule (the clock advanced, the
/// leader's claim renewed, a move, a revocation, a crash, a restart, a failover, a message
/// lost), drawn uniformly among those; the others carry the protocol on (a renewal asked,
/// delivered, a claim, a grant, a commit, an apply, a release). Drawn uniformly from all,
/// the schedule's choices outnumbered the protocol's steps, and 5 million states of walks
/// never reached a second node's claim on the sound rules nor caught a new leader granting in
/// its first follower lease.
#[derive(Clone)]
struct Unhurried;

impl stateright::Chooser<RolesModel> for Unhurried {
    type State = rand::rngs::StdRng;

    fn new_state(&self, seed: u64) -> Self::State {
        rand::SeedableRng::seed_from_u64(seed)
    }

    fn choose_initial_state(&self, _: &mut Self::State, _: &[RoleState]) -> usize {
        0
    }

    fn choose_action(&self, rng: &mut Self::State, _: &RoleState, acts: &[RoleAct]) -> usize {
        use rand::Rng;
        let (schedule, protocol): (Vec<usize>, Vec<usize>) =
            (0..acts.len()).partition(|i| acts[*i].is_schedule());
        let pool = if protocol.is_empty() || (!schedule.is_empty() && rng.gen_ratio(1, 4)) {
            &schedule
        } else {
            &protocol
        };
        pool[rng.gen_range(0..pool.len())]
    }
}

impl RoleAct {
    /// A choice of the schedule, not a step of the protocol.
    fn is_schedule(&self) -> bool {
        matches!(
            self,
            RoleAct::Advance(_)
                | RoleAct::RenewLead
                | RoleAct::Move
                | RoleAct::Revoke
                | RoleAct::Crash(_)
                | RoleAct::Restart(_)
                | RoleAct::Failover { .. }
                | RoleAct::Lose(_)
        )
    }
}

/// Plays `acts` from the start, skipping those not enabled where they come, until `broken`
/// says the state breaks a property: the actions played, and whether it broke.
pub fn play(
    model: &RolesModel,
    acts: &[RoleAct],
    broken: impl Fn(&RoleState) -> bool,
) -> (Vec<RoleAct>, Vec<RoleState>, bool) {
    let mut s = model.init_states().pop().expect("one initial state");
    let mut played = Vec::new();
    let mut states = vec![s.clone()];
    let mut buf = Vec::new();
    for a in acts {
        buf.clear();
        model.actions(&s, &mut buf);
        if !buf.contains(a) {
            continue;
        }
        s = model.step(&s, a.clone()).expect("enabled");
        played.push(a.clone());
        states.push(s.clone());
        if broken(&s) {
            return (played, states, true);
        }
    }
    (played, states, false)
}

/// `acts` made short: actions left out one at a time while what is left still breaks.
pub fn shrink(
    model: &RolesModel,
    mut acts: Vec<RoleAct>,
    broken: impl Fn(&RoleState) -> bool + Copy,
) -> Vec<RoleAct> {
    loop {
        let before = acts.len();
        let mut i = acts.len();
        while i > 0 {
            i -= 1;
            let mut fewer = acts.clone();
            fewer.remove(i);
            if play(model, &fewer, broken).2 {
                acts = fewer;
            }
        }
        if acts.len() == before {
            return play(model, &acts, broken).0;
        }
    }
}

/// What one check of the roles model found.
#[derive(Debug)]
pub struct RolesReport {
    pub variant: RolesVariant,
    pub states: usize,
    pub unique: usize,
    pub max_depth: usize,
    pub took: std::time::Duration,
    /// The `always` properties broken, each with its counterexample's length and path.
    pub broken: Vec<(&'static str, usize, String)>,
    /// The first counterexample's actions.
    pub counterexample: Option<Vec<RoleAct>>,
    /// The `sometimes` properties reached.
    pub reached: Vec<&'static str>,
}

/// Checks `model`: breadth first to `depth` when `seed` is `None`, else by uniform random walks
/// of `depth` steps from `seed`; at most `states` states either way, and `guard` against a
/// hang. A broken variant stops at its first counterexample.
pub fn check(
    model: RolesModel,
    depth: usize,
    seed: Option<u64>,
    states: usize,
    guard: std::time::Duration,
) -> RolesReport {
    use stateright::{Checker, HasDiscoveries};
    let variant = model.variant;
    let props = model.properties();
    let started = std::time::Instant::now();
    let builder = model
        .checker()
        .threads(2)
        .timeout(guard)
        .target_state_count(states)
        .target_max_depth(depth);
    let builder = if variant == RolesVariant::Sound {
        builder
    } else {
        builder.finish_when(HasDiscoveries::AnyFailures)
    };
    let checker: Box<dyn Checker<RolesModel>> = match seed {
        None => Box::new(builder.spawn_bfs().join()),
        Some(seed) => Box::new(builder.spawn_simulation(seed, Unhurried).join()),
    };
    let mut broken = Vec::new();
    let mut reached = Vec::new();
    let mut counterexample = None;
    for p in &props {
        let Some(path) = checker.discovery(p.name) else {
            continue;
        };
        if matches!(p.expectation, stateright::Expectation::Always) {
            let acts = path.clone().into_actions();
            counterexample.get_or_insert_with(|| acts.clone());
            let shown: Vec<String> = acts.iter().map(|a| format!("{a:?}")).collect();
            broken.push((p.name, acts.len(), shown.join(", ")));
        } else {
            reached.push(p.name);
        }
    }
    RolesReport {
        variant,
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        took: started.elapsed(),
        broken,
        reached,
        counterexample,
    }
}
