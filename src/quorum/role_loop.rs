//! The role loop of a quorum node: it ticks the core (core/mod.rs, `tick`) every beat, and
//! sooner when a claim ends or openraft changes, and carries out the probes the core asks for,
//! keeping the event log in step while a probe is out. The core decides when to probe, claim,
//! go quiet and give the claim up (docs/safety.md, "Why two nodes never claim at once").

use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, RaftMetrics};
use tokio_util::sync::CancellationToken;

use super::core::{Action, Answer, Input, RaftView};
use super::node::QuorumNode;
use crate::role::NodeId;

impl QuorumNode {
    /// The role loop: carries out the core's turns (core/mod.rs, `tick`) while openraft has this
    /// node as leader, probing the quorum every beat (the core claims after each acknowledged
    /// probe and goes quiet after 2F without); records every role change. Runs until `stop`
    /// is cancelled or openraft stops.
    ///
    /// The probes are the leader's heartbeats: one AppendEntries round every `heartbeat_ms`
    /// exactly, so a follower's silence is measured against a regular beat. openraft's own
    /// heartbeat (which also pushes missing entries to a follower that lags) is off and sent
    /// together with every `HEARTBEAT_EVERY`th probe instead (core/mod.rs).
    pub(super) async fn role_loop(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let mut metrics = self.raft.metrics();
        loop {
            // The next turn: a probing leader's next probe, a beat for anyone else (a follower,
            // whose leader expires with its lease; a quiet, resigned or stopping leader), and
            // the end of a running claim, whichever comes first.
            let raft = RaftView::of(&metrics.borrow());
            let wake_in = self.with_core(|core, now| {
                let next = core.next_tick_ns(now.boot_ns, &raft);
                Duration::from_nanos(next.saturating_sub(now.boot_ns))
            });
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(()),
                r = metrics.changed() => if r.is_err() { return Err("openraft stopped".into()) },
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wake_in) => {}
            }
            let m = metrics.borrow_and_update().clone();
            if let Err(fatal) = &m.running_state {
                return Err(format!("openraft stopped: {fatal}"));
            }
            let actions = self.with_core(|core, now| core.tick(now, &RaftView::of(&m)));
            for a in actions {
                match a {
                    Action::Probe { term, heartbeat } => {
                        if heartbeat {
                            let _ = self.raft.trigger().heartbeat().await;
                        }
                        self.probe_recording(term, &mut metrics).await;
                    }
                    other => {
                        self.carry_out(vec![other]);
                    }
                }
            }
        }
    }

    /// [`QuorumNode::probe`], keeping the event log in step while the round is out (up to a
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
    pub(super) async fn probe_recording(
        &self,
        term: u64,
        metrics: &mut tokio::sync::watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
    ) -> bool {
        self.record_view();
        let probe = self.probe(term);
        if self.flaws.record_between_probes() {
            return probe.await;
        }
        tokio::pin!(probe);
        let mut raft_running = true;
        loop {
            let left = self.with_core(|core, now| {
                let claim = core.lease().current(term, now.boot_ns);
                claim.map(|c| c.left_ns(now.boot_ns))
            });
            tokio::select! {
                biased;
                granted = &mut probe => return granted,
                r = metrics.changed(), if raft_running => raft_running = r.is_ok(),
                _ = tokio::time::sleep(Duration::from_nanos(left.unwrap_or_default())), if left.is_some() => {}
            }
            self.record_view();
        }
    }

    /// One probe of the quorum in `term`: a fresh AppendEntries round (`get_read_log_id`, which
    /// returns when a majority has acknowledged the round, without waiting for the blank
    /// entry to be committed and applied as `ensure_linearizable` does). `t0` is read before
    /// the round is built, so every acknowledgement was processed after it; the core claims
    /// to `t0 + lease` on an acknowledgement (core/mod.rs, `probe_done`). Returns whether it did.
    pub(super) async fn probe(&self, term: u64) -> bool {
        let t0 = self.clock.read();
        let acked = matches!(
            tokio::time::timeout(self.election.probe_timeout(), self.raft.get_read_log_id()).await,
            Ok(Ok(_))
        );
        let raft = RaftView::of(&self.raft_metrics());
        let answer = self.step(Input::ProbeDone {
            term,
            t0,
            acked,
            raft,
        });
        let took = self.clock.boot_ns().saturating_sub(t0.boot_ns);
        let Some(Answer::Probe {
            granted,
            went_quiet,
        }) = answer
        else {
            return false;
        };
        tracing::debug!(term, acked, granted, took_us = took / 1000, "probe");
        if granted {
            self.counters
                .timings
                .probe_round_trip
                .observe(took as f64 / 1e9);
        }
        if went_quiet {
            let quiet_ns = self.with_core(|core, _| core.timing().quiet_ns);
            tracing::warn!(
                quiet_ms = quiet_ns / 1_000_000,
                "no quorum for two follower leases: probes and heartbeats paused"
            );
        }
        granted
    }
}
