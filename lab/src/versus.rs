//! Failover of electd against etcd, measured by one poller (`scripts/bench-vs-etcd.sh`,
//! `electd-lab ctl bench vs-etcd`).
//!
//! Both clusters have five members on this host. A trial: wait until every member names the
//! same leader; SIGKILL it (by pid); then ask every survivor every [`POLL`] which leader it
//! names, until all name one leader other than the killed one; the time from the kill to that
//! round is the failover. The killed member is restarted on its data and the next trial waits
//! until it names the leader again. The same code measures both: only "which leader does this
//! member name" differs ([`Target::named_leader`]): electd's `GET /v1/leader` (`leader.id`;
//! a leader names itself only while it holds its lease-bound claim) and etcd's
//! `POST /v3/maintenance/status` (`leader`, absent while it knows none).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::chaos::checkers::{cap_paused_claims, split_brain};
use crate::chaos::record::Recorder;
use crate::chaos::record::RunLog;
use crate::cluster::{AddrBlock, Cluster, Observed};
use electd::clock::mono_ns;
use electd_client::NodeId;
use rustix::process::{self, Pid, Signal};

/// How often the poller asks every survivor.
pub const POLL: Duration = Duration::from_millis(10);
/// Bound of every wait of a trial.
const WAIT: Duration = Duration::from_secs(30);

/// A cluster the poller can measure.
#[allow(async_fn_in_trait)]
pub trait Target {
    fn name(&self) -> &'static str;
    fn members(&self) -> Vec<NodeId>;
    /// The leader `member` names now (as an opaque id), `None` when it names none or does not
    /// answer within the poll interval.
    async fn named_leader(&self, member: NodeId) -> Option<String>;
    /// The member whose id `named_leader` reports as `leader`.
    fn member_of(&self, leader: &str) -> Option<NodeId>;
    /// The term `member` is in, `None` when it does not answer within the poll interval.
    async fn term(&self, member: NodeId) -> Option<u64>;
    fn kill(&self, member: NodeId);
    fn restart(&self, member: NodeId) -> Result<(), String>;
}

/// Every given member's named leader, asked concurrently.
async fn round<T: Target>(t: &T, members: &[NodeId]) -> BTreeMap<NodeId, Option<String>> {
    let answers = futures_util::future::join_all(members.iter().map(|m| t.named_leader(*m))).await;
    members.iter().copied().zip(answers).collect()
}

/// The leader all of `members` name, if they agree on one.
fn agreed(named: &BTreeMap<NodeId, Option<String>>) -> Option<String> {
    let mut it = named.values();
    let first = it.next()?.clone()?;
    it.all(|l| l.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// Polls `members` every [`POLL`] until `pred` holds for their agreed leader; returns it.
pub(crate) async fn until_agreed<T: Target>(
    t: &T,
    members: &[NodeId],
    pred: impl Fn(NodeId) -> bool,
) -> Option<NodeId> {
    let until = tokio::time::Instant::now() + WAIT;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while tokio::time::Instant::now() < until {
        tick.tick().await;
        if let Some(l) = agreed(&round(t, members).await).and_then(|l| t.member_of(&l)) {
            if pred(l) {
                return Some(l);
            }
        }
    }
    None
}

/// `trials` failovers of `t`; the failover times in ms. Each kill comes a random 300–600 ms
/// after the members agreed (drawn from `seed`), so that it lands at a random point of the
/// leader's heartbeat cycle rather than in step with the poller.
pub async fn failovers<T: Target>(t: &T, trials: usize, seed: u64) -> Result<Vec<f64>, String> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let all = t.members();
    let mut out = Vec::new();
    for i in 1..=trials {
        until_agreed(t, &all, |_| true)
            .await
            .ok_or(format!("{}: no agreed leader before trial {i}", t.name()))?;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..600))).await;
        let leader = until_agreed(t, &all, |_| true)
            .await
            .ok_or(format!("{}: no agreed leader before trial {i}", t.name()))?;
        let survivors: Vec<NodeId> = all.iter().copied().filter(|m| *m != leader).collect();
        let t0 = mono_ns();
        t.kill(leader);
        let next = until_agreed(t, &survivors, |l| l != leader)
            .await
            .ok_or(format!("{} trial {i}: no new leader", t.name()))?;
        let dt = (mono_ns() - t0) as f64 / 1e6;
        println!(
            "{} trial {i:>3}: leader {leader} -> {next} in {dt:.0} ms",
            t.name()
        );
        out.push(dt);
        t.restart(leader)?;
        until_agreed(t, &all, |_| true)
            .await
            .ok_or(format!("{} trial {i}: {leader} did not rejoin", t.name()))?;
    }
    Ok(out)
}

/// What an idle cluster did in a window: elections (terms gained) and what a once-a-second
/// poll of every member saw.
#[derive(Debug, Default)]
pub struct Idle {
    pub seconds: u64,
    /// Highest term at the end less highest term at the start: elections begun.
    pub terms: u64,
    /// Polls whose agreed leader differed from the previous agreed one.
    pub leader_changes: u64,
    /// Polls in which the members did not all name one leader.
    pub polls_without_leader: u64,
    pub polls: u64,
}

/// The highest term any of `members` reports.
async fn max_term<T: Target>(t: &T, members: &[NodeId]) -> Option<u64> {
    let terms = futures_util::future::join_all(members.iter().map(|m| t.term(*m))).await;
    terms.into_iter().flatten().max()
}

/// Leaves `t` idle for `seconds` (no load, no faults) once all members agree on a leader, and
/// counts the elections it held meanwhile. The members are asked only once a second, so that
/// the poller itself keeps the host about as idle as it is.
pub async fn idle<T: Target>(t: &T, seconds: u64) -> Result<Idle, String> {
    let all = t.members();
    until_agreed(t, &all, |_| true).await.ok_or(format!(
        "{}: no agreed leader before the idle window",
        t.name()
    ))?;
    let before = max_term(t, &all)
        .await
        .ok_or(format!("{}: no member reports a term", t.name()))?;
    let end = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut out = Idle {
        seconds,
        ..Idle::default()
    };
    let mut last: Option<NodeId> = None;
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        out.polls += 1;
        match agreed(&round(t, &all).await).and_then(|l| t.member_of(&l)) {
            Some(l) => {
                if last.is_some_and(|p| p != l) {
                    out.leader_changes += 1;
                }
                last = Some(l);
            }
            None => out.polls_without_leader += 1,
        }
    }
    let after = max_term(t, &all)
        .await
        .ok_or(format!("{}: no member reports a term", t.name()))?;
    out.terms = after.saturating_sub(before);
    println!(
        "{} idle {} s: {} elections (terms gained), {} changes of the agreed leader and {} of {} \
         polls without one (a poll a second)",
        t.name(),
        out.seconds,
        out.terms,
        out.leader_changes,
        out.polls_without_leader,
        out.polls
    );
    Ok(out)
}

/// electd's side: a cluster directory run by [`Cluster`].
pub struct Electd<'a> {
    pub c: &'a Cluster,
    client: reqwest::Client,
    /// Kills and starts, for the split-brain check over the event logs.
    rec: std::sync::Mutex<Recorder>,
}

impl<'a> Electd<'a> {
    pub fn new(c: &'a Cluster) -> Self {
        Electd {
            c,
            client: poll_client(),
            rec: Default::default(),
        }
    }

    /// `GET /v1/leader` of `member`, `None` on any failure.
    async fn leader_info(&self, member: NodeId) -> Option<electd_client::LeaderInfo> {
        let addr = &self.c.member(member).ok()?.addr;
        fetch_json(self.client.get(format!("http://{addr}/v1/leader"))).await
    }

    /// The time two nodes claimed at once since `since_ns`, from the event logs, in ms.
    pub fn split_brain_ms(&self, since_ns: u64, lease_ms: u64) -> f64 {
        let log = RunLog {
            start_ns: since_ns,
            ..self
                .rec
                .lock()
                .expect("recorder")
                .run_log(self.c, self.c.mode(), Vec::new())
        };
        split_brain(&cap_paused_claims(&log, electd::clock::ms(lease_ms))).split_brain_ns as f64
            / 1e6
    }
}

/// The JSON answer of `req`, or `None` on any failure (the poller counts it as no answer).
async fn fetch_json<T: serde::de::DeserializeOwned>(req: reqwest::RequestBuilder) -> Option<T> {
    req.send().await.ok()?.json().await.ok()
}

pub(crate) fn poll_client() -> reqwest::Client {
    electd_client::http_client()
        .timeout(POLL * 5)
        .build()
        .expect("client")
}

impl Target for Electd<'_> {
    fn name(&self) -> &'static str {
        match self.c.mode() {
            electd_client::Mode::Quorum => "electd",
            other => other.as_str(),
        }
    }
    fn members(&self) -> Vec<NodeId> {
        self.c.ids()
    }
    async fn named_leader(&self, member: NodeId) -> Option<String> {
        let info = self.leader_info(member).await?;
        info.leader.map(|l| l.id.to_string())
    }
    async fn term(&self, member: NodeId) -> Option<u64> {
        Some(self.leader_info(member).await?.term)
    }
    fn member_of(&self, leader: &str) -> Option<NodeId> {
        leader.parse().ok()
    }
    fn kill(&self, member: NodeId) {
        self.rec.lock().expect("recorder").kill(self.c, member);
    }
    fn restart(&self, member: NodeId) -> Result<(), String> {
        self.rec
            .lock()
            .expect("recorder")
            .start(self.c, member, self.c.mode())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// etcd's side: five `etcd` processes on their own loopback addresses, each with a data dir
/// in `dir`, ended by pid when dropped.
pub struct Etcd {
    bin: PathBuf,
    dir: PathBuf,
    block: AddrBlock,
    heartbeat_ms: u64,
    election_ms: u64,
    /// How many members (1..=n).
    n: u64,
    pids: std::sync::Mutex<BTreeMap<NodeId, u32>>,
    /// etcd's member ids (decimal strings, as its JSON gives them) to our member numbers.
    ids: BTreeMap<String, NodeId>,
    client: reqwest::Client,
}

/// Members of the etcd of the comparisons.
const ETCD_MEMBERS: u64 = 5;

impl Etcd {
    /// Starts the five members and waits until each has reported its own member id.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        heartbeat_ms: u64,
        election_ms: u64,
    ) -> Result<Etcd, String> {
        Etcd::start_n(bin, dir, heartbeat_ms, election_ms, ETCD_MEMBERS).await
    }

    /// Starts `n` members and waits until each has reported its own member id.
    pub async fn start_n(
        bin: &Path,
        dir: &Path,
        heartbeat_ms: u64,
        election_ms: u64,
        n: u64,
    ) -> Result<Etcd, String> {
        let mut e = Etcd {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            block: AddrBlock::claim(),
            heartbeat_ms,
            election_ms,
            n,
            pids: Default::default(),
            ids: BTreeMap::new(),
            client: poll_client(),
        };
        for m in 1..=n {
            e.restart(m)?;
        }
        // A large etcd takes longer to form on two cores (each member preallocates its WAL).
        let until = tokio::time::Instant::now() + WAIT + Duration::from_secs(2 * n);
        for m in 1..=n {
            loop {
                if let Some(id) = e.status(m).await.and_then(|s| s.member_id) {
                    e.ids.insert(id, m);
                    break;
                }
                if tokio::time::Instant::now() >= until {
                    return Err(format!(
                        "etcd member {m} did not start (see {})",
                        e.log(m).display()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(e)
    }

    /// The members' address block as a subnet (their peer port is 2380).
    pub fn subnet(&self) -> String {
        self.block.subnet()
    }

    /// The members' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.pids.lock().expect("pids").values().copied().collect()
    }

    /// Member `m`'s client URL.
    pub fn client_url(&self, m: NodeId) -> String {
        self.url(m, 2379)
    }

    fn url(&self, m: NodeId, port: u16) -> String {
        format!("http://{}:{port}", self.block.ip(m))
    }

    fn log(&self, m: NodeId) -> PathBuf {
        self.dir.join(format!("m{m}.log"))
    }

    async fn status(&self, m: NodeId) -> Option<EtcdStatus> {
        let req = self
            .client
            .post(format!("{}/v3/maintenance/status", self.url(m, 2379)))
            .body("{}");
        let v: serde_json::Value = fetch_json(req).await?;
        Some(EtcdStatus {
            member_id: v["header"]["member_id"].as_str().map(str::to_string),
            // Zero fields are left out of etcd's JSON: no `leader` means no leader.
            leader: v["leader"].as_str().map(str::to_string),
            // 64-bit numbers come as strings.
            term: v["raftTerm"].as_str().and_then(|t| t.parse().ok()),
        })
    }
}

struct EtcdStatus {
    member_id: Option<String>,
    leader: Option<String>,
    term: Option<u64>,
}

impl Target for Etcd {
    fn name(&self) -> &'static str {
        "etcd"
    }
    fn members(&self) -> Vec<NodeId> {
        (1..=self.n).collect()
    }
    async fn named_leader(&self, member: NodeId) -> Option<String> {
        self.status(member).await?.leader
    }
    async fn term(&self, member: NodeId) -> Option<u64> {
        self.status(member).await?.term
    }
    fn member_of(&self, leader: &str) -> Option<NodeId> {
        self.ids.get(leader).copied()
    }
    fn kill(&self, member: NodeId) {
        if let Some(pid) = self.pids.lock().expect("pids").remove(&member) {
            // A pid this process started and has not reaped: kill it, then reap it.
            if let Some(pid) = Pid::from_raw(pid as i32) {
                let _ = process::kill_process(pid, Signal::KILL);
                let _ = process::waitpid(Some(pid), process::WaitOptions::empty());
            }
        }
    }
    /// Starts member `m` on its data dir (the cluster flags only count the first time).
    fn restart(&self, m: NodeId) -> Result<(), String> {
        let cluster: Vec<String> = (1..=self.n)
            .map(|i| format!("m{i}={}", self.url(i, 2380)))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(m))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.bin)
            .args(["--name", &format!("m{m}")])
            .arg("--data-dir")
            .arg(self.dir.join(format!("m{m}.data")))
            .args(["--listen-client-urls", &self.url(m, 2379)])
            .args(["--advertise-client-urls", &self.url(m, 2379)])
            .args(["--listen-peer-urls", &self.url(m, 2380)])
            .args(["--initial-advertise-peer-urls", &self.url(m, 2380)])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "electd-bench"])
            .args(["--heartbeat-interval", &self.heartbeat_ms.to_string()])
            .args(["--election-timeout", &self.election_ms.to_string()])
            .args([
                "--logger",
                "zap",
                "--log-outputs",
                "stderr",
                "--log-level",
                "error",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        self.pids.lock().expect("pids").insert(m, child.id());
        Ok(())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in self.members() {
            self.kill(m);
        }
    }
}

/// The profile of a comparison: electd's timings and etcd's equivalent flags.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Profile {
    /// Heartbeat 30 ms, follower lease / election timeout 150 ms (the bundled defaults).
    Default,
    /// Heartbeat 10 ms, follower lease / election timeout 50 ms.
    Fast,
}

impl Profile {
    /// (heartbeat, follower lease = etcd's election timeout), ms.
    pub fn timings(self) -> (u64, u64) {
        match self {
            Profile::Default => (30, 150),
            Profile::Fast => (10, 50),
        }
    }
}

/// Waits until every node of `c` runs and names the same claiming leader.
pub async fn electd_ready(c: &Cluster) -> Result<NodeId, String> {
    let ok = c
        .wait_for(WAIT, |s| {
            s.values().all(|st| matches!(st, Observed::Up(_)))
                && crate::cluster::agreed(s).is_some()
        })
        .await;
    if !ok {
        return Err("electd: no agreed leader".into());
    }
    c.agreed_leader()
        .await
        .ok_or("electd: no agreed leader".into())
}

/// Refuses a cluster with a node running: a benchmark starts its own with its timings.
pub(crate) fn require_down(c: &Cluster) -> Result<(), String> {
    match c.ids().into_iter().find(|id| c.pid(*id).is_some()) {
        Some(id) => Err(format!(
            "node {id} of {} is running: stop the cluster first (scripts/cluster.sh down)",
            c.dir.display()
        )),
        None => Ok(()),
    }
}

/// Starts every node of `c` in quorum mode at heartbeat `hb` and follower lease `lease` (ms),
/// the claim lease derived, each node dying with this process.
pub(crate) fn start_quorum(c: &mut Cluster, hb: u64, lease: u64) -> Result<(), String> {
    c.extra_args = vec![
        "--heartbeat-ms".into(),
        hb.to_string(),
        "--follower-lease-ms".into(),
        lease.to_string(),
        "--lease-ms".into(),
        "0".into(),
    ];
    c.die_with_parent = true;
    c.ensure_secrets().map_err(|e| e.to_string())?;
    for id in c.ids() {
        c.start(id, electd_client::Mode::Quorum)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `electd-lab ctl bench vs-etcd`: `trials` failovers of the cluster in `c` (which must be down:
/// its nodes are started here with the profile's timings and stopped at the end), then of a
/// 5-member etcd (`etcd_bin`) at the same timings with data under `work`; prints both
/// distributions, the ratios, and electd's time with two claimants (from its event logs); then,
/// with `idle_seconds` > 0, leaves both idle that long at the same time and counts their
/// elections ([`idle`]).
/// Fails when two electd nodes ever claimed at once.
pub async fn compare(
    c: &mut Cluster,
    trials: usize,
    idle_seconds: u64,
    profile: Profile,
    seed: u64,
    etcd_bin: &Path,
    work: &Path,
) -> Result<(), String> {
    use crate::bench::{percentile, summarize};
    let (hb, lease) = profile.timings();
    require_down(c)?;
    println!(
        "profile {profile:?}: heartbeat {hb} ms, follower lease / election timeout {lease} ms; \
         {trials} SIGKILLs of the leader each; poll every {} ms; seed {seed} (--seed)",
        POLL.as_millis()
    );
    let since = mono_ns();
    start_quorum(c, hb, lease)?;
    let target = Electd::new(c);
    // electd first, then etcd, each with the other idle beside it; then both idle at once, so
    // that the host's stalls (which come and go by the minute here) fall on both alike.
    let measured = async {
        electd_ready(c).await?;
        let electd = failovers(&target, trials, seed).await?;
        let e = Etcd::start(etcd_bin, work, hb, lease).await?;
        let etcd = failovers(&e, trials, seed).await?;
        if idle_seconds > 0 {
            println!("both clusters idle for {idle_seconds} s, side by side");
            let (a, b) = tokio::join!(idle(&target, idle_seconds), idle(&e, idle_seconds));
            a?;
            b?;
        }
        Ok::<_, String>((electd, etcd))
    }
    .await;
    let split_ms = target.split_brain_ms(since, lease - lease / 5);
    c.down(Duration::from_secs(2));
    let (electd, etcd) = measured?;
    // Mutex mode on the same nodes, timings and poller, with a PostgreSQL of the cluster's own.
    let mutex = mutex_failovers(c, trials, seed, lease).await;
    let a = summarize("electd failover", electd);
    let b = summarize("etcd   failover", etcd);
    let ratio = |x: &[f64], y: &[f64], p: f64| percentile(x, p) / percentile(y, p);
    println!(
        "ratio electd/etcd: p50 {:.2}, p90 {:.2}, p99 {:.2}",
        ratio(&a, &b, 50.0),
        ratio(&a, &b, 90.0),
        ratio(&a, &b, 99.0)
    );
    println!("electd: {split_ms:.0} ms with two claimants (event logs of all trials)");
    if split_ms > 0.0 {
        return Err("two electd nodes claimed at once".into());
    }
    match mutex {
        Ok((m, per_s, mutex_split_ms)) => {
            let m = summarize("mutex  failover", m);
            println!(
                "ratio mutex/quorum: p50 {:.2}, p90 {:.2}, p99 {:.2}; the store ran {per_s:.0} \
                 statements/s for 5 nodes (one a beat each); mutex: {mutex_split_ms:.0} ms \
                 with two claimants",
                ratio(&m, &a, 50.0),
                ratio(&m, &a, 90.0),
                ratio(&m, &a, 99.0)
            );
            if mutex_split_ms > 0.0 {
                return Err("two mutex-mode nodes claimed at once".into());
            }
        }
        Err(why) => println!("mutex failover: not measured: {why}"),
    }
    Ok(())
}

/// Mutex mode's side: the nodes of `c` in mutex mode with a PostgreSQL of their own beside
/// them, `trials` SIGKILLs of the holder by the same poller; then the store's statements per
/// second over two quiet seconds. Answers the failovers, the rate, and the time two nodes
/// claimed at once.
async fn mutex_failovers(
    c: &mut Cluster,
    trials: usize,
    seed: u64,
    lease: u64,
) -> Result<(Vec<f64>, f64, f64), String> {
    crate::cluster::postgres_bin_dir()?;
    let ip = c
        .members
        .first()
        .and_then(|m| m.addr.rsplit_once(':'))
        .map_or("127.0.0.1".to_string(), |a| a.0.to_string());
    c.start_store(&ip, MUTEX_STORE_PORT)
        .map_err(|e| e.to_string())?;
    let since = mono_ns();
    for id in c.ids() {
        c.start(id, electd_client::Mode::Mutex)
            .map_err(|e| e.to_string())?;
    }
    let target = Electd::new(c);
    let measured = async {
        electd_ready(c).await?;
        let m = failovers(&target, trials, seed).await?;
        electd_ready(c).await?;
        let (a, t0) = (store_statements(c).await, mono_ns());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (b, t1) = (store_statements(c).await, mono_ns());
        let per_s = (b - a) as f64 / ((t1 - t0) as f64 / 1e9);
        Ok::<_, String>((m, per_s))
    }
    .await;
    let split_ms = target.split_brain_ms(since, lease - lease / 5);
    c.down(Duration::from_secs(2));
    c.store = None;
    let (m, per_s) = measured?;
    Ok((m, per_s, split_ms))
}

/// The statements the nodes of `c` have sent the store so far (each a claim or a renewal).
async fn store_statements(c: &Cluster) -> u64 {
    let mut n = 0;
    for id in c.ids() {
        if let Ok(s) = c.status(id).await {
            n += s.counters.messages_sent.get("claim").copied().unwrap_or(0);
        }
    }
    n
}

/// The port of the comparison's store, beside the bundled cluster's nodes.
const MUTEX_STORE_PORT: u16 = 7009;
