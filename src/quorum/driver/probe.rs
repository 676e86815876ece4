//! The probes of a leader: one AppendEntries round each, whose acknowledgement by a majority
//! lets the core claim (core/mod.rs, `probe_done`). The driver (driver/mod.rs) starts one when
//! the core's `tick` asks for it and turns the core again once it is done.

use std::time::Duration;

use std::collections::BTreeSet;

use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::{BasicNode, RaftMetrics, ServerState};

use crate::quorum::core::{Answer, CoreTiming, Input, RaftView};
use crate::quorum::election::majority_of_each;
use crate::quorum::node::QuorumNode;
use crate::quorum::protocol::{Probe, PATH_APPEND};
use crate::quorum::types::{sets_of, voters_of, TypeConfig};
use crate::role::NodeId;
use crate::transport::TransportError;

/// [`probe`], keeping the event log in step while the round is out (up to a
/// third of a follower lease when no majority answers): should the claim end, or openraft
/// step this node down, meanwhile, the change is recorded at its instant, not when the round
/// gives up. (Recorded only between probes, the end of a claim reached `/v1/events` and
/// `/v1/watch` up to a probe timeout late, stamped right but after another node had begun
/// to claim: sim seed 720002798.)
///
/// The view as it stands (a new leader's "candidate": elected, not yet claiming) is
/// recorded first, before the probe reads its send instant: an event recorded while the
/// probe is out is then either no change or the end of an earlier claim, so the claim the
/// probe starts, stamped at its send instant, never comes before an event written ahead
/// of it (`t_mono_ns` never decreases with `seq`; events.rs, `record`). (Recorded only
/// once the probe was out, a restarted node's "candidate" was stamped after the claim that
/// followed it: chaos S2, seeds 2 and 8.)
pub(crate) async fn probe_recording(
    node: &QuorumNode,
    term: u64,
    metrics: &mut tokio::sync::watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
) -> bool {
    node.record_view();
    let probe = probe(node, term);
    if node.flaws.record_between_probes() {
        return probe.await;
    }
    tokio::pin!(probe);
    let mut raft_running = true;
    loop {
        let left = {
            let core = node.core.read();
            let now = node.clock.boot_ns();
            let claim = core.lease().current(term, now);
            claim.map(|c| c.left_ns(now))
        };
        tokio::select! {
            biased;
            granted = &mut probe => return granted,
            r = metrics.changed(), if raft_running => raft_running = r.is_ok(),
            _ = tokio::time::sleep(Duration::from_nanos(left.unwrap_or_default())), if left.is_some() => {}
        }
        node.record_view();
    }
}

/// One probe of the quorum in `term`: a fresh AppendEntries round ([`round`]), which is done
/// when a majority of every voter set has acknowledged it. `t0` is read before the round is
/// built, so every acknowledgement was processed after it; the core claims to `t0 + lease` on
/// an acknowledgement (core/mod.rs, `probe_done`). Returns whether it did.
pub(crate) async fn probe(node: &QuorumNode, term: u64) -> bool {
    let t0 = node.clock.read();
    let acked = matches!(
        tokio::time::timeout(node.election.probe_timeout(), round(node, term)).await,
        Ok(true)
    );
    let raft = RaftView::of(&node.raft_metrics());
    let answer = node
        .ask(Input::ProbeDone {
            term,
            t0,
            acked,
            raft,
        })
        .await;
    let took = node.clock.boot_ns().saturating_sub(t0.boot_ns);
    let Some(Answer::Probe {
        granted,
        went_quiet,
    }) = answer
    else {
        return false;
    };
    tracing::debug!(term, acked, granted, took_us = took / 1000, "probe");
    if granted {
        node.counters
            .timings
            .probe_round_trip
            .observe(took as f64 / 1e9);
    }
    if went_quiet {
        let quiet_ns = CoreTiming::from_config(&node.timing).quiet_ns;
        tracing::warn!(
            quiet_ms = quiet_ns / 1_000_000,
            "no quorum for two follower leases: probes and heartbeats paused"
        );
    }
    granted
}

/// The round of a probe, built as openraft builds its own read round (`get_read_log_id`,
/// docs/design/openraft.md: the leader's vote, each voter's matching log id as the previous
/// one, no entries) but sent by electd, marked as a probe ([`Probe`]), so that a node whose
/// incarnation is not confirmed refuses it rather than acknowledges it: openraft's own round
/// counted the answer of a wiped data dir, which has forgotten the vote its earlier
/// incarnation gave a later leader (docs/safety.md, step 10; model seed 3268846430960046888).
/// The commit it names is the leader's applied index (never past its commit). Any answer but
/// a higher vote counts, as in openraft's round; a higher vote ends the round unacknowledged
/// and sends openraft's heartbeat at once, whose answer steps openraft down, as its own round
/// would have. Done when every voter set of the membership (both halves of a joint one) has a
/// majority of acknowledgements, this node's own among them.
async fn round(node: &QuorumNode, term: u64) -> bool {
    let m = node.raft_metrics();
    let me = node.id;
    let leading = m.state == ServerState::Leader
        && m.current_term == term
        && m.vote.leader_id().voted_for() == Some(me)
        && m.vote.is_committed()
        // A node outside the voter sets (a non-voter, a leader removed) claims nothing,
        // whatever openraft's state says (docs/design/nonvoters.md, N1).
        && voters_of(&m).contains(&me);
    if !leading {
        return false;
    }
    let sets = sets_of(m.membership_config.membership());
    let learners = flawed_learners(node, &m);
    let mut acked = BTreeSet::from([me]);
    let (answers, mut out) = tokio::sync::mpsc::unbounded_channel();
    let others = voters_of(&m).into_iter().filter(|&to| to != me);
    for to in others.chain(learners.iter().copied()) {
        let matching = m.replication.as_ref().and_then(|r| r.get(&to));
        let append = AppendEntriesRequest::<TypeConfig> {
            vote: m.vote,
            prev_log_id: matching.copied().flatten(),
            entries: Vec::new(),
            leader_commit: m.last_applied,
        };
        send(node, to, append, answers.clone(), !learners.contains(&to));
    }
    drop(answers);
    while !acknowledged(&sets, &acked, &learners) {
        let Some((from, answer)) = out.recv().await else {
            return false;
        };
        match answer {
            Ok(Ok(AppendEntriesResponse::HigherVote(_))) => {
                let _ = node.raft.trigger().heartbeat().await;
                return false;
            }
            Ok(Ok(_)) => {
                acked.insert(from);
            }
            Ok(Err(_)) | Err(_) => {}
        }
    }
    true
}

/// The lab's `count-learner-ack` (never in the node): the members outside the voter sets,
/// whose acknowledgements the flawed round counts; none without the flaw.
fn flawed_learners(node: &QuorumNode, m: &RaftMetrics<NodeId, BasicNode>) -> BTreeSet<NodeId> {
    if !node.flaws.count_learner_acks() {
        return BTreeSet::new();
    }
    let voters = voters_of(m);
    let nodes = m.membership_config.nodes().map(|(id, _)| *id);
    nodes.filter(|id| !voters.contains(id)).collect()
}

/// Whether `acked` makes the round: a majority of each voter set; with the lab's flaw, the
/// `learners` that acknowledged count toward every set as if they were voters.
fn acknowledged(
    sets: &[Vec<NodeId>],
    acked: &BTreeSet<NodeId>,
    learners: &BTreeSet<NodeId>,
) -> bool {
    if learners.is_empty() {
        return majority_of_each(sets, acked);
    }
    let extra = learners.intersection(acked).count();
    let counted = |set: &Vec<NodeId>| set.iter().filter(|id| acked.contains(id)).count() + extra;
    !sets.is_empty() && sets.iter().all(|set| counted(set) > set.len() / 2)
}

/// An answer to a probe, from the node it names.
type ProbeAnswer = (
    NodeId,
    Result<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>, TransportError>,
);

/// Sends `append` to `to` as a probe (marked, with `probe`), its answer to `answers`: a task of its own that runs to
/// the answer after the round is done, as openraft's are, so that every follower's lease is
/// renewed by every probe, not only the first majority's (aborted with the round, the slowest
/// follower heard only openraft's heartbeat, every fourth beat, and lost the race for a
/// handover: CI on 36c67e7, lab/tests/preference.rs).
fn send(
    node: &QuorumNode,
    to: NodeId,
    append: AppendEntriesRequest<TypeConfig>,
    answers: tokio::sync::mpsc::UnboundedSender<ProbeAnswer>,
    probe: bool,
) {
    let transport = node.transport.clone();
    let timeout = node.election.probe_timeout();
    tokio::spawn(async move {
        // Unmarked only for the lab's flaw: a non-voter refuses a marked probe (unconfirmed).
        let probe = Probe {
            append: &append,
            probe,
        };
        let answer = transport
            .call(to, PATH_APPEND, "probe", &probe, timeout)
            .await;
        let _ = answers.send((to, answer));
    });
}
