//! Failover where the application runs (`scripts/bench-vs-etcd.sh`, `electd-lab ctl bench
//! app-failover`): five instances of a stand-in application ([`crate::stamp`]), one per host,
//! each under its host's coordinator-election tool, against the same under etcd.
//!
//! - electd: each host runs a node of the cluster and `electd run --node NODE -- electd-lab
//!   stamp FILE` beside it, so that the stamp runs only on the host whose node claims.
//! - etcd: each host runs a member of a 5-member etcd and `etcdctl --endpoints MEMBER lock
//!   --ttl 1 NAME electd-lab stamp FILE`, so that the stamp runs only on the host holding the
//!   lock (the usual way to run one coordinator with etcd).
//!
//! A trial (the same code for both): wait until one host's stamp runs and a random 300–600 ms
//! more (seeded); crash that host: SIGKILL to its node (member), its supervisor (`electd run`,
//! `etcdctl`) and the stamp itself, at one instant; then read every other host's stamp file
//! every millisecond until one has a stamp after the crash. The time from the crash to that
//! first stamp is the application's failover. For electd also the time from the new leader's
//! claim (its event log's "leader" event) to the application's exec (`electd run` logs the
//! instant `spawn` returned): what `electd run` adds to the node's failover; and from the
//! exec to the first stamp: the application's own start-up, reported apart. The crashed host
//! is started again before the next trial.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use electd::clock::mono_ns;
use electd_client::{Mode, NodeId, Role};
use rustix::process::{Pid, Signal};

use crate::bench::{spawn_owned, Owned};
use crate::cluster::Cluster;
use crate::versus::{
    electd_ready, require_down, start_quorum, until_agreed, Etcd, Profile, Target,
};

/// Bound of every wait of a trial.
const WAIT: Duration = Duration::from_secs(30);
/// How often the stamp files are read.
const READ_EVERY: Duration = Duration::from_millis(1);
/// The lock's name and session TTL under etcd (the shortest `etcdctl lock` takes, seconds).
const LOCK: &str = "electd-bench-coordinator";
const LOCK_TTL_S: u64 = 1;

/// One stamp line: `<mono ns> <term> <pid>`.
fn parse(line: &str) -> Option<(u64, u32)> {
    let mut it = line.split_whitespace();
    let t = it.next()?.parse().ok()?;
    let pid = it.last()?.parse().ok()?;
    Some((t, pid))
}

/// A host's stamp file, read from where the last read ended.
struct StampFile {
    path: PathBuf,
    at: u64,
    partial: String,
}

impl StampFile {
    fn new(path: PathBuf) -> StampFile {
        let _ = std::fs::write(&path, b"");
        StampFile {
            path,
            at: 0,
            partial: String::new(),
        }
    }

    /// The complete lines written since the last read.
    fn new_lines(&mut self) -> Vec<(u64, u32)> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut text = String::new();
        if f.seek(SeekFrom::Start(self.at)).is_err() || f.read_to_string(&mut text).is_err() {
            return Vec::new();
        }
        self.at += text.len() as u64;
        self.partial.push_str(&text);
        let Some(end) = self.partial.rfind('\n') else {
            return Vec::new();
        };
        let done: String = self.partial.drain(..=end).collect();
        done.lines().filter_map(parse).collect()
    }
}

/// Five hosts, each with its election tool, a supervisor and a stamp.
trait Hosts {
    fn name(&self) -> &'static str;
    /// Crashes host `h` at once: its node or member, its supervisor and its stamp (`pid`).
    fn crash(&mut self, h: NodeId, stamp_pid: u32);
    /// Starts host `h` again (node or member, then supervisor).
    fn restart(&mut self, h: NodeId) -> Result<(), String>;
    /// Waits until every host runs and the cluster has a leader again.
    async fn ready(&self) -> Result<(), String>;
    /// The instant (mono ns) the new coordinator's claim began, if the tool says.
    fn claim_since(&self, _after_ns: u64) -> Option<u64> {
        None
    }
    /// The instant (mono ns) host `h`'s supervisor exec'd the application, if it says.
    fn exec_since(&self, _h: NodeId, _after_ns: u64) -> Option<u64> {
        None
    }
}

fn kill_pid(pid: u32) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// Starts the stand-in application under `tool` (an election tool's supervisor command):
/// `tool … electd-lab stamp STAMPS`, its output in `log`.
fn supervise_stamp(mut tool: Command, stamps: PathBuf, log: &Path) -> Result<Owned, String> {
    tool.arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("stamp")
        .arg(stamps);
    spawn_owned(tool, log)
}

/// The electd hosts: the cluster's nodes with `electd run` beside each.
struct ElectdHosts<'a> {
    c: &'a Cluster,
    work: PathBuf,
    supervisors: BTreeMap<NodeId, Owned>,
}

impl ElectdHosts<'_> {
    fn start_supervisor(&mut self, h: NodeId) -> Result<(), String> {
        let addr = self.c.member(h).map_err(|e| e.to_string())?.addr.clone();
        let mut cmd = Command::new(&self.c.bin);
        cmd.args(["run", "--node", &addr, "--"]);
        let sup = supervise_stamp(
            cmd,
            self.work.join(format!("electd-{h}.stamps")),
            &self.work.join(format!("electd-run-{h}.log")),
        )?;
        self.supervisors.insert(h, sup);
        Ok(())
    }
}

impl Hosts for ElectdHosts<'_> {
    fn name(&self) -> &'static str {
        "electd run"
    }
    fn crash(&mut self, h: NodeId, stamp_pid: u32) {
        let node = self.c.pid(h);
        let sup = self.supervisors.get(&h).map(|s| s.0.id());
        for pid in [node.map(|p| p as u32), sup, Some(stamp_pid)]
            .into_iter()
            .flatten()
        {
            kill_pid(pid);
        }
        if let Some(mut s) = self.supervisors.remove(&h) {
            s.kill();
        }
        self.c.wait_exit(h, Duration::from_secs(5));
    }
    fn restart(&mut self, h: NodeId) -> Result<(), String> {
        self.c.start(h, Mode::Quorum).map_err(|e| e.to_string())?;
        self.start_supervisor(h)
    }
    async fn ready(&self) -> Result<(), String> {
        electd_ready(self.c).await.map(|_| ())
    }
    fn claim_since(&self, after_ns: u64) -> Option<u64> {
        self.c
            .events(Mode::Quorum)
            .into_iter()
            .filter(|e| e.view.role == Role::Leader && e.t_mono_ns >= after_ns)
            .map(|e| e.t_mono_ns)
            .min()
    }
    fn exec_since(&self, h: NodeId, after_ns: u64) -> Option<u64> {
        let log = std::fs::read_to_string(self.work.join(format!("electd-run-{h}.log"))).ok()?;
        let first = exec_instants(&log).find(|t| *t > after_ns);
        first
    }
}

/// The instants `electd run` logged as its child's exec ("… (exec mono N)").
fn exec_instants(log: &str) -> impl Iterator<Item = u64> + '_ {
    log.lines().filter_map(|l| {
        let (_, rest) = l.split_once("(exec mono ")?;
        rest.strip_suffix(')')?.parse().ok()
    })
}

/// The etcd hosts: the members with `etcdctl lock` beside each.
struct EtcdHosts<'a> {
    etcd: &'a Etcd,
    etcdctl: PathBuf,
    work: PathBuf,
    supervisors: BTreeMap<NodeId, Owned>,
}

impl EtcdHosts<'_> {
    fn start_supervisor(&mut self, h: NodeId) -> Result<(), String> {
        let mut cmd = Command::new(&self.etcdctl);
        cmd.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.etcd.client_url(h)])
            .args(["lock", "--ttl", &LOCK_TTL_S.to_string(), LOCK]);
        let sup = supervise_stamp(
            cmd,
            self.work.join(format!("etcd-{h}.stamps")),
            &self.work.join(format!("etcdctl-{h}.log")),
        )?;
        self.supervisors.insert(h, sup);
        Ok(())
    }
}

impl Hosts for EtcdHosts<'_> {
    fn name(&self) -> &'static str {
        "etcdctl lock"
    }
    fn crash(&mut self, h: NodeId, stamp_pid: u32) {
        let sup = self.supervisors.get(&h).map(|s| s.0.id());
        for pid in [sup, Some(stamp_pid)].into_iter().flatten() {
            kill_pid(pid);
        }
        self.etcd.kill(h);
        if let Some(mut s) = self.supervisors.remove(&h) {
            s.kill();
        }
    }
    fn restart(&mut self, h: NodeId) -> Result<(), String> {
        self.etcd.restart(h)?;
        self.start_supervisor(h)
    }
    async fn ready(&self) -> Result<(), String> {
        until_agreed(self.etcd, &self.etcd.members(), |_| true)
            .await
            .map(|_| ())
            .ok_or_else(|| "etcd: no agreed leader".into())
    }
}

/// The host whose stamp runs now: the one with a stamp in the last 20 ms, waited for.
async fn holder(files: &mut BTreeMap<NodeId, StampFile>) -> Result<(NodeId, u32), String> {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let now = mono_ns();
        let mut running = None;
        for (h, f) in files.iter_mut() {
            if let Some(&(t, pid)) = f.new_lines().last() {
                if now.saturating_sub(t) < 20_000_000 {
                    running = Some((*h, pid));
                }
            }
        }
        if let Some(r) = running {
            return Ok(r);
        }
        if tokio::time::Instant::now() > until {
            return Err("no host's application runs".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One trial's figures (ms): crash to the first stamp elsewhere, and (electd) the new claim
/// to the application's exec and that exec to its first stamp (the application's own
/// start-up).
struct Trial {
    failover_ms: f64,
    claim_to_exec_ms: Option<f64>,
    exec_to_stamp_ms: Option<f64>,
}

/// `trials` crashes of the host whose application runs.
async fn trials<H: Hosts>(
    hosts: &mut H,
    files: &mut BTreeMap<NodeId, StampFile>,
    n: usize,
    seed: u64,
) -> Result<Vec<Trial>, String> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 1..=n {
        hosts.ready().await?;
        holder(files).await?;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..600))).await;
        let (h, pid) = holder(files).await?;
        let t0 = mono_ns();
        hosts.crash(h, pid);
        let until = tokio::time::Instant::now() + WAIT;
        let (next, first) = 'found: loop {
            for (other, f) in files.iter_mut() {
                if let Some(&(t, _)) = f.new_lines().iter().find(|(t, _)| *t > t0) {
                    if *other != h {
                        break 'found (*other, t);
                    }
                }
            }
            if tokio::time::Instant::now() > until {
                return Err(format!(
                    "{} trial {i}: no application ran again",
                    hosts.name()
                ));
            }
            tokio::time::sleep(READ_EVERY).await;
        };
        let failover_ms = (first - t0) as f64 / 1e6;
        let claim = hosts.claim_since(t0);
        // The supervisor logs the exec just after it, perhaps after the first stamp: wait
        // for the line (at most a second) where the tool logs one.
        let mut exec = None;
        let until = tokio::time::Instant::now() + Duration::from_secs(1);
        while claim.is_some() && exec.is_none() && tokio::time::Instant::now() < until {
            // The child may run (and stamp) before its supervisor, back from `spawn`, reads
            // the clock: it was exec'd by its first stamp at the latest.
            exec = hosts.exec_since(next, t0).map(|e| e.min(first));
            if exec.is_none() {
                tokio::time::sleep(READ_EVERY).await;
            }
        }
        let claim_to_exec_ms = claim
            .zip(exec)
            .map(|(c, e)| e.saturating_sub(c) as f64 / 1e6);
        let exec_to_stamp_ms = exec.map(|e| (first - e) as f64 / 1e6);
        println!(
            "{} trial {i:>3}: host {h} crashed, host {next}'s application ran {failover_ms:.0} ms \
             later{}",
            hosts.name(),
            claim_to_exec_ms
                .zip(exec_to_stamp_ms)
                .map(|(c, e)| format!(
                    " (exec'd {c:.1} ms after the node's claim, first stamp {e:.1} ms after exec)"
                ))
                .unwrap_or_default()
        );
        out.push(Trial {
            failover_ms,
            claim_to_exec_ms,
            exec_to_stamp_ms,
        });
        hosts.restart(h)?;
    }
    Ok(out)
}

fn stamp_files(work: &Path, prefix: &str, hosts: &[NodeId]) -> BTreeMap<NodeId, StampFile> {
    hosts
        .iter()
        .map(|h| {
            (
                *h,
                StampFile::new(work.join(format!("{prefix}-{h}.stamps"))),
            )
        })
        .collect()
}

/// `electd-lab ctl bench app-failover`: `n` host crashes under electd (the cluster in `c`,
/// which must be down: started here with the profile's timings and stopped at the end) and
/// under a 5-member etcd with `etcdctl lock` at the same timings; prints both distributions,
/// their ratio, and electd's claim-to-start distribution.
pub async fn compare(
    c: &mut Cluster,
    n: usize,
    profile: Profile,
    seed: u64,
    etcd_bin: &Path,
    etcdctl: &Path,
    work: &Path,
) -> Result<(), String> {
    use crate::bench::{percentile, summarize};
    let (hb, lease) = profile.timings();
    require_down(c)?;
    println!(
        "application failover, profile {profile:?} (heartbeat {hb} ms, follower lease / election \
         timeout {lease} ms): {n} host crashes each (node or member, supervisor and application \
         SIGKILLed at once) until another host's application runs; etcdctl lock --ttl \
         {LOCK_TTL_S}; stamp files read every {} ms; seed {seed}",
        READ_EVERY.as_millis()
    );
    start_quorum(c, hb, lease)?;
    let ids = c.ids();
    let electd = async {
        let mut files = stamp_files(work, "electd", &ids);
        let mut hosts = ElectdHosts {
            c,
            work: work.to_path_buf(),
            supervisors: BTreeMap::new(),
        };
        for h in &ids {
            hosts.start_supervisor(*h)?;
        }
        trials(&mut hosts, &mut files, n, seed).await
    }
    .await;
    c.down(Duration::from_secs(2));
    let electd = electd?;
    let etcd_dir = work.join("etcd");
    std::fs::create_dir_all(&etcd_dir).map_err(|e| format!("{}: {e}", etcd_dir.display()))?;
    let etcd = Etcd::start(etcd_bin, &etcd_dir, hb, lease).await?;
    let members = etcd.members();
    let mut files = stamp_files(work, "etcd", &members);
    let mut hosts = EtcdHosts {
        etcd: &etcd,
        etcdctl: etcdctl.to_path_buf(),
        work: work.to_path_buf(),
        supervisors: BTreeMap::new(),
    };
    for h in &members {
        hosts.start_supervisor(*h)?;
    }
    let etcd_trials = trials(&mut hosts, &mut files, n, seed).await;
    drop(hosts);
    drop(etcd);
    let etcd_trials = etcd_trials?;

    let a = summarize(
        "electd run   application failover",
        electd.iter().map(|t| t.failover_ms).collect(),
    );
    let b = summarize(
        "etcdctl lock application failover",
        etcd_trials.iter().map(|t| t.failover_ms).collect(),
    );
    summarize(
        "electd run   node's claim -> application's exec",
        electd.iter().filter_map(|t| t.claim_to_exec_ms).collect(),
    );
    summarize(
        "electd run   exec -> application's first stamp (its own start-up)",
        electd.iter().filter_map(|t| t.exec_to_stamp_ms).collect(),
    );
    let ratio = |p: f64| percentile(&a, p) / percentile(&b, p);
    println!(
        "ratio electd run / etcdctl lock: p50 {:.2}, p90 {:.2}, p99 {:.2}",
        ratio(50.0),
        ratio(90.0),
        ratio(99.0)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_lines_are_read_whole_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = StampFile::new(dir.path().join("s"));
        assert!(f.new_lines().is_empty());
        std::fs::write(&f.path, "100 7 42\n200 7 4").unwrap();
        assert_eq!(f.new_lines(), vec![(100, 42)]);
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&f.path)
            .unwrap();
        std::io::Write::write_all(&mut w, b"2\n300  43\n").unwrap();
        assert_eq!(f.new_lines(), vec![(200, 42), (300, 43)]);
        assert!(f.new_lines().is_empty());
    }

    #[test]
    fn exec_instants_are_read_from_the_supervisors_log() {
        let log = "electd run: started \"x\" (pid 9) for term 3 (exec mono 1234)\n\
                   electd run: SIGKILL to the child's group 1.0 ms before its deadline (mono 9)\n\
                   electd run: started \"x\" (pid 10) for term 4 (exec mono 5678)\n";
        assert_eq!(exec_instants(log).collect::<Vec<_>>(), vec![1234, 5678]);
    }
}
