//! `electd-lab ctl` and `electd-lab chaos`: the command line of [`crate::cluster`] (run by
//! `scripts/cluster.sh`) and of the chaos suite (run by `scripts/chaos.sh`).

use rustix::process::Signal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::chaos::runner::{run_matrix, Layer, Matrix};
use crate::chaos::scenario::Scenario;
use crate::cluster::{agreed, status_row, Cluster, CtlError};
use electd_client::Mode;
use electd_client::NodeId;

#[derive(clap::Args, Debug)]
pub struct CtlArgs {
    /// The cluster directory (node*.toml; runtime files go to its run/).
    #[arg(long, default_value = "cluster", env = "ELECTD_CLUSTER_DIR")]
    pub cluster_dir: PathBuf,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum CtlCmd {
    /// Start every node that is not running; wait at most 30 s for an agreed leader.
    Up {
        #[arg(long, default_value = "quorum")]
        mode: Mode,
        /// Seconds to wait for an agreed leader.
        #[arg(long, default_value_t = 30)]
        wait: u64,
        /// Run the nodes with this timing profile (lan or shared) instead of their config's
        /// timings (kept for later `start N` until the next `up`).
        #[arg(long)]
        timing_profile: Option<String>,
        /// Run the nodes with this heartbeat instead of their config's (kept for later
        /// `start N` until the next `up`), e.g. the fast profile: 10.
        #[arg(long)]
        heartbeat_ms: Option<u64>,
        /// Run the nodes with this follower lease instead of their config's, e.g. 50.
        #[arg(long)]
        follower_lease_ms: Option<u64>,
        /// Serve the API and the peer RPC over TLS: a CA of the cluster's own and a
        /// certificate per member, made under run/tls/ (client commands: --cacert
        /// cluster/run/tls/ca.pem). Without it, `up` removes them.
        #[arg(long)]
        tls: bool,
    },
    /// SIGTERM to every node, then SIGKILL to what is left; removes pid files.
    Down {
        /// Also delete every node's data (votes, logs, event logs, of every mode) and logs:
        /// the next `up` starts a new cluster, with the members of the configs.
        #[arg(long)]
        wipe: bool,
    },
    /// One row a node: id, role, term, leader.
    Status,
    /// Print the leader every running node agrees on; exit 1 when there is none.
    Leader,
    /// SIGKILL node N.
    Kill { id: NodeId },
    /// SIGTERM node N (SIGKILL after 5 s).
    Stop { id: NodeId },
    /// Start node N again on its data dir, in the cluster's mode.
    Start { id: NodeId },
    /// SIGSTOP node N.
    Pause { id: NodeId },
    /// SIGCONT node N.
    Resume { id: NodeId },
    /// Cut all peer traffic between groups, e.g. `partition 1,2 3,4,5`.
    Partition {
        #[arg(required = true, num_args = 2..)]
        groups: Vec<String>,
    },
    /// Clear every running node's fault set.
    Heal,
    /// SIGKILL nodes at random moments and restart them, then check one agreed leader and
    /// (quorum mode) no term led twice.
    CrashLoop {
        #[arg(long, default_value_t = 50)]
        cycles: usize,
        /// Seed of the kill schedule (random and printed when not given).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Benchmarks on the running cluster.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// SIGKILL the leader, time until all agree on a new one, restart it; repeat.
    Failover {
        #[arg(long, default_value_t = 20)]
        trials: usize,
        /// SIGTERM instead of SIGKILL (graceful handoff).
        #[arg(long)]
        graceful: bool,
    },
    /// Every node in a cgroup of a share of one core beside a busy neighbour: leader changes
    /// over an idle stretch (and an hour's worth), then failover after SIGKILL (root).
    Throttled {
        /// The quota of each node's cgroup, percent of one core.
        #[arg(long, default_value_t = 20)]
        cpu_percent: u64,
        #[arg(long, default_value_t = 120)]
        idle_seconds: u64,
        #[arg(long, default_value_t = 20)]
        trials: usize,
    },
    /// Cut the leader off; time its stop and the majority's new claim from the event logs.
    Isolate {
        #[arg(long, default_value_t = 10)]
        trials: usize,
    },
    /// Failover of this cluster (started here, with the profile's timings) against a 5-member
    /// etcd at the same timings, measured by one poller; prints both and the ratios.
    VsEtcd {
        #[arg(long, default_value_t = 30)]
        trials: usize,
        /// After the failovers, leave both clusters idle this long side by side and count
        /// their elections.
        #[arg(long, default_value_t = 0)]
        idle_seconds: u64,
        #[command(flatten)]
        run: BesideEtcd,
    },
    /// Failover where the application runs: host crashes (node, `electd run` and the
    /// application at once) until another host's application runs, against etcd with
    /// `etcdctl lock` at the same timings (the cluster must be down; started here).
    AppFailover {
        #[arg(long, default_value_t = 12)]
        trials: usize,
        /// The etcdctl binary (Debian's etcd-client).
        #[arg(long, default_value = "/usr/bin/etcdctl")]
        etcdctl: PathBuf,
        #[command(flatten)]
        run: BesideEtcd,
    },
    /// The cost side against etcd: idle CPU and peer traffic side by side, `GET /v1/leader`
    /// against a bare axum handler, failover at growing cluster sizes (the bundled cluster
    /// must be down; clusters of their own are started here).
    Cost {
        #[arg(long, default_value_t = 30)]
        idle_seconds: u64,
        /// Seconds of each serving round (four rounds each side, in turn).
        #[arg(long, default_value_t = 5)]
        serve_seconds: u64,
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// Failovers per cluster size.
        #[arg(long, default_value_t = 10)]
        trials: usize,
        /// Cluster sizes for the failovers, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "5,15,31")]
        sizes: Vec<usize>,
        /// An earlier electd binary to run idle in the same window, a cluster of its own,
        /// measured by the same code: the ratios of this build's CPU, packets and bytes to
        /// its (a change's cost, side by side in one run).
        #[arg(long)]
        baseline_bin: Option<std::path::PathBuf>,
        #[command(flatten)]
        run: BesideEtcd,
    },
    /// Named roles: a holder's crash with 1 and with 1,000 roles against etcd's election recipe
    /// (lab/src/etcd_election.rs) at the same timings, by one poller; then clusters with 0 to 10,000 roles idle side by
    /// side (CPU, peer traffic, memory). Clusters of their own are started here.
    Roles {
        /// Crashes per role count (0: no crash trials).
        #[arg(long, default_value_t = 20)]
        trials: usize,
        /// The role counts of the crash trials, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,1000")]
        crash_roles: Vec<usize>,
        /// The role counts of the idle clusters, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0,1,1000,10000")]
        idle_roles: Vec<usize>,
        /// The idle window (0: no idle part).
        #[arg(long, default_value_t = 30)]
        idle_seconds: u64,
        #[command(flatten)]
        run: BesideEtcd,
    },
    /// `GET /v1/leader` at full rate on every node; fails on any leader change meanwhile.
    Load {
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Concurrent clients (keep-alive connections), spread over the nodes.
        #[arg(long, default_value_t = 64)]
        connections: usize,
    },
}

/// What the benchmarks against etcd share: the timings, the seed, etcd and a work directory.
#[derive(clap::Args, Debug)]
pub struct BesideEtcd {
    #[arg(long, value_enum, default_value = "default")]
    profile: crate::versus::Profile,
    /// Seed of the random wait before each kill or crash (default: random, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// The etcd binary (Debian's etcd-server).
    #[arg(long, default_value = "/usr/bin/etcd")]
    etcd: PathBuf,
    /// Where etcd's data and the run's own files go (created; removed by the caller).
    #[arg(long)]
    work: PathBuf,
}

impl BesideEtcd {
    /// Creates the work directory; answers the seed (drawn when not given).
    fn prepare(&self) -> Result<u64, CtlError> {
        std::fs::create_dir_all(&self.work).map_err(|source| CtlError::Io {
            path: self.work.clone(),
            source,
        })?;
        Ok(self.seed.unwrap_or_else(rand::random))
    }
}

fn parse_group(s: &str) -> Result<Vec<NodeId>, CtlError> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| CtlError::Usage(format!("{s:?}: a group is ids separated by commas")))
        })
        .collect()
}

async fn print_status(c: &Cluster) {
    let states = c.states().await;
    let members = c.members_in_force(&states).await;
    for (id, st) in states {
        let outside = members.as_ref().is_some_and(|m| !m.contains(&id));
        let note = if outside { "  (not a member)" } else { "" };
        println!("{}{note}", status_row(id, &st));
    }
}

async fn run(args: CtlArgs) -> Result<ExitCode, CtlError> {
    let bin = crate::bin::electd_bin().map_err(CtlError::Usage)?;
    let mut c = Cluster::open(&args.cluster_dir, &bin)?;
    match args.cmd {
        CtlCmd::Up {
            mode,
            wait,
            timing_profile,
            heartbeat_ms,
            follower_lease_ms,
            tls,
        } => {
            let timing = TimingFlags {
                profile: timing_profile,
                heartbeat_ms,
                follower_lease_ms,
            };
            up(c, mode, wait, timing, tls).await
        }
        CtlCmd::Down { wipe } => {
            c.down(Duration::from_secs(5));
            c.stop_detached_store();
            if wipe {
                c.wipe()?;
                eprintln!("wiped: {}", c.run.join("data").display());
            }
            Ok(ExitCode::SUCCESS)
        }
        CtlCmd::Status => {
            print_status(&c).await;
            Ok(ExitCode::SUCCESS)
        }
        CtlCmd::Leader => match agreed(&c.member_states().await.0) {
            Some(l) => {
                println!("{l}");
                Ok(ExitCode::SUCCESS)
            }
            None => Ok(ExitCode::FAILURE),
        },
        CtlCmd::Kill { id } => signal_result(c.kill(node(&c, id)?), id),
        CtlCmd::Stop { id } => signal_result(c.stop(node(&c, id)?, Duration::from_secs(5)), id),
        CtlCmd::Start { id } => {
            let pid = c.start(node(&c, id)?, c.mode())?;
            println!("node {id}: pid {pid}");
            Ok(ExitCode::SUCCESS)
        }
        CtlCmd::Pause { id } => signal_result(c.signal(node(&c, id)?, Signal::STOP), id),
        CtlCmd::Resume { id } => signal_result(c.signal(node(&c, id)?, Signal::CONT), id),
        CtlCmd::Partition { groups } => {
            let groups = groups
                .iter()
                .map(|g| parse_group(g))
                .collect::<Result<Vec<_>, _>>()?;
            c.partition(&groups).await?;
            Ok(ExitCode::SUCCESS)
        }
        CtlCmd::Bench { what } => bench(c, what).await,
        CtlCmd::CrashLoop { cycles, seed } => crash_loop(&c, cycles, seed).await,
        CtlCmd::Heal => {
            c.heal().await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `id` when it is a member of the cluster.
fn node(c: &Cluster, id: NodeId) -> Result<NodeId, CtlError> {
    c.member(id).map(|_| id)
}

/// `up`'s timing overrides.
struct TimingFlags {
    profile: Option<String>,
    heartbeat_ms: Option<u64>,
    follower_lease_ms: Option<u64>,
}

/// `up`: starts every node (refused while nodes run in another mode or with other timing
/// flags), waits for an agreed leader and prints the states.
async fn up(
    mut c: Cluster,
    mode: Mode,
    wait: u64,
    timing: TimingFlags,
    tls: bool,
) -> Result<ExitCode, CtlError> {
    let TimingFlags {
        profile,
        heartbeat_ms,
        follower_lease_ms,
    } = timing;
    let mut flags = Vec::new();
    if let Some(p) = profile {
        flags.extend(["--timing-profile".to_string(), p]);
    }
    if let Some(v) = heartbeat_ms {
        flags.extend(["--heartbeat-ms".to_string(), v.to_string()]);
    }
    if let Some(v) = follower_lease_ms {
        flags.extend(["--follower-lease-ms".to_string(), v.to_string()]);
    }
    let running: Vec<_> = c
        .ids()
        .into_iter()
        .filter(|id| c.pid(*id).is_some())
        .collect();
    if !running.is_empty() && c.mode() != mode {
        return Err(CtlError::Usage(format!(
            "nodes {running:?} are running in mode {}; run `down` first",
            c.mode().as_str()
        )));
    }
    if !running.is_empty() && c.tls_ca().is_some() != tls {
        return Err(CtlError::Usage(format!(
            "nodes {running:?} are running {} TLS; run `down` first",
            if tls { "without" } else { "with" }
        )));
    }
    if !running.is_empty() && c.extra_args != flags {
        return Err(CtlError::Usage(format!(
            "nodes {running:?} are running with timing flags {:?}; run `down` first",
            c.extra_args
        )));
    }
    c.set_timing_flags(flags)?;
    c.ensure_secrets()?;
    if tls {
        c.ensure_tls()?;
        eprintln!(
            "tls: CA {} (electd status --cacert {})",
            c.tls_ca().unwrap_or_default().display(),
            c.tls_ca().unwrap_or_default().display()
        );
    } else {
        c.drop_tls()?;
    }
    if mode == Mode::Mutex && c.store_url().is_none() {
        // The bundled cluster's store: beside the nodes, on 127.0.0.1:7009, until `down`.
        let ip = c.members[0]
            .addr
            .rsplit_once(':')
            .map_or("127.0.0.1", |a| a.0)
            .to_string();
        c.start_store(&ip, BUNDLED_STORE_PORT)?;
        eprintln!("store: PostgreSQL on {ip}:{BUNDLED_STORE_PORT}");
        c.detach_store()?;
    }
    for id in c.ids() {
        let pid = c.start(id, mode)?;
        eprintln!("node {id}: pid {pid}, log {}", c.log_file(id).display());
    }
    // Agreement among the members in force: a node removed at run time still has its
    // config here, and runs, but takes no part.
    let (leader, outside) = c.wait_agreed_members(Duration::from_secs(wait)).await;
    print_status(&c).await;
    if !outside.is_empty() {
        eprintln!(
            "nodes {outside:?} are not members of the cluster (removed at run time); \
             `electd member add` takes one back, `down --wipe` starts a new cluster"
        );
    }
    match leader {
        Some(l) => {
            println!("leader: {l} (mode {})", mode.as_str());
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!(
                "no agreed leader within {wait} s; see the logs under {}",
                c.run.display()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The port of the bundled cluster's store (mutex mode), beside its nodes' 7001–7005.
const BUNDLED_STORE_PORT: u16 = 7009;

/// `bench …`: one benchmark, its numbers printed; exit 1 when it failed.
async fn bench(c: Cluster, what: BenchCmd) -> Result<ExitCode, CtlError> {
    let res = match what {
        BenchCmd::Failover {
            trials,
            graceful: false,
        } => crate::bench::failover(&c, trials).await.map(|v| {
            crate::bench::summarize("failover after SIGKILL of the leader", v);
        }),
        BenchCmd::Failover {
            trials,
            graceful: true,
        } => crate::bench::handoff(&c, trials).await.map(print_handoff),
        BenchCmd::Throttled {
            cpu_percent,
            idle_seconds,
            trials,
        } => crate::throttle::throttled(&c, cpu_percent, idle_seconds, trials).await,
        BenchCmd::Isolate { trials } => crate::bench::isolate(&c, trials).await.map(|(s, e)| {
            crate::bench::summarize("isolated leader stopped claiming", s);
            crate::bench::summarize("majority's new leader claimed", e);
        }),
        BenchCmd::Load {
            seconds,
            connections,
        } => crate::bench::load(&c, seconds, connections)
            .await
            .and_then(|r| print_load(&r)),
        BenchCmd::VsEtcd {
            trials,
            idle_seconds,
            run,
        } => {
            let seed = run.prepare()?;
            let mut c = c;
            crate::versus::compare(
                &mut c,
                trials,
                idle_seconds,
                run.profile,
                seed,
                &run.etcd,
                &run.work,
            )
            .await
        }
        BenchCmd::Cost {
            idle_seconds,
            serve_seconds,
            connections,
            trials,
            sizes,
            baseline_bin,
            run,
        } => {
            let args = crate::cost::CostArgs {
                idle_seconds,
                serve_seconds,
                connections,
                trials,
                sizes,
                baseline_bin,
                profile: run.profile,
                seed: run.prepare()?,
                etcd: run.etcd,
                work: run.work,
            };
            crate::cost::compare(&c, &args).await
        }
        BenchCmd::Roles {
            trials,
            crash_roles,
            idle_roles,
            idle_seconds,
            run,
        } => {
            let args = crate::roles_bench::RolesArgs {
                trials,
                crash_roles,
                idle_roles,
                idle_seconds,
                profile: run.profile,
                seed: run.prepare()?,
                etcd: run.etcd,
                work: run.work,
            };
            crate::roles_bench::compare(&c, &args).await
        }
        BenchCmd::AppFailover {
            trials,
            etcdctl,
            run,
        } => {
            let seed = run.prepare()?;
            let mut c = c;
            crate::app_failover::compare(
                &mut c,
                trials,
                run.profile,
                seed,
                &run.etcd,
                &etcdctl,
                &run.work,
            )
            .await
        }
    };
    match res {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("bench failed: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `bench failover --graceful`: when the leader stopped claiming, the others agreed on a new
/// one, and the old one exited, after its SIGTERM.
fn print_handoff(h: crate::bench::Handoff) {
    let stopped: Vec<f64> = h.stopped_claiming.iter().flatten().copied().collect();
    let missing = h.stopped_claiming.len() - stopped.len();
    crate::bench::summarize("SIGTERM: the leader stopped claiming", stopped);
    if missing > 0 {
        println!("  ({missing} trials recorded no step-down event)");
    }
    crate::bench::summarize("SIGTERM: the others agreed on a new leader", h.handoff);
    crate::bench::summarize("SIGTERM: the old leader exited", h.exited);
}

/// `bench load`: the rate, the latency and the leader changes; `Err` when the leader changed.
fn print_load(report: &crate::bench::LoadReport) -> Result<(), String> {
    let r = &report.load;
    let p = |q| crate::bench::percentile(&r.latency_ms, q);
    println!(
        "load: {} requests in {:.1} s = {:.0} req/s, {} errors; latency \
         p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        r.requests,
        r.seconds,
        r.requests as f64 / r.seconds,
        r.errors,
        p(50.0),
        p(99.0),
        r.latency_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "leader before: {} (term {}), after: {} (term {}); role changes \
         during the run: {}",
        report.before.0,
        report.before.1,
        report.after.0,
        report.after.1,
        report.changes.len()
    );
    for e in &report.changes {
        println!("  change: {e:?}");
    }
    if report.changes.is_empty() && report.before == report.after {
        Ok(())
    } else {
        Err("spurious leader changes under load".to_string())
    }
}

/// `crash-loop`: SIGKILLs at random moments (seeded; the seed is printed to replay), then the
/// verdict.
async fn crash_loop(c: &Cluster, cycles: usize, seed: Option<u64>) -> Result<ExitCode, CtlError> {
    let seed = seed.unwrap_or_else(rand::random);
    println!("crash loop: {cycles} cycles, seed {seed} (replay with --seed {seed})");
    let timing = electd::config::Config::load(&c.member(c.ids()[0])?.config)?.timing;
    match crate::crashloop::crash_loop(c, timing, cycles, seed, 50).await {
        Ok(r) => {
            println!(
                "crash loop passed: {} cycles in {:.1} s, {} leader kills, {} kills \
                 during start-up, {} restarts read back with their term, {} leaderships \
                 taken; final leader {} in term {}",
                r.cycles,
                r.elapsed_ms as f64 / 1e3,
                r.leader_kills,
                r.early_kills,
                r.durable_checks,
                r.leader_changes,
                r.final_leader,
                r.final_term
            );
            if c.mode().leased() {
                println!("event logs: no term led twice, never two claimants at once");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("crash loop FAILED (seed {seed}): {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn signal_result(sent: bool, id: NodeId) -> Result<ExitCode, CtlError> {
    if sent {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("node {id} is not running");
        Ok(ExitCode::FAILURE)
    }
}

/// Entry point of `electd-lab ctl`.
pub fn main(args: CtlArgs) -> ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("electd-lab ctl: {e}");
            ExitCode::from(2)
        }
    }
}

/// `electd-lab chaos`: the matrix of `docs/design/chaos.md` on real clusters.
#[derive(clap::Args, Debug)]
pub struct ChaosArgs {
    /// One run of each scenario per mode (and per layer where it matters), seed 1.
    #[arg(long)]
    pub quick: bool,
    /// Only this scenario (S1..S26); repeatable.
    #[arg(long)]
    pub scenario: Vec<Scenario>,
    /// Only this mode; repeatable.
    #[arg(long)]
    pub mode: Vec<Mode>,
    /// Only this layer (app, kernel, process); repeatable.
    #[arg(long)]
    pub layer: Vec<String>,
    /// Replay exactly this seed (otherwise seeds 1..=--seeds).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How many seeds a scenario runs with by default.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Output folder of report.json, report.md, the SVG timelines and the runs' logs.
    #[arg(long, default_value = "target/chaos")]
    pub out: PathBuf,
    /// Every run over TLS: a CA of the run's own, the peers authenticated by their
    /// certificates instead of the cluster secret.
    #[arg(long)]
    pub tls: bool,
    /// Run nothing: judge the stored runs of the report in --out again with this build's
    /// checkers (each run's `runs/*/runlog.json`) and rewrite report.json and report.md.
    #[arg(long)]
    pub rejudge: bool,
    /// Run the lab's `electd-flawed` binary (beside electd; `cargo build -p electd --features
    /// flaws --bin electd-flawed`) with this deliberate flaw (src/bin/electd/main.rs,
    /// `lab_flaws`): a broken variant, to see which checker catches it. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub lab_flaw: Vec<String>,
}

/// Entry point of `electd-lab chaos`; exits 1 when a run failed.
pub fn chaos_main(args: ChaosArgs) -> ExitCode {
    if args.rejudge {
        return rejudge(&args.out);
    }
    let bin = match crate::bin::electd_bin() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("electd-lab chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let m = match matrix(&args) {
        Ok(m) => m,
        Err(code) => return code,
    };
    println!(
        "chaos: seeds {:?} (replay one run with --scenario S --mode M --layer L --seed N)",
        m.seeds
    );
    run_chaos(&m, &bin)
}

/// `chaos --rejudge`: the stored runs in `out` judged again.
fn rejudge(out: &Path) -> ExitCode {
    // Each scenario's own bound (S26's is longer).
    let bound = |s: &str| {
        s.parse::<Scenario>()
            .map_or(crate::chaos::scenario::CONVERGE_BOUND_MS, |s| {
                s.converge_bound_ms()
            })
    };
    match crate::chaos::report::rejudge(out, bound) {
        Ok((n, changed)) => {
            println!(
                "chaos: {n} runs in {} judged again: {changed} came out different",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("electd-lab chaos --rejudge: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The matrix the arguments ask for (every scenario and mode when none is named); `Err` with
/// exit code 2 for an unknown layer.
fn matrix(args: &ChaosArgs) -> Result<Matrix, ExitCode> {
    let scenarios: Vec<Scenario> = if args.scenario.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        args.scenario.clone()
    };
    let mut layers = Vec::new();
    for l in &args.layer {
        match Layer::parse(l) {
            Some(l) => layers.push(l),
            None => {
                eprintln!("electd-lab chaos: unknown layer {l}; expected app, kernel or process");
                return Err(ExitCode::from(2));
            }
        }
    }
    let seeds: Vec<u64> = match (args.seed, args.quick) {
        (Some(s), _) => vec![s],
        (None, true) => vec![1],
        (None, false) => (1..=args.seeds.max(1)).collect(),
    };
    Ok(Matrix {
        modes: if args.mode.is_empty() {
            Mode::ALL.to_vec()
        } else {
            args.mode.clone()
        },
        scenarios,
        layers: (!layers.is_empty()).then_some(layers),
        seeds,
        out: args.out.clone(),
        tls: args.tls,
        flaws: args.lab_flaw.clone(),
    })
}

/// Runs the matrix until it is done or the process is told to stop; exit 0 when every run
/// passed, 1 when one failed or was skipped (a skip is no pass) or the report could not be
/// written, 130 when stopped.
fn run_chaos(m: &Matrix, bin: &Path) -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let run = rt.block_on(async {
        tokio::select! {
            r = run_matrix(m, bin) => Some(r),
            sig = electd::terminate_signal() => {
                // Dropping the run removes its iptables chain and temp dir; its nodes die
                // with this process (they were started with a parent-death signal).
                eprintln!("electd-lab chaos: {sig}, stopping; no report written");
                None
            }
        }
    });
    let Some(run) = run else {
        return ExitCode::from(130);
    };
    match run {
        Ok(all_passed) => {
            println!("report: {}", m.out.join("report.md").display());
            if all_passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("electd-lab chaos: cannot write the report: {e}");
            ExitCode::from(1)
        }
    }
}
