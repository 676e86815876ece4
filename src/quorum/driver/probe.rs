//! The probes of a leader: one AppendEntries round each, whose acknowledgement by a majority
//! lets the core claim (core/mod.rs, `probe_done`). The driver (driver/mod.rs) starts one when
//! the core's `tick` asks for it and turns the core again once it is done.

use std::time::Duration;

use openraft::{BasicNode, RaftMetrics};

use crate::quorum::core::{Answer, CoreTiming, Input, RaftView};
use crate::quorum::node::QuorumNode;
use crate::role::NodeId;

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

/// One probe of the quorum in `term`: a fresh AppendEntries round (`get_read_log_id`, which
/// returns when a majority has acknowledged the round, without waiting for the blank
/// entry to be committed and applied as `ensure_linearizable` does). `t0` is read before
/// the round is built, so every acknowledgement was processed after it; the core claims
/// to `t0 + lease` on an acknowledgement (core/mod.rs, `probe_done`). Returns whether it did.
pub(crate) async fn probe(node: &QuorumNode, term: u64) -> bool {
    let t0 = node.clock.read();
    let acked = matches!(
        tokio::time::timeout(node.election.probe_timeout(), node.raft.get_read_log_id()).await,
        Ok(Ok(_))
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
