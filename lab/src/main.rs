//! `electd-lab`: the lab's command line. `ctl …` controls a local cluster (what
//! `scripts/cluster.sh`, `load.sh`, `crash-soak.sh` and `bench-vs-etcd.sh` run); `chaos` runs
//! the partition chaos suite (what `scripts/chaos.sh` runs). Nodes are started from the
//! `electd` binary beside this one, or `$ELECTD_BIN`.

use std::process::ExitCode;

use clap::Parser;

/// electd-lab: local clusters, chaos, benchmarks.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
enum Cli {
    /// Control a local cluster (what scripts/cluster.sh runs).
    Ctl(electd_lab::ctl::CtlArgs),
    /// Run the partition chaos suite (what scripts/chaos.sh runs).
    Chaos(electd_lab::ctl::ChaosArgs),
    /// Run the quorum node through simulated schedules (what scripts/sim.sh runs).
    Sim(electd_lab::sim::cmd::SimArgs),
    /// Model-check the quorum core (what scripts/model.sh runs).
    Model(electd_lab::model::cmd::ModelArgs),
    /// A stand-in application for the tests of `electd run` (stamps its lifetime to a file).
    #[command(hide = true)]
    Stamp(electd_lab::stamp::StampArgs),
    /// A bare axum handler answering GET /v1/leader (the cost benchmark's peer).
    #[command(hide = true)]
    BareLeader(electd_lab::cost::BareArgs),
    /// Keeps one core busy for a bounded time (the throttled benchmark's busy neighbour).
    #[command(hide = true)]
    Spin(electd_lab::throttle::SpinArgs),
}

fn main() -> ExitCode {
    match Cli::parse() {
        Cli::Ctl(args) => electd_lab::ctl::main(args),
        Cli::Chaos(args) => electd_lab::ctl::chaos_main(args),
        Cli::Sim(args) => electd_lab::sim::cmd::main(args),
        Cli::Model(args) => electd_lab::model::cmd::main(args),
        Cli::Stamp(args) => electd_lab::stamp::main(args),
        Cli::BareLeader(args) => electd_lab::cost::bare_main(args),
        Cli::Spin(args) => electd_lab::throttle::spin_main(args),
    }
}
