//! The driver of a quorum node: the one task that turns its core (core/mod.rs) and does the
//! node's own I/O. Each turn is a reason to wake and what it starts:
//!
//! | turn | when | what it starts |
//! |---|---|---|
//! | role | every beat, sooner when a claim ends, openraft changes or the core asks | the core's `tick`, and the probe it asks for (`probe.rs`) |
//! | members | openraft changes | the address book, the hellos to a changed membership, a joint config's completion (membership.rs) |
//! | identity | once, at start (not on a non-voter) | a new data dir's hellos until it is confirmed (`confirm.rs`) |
//! | campaign | whenever none is under way, once the identity is confirmed | a campaign turn (`campaign.rs`) |
//! | preference | every beat, in a cluster with priorities | a look for a preferred leader, and the handover to it (`prefer.rs`) |
//! | roles | every beat | the named roles' renewal, and a leader's writes (`roles.rs`) |
//! | non-voters | every beat | a non-voter's join; a leader's removal of absent non-voters (`nonvoters.rs`) |
//!
//! Work a turn starts runs inside this task, polled beside the next turns (one `select!`), so
//! every reason to act is in one place and no two of the node's own tasks interleave. The
//! driver owns the core (inbox.rs, `CoreOwner`): it alone steps it. What the node's other
//! tasks ask of it (the peers' requests: node/mod.rs, `QuorumPeer`; an admin's resign; the
//! stop) arrives in its inbox, and is stepped, and what the step says carried out, in the
//! order it arrives, beside the turns; the work the turns started asks the same way. A peer's
//! append or vote is handed to openraft under the gate's read side (election/mod.rs, `Gate`);
//! a campaign enqueues openraft's election under its write side (`campaign.rs`,
//! `elect_if_still_due`). That is the order between appends and elections the safety argument
//! states (docs/safety.md, "Why two nodes never claim at once").

mod campaign;
mod confirm;
mod nonvoters;
mod prefer;
pub(super) mod probe;
mod roles;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use openraft::{BasicNode, LogId, RaftMetrics};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::core::{Action, Answer, Input, RaftView};
use super::inbox::CoreOwner;
use super::node::QuorumNode;
use crate::quorum::node::roles::new_steward;
use crate::role::NodeId;
use crate::roles::steward::Steward;

/// The driver's state between turns: the work under way, and what the turns remember.
pub struct Driver {
    node: Arc<QuorumNode>,
    /// The core, which only this task steps.
    core: CoreOwner,
    stop: CancellationToken,
    metrics: watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
    /// The config's beat (`heartbeat_ms`): the preference looks once a beat.
    beat: Duration,
    /// The probe out, if any: no role turn until it is back (`probe.rs`).
    probe: Option<BoxFuture<'static, ()>>,
    /// A new data dir's confirmation under way: no campaign until it is done (`confirm.rs`).
    confirming: Option<BoxFuture<'static, Result<(), String>>>,
    /// The campaign turn under way (`campaign.rs`).
    campaign: Option<BoxFuture<'static, ()>>,
    /// The next look for a preferred leader (none in a cluster without priorities, and none
    /// while a handover is under way), and the handover under way.
    next_look: Option<Instant>,
    handing_over: Option<BoxFuture<'static, ()>>,
    /// The membership the address book follows (membership.rs, `follow_members`), and the
    /// hellos and completions it started.
    members_seen: Option<Option<LogId<NodeId>>>,
    work: FuturesUnordered<BoxFuture<'static, ()>>,
    /// The named roles of this node, which only this task steps; the next roles turn, and its
    /// work under way (`roles.rs`).
    steward: Steward,
    next_roles: Instant,
    roles: roles::RolesWork,
    /// A non-voter's join, a leader's removal of absent non-voters (`nonvoters.rs`).
    nonvoters: nonvoters::NonVotersWork,
}

/// Why the driver woke.
enum Woke {
    /// The node stops.
    Stop,
    /// openraft changed: the members' turn and the role's.
    Raft,
    /// A beat, the end of a claim, or the core's poke: the role's turn.
    Role,
    /// The preference's beat.
    Look,
    /// The roles' beat.
    Roles,
    /// Work it started ended, or it stepped what was asked.
    Done,
}

impl Driver {
    /// Runs the driver in the background. When it ends with an error (openraft stopped on its
    /// own: a storage error; a member knows this node by an earlier data dir) or panics, the
    /// reason is logged and `fatal` is cancelled, which stops the process.
    pub fn spawn(
        node: Arc<QuorumNode>,
        core: CoreOwner,
        stop: CancellationToken,
        fatal: CancellationToken,
    ) {
        let run = tokio::spawn(Self::run(node, core, stop));
        tokio::spawn(async move {
            let why = match run.await {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e,
                // The runtime shuts down: the process ends anyway.
                Err(e) if e.is_cancelled() => return,
                Err(e) => format!("the driver panicked: {e}"),
            };
            tracing::error!(error = %why, "quorum engine stopped");
            fatal.cancel();
        });
    }

    /// The driver's task: turns until `stop` is cancelled, or ends with an error when openraft
    /// stops on its own or a member knows this node by an earlier data dir (identity.rs).
    pub async fn run(
        node: Arc<QuorumNode>,
        core: CoreOwner,
        stop: CancellationToken,
    ) -> Result<(), String> {
        Self::run_owning(node, core, stop).await.0
    }

    /// [`Driver::run`], and the core it owned, once it stops (the node's tests step it then).
    pub(crate) async fn run_owning(
        node: Arc<QuorumNode>,
        core: CoreOwner,
        stop: CancellationToken,
    ) -> (Result<(), String>, CoreOwner) {
        let beat = Duration::from_millis(node.timing.heartbeat_ms);
        // A non-voter has no vote to double: it confirms no incarnation (nonvoters.rs).
        let confirming = (!node.admission.nonvoter).then(|| {
            let (node, stop) = (node.clone(), stop.clone());
            let confirm: BoxFuture<'static, Result<(), String>> =
                Box::pin(async move { confirm::confirm_identity(&node, &stop).await });
            confirm
        });
        let mut driver = Driver {
            metrics: node.raft.metrics(),
            beat,
            probe: None,
            confirming,
            campaign: None,
            next_look: prefer::wanted(&node).then(|| Instant::now() + beat),
            handing_over: None,
            members_seen: None,
            work: FuturesUnordered::new(),
            steward: new_steward(node.id, &node.timing, &node.flaws, node.clock.boot_ns()),
            next_roles: Instant::now() + beat,
            roles: roles::RolesWork::default(),
            nonvoters: nonvoters::NonVotersWork::new(&node),
            node: node.clone(),
            core,
            stop,
        };
        node.store.set_flaws(&node.flaws);
        let res = driver.turns().await;
        // openraft stopping after this node closed its claim is the node's own shutdown.
        let closed = driver.core.read().lease().is_closed();
        let res = res.or_else(|e| if closed { Ok(()) } else { Err(e) });
        if res.is_err() {
            driver.stop_claiming();
        }
        (res, driver.core)
    }

    /// The driver ends with an error (the process exits next): the claim ends for good now and
    /// is recorded, and the successor a leader names is told, as a graceful stop does, since no
    /// one can ask the core once this task has ended.
    fn stop_claiming(&mut self) {
        self.steward.close();
        let m = self.metrics.borrow().clone();
        let answer = self.step(self.node.stopping(&m));
        if let Some(told) = self.node.stopped(&m, answer) {
            tokio::spawn(told);
        }
    }

    /// The driver's loop: waits for a reason to act, then takes the turns it calls for.
    async fn turns(&mut self) -> Result<(), String> {
        // The first turns at once: a restarted node's event log ends in its earlier run (which
        // may have claimed), and tells of the view as it is now before anything else happens.
        let first = self.metrics.borrow_and_update().clone();
        self.follow_members(&first);
        self.role_turn(&first);
        loop {
            self.campaign_turn();
            let woke = self.woken().await?;
            match woke {
                Woke::Stop => return Ok(()),
                Woke::Raft | Woke::Role => {
                    let m = self.metrics.borrow_and_update().clone();
                    if let Err(fatal) = &m.running_state {
                        return Err(format!("openraft stopped: {fatal}"));
                    }
                    // Either wake may be the first to see a new membership (both mark it
                    // seen); following an unchanged one does nothing.
                    self.follow_members(&m);
                    if self.probe.is_none() {
                        self.role_turn(&m);
                    }
                }
                Woke::Look => self.look(),
                Woke::Roles => {
                    self.next_roles = Instant::now() + self.beat;
                    let m = self.metrics.borrow().clone();
                    roles::turn(&self.node, &mut self.steward, &m, &mut self.roles);
                    nonvoters::turn(&self.node, &mut self.nonvoters, &m);
                }
                Woke::Done => {}
            }
        }
    }

    /// Waits for the next reason to act; work that ended is taken off. `Err` when openraft
    /// stopped, or the confirmation of this data dir failed.
    async fn woken(&mut self) -> Result<Woke, String> {
        let node = self.node.clone();
        // The role's next turn: a probing leader's next probe, a beat for anyone else, and the
        // end of a running claim, whichever comes first; none while a probe is out.
        let role_in = self.probe.is_none().then(|| {
            let raft = RaftView::of(&self.metrics.borrow());
            let now = node.clock.boot_ns();
            let next = self.core.read().next_tick_ns(now, &raft);
            Duration::from_nanos(next.saturating_sub(now))
        });
        let beat = self.beat;
        // Work under way first: each branch ends at most once for each piece of work started,
        // while openraft sends its metrics on every report, changed or not
        // (docs/design/openraft.md), which must not hold the work back. `biased` keeps the
        // order fixed, so a simulated run is reproducible.
        Ok(tokio::select! {
            biased;
            _ = self.stop.cancelled() => Woke::Stop,
            Some(ask) = self.core.asked() => {
                let answer = self.step(ask.input);
                // The asker may have gone (a dropped request): the step stands.
                let _ = ask.answer.send(answer);
                Woke::Done
            }
            _ = under_way(&mut self.probe) => {
                self.probe = None;
                Woke::Done
            }
            r = under_way(&mut self.confirming) => {
                self.confirming = None;
                r?;
                Woke::Done
            }
            _ = under_way(&mut self.campaign) => {
                self.campaign = None;
                Woke::Done
            }
            _ = under_way(&mut self.handing_over) => {
                self.handing_over = None;
                self.next_look = Some(Instant::now() + beat);
                Woke::Done
            }
            Some(()) = self.work.next(), if !self.work.is_empty() => Woke::Done,
            a = under_way(&mut self.roles.renewing) => self.renewed(a),
            w = under_way(&mut self.roles.writing) => self.written(w),
            j = under_way(&mut self.nonvoters.under_way) => {
                self.nonvoters.done(j);
                Woke::Done
            }
            _ = sleep_until(self.next_look), if self.next_look.is_some() => Woke::Look,
            _ = tokio::time::sleep_until(self.next_roles) => Woke::Roles,
            r = self.metrics.changed() => match r {
                Ok(()) => Woke::Raft,
                Err(_) => return Err("openraft stopped".into()),
            },
            _ = node.wake.notified(), if role_in.is_some() => Woke::Role,
            _ = tokio::time::sleep(role_in.unwrap_or_default()), if role_in.is_some() => Woke::Role,
        })
    }

    /// The role's turn: ticks the core and carries out what it says. A probe it asks for goes
    /// out now, and what the core said after it is carried out once the probe is back.
    fn role_turn(&mut self, m: &RaftMetrics<NodeId, BasicNode>) {
        let clock = &self.node.clock;
        let mut actions = self.core.tick(|| clock.read(), &RaftView::of(m));
        let at = actions
            .iter()
            .position(|a| matches!(a, Action::Probe { .. }));
        let Some(at) = at else {
            self.node.carry_out(actions);
            return;
        };
        let after = actions.split_off(at + 1);
        let Some(Action::Probe { term, heartbeat }) = actions.pop() else {
            unreachable!("the action at {at} is a probe");
        };
        self.node.carry_out(actions);
        let node = self.node.clone();
        let mut metrics = self.metrics.clone();
        self.probe = Some(Box::pin(async move {
            if heartbeat {
                let _ = node.raft.trigger().heartbeat().await;
            }
            probe::probe_recording(&node, term, &mut metrics).await;
            node.carry_out(after);
        }));
    }

    /// This node's renewal came back, answered or not (`roles.rs`).
    fn renewed(&mut self, a: Option<roles::Answered>) -> Woke {
        self.roles.renewing = None;
        if let Some(a) = a {
            roles::answered(&self.node, &mut self.steward, &a);
        }
        Woke::Done
    }

    /// A leader's roles writes ended (`roles.rs`).
    fn written(&mut self, w: roles::Written) -> Woke {
        self.roles.writing = None;
        roles::written(&self.node, &mut self.steward, &w);
        Woke::Done
    }

    /// The members' turn (membership.rs, `follow_members`).
    fn follow_members(&mut self, m: &RaftMetrics<NodeId, BasicNode>) {
        let work = self
            .node
            .members
            .follow_members(m, &mut self.members_seen, &self.stop);
        self.work.extend(work);
    }

    /// The campaign's turn: a new one starts when none is under way, once this data dir's
    /// incarnation is confirmed; never on a non-voter, while the node stops or after its claim
    /// closed.
    fn campaign_turn(&mut self) {
        // A non-voter never campaigns, even where a log names it a voter: it confirmed no
        // incarnation, and a wiped data dir could vote twice (docs/safety.md, step 10).
        if self.campaign.is_some()
            || self.node.admission.nonvoter
            || self.confirming.is_some()
            || self.stop.is_cancelled()
            || self.core.read().lease().is_closed()
        {
            return;
        }
        let turn = campaign::turn(self.node.clone(), self.stop.clone());
        self.campaign = Some(Box::pin(turn));
    }

    /// The preference's turn: one look, and the handover it calls for.
    fn look(&mut self) {
        self.next_look = Some(Instant::now() + self.beat);
        let look = prefer::look(&self.node);
        if let Some(Answer::HandOver(Some(to))) = self.step(look) {
            self.next_look = None;
            self.handing_over = Some(Box::pin(prefer::hand_over(self.node.clone(), to)));
        }
    }
}

impl Driver {
    /// Steps the core with `input` now and carries out what it says; its answer. A request
    /// about roles is the steward's (`roles.rs`); a stop closes the steward's claims too.
    fn step(&mut self, input: Input) -> Option<Answer> {
        match input {
            Input::Roles(ask) => {
                let m = self.metrics.borrow().clone();
                Some(roles::step(&self.node, &mut self.steward, &m, ask))
            }
            input => {
                if matches!(input, Input::Shutdown { .. }) {
                    self.steward.close();
                }
                step(&self.node, &mut self.core, input)
            }
        }
    }
}

/// Steps `core` with `input` now and carries out what it says; its answer.
fn step(node: &QuorumNode, core: &mut CoreOwner, input: Input) -> Option<Answer> {
    let actions = core.step(|| node.clock.read(), input);
    node.carry_out(actions)
}

/// Runs `work` while stepping what is asked of `core`, as the driver does (the node's tests,
/// once its driver stopped).
#[cfg(test)]
pub(crate) async fn serve<T>(
    node: &QuorumNode,
    core: &mut CoreOwner,
    work: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => return out,
            Some(ask) = core.asked() => {
                let answer = step(node, core, ask.input);
                let _ = ask.answer.send(answer);
            }
        }
    }
}

/// The end of the work under way in `slot`; never, when there is none.
async fn under_way<T>(slot: &mut Option<BoxFuture<'static, T>>) -> T {
    match slot {
        Some(work) => work.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
