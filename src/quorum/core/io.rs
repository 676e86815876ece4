//! What the core is told ([`Input`], with openraft's state as a [`RaftView`]) and what it says
//! ([`Action`], [`Answer`]): the core's whole interface with the world, which it never touches
//! itself.

use openraft::{BasicNode, LogId, RaftMetrics, ServerState};

use crate::clock::{ms, Reading};
use crate::config::Timing;
use crate::engine::ResignError;
use crate::quorum::election::{ElectionTiming, PreVoteRefusal};
use crate::quorum::identity::{Heard, Verdict};
use crate::quorum::preference::{Followers, Look};
use crate::role::{NodeId, Resigned};
use crate::roles::steward::{RolesAnswer, RolesAsk};

/// The core's timings, derived from the config once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoreTiming {
    /// The claim lease L (`effective_lease_ms`).
    pub lease_ns: u64,
    /// How long without an acknowledged probe before a leader goes quiet: 2F (quiet.rs).
    pub quiet_after_ns: u64,
    /// How long it stays quiet: 2F + L.
    pub quiet_ns: u64,
    pub election: ElectionTiming,
}

impl CoreTiming {
    pub fn from_config(t: &Timing) -> CoreTiming {
        let lease_ns = ms(t.effective_lease_ms());
        let quiet_after_ns = 2 * ms(t.follower_lease_ms);
        CoreTiming {
            lease_ns,
            quiet_after_ns,
            quiet_ns: quiet_after_ns + lease_ns,
            election: ElectionTiming::from_config(t),
        }
    }
}

/// The lab's flaws a core can be built with (engine.rs, `Flaws`): none without the `flaws`
/// feature, which only the lab enables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CoreFlaws {
    /// Votes are passed to openraft inside a promise.
    #[cfg(feature = "flaws")]
    pub vote_while_leading: bool,
}

impl CoreFlaws {
    pub fn vote_while_leading(&self) -> bool {
        #[cfg(feature = "flaws")]
        return self.vote_while_leading;
        #[cfg(not(feature = "flaws"))]
        false
    }
}

/// openraft's server state, as the core reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RaftRole {
    Leader,
    Candidate,
    Follower,
    Learner,
    Shutdown,
}

/// openraft's own heartbeat (which also pushes missing log entries to a lagging follower)
/// goes out with every this many probes.
pub const HEARTBEAT_EVERY: u64 = 4;

/// What the core needs of openraft's state at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RaftView {
    pub role: RaftRole,
    pub term: u64,
    /// The leader openraft names.
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
}

impl RaftView {
    pub fn of(m: &RaftMetrics<NodeId, BasicNode>) -> RaftView {
        RaftView {
            role: match m.state {
                ServerState::Leader => RaftRole::Leader,
                ServerState::Candidate => RaftRole::Candidate,
                ServerState::Follower => RaftRole::Follower,
                ServerState::Learner => RaftRole::Learner,
                ServerState::Shutdown => RaftRole::Shutdown,
            },
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index,
        }
    }
}

/// What happened: the first argument of [`QuorumCore::step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// openraft accepted an AppendEntries from `leader` (not answered with a higher vote), whose
    /// commit index was `commit`.
    AppendAccepted { leader: NodeId, commit: Option<u64> },
    /// openraft accepted a snapshot whose vote did not lose to its own.
    SnapshotAccepted { leader: Option<NodeId> },
    /// A vote request for `term` arrived; openraft is in `current_term`, and this data dir's
    /// incarnation is `confirmed` or not (identity.rs). Answered [`Answer::Vote`].
    VoteAsked {
        term: u64,
        current_term: u64,
        confirmed: bool,
    },
    /// openraft answered the vote request that [`Input::VoteAsked`] passed to it.
    VoteAnswered {
        term: u64,
        /// As [`Answer::Vote`] said: the request's term was above openraft's.
        higher: bool,
        granted: bool,
        /// openraft failed: it may have saved the grant.
        failed: bool,
        inside_promise: bool,
    },
    /// A pre-vote request from `from`, whose log ends at `theirs`; this node's ends at `mine`.
    /// Answered [`Answer::PreVote`].
    PreVoteAsked {
        from: NodeId,
        theirs: Option<LogId<NodeId>>,
        mine: Option<LogId<NodeId>>,
        confirmed: bool,
    },
    /// The leader of `term` resigned, naming `successor`; openraft's state now is `raft`.
    ResignNotice {
        from: NodeId,
        term: u64,
        successor: NodeId,
        raft: RaftView,
    },
    /// The probe of `term` sent at `t0` came back, acknowledged by a majority or not; openraft's
    /// state after it is `raft`. Answered [`Answer::Probe`].
    ProbeDone {
        term: u64,
        t0: Reading,
        acked: bool,
        raft: RaftView,
    },
    /// This node's own pre-vote round is about to start. Answered [`Answer::Round`].
    RoundStarting,
    /// This node's round ended; `failed` when it was lost for good (not to leases about to end).
    RoundEnded { failed: bool },
    /// Under the gate's write side: may openraft's election be enqueued, no contact since
    /// `seq`? Answered [`Answer::Elect`].
    MayElect { seq: u64, raft: RaftView },
    /// The election this node started was won, or not.
    ElectionOver { won: bool },
    /// The admin (or the preferred leader) asked this node to resign, to `to` or to whom the
    /// `followers` make the successor. Answered [`Answer::Resign`].
    Resign {
        raft: RaftView,
        to: Option<NodeId>,
        followers: Followers,
    },
    /// The node is stopping. Answered [`Answer::Shutdown`].
    Shutdown {
        raft: RaftView,
        followers: Followers,
    },
    /// The preferred leader's look, every beat (preference.rs), openraft's state being `raft`.
    /// Answered [`Answer::HandOver`].
    Look { raft: RaftView, look: Look },
    /// The member a look named cannot campaign (its data dir is not confirmed).
    CannotTakeOver,
    /// What a new data dir's hellos gathered (identity.rs). Answered [`Answer::Heard`].
    Heard(Heard),
    /// A request about named roles: stepped by the driver with its steward and the applied
    /// table (driver/roles.rs), not by the core. Answered [`Answer::Roles`].
    Roles(RolesAsk),
}

/// What to do: the result of [`QuorumCore::step`] and [`QuorumCore::tick`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The answer to the input (at most one per step).
    Answer(Answer),
    /// Probe the quorum in `term` (driver/probe.rs: a round built as openraft's read round),
    /// after openraft's own heartbeat if `heartbeat`; then step [`Input::ProbeDone`].
    Probe { term: u64, heartbeat: bool },
    /// Judge the view and record it if it changed (events.rs, `record_leased_view`).
    Record,
    /// The contact changed: wake whatever waits on it (a campaign).
    ContactChanged,
    /// The claim must be judged again at once (the driver's role turn).
    Wake,
    /// A lab observation (only counted with the `flaws` feature).
    Observed(Observation),
}

/// The answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Refuse the vote before openraft sees it.
    RefuseVote,
    /// Let openraft judge the vote; `higher`: the claim is suspended meanwhile.
    PassVote {
        higher: bool,
        inside_promise: bool,
    },
    PreVote {
        verdict: Result<(), PreVoteRefusal>,
        /// When refused because a leader is alive: how long this node's follower lease still
        /// runs (µs).
        lease_left_us: Option<u64>,
    },
    /// The resignation was taken (the notice is to be sent), or the node held no claim.
    Handoff {
        taken: bool,
    },
    /// Whether the probe granted a claim, and whether the leader went quiet after it.
    Probe {
        granted: bool,
        went_quiet: bool,
    },
    /// Whether the round may start (this node is not pledged to another candidate).
    Round(bool),
    /// The term to campaign for, if the election may be enqueued.
    Elect(Option<u64>),
    /// The claim of `term` was resigned to `successor` (the notice is to be sent); or why not:
    /// this node holds no claim, or none can take over.
    Resign(Result<Resigned, ResignError>),
    /// The successor to tell, when this node led or claimed as it stopped.
    Shutdown(Option<NodeId>),
    /// The member of higher priority to hand over to now, if any.
    HandOver(Option<NodeId>),
    /// What the hellos of a new data dir decided.
    Heard(Verdict),
    Roles(RolesAnswer),
}

/// What the simulator counts to prove its schedules reach a precondition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Observation {
    VoteAskedInsidePromise,
    VoteGrantedInsidePromise,
}
