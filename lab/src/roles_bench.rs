//! Named roles measured (`scripts/bench-roles.sh`, `electd-lab ctl bench roles`; the figures
//! are in docs/benchmarks.md, "Named roles").
//!
//! - **Holder crash**, with 1 and with 1,000 roles, four candidates for each: a trial waits
//!   until every role is claimed and the claims have stayed put for [`STILL`], then SIGKILLs
//!   the candidate that claims the most; the time from the kill until the survivors claim every
//!   role again is the failover. The same code ([`crashes`]) measures etcd's election API
//!   (v3election through etcd's JSON gateway, at the same heartbeat and election timeout): only
//!   "how many roles does candidate C claim now" differs ([`Claimants::claimed`]). electd's is
//!   its node's `electd_roles_claimed` (`/metrics`: roles a claim would be answered on). etcd's
//!   candidates are clients of this process, one per member, each with a lease of etcd's
//!   shortest TTL kept alive at a third of it (as etcd's own clients do), campaigning for each
//!   name: what it claims is the campaigns that returned to it. A crashed etcd candidate is a
//!   client gone: its keepalives stop and its connections close.
//!   On electd's side the cluster's leader stands for no role: its crash is a failover of the
//!   cluster's election as well (`bench failover` measures that one).
//! - **Idle cost**: 5-node clusters with 0, 1, 1,000 and 10,000 roles, every node standing for
//!   each, idle side by side: CPU, peer packets and bytes, resident memory
//!   ([`crate::cost::measure_idle`]), and each one's ratio to the cluster with one role.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use electd_client::{Mode, NodeId, RoleName};
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::bench::{percentile, summarize};
use crate::cluster::Cluster;
use crate::cost::{measure_idle, own_cluster, ratio, IdleCost, Side, SETTLE};
use crate::etcd_election::{b64, Candidate};
use crate::versus::{electd_ready, poll_client, require_down, until_agreed, Etcd, Profile, POLL};

/// What `ctl bench roles` measures (see the module's notes).
pub struct RolesArgs {
    pub trials: usize,
    /// The role counts of the crash trials.
    pub crash_roles: Vec<usize>,
    /// The role counts of the idle clusters.
    pub idle_roles: Vec<usize>,
    pub idle_seconds: u64,
    pub profile: Profile,
    pub seed: u64,
    pub etcd: PathBuf,
    pub work: PathBuf,
}

/// Bound of every wait for the roles to be claimed.
const WAIT: Duration = Duration::from_secs(120);
/// How long the claims stay put before a trial's kill.
const STILL: Duration = Duration::from_secs(1);
/// Candidacies asked at once while a cluster is set up.
const STANDING: usize = 64;
/// Candidates of each role in the crash trials (the cluster's leader aside).
const CANDIDATES: u64 = 4;

/// The roles' names start with this; etcd's election keys lie between it and [`ROLE_END`].
const ROLE_PREFIX: &str = "job-";
const ROLE_END: &str = "job.";

fn names(n: usize) -> Vec<RoleName> {
    (0..n)
        .map(|i| RoleName::new(format!("{ROLE_PREFIX}{i:05}")).expect("a valid role name"))
        .collect()
}

/// The candidates of one side, as the measuring code sees them.
#[allow(async_fn_in_trait)]
pub trait Claimants {
    fn name(&self) -> &'static str;
    fn candidates(&self) -> Vec<NodeId>;
    /// How many roles candidate `c` claims now; `None` when it does not answer.
    async fn claimed(&self, c: NodeId) -> Option<u64>;
    /// Every candidacy is in place (etcd: every campaign sent holds its key, and a crashed
    /// candidate's are gone).
    async fn standing(&self) -> bool {
        true
    }
    fn crash(&self, c: NodeId);
    async fn restart(&self, c: NodeId) -> Result<(), String>;
}

/// What each of `among` claims, asked at once; `None` unless all answered.
async fn claims<T: Claimants>(t: &T, among: &[NodeId]) -> Option<BTreeMap<NodeId, u64>> {
    let got = futures_util::future::join_all(among.iter().map(|c| t.claimed(*c))).await;
    among
        .iter()
        .copied()
        .zip(got)
        .map(|(c, n)| Some((c, n?)))
        .collect()
}

/// Waits until the candidates of `t` claim `roles` roles in all and their claims have not
/// changed for [`STILL`]; answers who claims how many.
async fn until_still<T: Claimants>(t: &T, roles: u64) -> Result<BTreeMap<NodeId, u64>, String> {
    let until = Instant::now() + WAIT;
    let mut last: Option<(BTreeMap<NodeId, u64>, Instant)> = None;
    while Instant::now() < until {
        match claims(t, &t.candidates()).await {
            Some(now) if now.values().sum::<u64>() == roles && t.standing().await => match &last {
                Some((was, since)) if *was == now => {
                    if since.elapsed() >= STILL {
                        return Ok(now);
                    }
                }
                _ => last = Some((now, Instant::now())),
            },
            _ => last = None,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "{}: {roles} roles were not all claimed, and still, within {} s",
        t.name(),
        WAIT.as_secs()
    ))
}

/// `trials` crashes of the candidate of `t` that claims the most of `roles` roles: the times
/// until the others claimed every role again, ms. Each kill comes a random 0–200 ms (drawn
/// from `seed`) after the claims were seen still, off the poller's and the heartbeat's beat.
pub async fn crashes<T: Claimants>(
    t: &T,
    roles: u64,
    trials: usize,
    seed: u64,
) -> Result<Vec<f64>, String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 1..=trials {
        let before = until_still(t, roles).await?;
        let (victim, held) = (before.iter())
            .max_by_key(|(_, n)| **n)
            .map(|(c, n)| (*c, *n))
            .ok_or("no candidates")?;
        let survivors: Vec<NodeId> = before.keys().copied().filter(|c| *c != victim).collect();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..200))).await;
        let t0 = Instant::now();
        t.crash(victim);
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let all = claims(t, &survivors).await;
            if all.is_some_and(|a| a.values().sum::<u64>() == roles) {
                break;
            }
            if t0.elapsed() > WAIT {
                return Err(format!("{} trial {i}: roles not claimed again", t.name()));
            }
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        println!(
            "{} {roles} roles, trial {i:>2}: candidate {victim} claiming {held} killed; all \
             claimed again after {ms:.0} ms",
            t.name()
        );
        out.push(ms);
        t.restart(victim).await?;
    }
    Ok(out)
}

/// electd's side: nodes of a cluster, their claims read from `/metrics`.
struct ElectdRoles<'a> {
    c: &'a Cluster,
    candidates: Vec<NodeId>,
    http: reqwest::Client,
}

impl Claimants for ElectdRoles<'_> {
    fn name(&self) -> &'static str {
        "electd"
    }
    fn candidates(&self) -> Vec<NodeId> {
        self.candidates.clone()
    }
    async fn claimed(&self, c: NodeId) -> Option<u64> {
        self.c.roles_claimed(self.http.clone(), c).await
    }
    fn crash(&self, c: NodeId) {
        self.c.kill(c);
    }
    async fn restart(&self, c: NodeId) -> Result<(), String> {
        (self.c.start(c, Mode::Quorum).map(|_| ())).map_err(|e| e.to_string())
    }
}

/// Every node of `nodes` stands for every role of `roles` (asked on the node itself, with the
/// admin token, [`STANDING`] at once; each answered once applied).
async fn stand_all(c: &Cluster, roles: &[RoleName], nodes: &[NodeId]) -> Result<(), String> {
    let asks = roles
        .iter()
        .flat_map(|r| nodes.iter().map(move |n| (r, *n)));
    let mut answers = futures_util::stream::iter(asks)
        .map(|(r, n)| async move {
            let client = c.client(n).map_err(|e| e.to_string())?;
            let client = client.timeout(Duration::from_secs(20));
            (client.stand(r, n, true).await.map(|_| ()))
                .map_err(|e| format!("node {n} standing for {r}: {e}"))
        })
        .buffer_unordered(STANDING);
    while let Some(a) = answers.next().await {
        a?;
    }
    Ok(())
}

/// etcd's side: one client per candidate, on member `c` for candidate `c`
/// (`etcd_election.rs`).
struct EtcdRoles {
    etcd: Etcd,
    names: Vec<String>,
    http: reqwest::Client,
    running: Mutex<BTreeMap<NodeId, Candidate>>,
}

impl EtcdRoles {
    async fn join(&self, c: NodeId) -> Result<(), String> {
        let url = self.etcd.client_url(c);
        let cand = Candidate::join(self.http.clone(), url, ROLE_PREFIX, ROLE_END).await?;
        self.running.lock().expect("candidates").insert(c, cand);
        Ok(())
    }

    /// Candidate `c` campaigns for the roles at `indices`.
    fn campaign(&self, c: NodeId, indices: impl Iterator<Item = usize>) {
        let names = indices.map(|i| self.names[i].clone()).collect();
        if let Some(cand) = self.running.lock().expect("candidates").get_mut(&c) {
            cand.campaign(names);
        }
    }
}

impl Claimants for EtcdRoles {
    fn name(&self) -> &'static str {
        "etcd"
    }
    fn candidates(&self) -> Vec<NodeId> {
        (1..=CANDIDATES).collect()
    }
    async fn claimed(&self, c: NodeId) -> Option<u64> {
        Some(self.running.lock().expect("candidates").get(&c)?.claimed())
    }
    /// etcd holds a key for each campaign of a running candidate (won or waiting), and none
    /// of a crashed one.
    async fn standing(&self) -> bool {
        let body = serde_json::json!({
            "key": b64(ROLE_PREFIX), "range_end": b64(ROLE_END), "count_only": true
        });
        let url = format!("{}/v3/kv/range", self.etcd.client_url(1));
        let count = match self.http.post(url).json(&body).send().await {
            Ok(r) => r.json::<serde_json::Value>().await.ok(),
            Err(_) => None,
        };
        let want: u64 = (self.running.lock().expect("candidates").values())
            .map(Candidate::campaigns)
            .sum();
        // etcd leaves zero fields out: no `count` is 0.
        count.is_some_and(|v| v["count"].as_str().unwrap_or("0").parse() == Ok(want))
    }
    fn crash(&self, c: NodeId) {
        self.running.lock().expect("candidates").remove(&c);
    }
    async fn restart(&self, c: NodeId) -> Result<(), String> {
        self.join(c).await?;
        self.campaign(c, 0..self.names.len());
        Ok(())
    }
}

/// The etcd side of `roles` roles: its candidates joined, each campaigning first for a
/// quarter of the names (so that each claims a quarter, as electd's placement spreads them)
/// and, once those are won, for the rest.
async fn etcd_side(etcd: Etcd, roles: usize) -> Result<EtcdRoles, String> {
    until_agreed(&etcd, &crate::versus::Target::members(&etcd), |_| true)
        .await
        .ok_or("etcd: no agreed leader")?;
    let side = EtcdRoles {
        etcd,
        names: names(roles).iter().map(|n| n.to_string()).collect(),
        http: electd_client::http_client()
            .build()
            .map_err(|e| e.to_string())?,
        running: Mutex::default(),
    };
    let mine = |c: NodeId, i: usize| i as u64 % CANDIDATES == c - 1;
    for c in side.candidates() {
        side.join(c).await?;
        side.campaign(c, (0..roles).filter(|i| mine(c, *i)));
    }
    until_still(&side, roles as u64).await?;
    for c in side.candidates() {
        side.campaign(c, (0..roles).filter(|i| !mine(c, *i)));
    }
    Ok(side)
}

/// The crash trials at `roles` roles on both sides; the two distributions.
async fn crash_both(
    bin: &Path,
    a: &RolesArgs,
    roles: usize,
    (hb, lease): (u64, u64),
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (c, _block) = own_cluster(bin, &a.work, &format!("crash-{roles}"), 5, (hb, lease))?;
    let electd = async {
        let leader = electd_ready(&c).await?;
        let candidates: Vec<NodeId> = c.ids().into_iter().filter(|i| *i != leader).collect();
        stand_all(&c, &names(roles), &candidates).await?;
        let side = ElectdRoles {
            c: &c,
            candidates,
            http: poll_client(),
        };
        crashes(&side, roles as u64, a.trials, a.seed).await
    }
    .await;
    c.down(Duration::from_secs(2));
    let electd = electd?;
    let dir = a.work.join(format!("etcd-{roles}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let etcd = async {
        let side = etcd_side(Etcd::start(&a.etcd, &dir, hb, lease).await?, roles).await?;
        crashes(&side, roles as u64, a.trials, a.seed).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((electd, etcd?))
}

/// One idle cluster's line: its figures per second and their ratios to `base`'s.
fn idle_line(roles: usize, x: &IdleCost, base: &IdleCost, s: f64) {
    let per_s = |v: Option<u64>, scale: f64| {
        v.map_or("?".into(), |v| format!("{:.1}", v as f64 / s / scale))
    };
    println!(
        "idle, {roles:>5} roles: CPU {:.1}% of a core, {} packets/s, {} kB/s, RSS {:.0} MB; \
         ratio to one role: CPU {:.2}, packets {}, bytes {}, RSS {:.2}",
        100.0 * x.cpu_s / s,
        per_s(x.packets, 1.0),
        per_s(x.bytes, 1e3),
        x.rss_kb as f64 / 1024.0,
        x.cpu_s / base.cpu_s,
        ratio(x.packets, base.packets),
        ratio(x.bytes, base.bytes),
        x.rss_kb as f64 / base.rss_kb as f64,
    );
}

/// 5-node clusters with each of `a.idle_roles` roles, idle side by side.
async fn idle_cost(bin: &Path, a: &RolesArgs, timings: (u64, u64)) -> Result<(), String> {
    let mut clusters = Vec::new();
    for &n in &a.idle_roles {
        let (c, block) = own_cluster(bin, &a.work, &format!("idle-{n}"), 5, timings)?;
        clusters.push((n, c, block));
    }
    let res = async {
        let claimants: Vec<ElectdRoles> = (clusters.iter())
            .map(|(_, c, _)| ElectdRoles {
                c,
                candidates: c.ids(),
                http: poll_client(),
            })
            .collect();
        for ((n, c, _), side) in clusters.iter().zip(&claimants) {
            electd_ready(c).await?;
            let t0 = Instant::now();
            stand_all(c, &names(*n), &c.ids()).await?;
            let spread = until_still(side, *n as u64).await?;
            println!(
                "idle, {n:>5} roles: 5 x {n} candidacies applied and every role claimed in \
                 {:.1} s; claimed per node {:?}",
                (t0.elapsed() - STILL).as_secs_f64(),
                spread.values().collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(SETTLE).await;
        let sides: Vec<Side> = clusters
            .iter()
            .map(|(_, c, b)| Side::electd(c, b))
            .collect();
        let (costs, s) = measure_idle(&sides, a.idle_seconds).await?;
        let base = (a.idle_roles.iter().position(|n| *n == 1)).map_or(&costs[0], |i| &costs[i]);
        for (((n, c, _), x), side) in clusters.iter().zip(&costs).zip(&claimants) {
            idle_line(*n, x, base, s);
            let now = claims(side, &c.ids())
                .await
                .map(|m| m.values().sum::<u64>());
            if now != Some(*n as u64) {
                return Err(format!("{n} roles: {now:?} claimed after the idle window"));
            }
        }
        Ok(())
    }
    .await;
    for (_, c, _) in &clusters {
        c.down(Duration::from_secs(2));
    }
    res
}

/// `electd-lab ctl bench roles`: the crash trials at each count, side by side with etcd, then
/// the idle clusters.
pub async fn compare(bundled: &Cluster, a: &RolesArgs) -> Result<(), String> {
    require_down(bundled)?;
    let timings @ (hb, lease) = a.profile.timings();
    println!(
        "roles, profile {:?} (heartbeat {hb} ms, follower lease / election timeout {lease} ms), \
         seed {} (--seed): holder crashes at {:?} roles, {} trials each, {CANDIDATES} \
         candidates, poll every {} ms; idle {} s at {:?} roles",
        a.profile,
        a.seed,
        a.crash_roles,
        a.trials,
        POLL.as_millis(),
        a.idle_seconds,
        a.idle_roles
    );
    let mut p50 = Vec::new();
    for &n in a.crash_roles.iter().filter(|_| a.trials > 0) {
        let (electd, etcd) = crash_both(&bundled.bin, a, n, timings).await?;
        let e = summarize(&format!("electd holder crash, {n:>4} roles"), electd);
        let t = summarize(&format!("etcd   holder crash, {n:>4} roles"), etcd);
        println!(
            "ratio electd/etcd at {n} roles: p50 {:.2}, p99 {:.2}",
            percentile(&e, 50.0) / percentile(&t, 50.0),
            percentile(&e, 99.0) / percentile(&t, 99.0)
        );
        p50.push((n, percentile(&e, 50.0), percentile(&e, 99.0)));
    }
    if let (Some(first), Some(last)) = (p50.first(), p50.last()) {
        println!(
            "electd, {} roles against {}: p50 {:+.0} ms, p99 {:+.0} ms",
            last.0,
            first.0,
            last.1 - first.1,
            last.2 - first.2
        );
    }
    if a.idle_seconds > 0 && !a.idle_roles.is_empty() {
        idle_cost(&bundled.bin, a, timings).await?;
    }
    Ok(())
}
