//! The model checker on the real quorum core (`electd-lab model`, `scripts/model.sh`;
//! docs/testing.md, "Model checking"). [stateright] explores every interleaving of a small
//! cluster, breadth first: each node is the node's own [`QuorumCore`] (`src/quorum/core/mod.rs`),
//! stepped and ticked as the node's tasks step and tick it, with openraft's vote and log
//! replaced by a small Raft ([`Disk`], [`Live`]). A new data dir's hellos are the node's
//! (`src/quorum/identity.rs`): a member records a peer's first incarnation and refuses another
//! (`recognise`, `hello_answer`), and the core's `Confirmation` says whom to ask, when ⌈n/2⌉
//! members recorded the data dir (it may vote from then on), and when a refusal stops the node.
//!
//! What can happen at each step ([`Act`]): a message delivered (in any order: the network is a
//! multiset), lost or duplicated, or a leader's append delivered as a snapshot of its log to
//! its commit (openraft sends one to a follower whose log entries it no longer holds: the core
//! takes `SnapshotAccepted`, and the answer acknowledges no probe; a probe to a node whose
//! data dir is not confirmed is refused, and acknowledges nothing); a node's tick (or none: a
//! stalled host skips ticks); openraft's replication apart from the probes (a leader's log sent
//! to a follower that lacks it); a campaign once the core says it is due, a pre-vote round or an
//! election given up, a probe failed; a claiming leader resigning to any other member (the
//! admin's resign: the core fences its claim, the followers are told who campaigns first); the
//! one clock advanced to the next instant some node waits for (so a message can be delayed past
//! any deadline but a probe's or an election's: there the probe gives up and the election
//! counts as failed, as the driver's timeouts end them); a crash, a graceful stop (the claim
//! closed for good, a successor named to the others, as on SIGTERM; openraft runs on until the
//! node exits, a step later), a restart with the durable state, a wipe of the disk.
//!
//! What each node's event log tells a watcher is its driver's, recorded when the driver wakes
//! to record (`State::record_woken`): a step of the core that asks to, its start, its role
//! turn, the end of its probe, a change of openraft's state, and the end of its claim (also
//! while a probe is out: driver/probe.rs, `probe_recording`).
//!
//! The properties, judged on every state reached ([`Ghost`]): no node claims inside another
//! node's promise (each node's promise is the end of the longest claim it answered, kept past
//! its crash), one leader per term, a node never votes for two candidates in one term (across
//! its data dirs), no running node's event log tells of its claim inside another node's
//! promise (at each instant, and back to the claim's start as the log stamps it), and each
//! tells whether it leads as its answers do; and, as reachability, that a node claims, that a
//! second term is claimed, that a term is claimed after a resignation and after a graceful
//! stop, that a follower installs a snapshot, and that a wiped data dir is refused.
//! Non-voters (`with_learners`; docs/safety.md, "Non-voters"): openraft learners beside the
//! voters, never promoted. A learner takes the leader's log (openraft's replication), is never
//! probed and never asked for a vote, never campaigns, and needs no confirmed incarnation (the
//! node's driver skips both for `nonvoter = true`; the model takes its data dir as confirmed,
//! which only a probe or a vote request would ask, and it gets neither); a resign names only a
//! voter. Its property: no
//! non-voter claims (N1); and, as reachability, that a non-voter takes the leader's log.
//! [`Variant`] breaks the core, or the driver's recording, the ways the simulator's flaws do;
//! each must yield a counterexample path. Liveness, where the model allows it, is
//! [`liveness`]'s: from the states the walks reach, the faults end and a node must claim
//! within a bound.

use std::collections::BTreeMap;

use electd::clock::{ms, Reading};
use electd::quorum::{
    hello_answer, recognise, Answer, CommittedLeaderId, CoreTiming, Followers, Heard, HelloAnswer,
    Input, LogId, QuorumCore, RaftRole, RaftView, Recognition, Verdict,
};
use electd::Timing;
use electd_client::{Resigned, Role};
use stateright::{Model, Property};

pub mod cmd;
pub mod liveness;
pub mod roles;
pub mod search;

pub type NodeId = u64;

/// A member's answer to a hello before it judges it: every node of the model is a member, none
/// behind (the model has no membership changes).
const MEMBER: HelloAnswer = HelloAnswer {
    accepted: false,
    known: None,
    member: true,
    behind: false,
    incarnation: None,
};

/// Where the model's clock starts (BOOTTIME ns).
pub const START_NS: u64 = 1_000_000_000;

/// The core as built, or broken the way one of the simulator's flaws breaks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Variant {
    /// The core as the node runs it.
    Sound,
    /// Votes pass to openraft inside a promise (the flaw `vote_while_leading`).
    VoteWhileLeading,
    /// A claim lease of three follower leases (the simulator's `--unsafe`).
    LongLease,
    /// A wiped disk's new incarnation is taken as confirmed at once (`trust_new_incarnation`).
    TrustNewIncarnation,
    /// The driver records a change of view only between probes (`record_between_probes`):
    /// while a probe is out, only what a step of the core asks to record is recorded.
    RecordBetweenProbes,
    /// A node whose incarnation is not confirmed acknowledges a probe as any append (as
    /// openraft's own read round let it before electd sent its probes itself).
    AckUnconfirmed,
    /// The leader probes its learners too and counts their acknowledgements toward the
    /// voters' majority (the flaw `count_learner_acks`: "a non-voter counted in a quorum").
    /// Needs a learner (`with_learners`).
    CountLearnerAck,
}

/// The cluster and the bounds of the search.
#[derive(Clone, Debug)]
pub struct QuorumModel {
    /// The voters, ids 1..=nodes.
    pub nodes: u64,
    /// Non-voters (openraft learners), ids nodes+1..=nodes+learners.
    pub learners: u64,
    pub variant: Variant,
    pub timing: CoreTiming,
    /// No campaign for a term above this.
    pub max_term: u64,
    /// Messages in flight at most (a send beyond is lost): three broadcasts' worth.
    pub max_in_flight: usize,
    pub max_crashes: u8,
    pub max_wipes: u8,
    pub max_resigns: u8,
    /// Messages duplicated at most.
    pub max_dups: u8,
    /// Appends delivered as snapshots at most.
    pub max_snapshots: u8,
    /// The clock never passes this (ns after the start).
    pub horizon_ns: u64,
    /// How many of the next instants the clock may advance to from a state.
    pub advances: usize,
    /// For the checker's own test: every claim's start stamped this much earlier than the node
    /// stamps it (0: as the node does), so that the stamp check is seen to fail.
    pub stamp_early_ns: u64,
}

impl QuorumModel {
    /// The bundled cluster's timings (beat 30 ms, follower lease 150 ms, claim lease 120 ms),
    /// `nodes` nodes, the core broken as `variant` says.
    pub fn new(nodes: u64, variant: Variant) -> QuorumModel {
        let config = Timing {
            heartbeat_ms: 30,
            follower_lease_ms: 150,
            lease_ms: 0,
        };
        let mut timing = CoreTiming::from_config(&config);
        if variant == Variant::LongLease {
            timing.lease_ns = 3 * timing.election.follower_lease_ns;
        }
        QuorumModel {
            nodes,
            learners: 0,
            variant,
            timing,
            max_term: 3,
            max_in_flight: 3 * (nodes as usize - 1),
            max_crashes: 1,
            max_wipes: 1,
            max_resigns: 1,
            max_dups: 1,
            max_snapshots: 1,
            horizon_ns: ms(1500),
            advances: 3,
            stamp_early_ns: 0,
        }
    }

    /// The same cluster with `learners` non-voters beside its voters (at most 8 nodes in all:
    /// a mask has a bit per node), and room in flight for their messages.
    pub fn with_learners(mut self, learners: u64) -> QuorumModel {
        assert!(self.nodes + learners <= 8, "at most 8 nodes in all");
        self.learners = learners;
        self.max_in_flight = 3 * (self.size() as usize - 1);
        self
    }

    /// Every node: the voters, then the non-voters.
    pub fn size(&self) -> u64 {
        self.nodes + self.learners
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> {
        1..=self.size()
    }

    fn voters(&self) -> impl Iterator<Item = NodeId> {
        1..=self.nodes
    }

    pub fn is_learner(&self, id: NodeId) -> bool {
        id > self.nodes
    }

    /// A majority of the voters among `mask` (a learner's bit counts nothing: openraft's
    /// quorum set and electd's probe count voters only).
    fn majority(&self, mask: u8) -> bool {
        let voters = (1u16 << self.nodes) - 1;
        u64::from((u16::from(mask) & voters).count_ones()) > self.nodes / 2
    }

    /// A probe's acknowledgements are a majority: of the voters, or with `CountLearnerAck`
    /// every acknowledgement counted toward it.
    fn probe_majority(&self, mask: u8) -> bool {
        match self.variant {
            Variant::CountLearnerAck => u64::from(mask.count_ones()) > self.nodes / 2,
            _ => self.majority(mask),
        }
    }

    /// The role openraft gives a node that follows: a learner stays one.
    fn following(&self, id: NodeId) -> RaftRole {
        match self.is_learner(id) {
            true => RaftRole::Learner,
            false => RaftRole::Follower,
        }
    }

    fn core(&self, id: NodeId, now_ns: u64) -> QuorumCore {
        let core = QuorumCore::new(id, self.timing, id, now_ns);
        core.with_vote_while_leading(self.variant == Variant::VoteWhileLeading)
    }
}

/// A node's durable state: openraft's vote and log, and the data dir's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Disk {
    pub term: u64,
    pub voted_for: Option<NodeId>,
    /// openraft's committed vote: the vote is for a leader this node heard from (or is).
    pub committed: bool,
    /// The terms of the log's entries.
    pub log: Vec<u64>,
    pub incarnation: u8,
    pub confirmed: bool,
    /// The incarnations this node recorded for the others.
    pub known: BTreeMap<NodeId, u8>,
}

impl Disk {
    /// The log's last entry as openraft names it.
    fn last(&self) -> (u64, u64) {
        (self.log.last().copied().unwrap_or(0), self.log.len() as u64)
    }
}

/// What a node holds while it runs: its core and openraft's volatile state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Live {
    pub core: QuorumCore,
    /// When openraft last renewed its committed vote (an append processed from the leader, its
    /// own election, its start): it refuses every vote request for a follower lease after
    /// (`docs/design/openraft.md`, "Follower vote refusal", "Restart keeps the refusal").
    pub vote_utime: u64,
    pub role: RaftRole,
    pub leader: Option<NodeId>,
    pub commit: u64,
    /// Votes for this candidate (bit per node).
    pub votes: u8,
    /// The probe out: its term and send instant, and who acknowledged it (bit per node). It
    /// gives up a probe timeout after its send instant at the latest (driver/probe.rs, `probe`).
    pub probe: Option<(u64, u64, u8)>,
    /// The pre-vote round out: its number, the contact sequence it was due at, and the
    /// grants (an answer to an earlier round counts nothing).
    pub round: Option<(u8, u64, u8)>,
    pub rounds: u8,
    /// The election this node started and watches: its term and when it started. It counts
    /// as failed an election timeout (`outcome_ns`) after its start at the latest
    /// (driver/campaign.rs, `await_outcome`).
    pub electing: Option<(u64, u64)>,
    /// A graceful stop under way (`Act::Shutdown` done): the claim is closed and the notices
    /// are out, while openraft still runs until `Act::Exit`.
    pub stopping: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub disk: Disk,
    pub live: Option<Live>,
    /// What its event log tells a watcher (`/v1/events`, `/v1/watch`): that it leads, as its
    /// last recorded view says. The file outlives a crash and a wiped disk; a restarted node
    /// records its view at once (driver/mod.rs, `turns`).
    pub logged_leading: bool,
}

/// A message between two nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    PreVote {
        from: NodeId,
        to: NodeId,
        round: u8,
        last: (u64, u64),
    },
    PreVoteAnswer {
        from: NodeId,
        to: NodeId,
        round: u8,
        granted: bool,
    },
    Vote {
        from: NodeId,
        to: NodeId,
        term: u64,
        last: (u64, u64),
    },
    VoteAnswer {
        from: NodeId,
        to: NodeId,
        term: u64,
        granted: bool,
    },
    Append {
        from: NodeId,
        to: NodeId,
        term: u64,
        log: Vec<u64>,
        commit: u64,
        t0: u64,
    },
    AppendAnswer {
        from: NodeId,
        to: NodeId,
        term: u64,
        ok: bool,
        t0: u64,
    },
    Hello {
        from: NodeId,
        to: NodeId,
        incarnation: u8,
    },
    /// The answer to the hello of `incarnation`: accepted, or refused naming the one `known`.
    HelloAnswer {
        from: NodeId,
        to: NodeId,
        incarnation: u8,
        accepted: bool,
        known: Option<u8>,
    },
    /// The leader of `term` resigned, naming `successor` (protocol.rs, `Resign`).
    Resign {
        from: NodeId,
        to: NodeId,
        term: u64,
        successor: NodeId,
    },
}

impl Msg {
    fn to(&self) -> NodeId {
        match self {
            Msg::PreVote { to, .. }
            | Msg::PreVoteAnswer { to, .. }
            | Msg::Vote { to, .. }
            | Msg::VoteAnswer { to, .. }
            | Msg::Append { to, .. }
            | Msg::AppendAnswer { to, .. }
            | Msg::Hello { to, .. }
            | Msg::HelloAnswer { to, .. }
            | Msg::Resign { to, .. } => *to,
        }
    }
}

/// What the checker remembers of the past to judge a state: the promises, the leaders and the
/// votes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Per node: the end of the longest claim it answered (BOOTTIME), kept past its crash.
    pub promised_until: BTreeMap<NodeId, u64>,
    /// Per term: the node openraft's model made leader.
    pub leaders: BTreeMap<u64, NodeId>,
    /// Per (voter, term): the candidate it voted for, across its data dirs.
    pub votes: BTreeMap<(NodeId, u64), NodeId>,
    /// Terms in which some node claimed (bit per term).
    pub claimed_terms: u32,
    /// The highest term a leader resigned, and whether a higher one was claimed since.
    pub resigned_term: Option<u64>,
    pub claimed_after_resign: bool,
    /// The highest term whose leader stopped gracefully naming a successor, and whether a
    /// higher one was claimed since.
    pub stopped_term: Option<u64>,
    pub claimed_after_stop: bool,
    /// A wiped data dir's confirmation was refused (a member knows the earlier one).
    pub refused: bool,
    /// A follower installed a leader's snapshot.
    pub snapshot_installed: bool,
    /// This step: a node claims inside another node's promise.
    pub two_claims: bool,
    /// This step: openraft's model made a second leader in a term.
    pub two_leaders: bool,
    /// This step: a node voted for a second candidate in a term.
    pub double_vote: bool,
    /// This step: a running node's event log tells of its claim while another node's promise
    /// runs.
    pub log_inside_promise: bool,
    /// This step: a running node's event log tells another role than the node answers.
    pub log_trails: bool,
    /// This step: a non-voter claimed (N1).
    pub nonvoter_claimed: bool,
    /// A non-voter took a leader's append.
    pub nonvoter_follows: bool,
    /// The step before broke a property: nothing is explored past it.
    pub halted: bool,
}

impl Ghost {
    /// The property this step broke, if one did.
    pub fn broken(&self) -> Option<&'static str> {
        [
            (self.two_claims, "a claim inside another node's promise"),
            (self.two_leaders, "two leaders in a term"),
            (self.double_vote, "a second vote in a term"),
            (
                self.log_inside_promise,
                "an event log told of a claim inside a promise",
            ),
            (self.log_trails, "an event log trailed its node's answers"),
            (self.nonvoter_claimed, "a non-voter claimed"),
        ]
        .into_iter()
        .find_map(|(b, what)| b.then_some(what))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: u64,
    pub nodes: Vec<Node>,
    /// Messages in flight, sorted (a multiset: delivered in any order).
    pub net: Vec<Msg>,
    pub crashes: u8,
    pub wipes: u8,
    pub resigns: u8,
    pub dups: u8,
    pub snapshots: u8,
    pub ghost: Ghost,
}

/// What wakes a node's driver to record its view, as it stood before a step
/// (`State::record_woken`).
#[derive(Clone, Copy, Debug)]
struct Woken {
    /// openraft's role, term and leader.
    raft: (RaftRole, u64, Option<NodeId>),
    probing: bool,
    /// The end of its last claim.
    claim_end: Option<u64>,
}

/// One step of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    Deliver(Msg),
    Duplicate(Msg),
    /// A leader's `Msg::Append` delivered as a snapshot.
    Snapshot(Msg),
    Tick(NodeId),
    Campaign(NodeId),
    GiveUpRound(NodeId),
    GiveUpElection(NodeId),
    FailProbe(NodeId),
    SayHello(NodeId),
    AdvanceTo(u64),
    Crash(NodeId),
    Restart(NodeId),
    Wipe(NodeId),
    /// The first resigns, naming the second its successor.
    Resign(NodeId, NodeId),
    /// A graceful stop begins (SIGTERM; quorum/node/mod.rs, `shutdown`): the claim ends for
    /// good, and a node that led names its successor to the others. It counts as one of the
    /// `max_crashes` stops.
    Shutdown(NodeId),
    /// A stopping node's openraft stops and its process exits: it may restart like a crashed
    /// one.
    Exit(NodeId),
    /// openraft's own replication, apart from the probes: leader `.0` sends its log to `.1`,
    /// which lacks it, one send in flight at a time (openraft retries a failed send after
    /// `RaftNet`'s backoff). An append no probe counts.
    Replicate(NodeId, NodeId),
}

/// The model's clock at one instant, for what the node stamps (BOOTTIME and MONOTONIC are one
/// clock here: the model never suspends).
struct At(u64);

impl electd::clock::Clock for At {
    fn mono_ns(&self) -> u64 {
        self.0
    }
    fn boot_ns(&self) -> u64 {
        self.0
    }
}

fn bit(id: NodeId) -> u8 {
    1 << (id - 1)
}

fn log_id((term, index): (u64, u64)) -> Option<LogId<NodeId>> {
    (index > 0).then(|| LogId::new(CommittedLeaderId::new(term, 0), index))
}

impl State {
    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    fn live(&self, id: NodeId) -> Option<&Live> {
        self.node(id).live.as_ref()
    }

    fn reading(&self) -> Reading {
        Reading {
            boot_ns: self.now,
            mono_ns: self.now,
        }
    }

    fn view(&self, id: NodeId) -> Option<RaftView> {
        let n = self.node(id);
        n.live.as_ref().map(|l| RaftView {
            role: l.role,
            term: n.disk.term,
            leader: l.leader,
            last_log_index: (!n.disk.log.is_empty()).then_some(n.disk.log.len() as u64),
        })
    }

    /// Steps `id`'s core; its answer. A record it asks for is made (node/mod.rs, `carry_out`);
    /// its other actions are the node's I/O the model has no use for (wakes, counts), and
    /// probes come from ticks only.
    fn step(&mut self, m: &QuorumModel, id: NodeId, input: Input) -> Option<Answer> {
        let now = self.reading();
        let live = self.node_mut(id).live.as_mut()?;
        let mut answer = None;
        let mut record = false;
        for a in live.core.step(now, input) {
            match a {
                electd::quorum::Action::Answer(x) => answer = Some(x),
                electd::quorum::Action::Record => record = true,
                _ => {}
            }
        }
        if record {
            self.record(m, id);
        }
        answer
    }

    /// `id` records its view as judged now in its event log (events.rs, `record_leased_view`).
    /// A claim's start is stamped as the node stamps it (lease.rs, `stamp_change`): back at the
    /// send instant of the probe that started it. The chaos checker C6 judges the logs as
    /// intervals, so that stamp must lie past every promise of another node, not only the
    /// instant it is recorded at.
    fn record(&mut self, m: &QuorumModel, id: NodeId) {
        let (Some(view), Some(live)) = (self.view(id), self.live(id)) else {
            return;
        };
        let judged = live.core.judge(self.reading(), &view).view;
        let leading = judged.role == Role::Leader;
        if leading && !self.node(id).logged_leading {
            let clock = At(self.now);
            let since = live
                .core
                .lease()
                .stamp_change(Role::Follower, Role::Leader, judged.term, &clock)
                .saturating_sub(m.stamp_early_ns);
            let g = &mut self.ghost;
            g.log_inside_promise |= g
                .promised_until
                .iter()
                .any(|(other, until)| *other != id && *until > since);
        }
        self.node_mut(id).logged_leading = leading;
    }

    fn send(&mut self, m: &QuorumModel, msg: Msg) {
        if self.net.len() < m.max_in_flight {
            let at = self.net.partition_point(|x| *x <= msg);
            self.net.insert(at, msg);
        }
    }

    fn take(&mut self, msg: &Msg) -> bool {
        match self.net.iter().position(|x| x == msg) {
            Some(i) => {
                self.net.remove(i);
                true
            }
            None => false,
        }
    }

    /// openraft saw a higher term: it adopts it and steps down.
    fn adopt_term(&mut self, m: &QuorumModel, id: NodeId, term: u64) {
        let n = self.node_mut(id);
        if term > n.disk.term {
            n.disk.term = term;
            n.disk.voted_for = None;
            n.disk.committed = false;
            if let Some(l) = n.live.as_mut() {
                l.role = m.following(id);
                l.leader = None;
                l.votes = 0;
            }
        }
    }

    /// What wakes `id`'s driver to record, as it stood before a step ([`Woken`]).
    fn woken(&self, id: NodeId) -> Option<Woken> {
        let (l, raft) = (self.live(id)?, self.view(id)?);
        Some(Woken {
            raft: (raft.role, raft.term, raft.leader),
            probing: l.probe.is_some(),
            claim_end: l.core.lease().last().map(|c| c.until_ns),
        })
    }

    /// The driver's recording after `act` (a step of the core that asks to record has recorded
    /// already: `step`). `id` records its view when its driver wakes to: its start (the first
    /// role turn, driver/mod.rs `turns`), its role turn (`Tick`: the view is recorded before
    /// the probe goes out, driver/probe.rs `probe_recording`), the end of its probe (the
    /// turn's record, carried out after it), a change of openraft's state (the role turn's
    /// `Woke::Raft`), and the end of its claim (the role turn's timer). While a probe is out,
    /// the last two wake `probe_recording` instead; the variant `RecordBetweenProbes` does not
    /// wake for them then.
    fn record_woken(&mut self, m: &QuorumModel, before: &[Option<Woken>], act: &Act, was_now: u64) {
        for id in m.ids() {
            let Some(now) = self.woken(id) else { continue };
            let was = before[(id - 1) as usize];
            let started = was.is_none();
            let turn = *act == Act::Tick(id);
            let probe_ended = was.is_some_and(|w| w.probing) && !now.probing;
            let raft_changed = was.is_some_and(|w| w.raft != now.raft);
            let claim_ended = was
                .and_then(|w| w.claim_end)
                .is_some_and(|end| was_now < end && end <= self.now);
            let deferred = m.variant == Variant::RecordBetweenProbes && now.probing;
            if started || turn || probe_ended || (!deferred && (raft_changed || claim_ended)) {
                self.record(m, id);
            }
        }
    }

    /// Judges every running node at this instant, as `/v1/leader` would: a claim while another
    /// node's promise runs is the violation; a claim makes a promise to its end. Then what a
    /// watcher is told: a running node's event log must say that it leads exactly when its
    /// answers do (the simulator's check of each event log against its answers), and never
    /// while another node's promise runs (the chaos checker C6 over the event logs, at the
    /// instant).
    fn judge(&mut self, m: &QuorumModel) {
        let mut leads = Vec::with_capacity(self.nodes.len());
        for id in m.ids() {
            let (Some(view), Some(live)) = (self.view(id), self.live(id)) else {
                continue;
            };
            let judged = live.core.judge(self.reading(), &view);
            leads.push((id, judged.view.role == Role::Leader));
            let Some(left) = judged.lease_remaining_ns.filter(|l| *l > 0) else {
                continue;
            };
            let now = self.now;
            let g = &mut self.ghost;
            g.nonvoter_claimed |= m.is_learner(id);
            if g.promised_until
                .iter()
                .any(|(other, until)| *other != id && *until > now)
            {
                g.two_claims = true;
            }
            let until = g.promised_until.entry(id).or_default();
            *until = (*until).max(now + left);
            g.claimed_terms |= 1 << judged.view.term.min(31);
            if g.resigned_term.is_some_and(|t| judged.view.term > t) {
                g.claimed_after_resign = true;
            }
            if g.stopped_term.is_some_and(|t| judged.view.term > t) {
                g.claimed_after_stop = true;
            }
        }
        for (id, leading) in leads {
            let logged = self.node(id).logged_leading;
            let now = self.now;
            let g = &mut self.ghost;
            g.log_trails |= logged != leading;
            g.log_inside_promise |= logged
                && g.promised_until
                    .iter()
                    .any(|(other, until)| *other != id && *until > now);
        }
    }

    /// `msg`, a leader's append, delivered: as openraft takes an append, or (`snapshot`) the
    /// leader's snapshot of its log to its commit. Either renews openraft's vote (its
    /// `accept_vote`) when the sender's term is not below this node's; the core takes
    /// `AppendAccepted` or `SnapshotAccepted` as the node's handlers step it (node/mod.rs,
    /// `on_append`, `on_snapshot`); a snapshot's answer acknowledges no probe (a probe counts
    /// heartbeat answers only).
    fn append(&mut self, m: &QuorumModel, msg: Msg, snapshot: bool) {
        let Msg::Append {
            from,
            to,
            term,
            log,
            commit,
            t0,
        } = msg
        else {
            return;
        };
        // A probe (it carries its send instant) to a node whose incarnation is not confirmed
        // is refused (protocol.rs, `Probe`): taken as nothing, answered as no acknowledgement.
        let probe = t0 != 0 && !snapshot;
        if probe && !self.node(to).disk.confirmed && m.variant != Variant::AckUnconfirmed {
            return;
        }
        let ok = term >= self.node(to).disk.term;
        if ok {
            self.adopt_term(m, to, term);
            let now = self.now;
            let n = self.node_mut(to);
            let l = n.live.as_mut().expect("live");
            if !snapshot {
                n.disk.log = log;
                l.commit = commit;
            } else if commit > l.commit {
                // openraft's `install_full_snapshot` (its engine's following handler): the snapshot
                // holds the leader's log to its commit, and is ignored when it is no newer than
                // what this node committed; a log that holds the snapshot's last entry keeps
                // what follows it, one that conflicts or is shorter ends there.
                let upto = commit as usize;
                if n.disk.log.get(upto - 1) != log.get(upto - 1) {
                    n.disk.log = log[..upto].to_vec();
                }
                l.commit = commit;
            }
            n.disk.voted_for = Some(from);
            n.disk.committed = true;
            l.role = m.following(to);
            l.leader = Some(from);
            l.vote_utime = now;
            self.ghost.nonvoter_follows |= m.is_learner(to);
            let taken = if snapshot {
                self.ghost.snapshot_installed = true;
                Input::SnapshotAccepted { leader: Some(from) }
            } else {
                Input::AppendAccepted {
                    leader: from,
                    commit: Some(commit),
                }
            };
            self.step(m, to, taken);
        }
        let term = self.node(to).disk.term;
        let answer = Msg::AppendAnswer {
            from: to,
            to: from,
            term,
            ok: ok && !snapshot,
            t0,
        };
        self.send(m, answer);
    }

    /// `voter` votes for `candidate` in `term`: the ghost remembers it across data dirs.
    fn note_vote(&mut self, voter: NodeId, term: u64, candidate: NodeId) {
        match self.ghost.votes.insert((voter, term), candidate) {
            Some(earlier) if earlier != candidate => self.ghost.double_vote = true,
            _ => {}
        }
    }

    fn deliver(&mut self, m: &QuorumModel, msg: Msg) {
        match msg {
            Msg::PreVote {
                from,
                to,
                round,
                last,
            } => {
                let mine = log_id(self.node(to).disk.last());
                let confirmed = self.node(to).disk.confirmed;
                let asked = Input::PreVoteAsked {
                    from,
                    theirs: log_id(last),
                    mine,
                    confirmed,
                };
                let granted = matches!(
                    self.step(m, to, asked),
                    Some(Answer::PreVote {
                        verdict: Ok(()),
                        ..
                    })
                );
                self.send(
                    m,
                    Msg::PreVoteAnswer {
                        from: to,
                        to: from,
                        round,
                        granted,
                    },
                );
            }
            Msg::PreVoteAnswer {
                from,
                to,
                round,
                granted,
            } => {
                let Some((out, seq, grants)) = self.live(to).and_then(|l| l.round) else {
                    return;
                };
                if out != round || !granted {
                    return;
                }
                let grants = grants | bit(from);
                if let Some(l) = self.node_mut(to).live.as_mut() {
                    l.round = Some((out, seq, grants));
                }
                if m.majority(grants) {
                    self.round_won(m, to, seq);
                }
            }
            Msg::Vote {
                from,
                to,
                term,
                last,
            } => self.vote(m, from, to, term, last),
            Msg::VoteAnswer {
                from,
                to,
                term,
                granted,
            } => {
                self.adopt_term(m, to, term);
                let n = self.node(to);
                let Some(l) = n.live.as_ref() else { return };
                if !granted || l.role != RaftRole::Candidate || n.disk.term != term {
                    return;
                }
                let votes = l.votes | bit(from);
                let won = m.majority(votes);
                let now = self.now;
                let n = self.node_mut(to);
                let l = n.live.as_mut().expect("live");
                l.votes = votes;
                if won {
                    l.role = RaftRole::Leader;
                    l.leader = Some(to);
                    l.vote_utime = now;
                    n.disk.committed = true;
                    // openraft's blank entry of a new leader.
                    n.disk.log.push(term);
                    if self.ghost.leaders.insert(term, to).is_some_and(|x| x != to) {
                        self.ghost.two_leaders = true;
                    }
                    if self.live(to).is_some_and(|l| l.electing.is_some()) {
                        self.node_mut(to).live.as_mut().expect("live").electing = None;
                        self.step(m, to, Input::ElectionOver { won: true });
                    }
                }
            }
            Msg::Append { .. } => self.append(m, msg, false),
            Msg::AppendAnswer {
                from,
                to,
                term,
                ok,
                t0,
            } => {
                self.adopt_term(m, to, term);
                let Some(l) = self.live(to) else { return };
                let Some((pterm, pt0, acks)) = l.probe else {
                    return;
                };
                if !ok || pt0 != t0 || pterm != term {
                    return;
                }
                let acks = acks | bit(from);
                self.node_mut(to).live.as_mut().expect("live").probe = Some((pterm, pt0, acks));
                if m.probe_majority(acks) {
                    self.probe_done(m, to, true);
                }
            }
            Msg::Hello {
                from,
                to,
                incarnation,
            } => {
                // A member judges the hello as the node's handler does (identity.rs).
                let known = &mut self.node_mut(to).disk.known;
                let r = recognise(known.get(&from).map(|k| u64::from(*k)), incarnation.into());
                if r == Recognition::New {
                    known.insert(from, incarnation);
                }
                let answer = hello_answer(r, MEMBER);
                self.send(
                    m,
                    Msg::HelloAnswer {
                        from: to,
                        to: from,
                        incarnation,
                        accepted: answer.accepted,
                        known: answer.known.map(|was| was as u8),
                    },
                );
            }
            Msg::Resign {
                from,
                to,
                term,
                successor,
            } => {
                let Some(raft) = self.view(to) else { return };
                let told = Input::ResignNotice {
                    from,
                    term,
                    successor,
                    raft,
                };
                self.step(m, to, told);
            }
            Msg::HelloAnswer {
                from,
                to,
                incarnation,
                accepted,
                known,
            } => {
                // An answer to an earlier data dir's hello was the answer to another process.
                if self.node(to).disk.incarnation != incarnation || self.live(to).is_none() {
                    return;
                }
                let heard = Heard::Answer {
                    from,
                    incarnation: incarnation.into(),
                    answer: Some(HelloAnswer {
                        accepted,
                        known: known.map(u64::from),
                        ..MEMBER
                    }),
                    members: m.nodes as usize,
                    joins: false,
                };
                match self.step(m, to, Input::Heard(heard)) {
                    // The node stops (driver/confirm.rs): a restart says hello again.
                    Some(Answer::Heard(Verdict::Refused(_))) => {
                        self.node_mut(to).live = None;
                        self.ghost.refused = true;
                    }
                    _ => self.confirm_round(m, to, false),
                }
            }
        }
    }

    /// A round of node `id`'s confirmation (driver/confirm.rs): the core says whether ⌈n/2⌉
    /// members recorded its data dir (then it is marked, durably) or whom to ask; the hellos
    /// go out when `say` (an answer's round only looks whether it is confirmed).
    fn confirm_round(&mut self, m: &QuorumModel, id: NodeId, say: bool) {
        let round = Heard::Round {
            members: m.voters().collect(),
            known: true,
        };
        match self.step(m, id, Input::Heard(round)) {
            Some(Answer::Heard(Verdict::Confirmed(_))) => self.node_mut(id).disk.confirmed = true,
            Some(Answer::Heard(Verdict::Ask(ask))) if say => {
                let incarnation = self.node(id).disk.incarnation;
                for to in ask {
                    let hello = Msg::Hello {
                        from: id,
                        to,
                        incarnation,
                    };
                    self.send(m, hello);
                }
            }
            _ => {}
        }
    }

    /// Leader `id` resigns to `to` (quorum/node/mod.rs, `resign`): the core fences its claim, and
    /// the others are told that the successor it names campaigns first.
    fn resign(&mut self, m: &QuorumModel, id: NodeId, to: NodeId) {
        self.resigns += 1;
        let Some(raft) = self.view(id) else { return };
        let followers = self.followers(m, id, raft.last_log_index);
        let resign = Input::Resign {
            raft,
            to: Some(to),
            followers,
        };
        let Some(Answer::Resign(Ok(Resigned { term, successor }))) = self.step(m, id, resign)
        else {
            return;
        };
        self.ghost.resigned_term = self.ghost.resigned_term.max(Some(term));
        self.tell_resign(m, id, term, successor);
    }

    /// `id` begins a graceful stop (quorum/node/mod.rs, `shutdown`): the core closes its claim
    /// for good; a node that led tells the others the successor it names, in openraft's term.
    /// openraft runs on while the notices are out (up to `RESIGN_TIMEOUT`): until `Act::Exit`
    /// the node answers its peers (votes, appends) with its claim closed, and its driver starts
    /// no campaign (driver/mod.rs, `campaign_turn`).
    fn shutdown(&mut self, m: &QuorumModel, id: NodeId) {
        self.crashes += 1;
        let Some(raft) = self.view(id) else { return };
        let term = raft.term;
        let followers = self.followers(m, id, raft.last_log_index);
        let stop = Input::Shutdown { raft, followers };
        if let Some(Answer::Shutdown(Some(successor))) = self.step(m, id, stop) {
            self.ghost.stopped_term = self.ghost.stopped_term.max(Some(term));
            self.tell_resign(m, id, term, successor);
        }
        if let Some(l) = self.node_mut(id).live.as_mut() {
            l.stopping = true;
        }
    }

    /// How much of leader `id`'s log each follower holds (openraft's replication progress, as
    /// `Followers::of` reads it): the model's leader knows each follower's log at once, where
    /// openraft learns it from the answers to its appends.
    fn followers(&self, m: &QuorumModel, id: NodeId, last: Option<u64>) -> Followers {
        let log = &self.node(id).disk.log;
        let matched = |o: NodeId| {
            let same = self.node(o).disk.log.iter().zip(log);
            let n = same.take_while(|(a, b)| a == b).count() as u64;
            (n > 0).then_some(n)
        };
        Followers {
            matched: m
                .voters()
                .filter(|o| *o != id)
                .map(|o| (o, matched(o)))
                .collect(),
            last,
        }
    }

    /// `id` tells every other member that it resigned in `term`, naming `successor`
    /// (protocol.rs, `tell_resign`).
    fn tell_resign(&mut self, m: &QuorumModel, id: NodeId, term: u64, successor: NodeId) {
        for to in m.ids().filter(|to| *to != id) {
            let notice = Msg::Resign {
                from: id,
                to,
                term,
                successor,
            };
            self.send(m, notice);
        }
    }

    /// Leader `id`'s log sent to `to` by openraft's replication: an append no probe counts.
    fn replicate(&mut self, m: &QuorumModel, id: NodeId, to: NodeId) {
        let n = self.node(id);
        let Some(l) = n.live.as_ref().filter(|l| l.role == RaftRole::Leader) else {
            return;
        };
        let append = Msg::Append {
            from: id,
            to,
            term: n.disk.term,
            log: n.disk.log.clone(),
            commit: l.commit,
            t0: 0,
        };
        self.send(m, append);
    }

    /// A vote request, as the node's handler takes it: the core first, then openraft's vote
    /// (one per term, to a log at least as long), then the core again.
    fn vote(&mut self, m: &QuorumModel, from: NodeId, to: NodeId, term: u64, last: (u64, u64)) {
        let d = &self.node(to).disk;
        let asked = Input::VoteAsked {
            term,
            current_term: d.term,
            confirmed: d.confirmed,
        };
        let granted = match self.step(m, to, asked) {
            Some(Answer::PassVote {
                higher,
                inside_promise,
            }) => {
                let f = m.timing.election.follower_lease_ns;
                let n = self.node(to);
                let leased = n.disk.committed
                    && n.live
                        .as_ref()
                        .is_some_and(|l| self.now <= l.vote_utime + f);
                if !leased {
                    self.adopt_term(m, to, term);
                }
                // A committed vote (the leader's, taken with an append or a snapshot) outranks
                // every request of its term: openraft's `update_vote` grants only a vote at
                // least as high, and an uncommitted vote of the same term is lower.
                let d = &self.node(to).disk;
                let grant = !leased
                    && term == d.term
                    && !d.committed
                    && d.voted_for.is_none_or(|v| v == from)
                    && last >= d.last();
                if grant {
                    let d = &mut self.node_mut(to).disk;
                    d.voted_for = Some(from);
                    d.committed = false;
                    self.note_vote(to, term, from);
                }
                self.step(
                    m,
                    to,
                    Input::VoteAnswered {
                        term,
                        higher,
                        granted: grant,
                        failed: false,
                        inside_promise,
                    },
                );
                grant
            }
            _ => false,
        };
        let term = self.node(to).disk.term;
        self.send(
            m,
            Msg::VoteAnswer {
                from: to,
                to: from,
                term,
                granted,
            },
        );
    }

    /// The pre-vote round of `id` won: the core's gate is asked, and openraft campaigns.
    fn round_won(&mut self, m: &QuorumModel, id: NodeId, seq: u64) {
        self.node_mut(id).live.as_mut().expect("live").round = None;
        self.step(m, id, Input::RoundEnded { failed: false });
        let Some(raft) = self.view(id) else { return };
        let Some(Answer::Elect(Some(term))) = self.step(m, id, Input::MayElect { seq, raft })
        else {
            return;
        };
        let now = self.now;
        let n = self.node_mut(id);
        n.disk.term = term;
        n.disk.voted_for = Some(id);
        n.disk.committed = false;
        let last = n.disk.last();
        let l = n.live.as_mut().expect("live");
        l.role = RaftRole::Candidate;
        l.leader = None;
        l.votes = bit(id);
        l.electing = Some((term, now));
        self.note_vote(id, term, id);
        for to in m.voters().filter(|to| *to != id) {
            self.send(
                m,
                Msg::Vote {
                    from: id,
                    to,
                    term,
                    last,
                },
            );
        }
    }

    fn probe_done(&mut self, m: &QuorumModel, id: NodeId, acked: bool) {
        let Some((term, t0, _)) = self.live(id).and_then(|l| l.probe) else {
            return;
        };
        let n = self.node_mut(id);
        let log_len = n.disk.log.len() as u64;
        let l = n.live.as_mut().expect("live");
        l.probe = None;
        if acked {
            l.commit = log_len;
        }
        let Some(raft) = self.view(id) else { return };
        let t0 = Reading {
            boot_ns: t0,
            mono_ns: t0,
        };
        self.step(
            m,
            id,
            Input::ProbeDone {
                term,
                t0,
                acked,
                raft,
            },
        );
    }

    fn tick(&mut self, m: &QuorumModel, id: NodeId) {
        let now = self.reading();
        let Some(raft) = self.view(id) else { return };
        let n = self.node_mut(id);
        let l = n.live.as_mut().expect("live");
        let probe = l.core.tick(now, &raft).into_iter().find_map(|a| match a {
            electd::quorum::Action::Probe { term, .. } => Some(term),
            _ => None,
        });
        if let Some(term) = probe {
            l.probe = Some((term, now.boot_ns, bit(id)));
            let (log, commit) = (n.disk.log.clone(), l.commit);
            // The probe goes to the voters (driver/probe.rs, `round`); the flaw probes every
            // member.
            let size = match m.variant {
                Variant::CountLearnerAck => m.size(),
                _ => m.nodes,
            };
            for to in (1..=size).filter(|to| *to != id) {
                self.send(
                    m,
                    Msg::Append {
                        from: id,
                        to,
                        term,
                        log: log.clone(),
                        commit,
                        t0: now.boot_ns,
                    },
                );
            }
        }
    }

    /// When `id`'s election driver would start a pre-vote round (`None`: it would not).
    fn campaign_due(&self, m: &QuorumModel, id: NodeId) -> Option<(u64, u64)> {
        let n = self.node(id);
        let l = n.live.as_ref()?;
        let free = l.round.is_none()
            && l.electing.is_none()
            && l.role != RaftRole::Leader
            && !l.core.lease().is_closed();
        // A non-voter never campaigns (driver/mod.rs skips its campaign turn).
        if !free || !n.disk.confirmed || n.disk.term >= m.max_term || m.is_learner(id) {
            return None;
        }
        let voters: Vec<NodeId> = m.voters().collect();
        let (due, contact) = l.core.campaign_due(&self.view(id)?, &voters);
        Some((due, contact.seq))
    }

    fn campaign(&mut self, m: &QuorumModel, id: NodeId) {
        let Some((_, seq)) = self.campaign_due(m, id) else {
            return;
        };
        if self.step(m, id, Input::RoundStarting) != Some(Answer::Round(true)) {
            self.step(m, id, Input::RoundEnded { failed: true });
            return;
        }
        let l = self.node_mut(id).live.as_mut().expect("live");
        l.rounds = l.rounds.wrapping_add(1);
        let round = l.rounds;
        l.round = Some((round, seq, bit(id)));
        let last = self.node(id).disk.last();
        for to in m.voters().filter(|to| *to != id) {
            self.send(
                m,
                Msg::PreVote {
                    from: id,
                    to,
                    round,
                    last,
                },
            );
        }
    }

    /// The earliest deadline of `id`'s work out: its probe's (a probe timeout after its send
    /// instant) or its election's (an election timeout after its start).
    fn deadline(&self, m: &QuorumModel, id: NodeId) -> Option<u64> {
        let l = self.live(id)?;
        let e = m.timing.election;
        let probe = l.probe.map(|(_, t0, _)| t0 + e.probe_timeout_ns);
        let election = l.electing.map(|(_, at)| at + e.outcome_ns);
        probe.into_iter().chain(election).min()
    }

    /// The latest instant the clock may move to: the horizon, or before it the first deadline
    /// of a probe or an election out (it ends there at the latest: the clock stops there).
    fn last_instant(&self, m: &QuorumModel) -> u64 {
        let deadline = m.ids().filter_map(|id| self.deadline(m, id)).min();
        deadline.unwrap_or(u64::MAX).min(START_NS + m.horizon_ns)
    }

    /// The clock came to `id`'s deadlines: a probe out gives up, an election out counts as
    /// failed (driver/probe.rs, `probe`; driver/campaign.rs, `await_outcome`).
    fn deadlines_passed(&mut self, m: &QuorumModel, id: NodeId) {
        let Some(l) = self.live(id) else { return };
        let e = m.timing.election;
        if l.probe
            .is_some_and(|(_, t0, _)| self.now >= t0 + e.probe_timeout_ns)
        {
            self.probe_done(m, id, false);
        }
        let l = self.live(id).expect("live");
        if l.electing
            .is_some_and(|(_, at)| self.now >= at + e.outcome_ns)
        {
            self.node_mut(id).live.as_mut().expect("live").electing = None;
            self.step(m, id, Input::ElectionOver { won: false });
        }
    }

    /// The instants some node waits for, after now: where the clock may jump to, none past
    /// the first deadline of a probe or an election out.
    fn next_instants(&self, m: &QuorumModel) -> Vec<u64> {
        let f = m.timing.election.follower_lease_ns;
        let mut at = Vec::new();
        for id in m.ids() {
            let (Some(l), Some(raft)) = (self.live(id), self.view(id)) else {
                continue;
            };
            at.push(l.core.next_tick_ns(self.now, &raft));
            if let Some((due, _)) = self.campaign_due(m, id) {
                at.push(due);
            }
            let lease = l.core.lease();
            at.extend(lease.last().map(|c| c.until_ns));
            at.extend(lease.vote_refused_until(f));
            at.push(m.timing.election.lease_over_at(l.core.contact().at_ns));
        }
        at.extend(self.ghost.promised_until.values().copied());
        // A probe or an election out ends at its deadline at the latest: the clock stops there.
        at.extend(m.ids().filter_map(|id| self.deadline(m, id)).min());
        let last = self.last_instant(m);
        at.retain(|t| *t > self.now && *t <= last);
        at.sort_unstable();
        at.dedup();
        at.truncate(m.advances);
        at
    }
}

impl Model for QuorumModel {
    type State = State;
    type Action = Act;

    fn init_states(&self) -> Vec<State> {
        let nodes = self
            .ids()
            .map(|id| Node {
                disk: Disk {
                    term: 0,
                    voted_for: None,
                    committed: false,
                    log: Vec::new(),
                    incarnation: 0,
                    confirmed: true,
                    known: self.ids().filter(|p| *p != id).map(|p| (p, 0)).collect(),
                },
                live: Some(self.live(id, START_NS)),
                logged_leading: false,
            })
            .collect();
        vec![State {
            now: START_NS,
            nodes,
            net: Vec::new(),
            crashes: 0,
            wipes: 0,
            resigns: 0,
            dups: 0,
            snapshots: 0,
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &State, acts: &mut Vec<Act>) {
        let mut last: Option<&Msg> = None;
        for msg in &s.net {
            if last == Some(msg) {
                continue;
            }
            last = Some(msg);
            if s.live(msg.to()).is_some() {
                acts.push(Act::Deliver(msg.clone()));
            }
            if s.dups < self.max_dups && s.net.len() < self.max_in_flight {
                acts.push(Act::Duplicate(msg.clone()));
            }
            // A leader has a snapshot only of what it applied: none before its first commit.
            let snapshot = matches!(msg, Msg::Append { commit, .. } if *commit > 0);
            if snapshot && s.snapshots < self.max_snapshots && s.live(msg.to()).is_some() {
                acts.push(Act::Snapshot(msg.clone()));
            }
        }
        for id in self.ids() {
            let n = s.node(id);
            let Some(l) = n.live.as_ref() else {
                acts.push(Act::Restart(id));
                if s.wipes < self.max_wipes {
                    acts.push(Act::Wipe(id));
                }
                continue;
            };
            // Only a leader's tick can change what the properties judge (anyone else's revokes
            // a claim openraft no longer backs, which `judge` already ignores).
            if l.probe.is_some() {
                acts.push(Act::FailProbe(id));
            } else if l.role == RaftRole::Leader {
                acts.push(Act::Tick(id));
            }
            if s.campaign_due(self, id)
                .is_some_and(|(due, _)| s.now >= due)
            {
                acts.push(Act::Campaign(id));
            }
            if l.round.is_some() {
                acts.push(Act::GiveUpRound(id));
            }
            if l.electing.is_some() {
                acts.push(Act::GiveUpElection(id));
            }
            let hello_out = s
                .net
                .iter()
                .any(|m| matches!(m, Msg::Hello { from, .. } if *from == id));
            if !n.disk.confirmed && !hello_out {
                acts.push(Act::SayHello(id));
            }
            if l.stopping {
                acts.push(Act::Exit(id));
            } else if s.crashes < self.max_crashes {
                acts.push(Act::Crash(id));
                acts.push(Act::Shutdown(id));
            }
            if l.role == RaftRole::Leader {
                let lacks = |to: &NodeId| {
                    *to != id
                        && s.node(*to).disk.log != n.disk.log
                        && !s.net.iter().any(|m| {
                            matches!(m, Msg::Append { from, to: t, t0: 0, .. }
                                if *from == id && t == to)
                        })
                };
                acts.extend(self.ids().filter(lacks).map(|to| Act::Replicate(id, to)));
            }
            let claims = s
                .view(id)
                .is_some_and(|raft| l.core.claim(s.now, &raft).is_some());
            if claims && s.resigns < self.max_resigns {
                // Only to a member that holds the whole log: the core refuses any other one
                // and changes nothing (core/mod.rs, `Followers::successor`), so such a resign
                // would only spend the one resignation of the bounds.
                let last = s.view(id).and_then(|raft| raft.last_log_index);
                let followers = s.followers(self, id, last);
                let able = self.voters().filter(|o| *o != id && followers.has_all(*o));
                acts.extend(able.map(|to| Act::Resign(id, to)));
            }
        }
        acts.extend(s.next_instants(self).into_iter().map(Act::AdvanceTo));
    }

    fn next_state(&self, last: &State, act: Act) -> Option<State> {
        let mut s = last.clone();
        let before: Vec<Option<Woken>> = self.ids().map(|id| s.woken(id)).collect();
        let act_seen = act.clone();
        let was_now = s.now;
        let g = &mut s.ghost;
        g.halted = g.broken().is_some();
        (g.two_claims, g.two_leaders, g.double_vote) = (false, false, false);
        (g.log_inside_promise, g.log_trails) = (false, false);
        g.nonvoter_claimed = false;
        match act {
            Act::Deliver(msg) => {
                s.take(&msg);
                s.deliver(self, msg);
            }
            Act::Duplicate(msg) => {
                s.dups += 1;
                s.send(self, msg);
            }
            Act::Snapshot(msg) => {
                s.take(&msg);
                s.snapshots += 1;
                s.append(self, msg, true);
            }
            Act::Tick(id) => s.tick(self, id),
            Act::Campaign(id) => s.campaign(self, id),
            Act::GiveUpRound(id) => {
                s.node_mut(id).live.as_mut()?.round = None;
                s.step(self, id, Input::RoundEnded { failed: true });
            }
            Act::GiveUpElection(id) => {
                s.node_mut(id).live.as_mut()?.electing = None;
                s.step(self, id, Input::ElectionOver { won: false });
            }
            Act::FailProbe(id) => s.probe_done(self, id, false),
            Act::SayHello(id) => s.confirm_round(self, id, true),
            Act::AdvanceTo(t) => {
                s.now = t;
                for id in self.ids() {
                    s.deadlines_passed(self, id);
                }
            }
            Act::Resign(id, successor) => s.resign(self, id, successor),
            Act::Shutdown(id) => s.shutdown(self, id),
            Act::Exit(id) => s.node_mut(id).live = None,
            Act::Replicate(id, to) => s.replicate(self, id, to),
            Act::Crash(id) => {
                s.node_mut(id).live = None;
                s.crashes += 1;
            }
            Act::Restart(id) => {
                let live = self.live(id, s.now);
                s.node_mut(id).live = Some(live);
            }
            Act::Wipe(id) => {
                let d = &mut s.node_mut(id).disk;
                *d = Disk {
                    term: 0,
                    voted_for: None,
                    committed: false,
                    log: Vec::new(),
                    incarnation: d.incarnation + 1,
                    // A non-voter confirms no incarnation (it never votes).
                    confirmed: self.variant == Variant::TrustNewIncarnation || self.is_learner(id),
                    known: BTreeMap::new(),
                };
                s.wipes += 1;
            }
        }
        s.record_woken(self, &before, &act_seen, was_now);
        s.judge(self);
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        !s.ghost.halted
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always("no claim inside another node's promise", |_, s: &State| {
                !s.ghost.two_claims
            }),
            Property::always("one leader per term", |_, s: &State| !s.ghost.two_leaders),
            Property::always(
                "no node votes twice in a term, across its data dirs",
                |_, s: &State| !s.ghost.double_vote,
            ),
            Property::always(
                "no event log tells of a claim inside another node's promise",
                |_, s: &State| !s.ghost.log_inside_promise,
            ),
            Property::always(
                "every running node's event log tells what it answers",
                |_, s: &State| !s.ghost.log_trails,
            ),
            Property::always("no non-voter claims", |_, s: &State| {
                !s.ghost.nonvoter_claimed
            }),
            Property::sometimes("a node claims", |_, s: &State| s.ghost.claimed_terms != 0),
            Property::sometimes("a second term is claimed", |_, s: &State| {
                s.ghost.claimed_terms.count_ones() >= 2
            }),
            Property::sometimes("a term is claimed after a resignation", |_, s: &State| {
                s.ghost.claimed_after_resign
            }),
            Property::sometimes("a term is claimed after a graceful stop", |_, s: &State| {
                s.ghost.claimed_after_stop
            }),
            Property::sometimes("a follower installs a snapshot", |_, s: &State| {
                s.ghost.snapshot_installed
            }),
            Property::sometimes("a wiped data dir is refused", |_, s: &State| {
                s.ghost.refused
            }),
        ];
        if self.learners > 0 {
            properties.push(Property::sometimes(
                "a non-voter takes the leader's log",
                |_, s: &State| s.ghost.nonvoter_follows,
            ));
        }
        properties
    }
}

impl QuorumModel {
    fn live(&self, id: NodeId, now_ns: u64) -> Live {
        Live {
            core: self.core(id, now_ns),
            vote_utime: now_ns,
            role: self.following(id),
            leader: None,
            commit: 0,
            votes: 0,
            probe: None,
            round: None,
            rounds: 0,
            electing: None,
            stopping: false,
        }
    }
}
