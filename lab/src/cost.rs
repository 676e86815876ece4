//! The cost side of the comparison with etcd (`scripts/bench-vs-etcd.sh`, `electd-lab ctl
//! bench cost`): each part measured for both sides by the same code, in one run.
//!
//! - **Idle**: a 5-node electd cluster and a 5-member etcd at the same heartbeat and election
//!   timeout, idle side by side for a window: the CPU time their processes took (utime + stime
//!   from `/proc/PID/stat`) and their peer traffic, in TCP packets and bytes to and from the
//!   peer port on the addresses of each side's own block, counted by iptables rules in a chain
//!   of the run's own (root only; said and left out otherwise). electd's own count of the peer
//!   messages it sent beside it.
//! - **Serving**: `GET /v1/leader` at full rate against one node of that cluster, then against
//!   a bare axum handler in a process of its own (`electd-lab bare-leader`, release build like
//!   the node, a multi-thread runtime like the node's) that answers the same `LeaderInfo` as
//!   JSON, TCP_NODELAY set as the node sets it; the same load generator
//!   ([`crate::bench::hammer`]) for both, in [`SERVE_ROUNDS`] rounds each in turn,
//!   with the cluster running beside both.
//! - **Scale**: failover after SIGKILL of the leader at each of `sizes` nodes (5, 15, 31), and
//!   of an etcd of as many members at the same timings, by the poller of [`crate::versus`]; p50
//!   and p99 per size, the ratio to etcd's, and each side's growth from the smallest size to
//!   the largest.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use electd::config::Timing;
use electd_client::{LeaderInfo, Mode};

use crate::bench::{hammer, percentile, spawn_owned, summarize};
use crate::chaos::kernel::{self, Chain};
use crate::cluster::{claim_addrs, AddrBlock, Cluster, BLOCK_NODE_PORT};
use crate::versus::{
    electd_ready, failovers, require_down, start_quorum, until_agreed, Electd, Etcd, Profile,
    Target,
};

/// etcd's peer port (as [`Etcd`] starts its members).
const ETCD_PEER_PORT: u16 = 2380;
/// How long both sides settle after agreeing on a leader before a window opens.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);
/// Rounds of the serving comparison (node, then bare handler, each round): several short
/// rounds in turn, so that the host's bursts of stolen time fall on both alike.
const SERVE_ROUNDS: usize = 4;

/// What `ctl bench cost` measures (see the module's notes).
pub struct CostArgs {
    pub idle_seconds: u64,
    pub serve_seconds: u64,
    pub connections: usize,
    pub trials: usize,
    pub sizes: Vec<usize>,
    /// An earlier electd binary idle beside this one ([`idle`]).
    pub baseline_bin: Option<PathBuf>,
    pub profile: Profile,
    pub seed: u64,
    pub etcd: PathBuf,
    pub work: PathBuf,
}

/// A cluster of `n` quorum nodes of its own in `work/name` (its own address block, which
/// must live as long as the cluster), started at the profile's timings.
pub(crate) fn own_cluster(
    bin: &Path,
    work: &Path,
    name: &str,
    n: usize,
    (hb, lease): (u64, u64),
) -> Result<(Cluster, AddrBlock), String> {
    let dir = work.join(name);
    let (block, addrs) = claim_addrs(n);
    Cluster::write_configs(&dir, &addrs, Mode::Quorum, Timing::default(), "electd-cost")
        .map_err(|e| e.to_string())?;
    let mut c = Cluster::open(&dir, bin).map_err(|e| e.to_string())?;
    start_quorum(&mut c, hb, lease)?;
    Ok((c, block))
}

/// utime + stime of process `pid` so far, in seconds; `None` when it is gone.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis,
    // which starts with field 3 (state); utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|p| cpu_seconds(*p)).sum()
}

/// Counting rules for one side's peer traffic: to and from `port` on the addresses of
/// `subnet`.
fn traffic_rules(subnet: &str, port: u16) -> [Vec<String>; 2] {
    let port = port.to_string();
    let rule = |dir: &str, pdir: &str| {
        ["-p", "tcp", dir, subnet, pdir, port.as_str()]
            .map(str::to_string)
            .to_vec()
    };
    [rule("-d", "--dport"), rule("-s", "--sport")]
}

/// Peer messages the nodes of `c` sent so far, by their own count; `None` when one does not
/// answer.
async fn messages_sent(c: &Cluster) -> Option<u64> {
    let mut total = 0;
    for id in c.ids() {
        total += c.status(id).await.ok()?.counters.total_sent();
    }
    Some(total)
}

/// What one side did in an idle window.
#[derive(Debug, Default)]
pub(crate) struct IdleCost {
    pub cpu_s: f64,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    /// The resident memory of its processes at the end, kB.
    pub rss_kb: u64,
}

/// One side of an idle window: its processes, and the rules that count its peer traffic.
pub(crate) struct Side {
    pids: Vec<u32>,
    rules: [Vec<String>; 2],
}

impl Side {
    /// The running nodes of `c`, whose peer port is on the addresses of `block`.
    pub(crate) fn electd(c: &Cluster, block: &AddrBlock) -> Side {
        Side {
            pids: (c.ids().into_iter())
                .filter_map(|id| c.pid(id).map(|p| p as u32))
                .collect(),
            rules: traffic_rules(&block.subnet(), BLOCK_NODE_PORT),
        }
    }

    fn etcd(etcd: &Etcd) -> Side {
        Side {
            pids: etcd.pids(),
            rules: traffic_rules(&etcd.subnet(), ETCD_PEER_PORT),
        }
    }
}

/// The resident memory of `pid` now, kB (`VmRSS` of `/proc/PID/status`); 0 when it is gone.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `sides` idle side by side for `seconds` from now: each one's CPU and peer traffic in the
/// window (traffic counted by iptables rules in a chain of the run's own: root only; said and
/// left out otherwise), and its resident memory at the end; and the window's length, s.
pub(crate) async fn measure_idle(
    sides: &[Side],
    seconds: u64,
) -> Result<(Vec<IdleCost>, f64), String> {
    let chain = match kernel::unavailable() {
        None => Some(Chain::create()?),
        Some(why) => {
            println!("idle peer traffic: not measured: {why}");
            None
        }
    };
    let rules: Vec<Vec<String>> = sides.iter().flat_map(|s| s.rules.clone()).collect();
    let cpu0: Vec<f64> = sides.iter().map(|s| cpu_of(&s.pids)).collect();
    if let Some(chain) = &chain {
        chain.count(&rules)?;
    }
    let t0 = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let counts = chain.as_ref().map(Chain::counters).transpose()?;
    let secs = t0.elapsed().as_secs_f64();
    let out = (sides.iter().enumerate())
        .map(|(i, s)| IdleCost {
            cpu_s: cpu_of(&s.pids) - cpu0[i],
            packets: counts.as_ref().map(|v| v[2 * i].0 + v[2 * i + 1].0),
            bytes: counts.as_ref().map(|v| v[2 * i].1 + v[2 * i + 1].1),
            rss_kb: s.pids.iter().map(|p| rss_kb(*p)).sum(),
        })
        .collect();
    Ok((out, secs))
}

/// The electd clusters `cs` (this build's first, then a baseline's if any) and etcd idle side
/// by side for `seconds`: each one's CPU and peer traffic, in `cs`'s order and then etcd's,
/// and the messages the first sent per second by its own count.
async fn idle(
    cs: &[(&Cluster, &AddrBlock)],
    etcd: &Etcd,
    seconds: u64,
) -> Result<(Vec<IdleCost>, Option<f64>), String> {
    for (c, _) in cs {
        electd_ready(c).await?;
    }
    until_agreed(etcd, &etcd.members(), |_| true)
        .await
        .ok_or("etcd: no agreed leader before the idle window")?;
    tokio::time::sleep(SETTLE).await;
    let mut sides: Vec<Side> = cs.iter().map(|(c, b)| Side::electd(c, b)).collect();
    sides.push(Side::etcd(etcd));
    let first = cs.first().ok_or("no electd cluster to measure")?.0;
    let m0 = messages_sent(first).await;
    let (out, secs) = measure_idle(&sides, seconds).await?;
    let m1 = messages_sent(first).await;
    let messages = m0.zip(m1).map(|(a, b)| (b - a) as f64 / secs);
    Ok((out, messages))
}

/// `electd-lab bare-leader`: a bare axum handler answering `GET /v1/leader` with the same
/// JSON as a node (the serving comparison's peer).
#[derive(clap::Args, Debug)]
pub struct BareArgs {
    /// Address to listen on.
    #[arg(long)]
    pub listen: String,
    /// A file with the `LeaderInfo` to answer, as JSON.
    #[arg(long)]
    pub body: PathBuf,
}

pub fn bare_main(args: BareArgs) -> std::process::ExitCode {
    use axum::routing::get;
    let run = async {
        let text = std::fs::read_to_string(&args.body).map_err(|e| e.to_string())?;
        let info: LeaderInfo = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let app = axum::Router::new().route(
            "/v1/leader",
            get(move || {
                let info = info.clone();
                async move { axum::Json(info) }
            }),
        );
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .map_err(|e| format!("{}: {e}", args.listen))?;
        // TCP_NODELAY on every connection, as the node's server sets it.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await.map_err(|e| e.to_string())
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bare-leader: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Requests per second of the node at `node_url` and of a bare handler answering its body.
async fn serving(
    block: &AddrBlock,
    node_url: &str,
    work: &Path,
    seconds: u64,
    connections: usize,
) -> Result<(f64, f64), String> {
    let body = reqwest::get(node_url)
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    let file = work.join("leader.json");
    std::fs::write(&file, body).map_err(|e| format!("{}: {e}", file.display()))?;
    // An address of the cluster's own block that no node uses.
    let listen = format!("{}:{BLOCK_NODE_PORT}", block.ip(200));
    let mut cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args(["bare-leader", "--listen", &listen, "--body"])
        .arg(&file);
    let bare = spawn_owned(cmd, &work.join("bare-leader.log"))?;
    let bare_url = format!("http://{listen}/v1/leader");
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while reqwest::get(&bare_url).await.is_err() {
        if tokio::time::Instant::now() > until {
            return Err("the bare handler did not answer within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut node, mut plain) = ((0u64, 0f64), (0u64, 0f64));
    for round in 1..=SERVE_ROUNDS {
        for (name, url, acc) in [
            ("node", node_url, &mut node),
            ("bare axum handler", bare_url.as_str(), &mut plain),
        ] {
            let h = hammer(&[url.to_string()], seconds, connections).await?;
            println!(
                "serving round {round}, {name}: {} requests in {:.1} s = {:.0} req/s, {} errors, \
                 p50 {:.2} ms p99 {:.2} ms",
                h.requests,
                h.seconds,
                h.requests as f64 / h.seconds,
                h.errors,
                percentile(&h.latency_ms, 50.0),
                percentile(&h.latency_ms, 99.0)
            );
            acc.0 += h.requests;
            acc.1 += h.seconds;
        }
    }
    drop(bare);
    Ok((node.0 as f64 / node.1, plain.0 as f64 / plain.1))
}

/// Failover at `n` nodes: `trials` SIGKILLs of the leader; fails on two claimants.
async fn failover_at(
    bundled: &Cluster,
    work: &Path,
    n: usize,
    timings: (u64, u64),
    trials: usize,
    seed: u64,
) -> Result<Vec<f64>, String> {
    let since = electd::clock::mono_ns();
    let (c, _block) = own_cluster(&bundled.bin, work, &format!("scale-{n}"), n, timings)?;
    let res = async {
        electd_ready(&c).await?;
        let target = Electd::new(&c);
        let ms = failovers(&target, trials, seed).await?;
        let split = target.split_brain_ms(since, timings.1 - timings.1 / 5);
        if split > 0.0 {
            return Err(format!("{n} nodes: {split:.0} ms with two claimants"));
        }
        Ok(ms)
    }
    .await;
    c.down(Duration::from_secs(2));
    res
}

/// etcd's failover at `n` members: `trials` SIGKILLs of the leader (its data removed after).
async fn etcd_failover_at(
    a: &CostArgs,
    n: usize,
    (hb, lease): (u64, u64),
) -> Result<Vec<f64>, String> {
    let dir = a.work.join(format!("etcd-{n}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let res = async {
        let etcd = Etcd::start_n(&a.etcd, &dir, hb, lease, n as u64).await?;
        failovers(&etcd, a.trials, a.seed).await
    }
    .await;
    // The first member's last words go with the error: the directory is removed.
    let res = res.map_err(|e| {
        let log = std::fs::read_to_string(dir.join("m1.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        format!("{e}; m1.log ends: {}", tail.join(" | "))
    });
    let _ = std::fs::remove_dir_all(&dir);
    res
}

/// `x / y` to two places, `?` when either was not measured.
pub(crate) fn ratio(x: Option<u64>, y: Option<u64>) -> String {
    x.zip(y).map_or("?".to_string(), |(x, y)| {
        format!("{:.2}", x as f64 / y as f64)
    })
}

/// The baseline's idle figures and this build's ratios to them (and both ratios to etcd's).
fn print_baseline(e: &IdleCost, b: &IdleCost, t: &IdleCost, bin: &Path, s: f64) {
    println!(
        "idle baseline {}: CPU {:.2} s ({:.1}%), {} packets/s, {} kB/s",
        bin.display(),
        b.cpu_s,
        100.0 * b.cpu_s / s,
        b.packets
            .map_or("?".into(), |p| format!("{:.0}", p as f64 / s)),
        b.bytes
            .map_or("?".into(), |x| format!("{:.1}", x as f64 / s / 1e3)),
    );
    println!(
        "ratio this build / baseline: CPU {:.2}, packets {}, bytes {}; to etcd's bytes: this \
         build {}, baseline {}",
        e.cpu_s / b.cpu_s,
        ratio(e.packets, b.packets),
        ratio(e.bytes, b.bytes),
        ratio(e.bytes, t.bytes),
        ratio(b.bytes, t.bytes),
    );
}

/// `electd-lab ctl bench cost`: the three parts, printed with their ratios.
pub async fn compare(bundled: &Cluster, a: &CostArgs) -> Result<(), String> {
    require_down(bundled)?;
    let timings @ (hb, lease) = a.profile.timings();
    println!(
        "cost, profile {:?} (heartbeat {hb} ms, follower lease / election timeout {lease} ms), \
         seed {}: idle {} s side by side; serving {} connections, {SERVE_ROUNDS} × {} s each; \
         failover at {:?} nodes, {} trials each",
        a.profile, a.seed, a.idle_seconds, a.connections, a.serve_seconds, a.sizes, a.trials
    );
    let (c, block) = own_cluster(&bundled.bin, &a.work, "idle", 5, timings)?;
    let baseline = match &a.baseline_bin {
        Some(bin) => Some(own_cluster(bin, &a.work, "idle-baseline", 5, timings)?),
        None => None,
    };
    let etcd_dir = a.work.join("etcd");
    std::fs::create_dir_all(&etcd_dir).map_err(|e| format!("{}: {e}", etcd_dir.display()))?;
    let parts = async {
        let etcd = Etcd::start(&a.etcd, &etcd_dir, hb, lease).await?;
        let mut cs = vec![(&c, &block)];
        cs.extend(baseline.as_ref().map(|(b, bb)| (b, bb)));
        let (mut sides, messages) = idle(&cs, &etcd, a.idle_seconds).await?;
        drop(etcd);
        let t = sides.pop().expect("etcd's side");
        let e = sides.remove(0);
        let s = a.idle_seconds as f64;
        println!(
            "idle CPU: electd {:.2} s ({:.1}% of a core), etcd {:.2} s ({:.1}%); ratio {:.2}",
            e.cpu_s,
            100.0 * e.cpu_s / s,
            t.cpu_s,
            100.0 * t.cpu_s / s,
            e.cpu_s / t.cpu_s
        );
        if let (Some(ep), Some(eb), Some(tp), Some(tb)) = (e.packets, e.bytes, t.packets, t.bytes) {
            println!(
                "idle peer traffic: electd {:.0} packets/s {:.1} kB/s, etcd {:.0} packets/s \
                 {:.1} kB/s; ratio packets {:.2}, bytes {:.2}",
                ep as f64 / s,
                eb as f64 / s / 1e3,
                tp as f64 / s,
                tb as f64 / s / 1e3,
                ep as f64 / tp as f64,
                eb as f64 / tb as f64
            );
        }
        if let Some(m) = messages {
            println!("idle: electd sent {m:.0} peer messages/s by its own count");
        }
        if let (Some(b), Some(bin)) = (sides.first(), &a.baseline_bin) {
            print_baseline(&e, b, &t, bin, s);
        }
        let leader = electd_ready(&c).await?;
        let addr = c.member(leader).map_err(|e| e.to_string())?.addr.clone();
        let (node, plain) = serving(
            &block,
            &format!("http://{addr}/v1/leader"),
            &a.work,
            a.serve_seconds,
            a.connections,
        )
        .await?;
        println!(
            "serving GET /v1/leader: node {node:.0} req/s, bare axum handler {plain:.0} req/s; \
             ratio {:.2}",
            node / plain
        );
        Ok::<_, String>(())
    }
    .await;
    c.down(Duration::from_secs(2));
    if let Some((b, _)) = &baseline {
        b.down(Duration::from_secs(2));
    }
    parts?;
    let mut sizes: Vec<(usize, Vec<f64>, Vec<f64>)> = Vec::new();
    for &n in &a.sizes {
        let ms = failover_at(bundled, &a.work, n, timings, a.trials, a.seed).await?;
        let ms = summarize(&format!("electd failover at {n:>2} nodes"), ms);
        let etcd = summarize(
            &format!("etcd   failover at {n:>2} members"),
            etcd_failover_at(a, n, timings).await?,
        );
        println!(
            "ratio electd/etcd at {n}: p50 {:.2}, p99 {:.2}",
            percentile(&ms, 50.0) / percentile(&etcd, 50.0),
            percentile(&ms, 99.0) / percentile(&etcd, 99.0)
        );
        sizes.push((n, ms, etcd));
    }
    if let (Some((n0, e0, t0)), Some((n1, e1, t1))) = (sizes.first(), sizes.last()) {
        let growth = |a: &[f64], b: &[f64], p| percentile(b, p) / percentile(a, p);
        println!(
            "growth {n0} -> {n1}: electd p50 {:.2}, p99 {:.2}; etcd p50 {:.2}, p99 {:.2}",
            growth(e0, e1, 50.0),
            growth(e0, e1, 99.0),
            growth(t0, t1, 50.0),
            growth(t0, t1, 99.0)
        );
    }
    Ok(())
}
