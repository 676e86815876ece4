//! The role loop of a quorum node: while openraft has it as leader, it probes the quorum every
//! beat and claims for a lease after each acknowledged probe, goes quiet after 2F without
//! acknowledgements, and records every role change. The one place where the claim is taken,
//! renewed and given up (docs/safety.md, "Why two nodes never claim at once").

use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio_util::sync::CancellationToken;

use super::node::QuorumNode;
use super::quiet::Quiet;
use crate::clock::ms;
use crate::lease::Lease;
use crate::role::NodeId;

/// openraft's own heartbeat (which also pushes missing log entries to a lagging follower)
/// goes out with every this many probes.
const HEARTBEAT_EVERY: u64 = 4;

impl QuorumNode {
    /// The role loop: while openraft has this node as leader, probe the quorum every heartbeat
    /// and claim for a lease after each acknowledged probe; go quiet after 2F without acks;
    /// record every role change. Runs until `stop` is cancelled or openraft stops.
    ///
    /// The probes are the leader's heartbeats: one AppendEntries round every `heartbeat_ms`
    /// exactly, so a follower's silence is measured against a regular beat. openraft's own
    /// heartbeat (which also pushes missing entries to a follower that lags) is off and sent
    /// together with every [`HEARTBEAT_EVERY`]th probe instead.
    ///
    /// Kept whole (about 80 lines) on purpose: it is the one place where the claim is taken,
    /// renewed and given up, and the safety argument (docs/safety.md) reads it top to bottom.
    pub(super) async fn role_loop(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let t = self.timing;
        let hb = Duration::from_millis(t.heartbeat_ms);
        let lease_ns = ms(t.effective_lease_ms());
        let quiet_after_ns = 2 * ms(t.follower_lease_ms);
        let quiet_ns = quiet_after_ns + lease_ns;
        let mut metrics = self.raft.metrics();
        let mut quiet = Quiet::default();
        let mut probes = 0u64;
        let mut next_probe = tokio::time::Instant::now();
        loop {
            let (claim_left, probing) = {
                let now = self.clock.boot_ns();
                let m = metrics.borrow();
                let lease = self.lease.lock().expect("lease");
                let claim = claim_left(&lease, m.current_term, now);
                let probing = m.state == ServerState::Leader
                    && !lease.is_closed()
                    && !lease.is_fenced(m.current_term)
                    && quiet.may_probe(now);
                (claim, probing)
            };
            // A probing leader wakes for its next probe; anyone else (a follower, whose leader
            // expires with its lease; a quiet, resigned or stopping leader) every beat.
            let wake_at = if probing {
                next_probe
            } else {
                tokio::time::Instant::now() + hb
            };
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(()),
                r = metrics.changed() => if r.is_err() { return Err("openraft stopped".into()) },
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = tokio::time::sleep(claim_left.unwrap_or_default()), if claim_left.is_some() => {}
            }
            let m = metrics.borrow_and_update().clone();
            if let Err(fatal) = &m.running_state {
                return Err(format!("openraft stopped: {fatal}"));
            }
            let now = self.clock.boot_ns();
            let (closed, fenced) = {
                let l = self.lease.lock().expect("lease");
                (l.is_closed(), l.is_fenced(m.current_term))
            };
            if m.state == ServerState::Leader && !closed && !fenced {
                quiet.leading(m.current_term, now);
                if quiet.may_probe(now) && tokio::time::Instant::now() >= next_probe {
                    next_probe = tokio::time::Instant::now() + hb;
                    // Not with the first probe of a term: the new leader's replication is already
                    // on its way, and the followers answer the probe after it.
                    if probes % HEARTBEAT_EVERY == HEARTBEAT_EVERY - 1 {
                        let _ = self.raft.trigger().heartbeat().await;
                    }
                    probes += 1;
                    let t0 = self.clock.boot_ns();
                    if self
                        .probe_recording(m.current_term, lease_ns, &mut metrics)
                        .await
                    {
                        quiet.acked(t0);
                        let took = self.clock.boot_ns().saturating_sub(t0);
                        self.counters
                            .timings
                            .probe_round_trip
                            .observe(took as f64 / 1e9);
                    } else if quiet.failed(self.clock.boot_ns(), quiet_after_ns, quiet_ns) {
                        tracing::warn!(
                            quiet_ms = quiet_ns / 1_000_000,
                            "no quorum for two follower leases: probes and heartbeats paused"
                        );
                    }
                }
            } else {
                // Not leading, resigned (fenced) or stopping: no probes, no heartbeats. Should
                // this node be elected, it probes at once.
                quiet.not_leading();
                probes = 0;
                next_probe = tokio::time::Instant::now();
                if m.state != ServerState::Leader {
                    self.lease.lock().expect("lease").revoke(now);
                }
            }
            self.record_view();
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
        lease_ns: u64,
        metrics: &mut tokio::sync::watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
    ) -> bool {
        self.record_view();
        let probe = self.probe(term, lease_ns);
        if self.flaws.record_between_probes() {
            return probe.await;
        }
        tokio::pin!(probe);
        let mut raft_running = true;
        loop {
            let left = claim_left(
                &self.lease.lock().expect("lease"),
                term,
                self.clock.boot_ns(),
            );
            tokio::select! {
                biased;
                granted = &mut probe => return granted,
                r = metrics.changed(), if raft_running => raft_running = r.is_ok(),
                _ = tokio::time::sleep(left.unwrap_or_default()), if left.is_some() => {}
            }
            self.record_view();
        }
    }

    /// One probe of the quorum in `term`: a fresh AppendEntries round (`get_read_log_id`, which
    /// returns when a majority has acknowledged the round, without waiting for the blank
    /// entry to be committed and applied as `ensure_linearizable` does). `t0` is read before
    /// the round is built, so every acknowledgement was processed after it. On success the
    /// claim runs to `t0 + lease`; returns whether the quorum acknowledged.
    pub(super) async fn probe(&self, term: u64, lease_ns: u64) -> bool {
        let t0 = self.clock.read();
        let acked = matches!(
            tokio::time::timeout(self.election.probe_timeout(), self.raft.get_read_log_id()).await,
            Ok(Ok(_))
        );
        let still = self.raft_metrics();
        let granted = acked
            && still.state == ServerState::Leader
            && still.current_term == term
            && self.lease.lock().expect("lease").grant(term, t0, lease_ns);
        tracing::debug!(
            term,
            acked,
            granted,
            took_us = (self.clock.boot_ns() - t0.boot_ns) / 1000,
            "probe"
        );
        if granted {
            // The leader's own contact: it refuses pre-votes while its quorum answers, waits a
            // whole lease before campaigning should it step down, and then goes last.
            self.gate
                .heard(t0.boot_ns, Some((self.id, still.last_log_index)));
        }
        granted
    }
}

/// How long the claim in `term` still runs at `now` (`CLOCK_BOOTTIME`), if one does.
fn claim_left(lease: &Lease, term: u64, now: u64) -> Option<Duration> {
    lease
        .current(term, now)
        .map(|c| Duration::from_nanos(c.left_ns(now)))
}
