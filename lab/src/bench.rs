//! Benchmarks on a running local cluster (`electd-lab ctl bench ...`), measured on the shared
//! monotonic clock and the nodes' own event logs.
//!
//! - `failover`: SIGKILL the agreed leader, time until every running node agrees on a new
//!   leader, restart the old one, repeat.
//! - `failover --graceful` ([`handoff`]): SIGTERM the leader; time when it stopped claiming (its
//!   event log), when the others agreed on a new leader, and when it exited.
//! - `isolate`: cut the leader off from everyone, read from the event logs when it stopped
//!   claiming and when the majority's new leader started, heal, repeat.

use std::time::Duration;

use crate::cluster::{Cluster, Observed};
use electd::clock::mono_ns;
use electd_client::{NodeId, Role};

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

/// A helper process a benchmark started (a supervisor, a bare server): killed and reaped when
/// asked or dropped.
pub struct Owned(pub std::process::Child);

impl Owned {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `cmd` with its output appended to `log` and SIGKILL when this thread dies (a killed
/// benchmark leaves nothing running).
pub fn spawn_owned(mut cmd: std::process::Command, log: &std::path::Path) -> Result<Owned, String> {
    use rustix::process::Signal;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: runs in the child between fork and exec: one plain system call (rustix).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
    cmd.spawn()
        .map(Owned)
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))
}

async fn leader_before_trial(c: &Cluster) -> Result<NodeId, String> {
    c.wait_agreed(WAIT)
        .await
        .ok_or_else(|| "no agreed leader before the trial".to_string())
}

/// Failover after killing the leader, `trials` times.
pub async fn failover(c: &Cluster, trials: usize) -> Result<Vec<f64>, String> {
    failover_then(c, trials, |_, _| Ok(())).await
}

/// [`failover`], calling `started(node, pid)` on each killed node as soon as it runs again
/// (the throttled benchmark puts it back in its cgroup).
pub async fn failover_then(
    c: &Cluster,
    trials: usize,
    started: impl Fn(NodeId, i32) -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for i in 0..trials {
        let leader = leader_before_trial(c).await?;
        let t0 = mono_ns();
        c.kill(leader);
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
        let pid = c.start(leader, c.mode()).map_err(|e| e.to_string())?;
        started(leader, pid)?;
        rejoin(c, leader, i).await?;
    }
    Ok(out)
}

/// Starts `id` again and waits until it follows a leader.
async fn restart_and_rejoin(c: &Cluster, id: NodeId, trial: usize) -> Result<(), String> {
    c.start(id, c.mode()).map_err(|e| e.to_string())?;
    rejoin(c, id, trial).await
}

/// Waits until the restarted `id` follows a leader.
async fn rejoin(c: &Cluster, id: NodeId, trial: usize) -> Result<(), String> {
    let rejoined = c
        .wait_for(
            WAIT,
            |s| matches!(s.get(&id), Some(Observed::Up(i)) if i.leader.is_some()),
        )
        .await;
    if rejoined {
        Ok(())
    } else {
        Err(format!("trial {trial}: node {id} did not rejoin"))
    }
}

/// The figures of graceful handoffs, in ms after SIGTERM, one entry a trial.
#[derive(Debug, Default)]
pub struct Handoff {
    /// The old leader's first event that is not leader (from its event log); `None` if it
    /// recorded none before exiting.
    pub stopped_claiming: Vec<Option<f64>>,
    /// Every other node agreed on a new leader.
    pub handoff: Vec<f64>,
    /// The old leader's process was gone.
    pub exited: Vec<f64>,
}

/// How long a node may take to exit after SIGTERM (docs/security.md, "Hardening").
pub const EXIT_LIMIT: Duration = Duration::from_secs(2);

/// SIGTERM to the leader, `trials` times: see [`Handoff`]. A trial fails when the node takes
/// longer than [`EXIT_LIMIT`] to exit (it is then killed) or no new leader is agreed.
pub async fn handoff(c: &Cluster, trials: usize) -> Result<Handoff, String> {
    let mut out = Handoff::default();
    for i in 0..trials {
        let leader = leader_before_trial(c).await?;
        let t0 = mono_ns();
        if !c.signal(leader, rustix::process::Signal::TERM) {
            return Err(format!("trial {i}: leader {leader} is not running"));
        }
        let since = |t: u64| (t.saturating_sub(t0)) as f64 / 1e6;
        let exit = async {
            while mono_ns() - t0 < 5 * EXIT_LIMIT.as_nanos() as u64 {
                if c.pid(leader).is_none() {
                    return Some(since(mono_ns()));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            None
        };
        let others = async {
            let ok = c
                .wait_for(WAIT, |s| {
                    let mut rest = s.clone();
                    rest.remove(&leader);
                    crate::cluster::agreed(&rest).is_some_and(|l| l != leader)
                })
                .await;
            (ok, since(mono_ns()))
        };
        let (exited, (agreed, handed)) = tokio::join!(exit, others);
        let Some(exited) = exited else {
            c.kill(leader);
            return Err(format!(
                "trial {i}: leader {leader} did not exit after SIGTERM"
            ));
        };
        c.wait_exit(leader, Duration::from_secs(1));
        if !agreed {
            return Err(format!("trial {i}: no new leader within {WAIT:?}"));
        }
        let stopped = c
            .events(c.mode())
            .iter()
            .filter(|e| e.node_id == leader && e.t_mono_ns >= t0 && e.view.role != Role::Leader)
            .map(|e| since(e.t_mono_ns))
            .reduce(f64::min);
        println!(
            "trial {:>3}: leader {leader} stopped claiming after {}, exited after {exited:.0} ms; \
             the others agreed on a new leader after {handed:.0} ms",
            i + 1,
            stopped.map_or("(no event)".to_string(), |s| format!("{s:.0} ms")),
        );
        if exited > EXIT_LIMIT.as_secs_f64() * 1e3 {
            return Err(format!(
                "trial {i}: leader {leader} took {exited:.0} ms to exit, above {EXIT_LIMIT:?}"
            ));
        }
        out.stopped_claiming.push(stopped);
        out.handoff.push(handed);
        out.exited.push(exited);
        restart_and_rejoin(c, leader, i).await?;
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
            .filter(|e| e.node_id == leader && e.t_mono_ns >= cut && e.view.role != Role::Leader)
            .map(|e| e.t_mono_ns)
            .min();
        let new = evs
            .iter()
            .filter(|e| {
                rest.contains(&e.node_id) && e.t_mono_ns >= cut && e.view.role == Role::Leader
            })
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

/// What a load run saw.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub load: Hammered,
    /// The agreed leader and its term before and after.
    pub before: (NodeId, u64),
    pub after: (NodeId, u64),
    /// Role, term or leader changes on any node during the run, from the event logs: with no
    /// fault injected, every one of them is spurious.
    pub changes: Vec<electd_client::Event>,
}

/// `GET /v1/leader` at full rate from `connections` concurrent clients, spread over every
/// node, for `seconds`; then counts the role changes the nodes logged meanwhile. With no
/// connections it watches an idle cluster for `seconds`.
pub async fn load(c: &Cluster, seconds: u64, connections: usize) -> Result<LoadReport, String> {
    let leader = c
        .wait_agreed(WAIT)
        .await
        .ok_or("no agreed leader before the run")?;
    let term_of = |s: &std::collections::BTreeMap<NodeId, Observed>, id: NodeId| {
        s.get(&id).and_then(Observed::term).unwrap_or(0)
    };
    let before = (leader, term_of(&c.states().await, leader));
    let urls: Vec<String> = c
        .ids()
        .into_iter()
        .map(|id| c.member(id).map(|m| format!("http://{}/v1/leader", m.addr)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let t0 = mono_ns();
    let h = hammer(&urls, seconds, connections).await?;
    let t1 = mono_ns();
    let mut out = LoadReport {
        load: h,
        ..LoadReport::default()
    };
    let after_leader = c
        .wait_agreed(WAIT)
        .await
        .ok_or("no agreed leader after the run")?;
    out.after = (after_leader, term_of(&c.states().await, after_leader));
    out.before = before;
    out.changes = c
        .events(c.mode())
        .into_iter()
        .filter(|e| e.t_mono_ns >= t0 && e.t_mono_ns <= t1)
        .collect();
    Ok(out)
}

/// What [`hammer`] saw.
#[derive(Debug, Default)]
pub struct Hammered {
    pub seconds: f64,
    pub requests: u64,
    pub errors: u64,
    /// Latency of the answered requests, ms, sorted.
    pub latency_ms: Vec<f64>,
}

/// `GET` at full rate from `connections` concurrent keep-alive clients, spread over `urls`,
/// for `seconds` (with no connections: the window passes idle). The one load generator of
/// `bench load` and of the cost benchmark's serving side.
pub async fn hammer(urls: &[String], seconds: u64, connections: usize) -> Result<Hammered, String> {
    let client = electd_client::http_client()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let t0 = mono_ns();
    let until = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..connections {
        let (client, url) = (client.clone(), urls[w % urls.len()].clone());
        workers.spawn(async move {
            let (mut ok, mut err, mut lat) = (0u64, 0u64, Vec::new());
            while tokio::time::Instant::now() < until {
                let start = mono_ns();
                let res = client.get(&url).send().await;
                let answered = match res {
                    Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                    _ => false,
                };
                if answered {
                    ok += 1;
                    lat.push((mono_ns() - start) as f64 / 1e6);
                } else {
                    err += 1;
                }
            }
            (ok, err, lat)
        });
    }
    if connections == 0 {
        tokio::time::sleep_until(until).await;
    }
    let mut out = Hammered::default();
    while let Some(r) = workers.join_next().await {
        let (ok, err, lat) = r.map_err(|e| e.to_string())?;
        out.requests += ok;
        out.errors += err;
        out.latency_ms.extend(lat);
    }
    out.seconds = (mono_ns() - t0) as f64 / 1e9;
    out.latency_ms.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
}
