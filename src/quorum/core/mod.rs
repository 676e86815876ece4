//! [`QuorumCore`]: every decision a quorum node makes about its claim, as one state machine
//! without I/O, a clock or a lock. It owns the claim ([`Lease`]), the probes and going quiet
//! ([`Quiet`]), the contact that gates a campaign ([`Contact`]) and the leader a follower
//! names, the campaign ([`Campaign`]), the pre-vote pledge ([`Pledged`]), the preferred
//! leader's settle time ([`Settle`]), a resignation's successor and a new data dir's
//! confirmation ([`Confirmation`]). As tikv/raft-rs's `Raft`, it has two entry points:
//! [`QuorumCore::step`] with what happened ([`Input`]) and [`QuorumCore::tick`] with the time;
//! each returns what to do ([`Action`]), which its driver task (`driver/mod.rs`) and its peers'
//! and admins' handlers (`node/mod.rs`) carry out. The claim changes in the
//! lease's own methods only, each called from one arm here. The lab's model checker
//! (`lab/src/model/`) drives this very type. The gate's order between appends and elections
//! (election/mod.rs, rule 1) is kept by the callers: an append, snapshot or vote is stepped in
//! under the gate's read side, [`Input::MayElect`] under its write side (`driver/campaign.rs`).

use openraft::LogId;

use super::election::{judge_prevote, rank, Campaign, Contact, Pledged, PreVoteRefusal};
use super::identity::Confirmation;
use super::preference::Settle;
use super::quiet::{follower_leader, Quiet};
use crate::clock::Reading;
use crate::engine::{Judged, ResignError};
use crate::lease::{Claim, Lease};
use crate::role::{NodeId, Resigned, Role, View};

mod io;

use self::io::HEARTBEAT_EVERY;

pub use self::io::{Action, Answer, CoreFlaws, CoreTiming, Input, Observation, RaftRole, RaftView};

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
    /// The follower lease's last contact (election/mod.rs, rule 1).
    contact: Contact,
    /// The last leader whose AppendEntries this node accepted, and when (MONOTONIC).
    follower_contact: Option<(NodeId, u64)>,
    campaign: Campaign,
    /// The pre-vote this node granted last (or its own round).
    pledge: Pledged,
    /// Who the preferred leader's looks wait for (preference.rs).
    settle: Settle,
    /// A new data dir's confirmation (identity.rs).
    confirmation: Confirmation,
    /// The lab's flaws (engine.rs, `Flaws`): none without the `flaws` feature.
    flaws: CoreFlaws,
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
            pledge: Pledged::default(),
            settle: Settle::default(),
            confirmation: Confirmation::default(),
            flaws: CoreFlaws::default(),
        }
    }

    /// The lab's flaw `vote_while_leading` (engine.rs, `Flaws`).
    #[cfg(feature = "flaws")]
    pub fn with_vote_while_leading(mut self, on: bool) -> QuorumCore {
        self.flaws.vote_while_leading = on;
        self
    }

    /// Something happened at `now`: what to do. Each input is taken by the part of the core it
    /// concerns: the contact, the votes, the claim, the campaign.
    pub fn step(&mut self, now: Reading, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        let answer = match input {
            Input::AppendAccepted { .. }
            | Input::SnapshotAccepted { .. }
            | Input::ResignNotice { .. } => self.step_contact(now, input, &mut out),
            Input::VoteAsked { .. } | Input::VoteAnswered { .. } | Input::PreVoteAsked { .. } => {
                self.step_votes(now.boot_ns, input, &mut out)
            }
            Input::ProbeDone { .. } | Input::Resign { .. } | Input::Shutdown { .. } => {
                self.step_claim(now.boot_ns, input, &mut out)
            }
            // MONOTONIC, like the contacts it judges (counters.rs, `last_contact_ns`).
            Input::Look { raft, look } => {
                let claims = self.claim(now.boot_ns, &raft).is_some();
                let to = self.settle.look(now.mono_ns, claims, &look);
                Some(Answer::HandOver(to))
            }
            Input::Heard(h) => Some(Answer::Heard(self.confirmation.step(self.id, h))),
            Input::Roles(_) => None, // the driver's own (driver/roles.rs)
            Input::CannotTakeOver => {
                self.settle.not_leading();
                None
            }
            Input::RoundStarting
            | Input::RoundEnded { .. }
            | Input::MayElect { .. }
            | Input::ElectionOver { .. } => self.step_campaign(now.boot_ns, input),
        };
        if let Some(a) = answer {
            out.insert(0, Action::Answer(a));
        }
        out
    }

    /// A leader was heard from: the follower lease starts again (election/mod.rs, rule 1).
    fn step_contact(
        &mut self,
        now: Reading,
        input: Input,
        out: &mut Vec<Action>,
    ) -> Option<Answer> {
        match input {
            Input::AppendAccepted { leader, commit } => {
                self.heard(now.boot_ns, Some((leader, commit)), out);
                self.campaign.settled();
                self.follower_contact = Some((leader, now.mono_ns));
                None
            }
            Input::SnapshotAccepted { leader } => {
                self.heard(now.boot_ns, leader.map(|l| (l, None)), out);
                None
            }
            Input::ResignNotice {
                from,
                term,
                successor,
                raft,
            } => {
                let taken = raft.leader == Some(from) && raft.term == term;
                if taken {
                    self.campaign.handoff(term, successor == self.id);
                    self.heard(0, None, out);
                }
                Some(Answer::Handoff { taken })
            }
            _ => None,
        }
    }

    /// A vote or pre-vote asked of this node, and openraft's answer to a vote it passed on.
    fn step_votes(&mut self, t: u64, input: Input, out: &mut Vec<Action>) -> Option<Answer> {
        match input {
            Input::VoteAsked {
                term,
                current_term,
                confirmed,
            } => Some(self.vote_asked(t, term, current_term, confirmed, out)),
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
                    self.heard(t, None, out);
                }
                None
            }
            Input::PreVoteAsked {
                from,
                theirs,
                mine,
                confirmed,
            } => Some(self.prevote_asked(t, from, theirs, mine, confirmed)),
            _ => None,
        }
    }

    /// The claim: a probe's outcome, a resignation, a stop (lease.rs).
    fn step_claim(&mut self, t: u64, input: Input, out: &mut Vec<Action>) -> Option<Answer> {
        match input {
            Input::ProbeDone {
                term,
                t0,
                acked,
                raft,
            } => Some(self.probe_done(t, term, t0, acked, raft, out)),
            Input::Resign {
                raft,
                to,
                followers,
            } => Some(Answer::Resign(match self.claim(t, &raft) {
                None => Err(ResignError::NotLeader(self.id)),
                Some(_) => followers.successor(to).map(|successor| {
                    self.lease.resign(raft.term, t);
                    out.extend([Action::Record, Action::Wake]);
                    Resigned {
                        term: raft.term,
                        successor,
                    }
                }),
            })),
            Input::Shutdown { raft, followers } => {
                let led = self.lease.current(raft.term, t).is_some();
                self.lease.close(t);
                out.push(Action::Record);
                let led = led || raft.role == RaftRole::Leader;
                Some(Answer::Shutdown(
                    followers.successor(None).ok().filter(|_| led),
                ))
            }
            _ => None,
        }
    }

    /// This node's own campaign: its pre-vote round, the gate's last word, the outcome.
    fn step_campaign(&mut self, t: u64, input: Input) -> Option<Answer> {
        match input {
            Input::RoundStarting => {
                let timing = self.timing.election;
                Some(Answer::Round(self.pledge.own_round(self.id, t, &timing)))
            }
            Input::RoundEnded { failed } => {
                self.pledge.release_own(self.id);
                if failed {
                    self.campaign.failed(t);
                }
                None
            }
            Input::MayElect { seq, raft } => {
                let c = self.contact;
                let due = c.seq == seq
                    && t >= self.timing.election.lease_over_at(c.at_ns)
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
            _ => None,
        }
    }

    /// The time is `now` and openraft's state `raft`: probe, claim or give up the claim. The
    /// driver's role turn (docs/safety.md, "Why two nodes never claim at once"): while openraft
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

    /// When the driver's role turn must come next, at the latest (BOOTTIME): the next probe of a probing
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
                Some(c) => Judged::claiming(self.id, &c, now.boot_ns),
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
        let behind = raft.last_log_index < c.leader_commit;
        let my_rank = rank(self.id, voters, c.leader, behind);
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
        if refused && !self.flaws.vote_while_leading() {
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
    /// changing nothing durable; a grant is a pledge to `from` (election/mod.rs).
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
            judge_prevote(now_ns, contact, &timing, mine, self.pledge.0, from, theirs)
        };
        if verdict.is_ok() {
            self.pledge.grant(from, now_ns, &timing);
        }
        let lease_left_us = (verdict == Err(PreVoteRefusal::LeaderAlive))
            .then(|| timing.lease_over_at(contact).saturating_sub(now_ns) / 1000);
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

#[cfg(test)]
mod tests;
