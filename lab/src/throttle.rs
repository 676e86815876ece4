//! Timings on CPU-limited hosts (`electd-lab ctl bench throttled`, `scripts/bench-timing.sh`):
//! every node of the running cluster goes into a cgroup of its own whose CPU quota is a share
//! of one core (cgroup v2 `cpu.max`, or `cpu.cfs_quota_us` where the host mounts v1), beside a
//! busy neighbour in the same cgroup: the application of a CPU-limited pod, which spends the
//! quota the node needs too, so that the node is held back until the next period (100 ms, the
//! CFS default Kubernetes uses) whenever the quota runs out. Then, on the same nodes:
//!
//! - leader changes over an idle stretch, as the most any node saw (what
//!   `ElectdLeaderChurn` reads), and scaled to an hour;
//! - failover after SIGKILL of the leader, until every running node agrees on a new one
//!   ([`crate::bench::failover`]'s measure), p50 and p99; the restarted node rejoins its
//!   cgroup.
//!
//! The cgroups are made under the cgroup mount's root, named after this process and the
//! node, and removed at the end (their processes moved back to the root first); the
//! neighbours are killed by pid (and die with this process).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use electd_client::NodeId;

use crate::bench::{spawn_owned, summarize, Owned};
use crate::cluster::Cluster;

const WAIT: Duration = Duration::from_secs(30);
/// The quota's period, µs (the CFS default).
const PERIOD_US: u64 = 100_000;

/// A cgroup whose processes share `percent` of one core.
pub struct CpuQuota {
    dir: PathBuf,
    /// Where its processes go back to when it is removed.
    root_procs: PathBuf,
}

impl CpuQuota {
    /// Makes the cgroup `name` with a quota of `percent` of one core.
    pub fn new(name: &str, percent: u64) -> Result<CpuQuota, String> {
        let quota_us = PERIOD_US * percent / 100;
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        let (root, limit): (PathBuf, Vec<(&str, String)>) = if v2.exists() {
            let root = PathBuf::from("/sys/fs/cgroup");
            let control = root.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                std::fs::write(&control, "+cpu")
                    .map_err(|e| format!("{}: +cpu: {e}", control.display()))?;
            }
            (root, vec![("cpu.max", format!("{quota_us} {PERIOD_US}"))])
        } else {
            let root = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.join("cpu.cfs_quota_us").exists())
                .ok_or("no cgroup CPU controller (neither cgroup v2 nor v1's cpu)")?;
            (
                root,
                vec![
                    ("cpu.cfs_period_us", PERIOD_US.to_string()),
                    ("cpu.cfs_quota_us", quota_us.to_string()),
                ],
            )
        };
        let dir = root.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let quota = CpuQuota {
            dir,
            root_procs: root.join("cgroup.procs"),
        };
        for (file, value) in limit {
            let path = quota.dir.join(file);
            std::fs::write(&path, &value)
                .map_err(|e| format!("{}: {value}: {e}", path.display()))?;
        }
        Ok(quota)
    }

    /// Moves process `pid` into the cgroup.
    pub fn add(&self, pid: i32) -> Result<(), String> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).map_err(|e| format!("{}: {e}", procs.display()))
    }

    /// The CPU time the cgroup was held back, ms (v2 `throttled_usec`, v1 `throttled_time`).
    pub fn throttled_ms(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            let v: f64 = v.trim().parse().ok()?;
            match k {
                "throttled_usec" => Some(v / 1e3),
                "throttled_time" => Some(v / 1e6),
                _ => None,
            }
        })
    }
}

impl Drop for CpuQuota {
    /// Moves what is left back to the root, then removes the cgroup (a few tries: a process
    /// that just exited leaves it a moment later).
    fn drop(&mut self) {
        for _ in 0..50 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(&self.root_procs, pid);
            }
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("throttle: could not remove {}", self.dir.display());
    }
}

/// One node's cgroup and its busy neighbour.
struct Throttled {
    quota: CpuQuota,
    _neighbour: Owned,
}

/// The busy neighbour: `electd-lab spin` for `seconds` (bounded), in `quota`.
fn neighbour(quota: &CpuQuota, seconds: u64, log: &Path) -> Result<Owned, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(me);
    cmd.args(["spin", "--seconds", &seconds.to_string()]);
    let spinner = spawn_owned(cmd, log)?;
    quota.add(spinner.0.id() as i32)?;
    Ok(spinner)
}

/// The most leader changes any running node has counted, by node.
async fn leader_changes(c: &Cluster) -> BTreeMap<NodeId, u64> {
    let mut out = BTreeMap::new();
    for id in c.ids() {
        if let Ok(client) = c.client(id) {
            if let Ok(s) = client.status().await {
                out.insert(id, s.counters.leader_changes);
            }
        }
    }
    out
}

/// `bench throttled`: see the module's doc.
pub async fn throttled(
    c: &Cluster,
    percent: u64,
    idle_seconds: u64,
    trials: usize,
) -> Result<(), String> {
    if !(1..=100).contains(&percent) {
        return Err(format!("--cpu-percent {percent}: must be 1 to 100"));
    }
    let first = c
        .wait_agreed(WAIT)
        .await
        .ok_or("no agreed leader before the benchmark")?;
    let timings = c
        .client(first)
        .map_err(|e| e.to_string())?
        .status()
        .await
        .map_err(|e| e.to_string())?
        .timings;
    println!(
        "throttled: every node in a cgroup of {percent}% of one core with a busy neighbour; \
         timing {} / {} / {} ms (beat, follower lease, claim)",
        timings.heartbeat_ms, timings.follower_lease_ms, timings.lease_ms
    );
    let log = c.run.join("throttle-neighbours.log");
    // Long enough for the whole benchmark, then the neighbours end by themselves.
    let spin_s = idle_seconds + trials as u64 * 2 * WAIT.as_secs() + 60;
    let mut nodes = BTreeMap::new();
    for id in c.ids() {
        let pid = c.pid(id).ok_or(format!("node {id} is not running"))?;
        let quota = CpuQuota::new(
            &format!("electd-lab-{}-node{id}", std::process::id()),
            percent,
        )?;
        quota.add(pid)?;
        let spinner = neighbour(&quota, spin_s, &log)?;
        nodes.insert(
            id,
            Throttled {
                quota,
                _neighbour: spinner,
            },
        );
    }

    let before = leader_changes(c).await;
    let started = Instant::now();
    // The measured stretch itself (no synchronisation waits on it).
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let idle_s = started.elapsed().as_secs_f64();
    let after = leader_changes(c).await;
    let changes = after
        .iter()
        .filter_map(|(id, n)| Some(n.saturating_sub(*before.get(id)?)))
        .max()
        .ok_or("no node answered its status")?;
    let throttled_ms: f64 = nodes.values().filter_map(|t| t.quota.throttled_ms()).sum();
    println!(
        "throttled: idle {idle_s:.0} s: {changes} leader changes (the most a node saw), \
         {:.0} an hour; the cgroups were held back {:.0} ms in all",
        changes as f64 * 3600.0 / idle_s,
        throttled_ms
    );

    let failovers =
        crate::bench::failover_then(c, trials, |node, pid| nodes[&node].quota.add(pid)).await?;
    if trials > 0 {
        summarize(
            &format!("throttled {percent}%: failover after SIGKILL of the leader"),
            failovers,
        );
    }
    Ok(())
}

/// `electd-lab spin --seconds N`: keeps one core busy for N seconds (the busy neighbour).
#[derive(clap::Args, Debug)]
pub struct SpinArgs {
    #[arg(long)]
    seconds: u64,
}

pub fn spin_main(args: SpinArgs) -> std::process::ExitCode {
    let end = Instant::now() + Duration::from_secs(args.seconds);
    let mut n: u64 = 0;
    while Instant::now() < end {
        for _ in 0..10_000 {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    std::process::ExitCode::SUCCESS
}
