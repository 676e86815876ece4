//! [`QuorumCore`]: every decision a quorum node makes about its claim, as one state machine
//! without I/O, a clock or a lock. It owns the claim ([`Lease`]), the probing and going quiet
//! ([`Quiet`]), the contact that gates a campaign ([`Contact`]) and the leader a follower
//! names, the campaign ([`Campaign`]) and the pre-vote pledge ([`Pledge`]). It is driven
//! through two entry points, as tikv/raft-rs's `Raft` is: [`QuorumCore::step`] with what
//! happened ([`Input`]: a peer's message, openraft's answer, an admin's request) and
//! [`QuorumCore::tick`] with the time; each returns what to do ([`Action`]), which the node's
//! tasks carry out (`node.rs`, `role_loop.rs`, `driver.rs`, `handover.rs`). The claim changes
//! in the lease's own methods only, each called from one arm here. The lab's model checker
//! (`lab/src/model/`) drives this very type.
//!
//! The order the gate enforces between appends and elections (election.rs, rule 1) is kept by
//! its callers: an append, snapshot or vote is stepped in ([`Input::AppendAccepted`],
//! [`Input::SnapshotAccepted`], [`Input::VoteAnswered`]) before the handler lets go of the
//! gate's read side, and [`Input::MayElect`] is stepped under its write side
//! (`driver.rs`, `elect_if_still_due`).

use openraft::{BasicNode, LogId, RaftMetrics, ServerState};

use super::election::{
    judge_prevote, rank, release_own_pledge, Campaign, Contact, ElectionTiming, Pledge,
    PreVoteRefusal,
};
use super::quiet::{follower_leader, Quiet};
use crate::clock::{ms, Reading};
use crate::config::Timing;
use crate::engine::Judged;
use crate::lease::{Claim, HoldsLease, Lease};
use crate::role::{NodeId, Role, View};

/// openraft's own heartbeat (which also pushes missing log entries to a lagging follower)
/// goes out with every this many probes.
pub const HEARTBEAT_EVERY: u64 = 4;

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

/// openraft's server state, as the core reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RaftRole {
    Leader,
    Candidate,
    Follower,
    Learner,
    Shutdown,
}

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
    /// The admin (or the preferred leader) asked this node to resign. Answered
    /// [`Answer::Resign`].
    Resign { raft: RaftView },
    /// The node is stopping. Answered [`Answer::Shutdown`].
    Shutdown { raft: RaftView },
}

/// What to do: the result of [`QuorumCore::step`] and [`QuorumCore::tick`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The answer to the input (at most one per step).
    Answer(Answer),
    /// Probe the quorum in `term` (openraft's `get_read_log_id`), after openraft's own
    /// heartbeat if `heartbeat`; then step [`Input::ProbeDone`].
    Probe { term: u64, heartbeat: bool },
    /// Judge the view and record it if it changed (events.rs, `record_leased_view`).
    Record,
    /// The contact changed: wake whatever waits on it (the election driver).
    ContactChanged,
    /// The claim must be judged again at once (the role loop).
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
    PassVote { higher: bool, inside_promise: bool },
    PreVote {
        verdict: Result<(), PreVoteRefusal>,
        /// When refused because a leader is alive: how long this node's follower lease still
        /// runs (µs).
        lease_left_us: Option<u64>,
    },
    /// The resignation was taken (the notice is to be sent), or the node held no claim.
    Handoff { taken: bool },
    /// Whether the probe granted a claim, and whether the leader went quiet after it.
    Probe { granted: bool, went_quiet: bool },
    /// Whether the round may start (this node is not pledged to another candidate).
    Round(bool),
    /// The term to campaign for, if the election may be enqueued.
    Elect(Option<u64>),
    /// `Ok(term)` when the claim of `term` was resigned; `Err` when this node holds no claim.
    Resign(Result<u64, ()>),
    /// Whether this node claimed when it stopped.
    Shutdown { was_claiming: bool },
}

/// What the simulator counts to prove its schedules reach a precondition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Observation {
    VoteAskedInsidePromise,
    VoteGrantedInsidePromise,
}

/// The quorum core of one node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuorumCore {
    id: NodeId,
    timing: CoreTiming,
    /// The claim (lease.rs): granted, renewed, suspended, fenced, revoked, closed.
    lease: Lease,
    quiet: Quiet,
    /// Probes sent in this leadership (for openraft's heartbeat every [`HEARTBEAT_EVERY`]).
    probes: u64,
    /// Not before this (BOOTTIME) is the next probe sent.
    next_probe_ns: u64,
    /// The follower lease's last contact (election.rs, rule 1).
    contact: Contact,
    /// The last leader whose AppendEntries this node accepted, and when (MONOTONIC).
    follower_contact: Option<(NodeId, u64)>,
    campaign: Campaign,
    /// The pre-vote this node granted last (or its own round).
    pledge: Option<Pledge>,
    /// The lab's flaw: votes are passed to openraft inside a promise (engine.rs, `Flaws`).
    #[cfg(feature = "flaws")]
    vote_while_leading: bool,
}

impl QuorumCore {
    /// The core of a process that starts at `started_ns` (BOOTTIME): it refuses votes and waits
    /// before it campaigns for a whole follower lease.
    pub fn new(id: NodeId, timing: CoreTiming, seed: u64, started_ns: u64) -> QuorumCore {
        QuorumCore {
            id,
            timing,
            lease: Lease::starting(started_ns),
            quiet: Quiet::default(),
            probes: 0,
            next_probe_ns: 0,
            contact: Contact::starting(started_ns),
            follower_contact: None,
            campaign: Campaign::new(timing.election, seed),
            pledge: None,
            #[cfg(feature = "flaws")]
            vote_while_leading: false,
        }
    }

    /// The lab's flaw `vote_while_leading` (engine.rs, `Flaws`).
    #[cfg(feature = "flaws")]
    pub fn with_vote_while_leading(mut self, on: bool) -> QuorumCore {
        self.vote_while_leading = on;
        self
    }

    fn vote_while_leading(&self) -> bool {
        #[cfg(feature = "flaws")]
        return self.vote_while_leading;
        #[cfg(not(feature = "flaws"))]
        false
    }

    /// Something happened at `now`: what to do.
    pub fn step(&mut self, now: Reading, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        let t = now.boot_ns;
        let f = self.timing.election.follower_lease_ns;
        let answer = match input {
            Input::AppendAccepted { leader, commit } => {
                self.heard(t, Some((leader, commit)), &mut out);
                self.campaign.settled();
                self.follower_contact = Some((leader, now.mono_ns));
                None
            }
            Input::SnapshotAccepted { leader } => {
                self.heard(t, leader.map(|l| (l, None)), &mut out);
                None
            }
            Input::VoteAsked {
                term,
                current_term,
                confirmed,
            } => Some(self.vote_asked(t, term, current_term, confirmed, &mut out)),
            Input::VoteAnswered {
                term,
                higher,
                granted,
                failed,
                inside_promise,
            } => {
                if higher {
                    // An error may come after openraft saved the grant: fence as if it had.
                    self.lease.resume((granted || failed).then_some(term));
                    out.push(Action::Wake);
                } else if granted {
                    self.lease.voted(term, t);
                    out.push(Action::Wake);
                }
                if granted && inside_promise {
                    out.push(Action::Observed(Observation::VoteGrantedInsidePromise));
                }
                if granted {
                    // A granted vote restarts the follower lease (as in Raft), so that this
                    // node does not race the candidate it just voted for.
                    self.heard(t, None, &mut out);
                }
                None
            }
            Input::PreVoteAsked {
                from,
                theirs,
                mine,
                confirmed,
            } => Some(self.prevote_asked(t, from, theirs, mine, confirmed)),
            Input::ResignNotice {
                from,
                term,
                successor,
                raft,
            } => {
                let taken = raft.leader == Some(from) && raft.term == term;
                if taken {
                    self.campaign.handoff(term, successor == self.id);
                    self.heard(0, None, &mut out);
                }
                Some(Answer::Handoff { taken })
            }
            Input::ProbeDone {
                term,
                t0,
                acked,
                raft,
            } => Some(self.probe_done(t, term, t0, acked, raft, &mut out)),
            Input::RoundStarting => {
                let pledged_away =
                    matches!(self.pledge, Some(p) if p.to != self.id && t < p.until_ns);
                if !pledged_away {
                    // This node's own round counts as its pledge: it refuses other candidates
                    // meanwhile.
                    self.pledge = Some(Pledge {
                        to: self.id,
                        until_ns: t + self.timing.election.pledge_ns(),
                    });
                }
                Some(Answer::Round(!pledged_away))
            }
            Input::RoundEnded { failed } => {
                release_own_pledge(&mut self.pledge, self.id);
                if failed {
                    self.campaign.failed(t);
                }
                None
            }
            Input::MayElect { seq, raft } => {
                let c = self.contact;
                let due = c.seq == seq
                    && t >= c.at_ns + f
                    && raft.role != RaftRole::Leader
                    && !self.lease.is_closed();
                Some(Answer::Elect(due.then_some(raft.term + 1)))
            }
            Input::ElectionOver { won } => {
                if won {
                    self.campaign.settled();
                } else {
                    self.campaign.failed(t);
                }
                None
            }
            Input::Resign { raft } => {
                let answer = match self.claim(t, &raft) {
                    Some(_) => {
                        self.lease.resign(raft.term, t);
                        out.push(Action::Record);
                        out.push(Action::Wake);
                        Ok(raft.term)
                    }
                    None => Err(()),
                };
                Some(Answer::Resign(answer))
            }
            Input::Shutdown { raft } => {
                let was_claiming = self.lease.current(raft.term, t).is_some();
                self.lease.close(t);
                out.push(Action::Record);
                Some(Answer::Shutdown { was_claiming })
            }
        };
        if let Some(a) = answer {
            out.insert(0, Action::Answer(a));
        }
        out
    }

    /// The time is `now` and openraft's state `raft`: probe, claim or give up the claim. The
    /// role loop's turn (docs/safety.md, "Why two nodes never claim at once"): while openraft
    /// has this node as leader, a probe every beat, a claim after each acknowledged one, quiet
    /// after 2F without; anything else ends the claim.
    pub fn tick(&mut self, now: Reading, raft: &RaftView) -> Vec<Action> {
        let t = now.boot_ns;
        let mut out = Vec::new();
        if self.leading(raft) {
            self.quiet.leading(raft.term, t);
            if self.quiet.may_probe(t) && t >= self.next_probe_ns {
                self.next_probe_ns = t + self.timing.election.heartbeat_ns;
                // Not with the first probe of a term: the new leader's replication is already
                // on its way, and the followers answer the probe after it.
                let heartbeat = self.probes % HEARTBEAT_EVERY == HEARTBEAT_EVERY - 1;
                self.probes += 1;
                out.push(Action::Probe {
                    term: raft.term,
                    heartbeat,
                });
            }
        } else {
            // Not leading, resigned (fenced) or stopping: no probes, no heartbeats. Should
            // this node be elected, it probes at once.
            self.quiet.not_leading();
            self.probes = 0;
            self.next_probe_ns = 0;
            if raft.role != RaftRole::Leader {
                self.lease.revoke(t);
            }
        }
        out.push(Action::Record);
        out
    }

    /// When the role loop must turn next, at the latest (BOOTTIME): the next probe of a probing
    /// leader, a beat from now for anyone else, and the end of a running claim.
    pub fn next_tick_ns(&self, now_ns: u64, raft: &RaftView) -> u64 {
        let probing = self.leading(raft) && self.quiet.may_probe(now_ns);
        let turn = if probing {
            self.next_probe_ns
        } else {
            now_ns + self.timing.election.heartbeat_ns
        };
        match self.lease.current(raft.term, now_ns) {
            Some(c) => turn.min(c.until_ns),
            None => turn,
        }
    }

    /// The effective role at `now`, judged from openraft's state and the claim: the one
    /// judgement `/v1/leader` makes. Judged on BOOTTIME (on MONOTONIC a host that resumes
    /// from suspend would still see its old claim running while another node leads).
    pub fn judge(&self, now: Reading, raft: &RaftView) -> Judged {
        let term = raft.term;
        match raft.role {
            RaftRole::Leader => match self.claim(now.boot_ns, raft) {
                Some(c) => Judged {
                    view: View {
                        role: Role::Leader,
                        term,
                        leader: Some(self.id),
                    },
                    lease_remaining_ns: Some(c.left_ns(now.boot_ns)),
                },
                // Elected but not (or no longer) acknowledged by a majority: not a leader.
                None => Judged::unleased(View::without_leader(Role::Candidate, term)),
            },
            RaftRole::Candidate => Judged::unleased(View::without_leader(Role::Candidate, term)),
            RaftRole::Follower | RaftRole::Learner => Judged::unleased(View {
                role: Role::Follower,
                term,
                leader: follower_leader(
                    raft.leader.filter(|l| *l != self.id),
                    self.follower_contact,
                    now.mono_ns,
                    self.timing.election.follower_lease_ns,
                ),
            }),
            RaftRole::Shutdown => Judged::unleased(View::without_leader(Role::Follower, term)),
        }
    }

    /// The claim in force at `now_ns` (BOOTTIME) for openraft's state `raft`.
    pub fn claim(&self, now_ns: u64, raft: &RaftView) -> Option<Claim> {
        self.lease
            .current(raft.term, now_ns)
            .filter(|_| raft.role == RaftRole::Leader)
    }

    /// The earliest instant (BOOTTIME) this voter of `voters` may start a pre-vote round, and
    /// the contact that instant is judged from (its `seq` is asked again in
    /// [`Input::MayElect`]).
    pub fn campaign_due(&self, raft: &RaftView, voters: &[NodeId]) -> (u64, Contact) {
        let c = self.contact;
        let my_rank = rank(
            self.id,
            voters,
            c.leader,
            raft.last_log_index < c.leader_commit,
        );
        (self.campaign.due_at(&c, my_rank, raft.term), c)
    }

    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    #[cfg(test)]
    pub fn lease_mut(&mut self) -> &mut Lease {
        &mut self.lease
    }

    pub fn contact(&self) -> Contact {
        self.contact
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn timing(&self) -> &CoreTiming {
        &self.timing
    }

    /// Attempts that failed since the last contact.
    pub fn failed_attempts(&self) -> u32 {
        self.campaign.failures
    }

    /// openraft has this node as leader, and the claim is neither fenced nor closed.
    fn leading(&self, raft: &RaftView) -> bool {
        raft.role == RaftRole::Leader && !self.lease.is_closed() && !self.lease.is_fenced(raft.term)
    }

    fn heard(&mut self, now_ns: u64, from: Option<(NodeId, Option<u64>)>, out: &mut Vec<Action>) {
        self.contact.heard(now_ns, from);
        out.push(Action::ContactChanged);
    }

    /// A vote is refused, for any term, while a promise this node answered can still run:
    /// until a follower lease after its latest acknowledged probe, as every follower that
    /// acknowledged it refuses, and after its start (docs/safety.md, step 4). openraft stamps a
    /// leader's own lease only once, when it is elected, and keeps none on a vote it adopted
    /// from a higher vote in an answer, whose term it then shares with the candidate. A
    /// request for a higher term that passes suspends the claim before openraft sees it
    /// ([`Input::VoteAnswered`] resumes it; a granted vote fences the lower terms for good).
    fn vote_asked(
        &mut self,
        now_ns: u64,
        term: u64,
        current_term: u64,
        confirmed: bool,
        out: &mut Vec<Action>,
    ) -> Answer {
        if !confirmed {
            return Answer::RefuseVote;
        }
        let f = self.timing.election.follower_lease_ns;
        let inside_promise = self
            .lease
            .promised_until(f)
            .is_some_and(|until| now_ns < until);
        if inside_promise {
            out.push(Action::Observed(Observation::VoteAskedInsidePromise));
        }
        let refused = self
            .lease
            .vote_refused_until(f)
            .is_some_and(|until| now_ns < until);
        if refused && !self.vote_while_leading() {
            return Answer::RefuseVote;
        }
        let higher = term > current_term;
        if higher {
            // Stop claiming before openraft can hand our vote to a higher term.
            self.lease.suspend(now_ns);
        }
        Answer::PassVote {
            higher,
            inside_promise,
        }
    }

    /// Judged by this node's own follower lease and log, and the pre-vote it pledged last,
    /// changing nothing durable; a grant is a pledge to `from` (election.rs).
    fn prevote_asked(
        &mut self,
        now_ns: u64,
        from: NodeId,
        theirs: Option<LogId<NodeId>>,
        mine: Option<LogId<NodeId>>,
        confirmed: bool,
    ) -> Answer {
        let timing = self.timing.election;
        let contact = self.contact.at_ns;
        let verdict = if self.lease.is_closed() {
            Err(PreVoteRefusal::Stopping)
        } else if !confirmed {
            Err(PreVoteRefusal::Unconfirmed)
        } else {
            judge_prevote(now_ns, contact, &timing, mine, self.pledge, from, theirs)
        };
        if verdict.is_ok() {
            self.pledge = Some(Pledge {
                to: from,
                until_ns: now_ns + timing.pledge_ns(),
            });
        }
        let lease_left_us = (verdict == Err(PreVoteRefusal::LeaderAlive))
            .then(|| (contact + timing.follower_lease_ns).saturating_sub(now_ns) / 1000);
        Answer::PreVote {
            verdict,
            lease_left_us,
        }
    }

    /// A probe sent at `t0` came back: on a majority's acknowledgement, while openraft still
    /// has this node as leader of `term`, the claim runs to `t0 + L` (lease.rs).
    fn probe_done(
        &mut self,
        now_ns: u64,
        term: u64,
        t0: Reading,
        acked: bool,
        raft: RaftView,
        out: &mut Vec<Action>,
    ) -> Answer {
        let granted = acked
            && raft.role == RaftRole::Leader
            && raft.term == term
            && self.lease.grant(term, t0, self.timing.lease_ns);
        let mut went_quiet = false;
        if granted {
            // The leader's own contact: it refuses pre-votes while its quorum answers, waits a
            // whole lease before campaigning should it step down, and then goes last.
            self.heard(t0.boot_ns, Some((self.id, raft.last_log_index)), out);
            self.quiet.acked(t0.boot_ns);
        } else {
            went_quiet =
                self.quiet
                    .failed(now_ns, self.timing.quiet_after_ns, self.timing.quiet_ns);
        }
        Answer::Probe {
            granted,
            went_quiet,
        }
    }
}

/// Quorum mode's lease, inside the core (node.rs, `record_view`).
impl HoldsLease for std::sync::Mutex<QuorumCore> {
    fn with_lease<R>(&self, f: impl FnOnce(&Lease) -> R) -> R {
        f(&self.lock().expect("core").lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::testing::ManualClock;
    use crate::clock::Clock;

    const F: u64 = ms(150);

    fn core(clock: &ManualClock) -> QuorumCore {
        let t = Timing {
            heartbeat_ms: 30,
            follower_lease_ms: 150,
            lease_ms: 0,
        };
        QuorumCore::new(1, CoreTiming::from_config(&t), 7, clock.boot_ns())
    }

    fn leader(term: u64) -> RaftView {
        RaftView {
            role: RaftRole::Leader,
            term,
            leader: Some(1),
            last_log_index: Some(3),
        }
    }

    fn answer(actions: &[Action]) -> Option<&Answer> {
        actions.iter().find_map(|a| match a {
            Action::Answer(x) => Some(x),
            _ => None,
        })
    }

    /// Ticks, and acknowledges the probe the tick sent: the claim then runs.
    fn claim(c: &mut QuorumCore, clock: &ManualClock, term: u64) {
        let raft = leader(term);
        let out = c.tick(clock.read(), &raft);
        assert!(
            out.contains(&Action::Probe {
                term,
                heartbeat: false
            }),
            "{out:?}"
        );
        let t0 = clock.read();
        clock.advance(ms(2));
        let done = Input::ProbeDone {
            term,
            t0,
            acked: true,
            raft,
        };
        let out = c.step(clock.read(), done);
        assert_eq!(
            answer(&out),
            Some(&Answer::Probe {
                granted: true,
                went_quiet: false
            })
        );
        assert!(out.contains(&Action::ContactChanged), "{out:?}");
    }

    /// A claim is judged on CLOCK_BOOTTIME, so a leader whose host was suspended past its
    /// lease does not claim when it resumes (CLOCK_MONOTONIC stood still meanwhile, so judged
    /// on it the claim would still run).
    #[test]
    fn a_claim_ends_while_the_host_is_suspended() {
        let clock = ManualClock::default();
        let mut c = core(&clock);
        clock.advance(F);
        claim(&mut c, &clock, 7);
        clock.advance(ms(50));
        let judged = c.judge(clock.read(), &leader(7));
        assert_eq!(judged.view.role, Role::Leader);
        assert!(judged.lease_remaining_ns.is_some_and(|l| l > 0));
        clock.suspend(ms(10_000));
        assert_eq!(
            c.judge(clock.read(), &leader(7)).view.role,
            Role::Candidate,
            "the claim must have ended during the suspend"
        );
        // What the monotonic clock alone would have said: still claiming.
        let since = c.lease().last().unwrap().since_ns;
        assert!(c.lease().current(7, since + ms(52)).is_some());
    }

    /// A vote request is refused while a promise can run, and after the promise's follower
    /// lease a request for a higher term suspends the claim until openraft answered.
    #[test]
    fn votes_wait_for_the_promises_and_a_higher_term_suspends_the_claim() {
        let clock = ManualClock::default();
        let mut c = core(&clock);
        let ask = |current_term| Input::VoteAsked {
            term: 8,
            current_term,
            confirmed: true,
        };
        assert_eq!(
            answer(&c.step(clock.read(), ask(7))),
            Some(&Answer::RefuseVote),
            "a follower lease after the start"
        );
        clock.advance(F);
        claim(&mut c, &clock, 7);
        let out = c.step(clock.read(), ask(7));
        assert_eq!(
            answer(&out),
            Some(&Answer::RefuseVote),
            "inside the promise"
        );
        assert!(out.contains(&Action::Observed(Observation::VoteAskedInsidePromise)));
        clock.advance(F);
        let out = c.step(clock.read(), ask(7));
        assert_eq!(
            answer(&out),
            Some(&Answer::PassVote {
                higher: true,
                inside_promise: false
            })
        );
        assert!(c.claim(clock.boot_ns(), &leader(7)).is_none(), "suspended");
        let out = c.step(
            clock.read(),
            Input::VoteAnswered {
                term: 8,
                higher: true,
                granted: true,
                failed: false,
                inside_promise: false,
            },
        );
        assert!(out.contains(&Action::Wake) && out.contains(&Action::ContactChanged));
        assert!(
            c.lease().is_fenced(7),
            "a granted vote fences the lower terms"
        );
        let unconfirmed = Input::VoteAsked {
            term: 9,
            current_term: 8,
            confirmed: false,
        };
        clock.advance(F);
        assert_eq!(
            answer(&c.step(clock.read(), unconfirmed)),
            Some(&Answer::RefuseVote)
        );
    }

    /// An election is enqueued only when no contact came since the campaign looked, the
    /// follower lease is over, and the node is neither leader nor stopping.
    #[test]
    fn an_election_needs_the_same_contact_and_the_lease_over() {
        let clock = ManualClock::default();
        let mut c = core(&clock);
        let follower = RaftView {
            role: RaftRole::Follower,
            term: 4,
            leader: Some(2),
            last_log_index: Some(3),
        };
        let (due, seen) = c.campaign_due(&follower, &[1, 2, 3]);
        assert!(due >= clock.boot_ns() + F);
        let may = |seq| Input::MayElect {
            seq,
            raft: follower,
        };
        assert_eq!(
            answer(&c.step(clock.read(), may(seen.seq))),
            Some(&Answer::Elect(None))
        );
        clock.advance(F);
        assert_eq!(
            answer(&c.step(clock.read(), may(seen.seq))),
            Some(&Answer::Elect(Some(5)))
        );
        c.step(
            clock.read(),
            Input::AppendAccepted {
                leader: 2,
                commit: Some(3),
            },
        );
        clock.advance(F);
        assert_eq!(
            answer(&c.step(clock.read(), may(seen.seq))),
            Some(&Answer::Elect(None)),
            "a contact came since"
        );
        let judged = c.judge(clock.read(), &follower);
        assert_eq!(judged.view.leader, None, "its lease ran out");
    }

    /// A resignation ends the claim and fences the term; a stop closes the lease for good.
    #[test]
    fn resigning_and_stopping_end_the_claim_for_good() {
        let clock = ManualClock::default();
        let mut c = core(&clock);
        clock.advance(F);
        claim(&mut c, &clock, 3);
        let out = c.step(clock.read(), Input::Resign { raft: leader(3) });
        assert_eq!(answer(&out), Some(&Answer::Resign(Ok(3))));
        assert!(out.contains(&Action::Record));
        assert_eq!(
            answer(&c.step(clock.read(), Input::Resign { raft: leader(3) })),
            Some(&Answer::Resign(Err(()))),
            "nothing left to resign"
        );
        assert_eq!(
            c.tick(clock.read(), &leader(3)),
            vec![Action::Record],
            "a resigned term is not probed"
        );
        claim(&mut c, &clock, 4);
        let out = c.step(clock.read(), Input::Shutdown { raft: leader(4) });
        assert_eq!(answer(&out), Some(&Answer::Shutdown { was_claiming: true }));
        assert_eq!(c.tick(clock.read(), &leader(4)), vec![Action::Record]);
        let prevote = Input::PreVoteAsked {
            from: 2,
            theirs: None,
            mine: None,
            confirmed: true,
        };
        assert!(matches!(
            answer(&c.step(clock.read(), prevote)),
            Some(Answer::PreVote {
                verdict: Err(PreVoteRefusal::Stopping),
                ..
            })
        ));
    }

    /// openraft's heartbeat goes with every fourth probe; the next tick is the next probe or
    /// the claim's end.
    #[test]
    fn a_leader_probes_every_beat_with_a_heartbeat_every_fourth() {
        let clock = ManualClock::default();
        let mut c = core(&clock);
        let raft = leader(2);
        let mut heartbeats = Vec::new();
        for _ in 0..8 {
            let out = c.tick(clock.read(), &raft);
            match out.first() {
                Some(Action::Probe { heartbeat, .. }) => heartbeats.push(*heartbeat),
                other => panic!("{other:?}"),
            }
            assert_eq!(
                c.tick(clock.read(), &raft),
                vec![Action::Record],
                "one probe a beat"
            );
            assert_eq!(
                c.next_tick_ns(clock.boot_ns(), &raft),
                clock.boot_ns() + ms(30)
            );
            clock.advance(ms(30));
        }
        assert_eq!(
            heartbeats,
            [false, false, false, true, false, false, false, true]
        );
    }
}
