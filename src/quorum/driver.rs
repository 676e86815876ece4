//! The election driver of a quorum node: *when* it campaigns (the rules are `election/mod.rs`).
//! It waits for the follower lease to end and its slot in the order of candidates to come,
//! asks a pre-vote round, re-checks the lease under the gate's write side and enqueues
//! openraft's election, then watches the outcome.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio_util::sync::CancellationToken;

use super::core::{Answer, Input, RaftView};
use super::election::{majority_of_each, prevote_retry_after_us};
use super::identity::{confirmations_needed, not_a_member_message, replaced_message};
use super::node::QuorumNode;
use super::protocol::{Hello, HelloAnswer, PreVoteRequest, PreVoteResponse, PATH_PREVOTE};
use crate::role::NodeId;

impl QuorumNode {
    /// The election driver (election/mod.rs): campaigns when the follower lease has run out, a
    /// pre-vote round succeeded and this node's stagger slot has come, then watches the
    /// outcome. Runs until `stop` is cancelled. Before its first campaign, a new data dir's
    /// incarnation is confirmed (identity.rs): `Err` when a member knows an earlier one.
    pub(super) async fn drive_elections(
        self: Arc<Self>,
        stop: CancellationToken,
    ) -> Result<(), String> {
        self.confirm_identity(&stop).await?;
        let mut metrics = self.raft.metrics();
        loop {
            if stop.is_cancelled() || self.with_core(|core, _| core.lease().is_closed()) {
                return Ok(());
            }
            let m = metrics.borrow_and_update().clone();
            // A leader, a stopped openraft, a learner (joining) or a node removed from the
            // cluster never campaigns: it waits for openraft to change.
            let voters = self.voters();
            if m.state == ServerState::Leader
                || m.running_state.is_err()
                || !voters.contains(&self.id)
            {
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    r = metrics.changed() => if r.is_err() { return Ok(()) },
                }
                continue;
            }
            let (due, contact) =
                self.with_core(|core, _| core.campaign_due(&RaftView::of(&m), &voters));
            let now = self.clock.boot_ns();
            if now < due {
                if !self.sleep_to_slot(due, &mut metrics, &stop).await {
                    return Ok(());
                }
                continue;
            }
            match self.pre_vote(m.current_term + 1).await {
                Ok(()) => {}
                // Lost only to leases that end within a stagger step (the others heard the
                // last heartbeat a little later): ask again right then.
                Err(Some(wait)) => {
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(wait + Duration::from_micros(200)) => {}
                    }
                    continue;
                }
                Err(None) => continue,
            }
            let Some(term) = self.elect_if_still_due(contact.seq).await else {
                continue;
            };
            self.counters.election_started();
            let won = self.await_outcome(term, contact.seq, &stop).await;
            self.step(Input::ElectionOver { won });
        }
    }

    /// Sleeps until the campaign slot `due` (BOOTTIME), or a contact, or a change of openraft's
    /// state, whichever comes first; a node woken more than a beat late gives the leader one
    /// more beat (election/mod.rs, `woke_late`). `false` when the node stops or openraft did.
    async fn sleep_to_slot(
        &self,
        due: u64,
        metrics: &mut tokio::sync::watch::Receiver<
            openraft::RaftMetrics<NodeId, openraft::BasicNode>,
        >,
        stop: &CancellationToken,
    ) -> bool {
        let now = self.clock.boot_ns();
        let slept = tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(Duration::from_nanos(due.saturating_sub(now))) => true,
            _ = self.gate.changed() => false,
            r = metrics.changed() => if r.is_err() { return false } else { false },
        };
        let woke = self.clock.boot_ns();
        if slept && self.election.woke_late(due, woke) {
            tracing::debug!(
                late_us = (woke - due) / 1000,
                "woke late for the campaign slot: one more beat for the leader"
            );
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_nanos(self.election.heartbeat_ns)) => {}
                _ = self.gate.changed() => {}
            }
        }
        true
    }

    /// Until this data dir's incarnation is confirmed: says hello to the other members, every
    /// beat at first and then less often, until ⌈n/2⌉ of them recorded it (identity.rs), then
    /// marks it confirmed, durably. `Err` when a member knows this node by an earlier one, or
    /// as many members as would confirm it do not count it among the members; a node that
    /// joins logs that and goes on asking instead. `Ok` at once when it was confirmed before,
    /// and when the node stops.
    async fn confirm_identity(&self, stop: &CancellationToken) -> Result<(), String> {
        let Some(me) = self.store.identity().filter(|i| !i.confirmed) else {
            return Ok(());
        };
        if self.flaws.trust_new_incarnation() {
            return self
                .store
                .confirm_identity()
                .await
                .map_err(|e| format!("cannot record the confirmed incarnation: {e}"));
        }
        let mut tally = Tally::default();
        let mut pause = Duration::from_nanos(self.election.heartbeat_ns);
        let mut rounds = 0u32;
        loop {
            // The members as the log names them (a joining node learns them from the leader),
            // this node counted as a voter.
            // Until its log names a membership (a joining node), it cannot know how many.
            let mut members = self.voters();
            let known = !members.is_empty();
            if !members.contains(&self.id) {
                members.push(self.id);
            }
            let need = confirmations_needed(members.len());
            if known && tally.recorded.len() >= need {
                break;
            }
            self.hello_round(me.incarnation, &members, need, &mut tally)
                .await?;
            rounds += 1;
            if rounds == 10 {
                tracing::warn!(
                    need,
                    recorded = ?tally.recorded,
                    "still waiting for members to record this data dir's incarnation: no votes \
                     until then"
                );
            }
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_secs(1));
        }
        self.store
            .confirm_identity()
            .await
            .map_err(|e| format!("cannot record the confirmed incarnation: {e}"))?;
        tracing::info!(
            incarnation = format!("{:#x}", me.incarnation),
            recorded = ?tally.recorded,
            "incarnation confirmed: this node votes from now on"
        );
        Ok(())
    }

    /// One round of [`confirm_identity`](Self::confirm_identity)'s hellos, to the `members`
    /// that have not recorded `incarnation` yet; `Err` when one refuses it for good.
    async fn hello_round(
        &self,
        incarnation: u64,
        members: &[NodeId],
        need: usize,
        tally: &mut Tally,
    ) -> Result<(), String> {
        use futures_util::StreamExt;
        let deadline = Duration::from_nanos(self.election.follower_lease_ns);
        let hello = &Hello {
            incarnation,
            membership: self.membership_index(),
        };
        let mut asks: futures_util::stream::FuturesUnordered<_> = members
            .iter()
            .filter(|id| **id != self.id && !tally.recorded.contains(*id))
            .map(|&to| async move { (to, self.hellos.ask(to, hello, deadline).await) })
            .collect();
        while let Some((from, answer)) = asks.next().await {
            let refusal = match answer {
                Ok(HelloAnswer { accepted: true, .. }) => {
                    tally.recorded.insert(from);
                    continue;
                }
                // It has not applied the log up to this node's membership: asked again in the
                // next round (identity.rs, rule 3).
                Ok(HelloAnswer { behind: true, .. }) | Err(_) => continue,
                Ok(HelloAnswer { member: false, .. }) => {
                    // A member that applied this node's membership and does not name it: as
                    // many as would confirm it are proof that it was removed.
                    tally.strangers.insert(from);
                    if tally.strangers.len() < need {
                        continue;
                    }
                    not_a_member_message(self.id, &tally.strangers)
                }
                Ok(HelloAnswer { known, .. }) => {
                    replaced_message(self.id, from, known.unwrap_or_default(), incarnation)
                }
            };
            if !self.joins {
                return Err(refusal);
            }
            // A node that joins catches up from the leader meanwhile: the log its hello names
            // may be older than its own addition, which the member then judges by what it knew
            // before. It waits, unconfirmed, and asks again.
            if tally.warned.insert(from) {
                tracing::warn!(
                    member = from,
                    "{refusal} (this node joins: it waits without voting, and asks again)"
                );
            }
        }
        Ok(())
    }

    /// Asks every other member whether it would vote for this node in `term`. `Ok` when a
    /// majority (this node included) says yes within the pre-vote deadline; otherwise
    /// `Err(Some(wait))` when the round was lost only to leases that end within `wait`, and
    /// `Err(None)` when it was lost for good (a live leader, a longer log, no answer).
    async fn pre_vote(&self, term: u64) -> Result<(), Option<Duration>> {
        let res = self.pre_vote_round(term).await;
        self.step(Input::RoundEnded {
            failed: res == Err(None),
        });
        res
    }

    /// [`QuorumNode::pre_vote`]'s round; its pledge to itself is released by the caller.
    async fn pre_vote_round(&self, term: u64) -> Result<(), Option<Duration>> {
        use futures_util::StreamExt;
        let req = PreVoteRequest {
            term,
            last_log_id: self.store.last_log_id(),
        };
        let sets = self.voter_sets();
        let timing = self.election;
        let deadline = Duration::from_nanos(timing.prevote_timeout_ns);
        // This node's own round counts as its pledge: it refuses other candidates meanwhile
        // (core/mod.rs); not while it is pledged to another.
        if self.step(Input::RoundStarting) != Some(Answer::Round(true)) {
            return Err(None);
        }
        let mut asks: futures_util::stream::FuturesUnordered<_> = self
            .voters()
            .into_iter()
            .filter(|id| *id != self.id)
            .map(|to| async move {
                let r: Result<PreVoteResponse, _> = self
                    .transport
                    .call(to, PATH_PREVOTE, "prevote", &req, deadline)
                    .await;
                (to, r.ok())
            })
            .collect();
        let mut granted = BTreeSet::from([self.id]);
        let mut waits = std::collections::BTreeMap::new();
        if majority_of_each(&sets, &granted) {
            return Ok(());
        }
        while let Some((from, answer)) = asks.next().await {
            match answer {
                Some(r) if r.granted => {
                    granted.insert(from);
                }
                Some(r) => {
                    if let Some(us) = r.lease_left_us {
                        waits.insert(from, us);
                    }
                }
                None => {}
            }
            if majority_of_each(&sets, &granted) {
                tracing::debug!(term, yes = granted.len(), "pre-vote won");
                return Ok(());
            }
        }
        let retry = prevote_retry_after_us(&sets, &granted, &waits)
            .filter(|us| *us <= timing.stagger_ns / 1000)
            .map(Duration::from_micros);
        tracing::debug!(term, ?granted, ?sets, ?retry, "pre-vote lost: no election");
        Err(retry)
    }

    /// Under the gate's write side: if no contact arrived since `seen_seq` and the follower
    /// lease is still over, enqueue openraft's election. Returns the term campaigned for.
    async fn elect_if_still_due(&self, seen_seq: u64) -> Option<u64> {
        let _exclusive = self.gate.exclusive().await;
        let raft = RaftView::of(&self.raft_metrics());
        let Some(Answer::Elect(Some(term))) = self.step(Input::MayElect {
            seq: seen_seq,
            raft,
        }) else {
            return None;
        };
        tracing::info!(term, "follower lease over and pre-vote won: campaigning");
        self.raft.trigger().elect().await.ok()?;
        Some(term)
    }

    /// Waits until this node leads `term`, hears from a leader, or the election deadline
    /// passes; true when it leads.
    async fn await_outcome(&self, term: u64, seq: u64, stop: &CancellationToken) -> bool {
        let mut metrics = self.raft.metrics();
        let limit = Duration::from_nanos(self.election.outcome_ns);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state == ServerState::Leader && m.current_term >= term {
                    return true;
                }
                if m.current_term > term {
                    return false;
                }
            }
            if self.with_core(|core, _| core.contact().seq) != seq {
                return false;
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep_until(deadline) => return false,
                _ = self.gate.changed() => {}
                r = metrics.changed() => if r.is_err() { return false },
            }
        }
    }
}

/// What a new data dir's hellos have gathered (`confirm_identity`).
#[derive(Default)]
struct Tally {
    /// Members that recorded this data dir's incarnation.
    recorded: BTreeSet<NodeId>,
    /// Members whose committed membership does not name this node.
    strangers: BTreeSet<NodeId>,
    /// Members whose refusal a joining node has logged.
    warned: BTreeSet<NodeId>,
}
