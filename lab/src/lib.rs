//! electd's lab: everything that runs nodes from the outside, to control, break and measure
//! them. It depends on the node (`electd`) and its client (`electd-client`), never the reverse;
//! none of it ships in the node binary.
//!
//! # Layout
//! - [`cluster`]: a local cluster of `electd` processes by pid file (start, stop, signal, fault
//!   sets, states); the tests, the chaos runner and `electd-lab ctl` all use it.
//! - [`ctl`]: the command line of `electd-lab` (`ctl …` for `scripts/cluster.sh`, `chaos` for
//!   `scripts/chaos.sh`).
//! - [`chaos`]: the partition chaos suite: scenarios, the runner, the checkers C1–C6 over merged
//!   event logs, the report and its timelines (`docs/design/chaos.md`).
//! - [`app_failover`]: failover where the application runs: `electd run` against `etcdctl lock`.
//! - [`cost`]: the cost side against etcd: idle CPU and peer traffic, `GET /v1/leader` against a
//!   bare axum handler, failover at 5, 15 and 31 nodes.
//! - [`roles_bench`]: named roles: a holder's crash against etcd's election recipe
//!   ([`etcd_election`]), and the idle cost of 0 to 10,000 roles.
//! - [`bench`]: failover, graceful handoff, isolation and load benchmarks on a running cluster;
//!   [`versus`]: failover against etcd with one poller.
//! - [`crashloop`]: SIGKILL at random moments, then judge the run.
//! - [`sim`]: simulated time: bully, ring and invitation as state machines, and the real quorum node
//!   in one process (`electd-lab sim`, `scripts/sim.sh`).
//! - [`model`]: the model checker on the quorum core (`electd-lab model`, `scripts/model.sh`).
//! - [`bin`]: where the node binary is found.
//! - [`stamp`]: a stand-in application that stamps its lifetime, for the tests of `electd run`.

pub mod app_failover;
pub mod bench;
pub mod bin;
pub mod chaos;
pub mod cluster;
pub mod cost;
pub mod crashloop;
pub mod ctl;
pub mod etcd_election;
pub mod model;
pub mod roles_bench;
pub mod sim;
pub mod skip;
pub mod stamp;
pub mod throttle;
pub mod versus;
