//! Benchmarks on a running local cluster (`electd ctl bench ...`), measured on the shared
//! monotonic clock and the nodes' own event logs.
//!
//! - `failover`: SIGKILL (or SIGTERM) the agreed leader, time until every running node agrees
//!   on a new leader, restart the old one, repeat.
//! - `isolate`: cut the leader off from everyone, read from the event logs when it stopped
//!   claiming and when the majority's new leader started, heal, repeat.

use std::time::Duration;

use crate::clock::mono_ns;
use crate::cluster::Cluster;
use crate::role::{NodeId, Role};

/// Percentile (nearest rank) of a sample, in ms.
pub fn percentile(sorted_ms: &[f64], p: f64) -> f64 {
    if sorted_ms.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted_ms.len() as f64).ceil().max(1.0) as usize;
    sorted_ms[rank.min(sorted_ms.len()) - 1]
}

/// Prints `label: n, p50, p90, p99, max` and returns the sorted sample.
pub fn summarize(label: &str, mut ms: Vec<f64>) -> Vec<f64> {
    ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{label}: n={} p50={:.0} ms p90={:.0} ms p99={:.0} ms max={:.0} ms",
        ms.len(),
        percentile(&ms, 50.0),
        percentile(&ms, 90.0),
        percentile(&ms, 99.0),
        ms.last().copied().unwrap_or(f64::NAN)
    );
    ms
}

const WAIT: Duration = Duration::from_secs(30);

/// Failover after killing (or stopping, with `graceful`) the leader, `trials` times.
pub async fn failover(c: &Cluster, trials: usize, graceful: bool) -> Result<Vec<f64>, String> {
    let mode = c.mode();
    let mut out = Vec::new();
    for i in 0..trials {
        let leader = c
            .wait_agreed(WAIT)
            .await
            .ok_or("no agreed leader before the trial")?;
        let t0 = mono_ns();
        if graceful {
            c.stop(leader, Duration::from_secs(5));
        } else {
            c.kill(leader);
        }
        let next = c
            .wait_agreed(WAIT)
            .await
            .ok_or(format!("trial {i}: no new leader within {WAIT:?}"))?;
        let dt = (mono_ns() - t0) as f64 / 1e6;
        println!(
            "trial {:>3}: leader {leader} -> {next} in {dt:.0} ms",
            i + 1
        );
        out.push(dt);
        c.start(leader, mode).map_err(|e| e.to_string())?;
        // Let the restarted node rejoin before the next trial.
        let rejoined = c
            .wait_for(WAIT, |s| {
                matches!(s.get(&leader), Some(crate::cluster::NodeState::Up(i)) if i.leader.is_some())
            })
            .await;
        if !rejoined {
            return Err(format!("trial {i}: node {leader} did not rejoin"));
        }
    }
    Ok(out)
}

/// Isolates the leader `trials` times; returns (stop-claiming ms, majority-elected ms).
pub async fn isolate(c: &Cluster, trials: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (mut stops, mut elects) = (Vec::new(), Vec::new());
    for i in 0..trials {
        let leader = c.wait_agreed(WAIT).await.ok_or("no agreed leader")?;
        let rest: Vec<NodeId> = c.ids().into_iter().filter(|x| *x != leader).collect();
        let cut = mono_ns();
        c.partition(&[vec![leader], rest.clone()])
            .await
            .map_err(|e| e.to_string())?;
        let elected = c
            .wait_for(WAIT, |s| {
                crate::cluster::claimants(s)
                    .iter()
                    .any(|x| rest.contains(x))
            })
            .await;
        if !elected {
            return Err(format!("trial {i}: the majority did not elect"));
        }
        let evs = c.events(c.mode());
        let stop = evs
            .iter()
            .filter(|e| e.node_id == leader && e.t_mono_ns >= cut && e.role != Role::Leader)
            .map(|e| e.t_mono_ns)
            .min();
        let new = evs
            .iter()
            .filter(|e| rest.contains(&e.node_id) && e.t_mono_ns >= cut && e.role == Role::Leader)
            .map(|e| e.t_mono_ns)
            .min();
        let (Some(stop), Some(new)) = (stop, new) else {
            return Err(format!("trial {i}: events missing"));
        };
        let (s, n) = ((stop - cut) as f64 / 1e6, (new - cut) as f64 / 1e6);
        println!(
            "trial {:>3}: leader {leader} stopped claiming after {s:.0} ms; majority's leader claimed after {n:.0} ms (gap {:.0} ms)",
            i + 1,
            n - s
        );
        stops.push(s);
        elects.push(n);
        c.heal().await.map_err(|e| e.to_string())?;
        c.wait_agreed(WAIT).await.ok_or("no leader after heal")?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok((stops, elects))
}
