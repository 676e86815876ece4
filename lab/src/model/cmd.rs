//! `electd-lab model` (what `scripts/model.sh` runs): checks the quorum core as built,
//! breadth first to a depth and then by seeded random walks, and each broken variant by random
//! walks until its first counterexample; prints for each the states explored, the depth, the
//! time, and for each property whether a path was found and its length.

use std::process::ExitCode;
use std::time::Duration;

use super::liveness::{self, LiveReport};
use super::search::{check, Report, Search};
use super::{QuorumModel, Variant};

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Non-voters beside the voters (openraft learners; at most 8 nodes in all). The variant
    /// `count-learner-ack` runs with at least one.
    #[arg(long, default_value_t = 0)]
    pub learners: u64,
    /// Steps from the start explored breadth first, every state.
    #[arg(long, default_value_t = 10)]
    pub depth: usize,
    /// Steps of each random walk.
    #[arg(long, default_value_t = 80)]
    pub walk_depth: usize,
    /// Seconds of random walks on the sound core.
    #[arg(long, default_value_t = 60)]
    pub walk_s: u64,
    /// Seconds of the liveness check on the sound core: every state of random walks healed,
    /// and a node must claim within the bound (liveness.rs).
    #[arg(long, default_value_t = 30)]
    pub live_s: u64,
    /// Seconds each broken variant may walk before its first counterexample (the search
    /// stops at it).
    #[arg(long, default_value_t = 600)]
    pub find_s: u64,
    /// Seconds the breadth-first check may take at most.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// The walks' seed (default: drawn, and printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the counterexample paths.
    #[arg(long)]
    pub paths: bool,
    /// Check only this variant (default: the sound core, then every broken variant).
    #[arg(long, value_enum)]
    pub variant: Option<Variant>,
    /// Check the rules of named roles instead (roles.rs): random walks of the sound rules, then
    /// of each broken rule until it is caught, each at most `--roles-states` states.
    #[arg(long)]
    pub roles: bool,
    /// States each walk search of `--roles` may visit.
    #[arg(long, default_value_t = 20_000_000)]
    pub roles_states: usize,
}

pub fn main(args: ModelArgs) -> ExitCode {
    let seed = args.seed.unwrap_or_else(rand::random);
    println!("model: seed {seed} (replay: --seed {seed})");
    if args.roles {
        return roles_main(&args, seed);
    }
    let variants = match args.variant {
        Some(v) => vec![v],
        None => vec![
            Variant::Sound,
            Variant::VoteWhileLeading,
            Variant::LongLease,
            Variant::TrustNewIncarnation,
            Variant::RecordBetweenProbes,
        ],
    };
    let walks = Search::Walks {
        depth: args.walk_depth,
        seed,
    };
    let (walk_time, find_time) = (
        Duration::from_secs(args.walk_s),
        Duration::from_secs(args.find_s),
    );
    let mut ok = true;
    for v in variants {
        let learners = match v {
            Variant::CountLearnerAck => args.learners.max(1),
            _ => args.learners,
        };
        let model = || QuorumModel::new(args.nodes, v).with_learners(learners);
        if v == Variant::Sound {
            let r = check(
                model(),
                Search::Breadth { depth: args.depth },
                Duration::from_secs(args.timeout_s),
            );
            print(&r, args.paths);
            ok &= verdict(&r);
        }
        let depth = args.walk_depth;
        if v == Variant::AckUnconfirmed {
            // Its counterexample needs the faults to end (a heal), which only the liveness
            // walks try: they found it once (seed 3268846430960046888, in 6 s), and in none of
            // 3 other seeds' 120 s; lab/tests/model.rs plays it. Not among the defaults.
            let r = liveness::check(&model(), seed, depth, find_time);
            print_liveness(&r, v, args.nodes, depth, args.paths);
            ok &= r
                .failed
                .as_ref()
                .is_some_and(|(why, ..)| why.contains("promise"));
            continue;
        }
        let time = if v == Variant::Sound {
            walk_time
        } else {
            find_time
        };
        let r = check(model(), walks, time);
        print(&r, args.paths);
        ok &= verdict(&r);
        if v == Variant::Sound {
            let r = liveness::check(&model(), seed, depth, Duration::from_secs(args.live_s));
            print_liveness(&r, v, args.nodes, depth, args.paths);
            ok &= r.failed.is_none();
        }
    }
    verdict_line(ok)
}

/// The run's last line, and its exit status.
fn verdict_line(ok: bool) -> ExitCode {
    println!(
        "model: {}",
        if ok { "as expected" } else { "NOT as expected" }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--roles`: the sound rules must break nothing and reach every `sometimes`; each broken rule
/// must be caught.
fn roles_main(args: &ModelArgs, seed: u64) -> ExitCode {
    use super::roles::{check, RolesModel, RolesVariant};
    let guard = Duration::from_secs(args.timeout_s.max(args.find_s));
    let mut ok = true;
    for v in [
        RolesVariant::Sound,
        RolesVariant::GrantInFirstLease,
        RolesVariant::IgnoreTakenAt,
        RolesVariant::GrantRevokedAtOnce,
        RolesVariant::ReleaseAtOnce,
        RolesVariant::ReuseToken,
        RolesVariant::ClaimFromReceipt,
    ] {
        let model = RolesModel::new(args.nodes, v);
        let r = check(model, args.walk_depth, Some(seed), args.roles_states, guard);
        let as_expected = if v == RolesVariant::Sound {
            r.broken.is_empty() && r.reached.len() == 3
        } else {
            !r.broken.is_empty()
        };
        ok &= as_expected;
        println!(
            "model roles {v:?}, {} nodes, walks of {} steps, seed {seed}: {} states, {:.1} s; broken {:?}; reached {:?}{}",
            args.nodes,
            args.walk_depth,
            r.states,
            r.took.as_secs_f64(),
            r.broken.iter().map(|b| (b.0, b.1)).collect::<Vec<_>>(),
            r.reached,
            if as_expected { "" } else { " (NOT as expected)" }
        );
        if args.paths {
            for b in &r.broken {
                println!("  {}: {}", b.0, b.2);
            }
        }
    }
    verdict_line(ok)
}

/// The sound core breaks no `always` property; each broken one breaks one.
pub fn verdict(r: &Report) -> bool {
    let broken = r.found.iter().any(|f| f.always && f.path_len.is_some());
    broken == (r.variant != Variant::Sound)
}

pub fn print(r: &Report, paths: bool) {
    let how = match r.search {
        Search::Breadth { depth } => format!("breadth first to depth {depth}"),
        Search::Walks { depth, seed } => format!("random walks of {depth} steps, seed {seed}"),
    };
    println!(
        "model {:?}, {} nodes, {how}: {} states ({} unique), depth reached {}, {:.1} s",
        r.variant,
        r.nodes,
        r.states,
        r.unique,
        r.max_depth,
        r.took.as_secs_f64()
    );
    for f in &r.found {
        let what = match (f.always, f.path_len) {
            (true, None) => "holds".to_string(),
            (true, Some(n)) => format!("BROKEN: counterexample of {n} steps"),
            (false, None) => "not reached".to_string(),
            (false, Some(n)) => format!("reached in {n} steps"),
        };
        println!("  {}: {what}", f.property);
        if let (true, Some(p)) = (paths, &f.path) {
            println!("  {p}");
        }
    }
}

pub fn print_liveness(r: &LiveReport, variant: Variant, nodes: u64, depth: usize, paths: bool) {
    let slowest = r.slowest.as_ref().map_or(0, |(h, _)| h.took_ns);
    println!(
        "model {variant:?}, {nodes} nodes, liveness from random walks of {depth} steps, seed {}: \
         {} states of {} walks healed, the slowest claimed {} ms after its heal (bound {} ms), \
         {:.1} s",
        r.seed,
        r.healed,
        r.walks,
        slowest / 1_000_000,
        r.bound_ns / 1_000_000,
        r.took.as_secs_f64()
    );
    match &r.failed {
        None => println!("  after the faults end, a node claims within the bound: holds"),
        Some((why, path, heal)) => {
            println!(
                "  after the faults end, a node claims within the bound: BROKEN after {} steps: {why}",
                path.len()
            );
            if paths {
                for a in path {
                    println!("  {a:?}");
                }
                println!("  the heal:");
                for a in heal {
                    println!("  {a:?}");
                }
            }
        }
    }
}
