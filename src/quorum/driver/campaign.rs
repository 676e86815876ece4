//! A campaign turn of the driver (driver/mod.rs): *when* a node campaigns (the rules are
//! `election/mod.rs`). It waits for the follower lease to end and its slot in the order of
//! candidates to come, asks a pre-vote round, re-checks the lease under the gate's write side
//! and enqueues openraft's election, then watches the outcome.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio_util::sync::CancellationToken;

use crate::quorum::core::{Answer, Input, RaftView};
use crate::quorum::election::{majority_of_each, prevote_retry_after_us};
use crate::quorum::node::QuorumNode;
use crate::quorum::protocol::{PreVoteRequest, PreVoteResponse, PATH_PREVOTE};
use crate::role::NodeId;

/// One turn of the campaign (election/mod.rs): a node campaigns when the follower lease has run
/// out, a pre-vote round succeeded and its stagger slot has come, then watches the outcome.
/// A turn ends when there is something new to judge: openraft changed while this node may not
/// campaign (a leader, a learner, a node removed), its slot was not yet due (it slept until
/// then, or until a contact), a pre-vote round ended, or an election did. The driver starts the
/// next one; none while the node stops or after its claim closed.
pub(super) async fn turn(node: Arc<QuorumNode>, stop: CancellationToken) {
    let node = &*node;
    let mut metrics = node.raft.metrics();
    // openraft ended (its metrics closed): the driver ends on that, a branch after this turn's
    // in its `select!`; a turn that ended at once here would be polled first, again and again.
    if metrics.has_changed().is_err() {
        stop.cancelled().await;
        return;
    }
    let m = metrics.borrow_and_update().clone();
    // A leader, a stopped openraft, a learner (joining) or a node removed from the
    // cluster never campaigns: it waits for openraft to change.
    let voters = node.members.voters();
    if m.state == ServerState::Leader || m.running_state.is_err() || !voters.contains(&node.id) {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = metrics.changed() => {}
        }
        return;
    }
    let (due, contact) = node.core.read().campaign_due(&RaftView::of(&m), &voters);
    let now = node.clock.boot_ns();
    if now < due {
        sleep_to_slot(node, due, &mut metrics, &stop).await;
        return;
    }
    match pre_vote(node, m.current_term + 1).await {
        Ok(()) => {}
        // Lost only to leases that end within a stagger step (the others heard the
        // last heartbeat a little later): ask again right then.
        Err(Some(wait)) => {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(wait + Duration::from_micros(200)) => {}
            }
            return;
        }
        Err(None) => return,
    }
    let Some(term) = elect_if_still_due(node, contact.seq).await else {
        return;
    };
    node.counters.election_started();
    let won = await_outcome(node, term, contact.seq, &stop).await;
    node.ask(Input::ElectionOver { won }).await;
}

/// Sleeps until the campaign slot `due` (BOOTTIME), or a contact, or a change of openraft's
/// state, whichever comes first; a node woken more than a beat late gives the leader one
/// more beat (election/mod.rs, `woke_late`). `false` when the node stops or openraft did.
async fn sleep_to_slot(
    node: &QuorumNode,
    due: u64,
    metrics: &mut tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, openraft::BasicNode>>,
    stop: &CancellationToken,
) -> bool {
    let now = node.clock.boot_ns();
    let slept = tokio::select! {
        _ = stop.cancelled() => return false,
        _ = tokio::time::sleep(Duration::from_nanos(due.saturating_sub(now))) => true,
        _ = node.gate.changed() => false,
        r = metrics.changed() => if r.is_err() { return false } else { false },
    };
    let woke = node.clock.boot_ns();
    if slept && node.election.woke_late(due, woke) {
        tracing::debug!(
            late_us = (woke - due) / 1000,
            "woke late for the campaign slot: one more beat for the leader"
        );
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(Duration::from_nanos(node.election.heartbeat_ns)) => {}
            _ = node.gate.changed() => {}
        }
    }
    true
}

/// Asks every other member whether it would vote for this node in `term`. `Ok` when a
/// majority (this node included) says yes within the pre-vote deadline; otherwise
/// `Err(Some(wait))` when the round was lost only to leases that end within `wait`, and
/// `Err(None)` when it was lost for good (a live leader, a longer log, no answer).
async fn pre_vote(node: &QuorumNode, term: u64) -> Result<(), Option<Duration>> {
    let res = pre_vote_round(node, term).await;
    node.ask(Input::RoundEnded {
        failed: res == Err(None),
    })
    .await;
    res
}

/// [`pre_vote`]'s round; its pledge to itself is released by the caller.
async fn pre_vote_round(node: &QuorumNode, term: u64) -> Result<(), Option<Duration>> {
    use futures_util::StreamExt;
    let req = PreVoteRequest {
        term,
        last_log_id: node.store.last_log_id(),
    };
    let sets = node.members.voter_sets();
    let timing = node.election;
    let deadline = Duration::from_nanos(timing.prevote_timeout_ns);
    // This node's own round counts as its pledge: it refuses other candidates meanwhile
    // (core/mod.rs); not while it is pledged to another.
    if node.ask(Input::RoundStarting).await != Some(Answer::Round(true)) {
        return Err(None);
    }
    let mut asks: futures_util::stream::FuturesUnordered<_> = node
        .members
        .other_voters()
        .into_iter()
        .map(|to| async move {
            let r: Result<PreVoteResponse, _> = node
                .transport
                .call(to, PATH_PREVOTE, "prevote", &req, deadline)
                .await;
            (to, r.ok())
        })
        .collect();
    let mut granted = BTreeSet::from([node.id]);
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
async fn elect_if_still_due(node: &QuorumNode, seen_seq: u64) -> Option<u64> {
    let _exclusive = node.gate.exclusive().await;
    let raft = RaftView::of(&node.raft_metrics());
    let asked = node.ask(Input::MayElect {
        seq: seen_seq,
        raft,
    });
    let Some(Answer::Elect(Some(term))) = asked.await else {
        return None;
    };
    tracing::info!(term, "follower lease over and pre-vote won: campaigning");
    node.raft.trigger().elect().await.ok()?;
    Some(term)
}

/// Waits until this node leads `term`, hears from a leader, or the election deadline
/// passes; true when it leads.
async fn await_outcome(node: &QuorumNode, term: u64, seq: u64, stop: &CancellationToken) -> bool {
    let mut metrics = node.raft.metrics();
    let limit = Duration::from_nanos(node.election.outcome_ns);
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
        if node.core.read().contact().seq != seq {
            return false;
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep_until(deadline) => return false,
            _ = node.gate.changed() => {}
            r = metrics.changed() => if r.is_err() { return false },
        }
    }
}
