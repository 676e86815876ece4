//! `electd-lab sim` (what `scripts/sim.sh` runs): schedules of the quorum simulator, one line
//! per failure with the command that replays it, then `sim: N schedules, V violations`.

use std::process::ExitCode;
use std::time::Instant;

use super::quorum::{run, Spec};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// How many schedules, from seed --first on (default: one run's worth, 200).
    #[arg(long, default_value_t = 200)]
    pub seeds: u64,
    /// The first seed of the range (default: random, printed).
    #[arg(long)]
    pub first: Option<u64>,
    /// Replay this one schedule and print its timeline.
    #[arg(long, conflicts_with_all = ["seeds", "first"])]
    pub seed: Option<u64>,
    /// Cluster size.
    #[arg(long, default_value_t = 5)]
    pub nodes: usize,
    /// Fault steps per schedule before the final heal.
    #[arg(long, default_value_t = 8)]
    pub steps: usize,
    /// Run a deliberately broken node (claim lease three times the followers' lease): the
    /// checkers must report violations.
    #[arg(long = "unsafe")]
    pub broken: bool,
}

/// Files this process has open.
fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Runs the schedules; exit 1 when any was violated.
pub fn main(args: SimArgs) -> ExitCode {
    let spec = |seed| Spec {
        seed,
        nodes: args.nodes,
        steps: args.steps,
        broken: args.broken,
    };
    let flags = format!(
        "--nodes {} --steps {}{}",
        args.nodes,
        args.steps,
        if args.broken { " --unsafe" } else { "" }
    );
    if let Some(seed) = args.seed {
        let out = run(&spec(seed));
        for line in &out.timeline {
            println!("{line}");
        }
        for v in &out.violations {
            println!("VIOLATION {v}");
        }
        println!(
            "sim: seed {seed}: {} ms simulated, highest term {}, {} violations",
            out.sim_ms,
            out.max_term,
            out.violations.len()
        );
        return if out.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let first = args.first.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000)
            .unwrap_or(1)
    });
    println!(
        "sim: seeds {first}..{} ({flags})",
        first + args.seeds.saturating_sub(1)
    );
    let started = Instant::now();
    let (mut violated, mut sim_ms) = (0u64, 0u64);
    let mut files = open_files();
    for seed in first..first + args.seeds {
        let out = run(&spec(seed));
        sim_ms += out.sim_ms;
        if let Some(v) = out.violations.first() {
            violated += 1;
            println!("FAIL seed {seed}: {v} (replay: scripts/sim.sh --seed {seed} {flags})");
        }
        // A schedule must free what it opened: a leak would end a long soak.
        let now = open_files();
        if now > files {
            violated += 1;
            println!(
                "FAIL seed {seed}: {} files left open (replay: scripts/sim.sh --seed {seed} {flags})",
                now - files
            );
            files = now;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "sim: {:.1} schedules/s, {:.0} s simulated in {secs:.1} s",
        args.seeds as f64 / secs,
        sim_ms as f64 / 1e3
    );
    println!("sim: {} schedules, {violated} violations", args.seeds);
    if violated > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
