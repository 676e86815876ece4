//! The chaos suite: its scenarios, the runner, the judges and the report (`docs/design/chaos.md`).
//!
//! A run of the matrix (mode × scenario × layer × seed) leaves a [`record::RunLog`]: every
//! node's event log on the one host-wide monotonic clock, the process faults the harness applied
//! (kill, stop, start, pause, resume), the network fault windows with who could talk to whom,
//! and the promises clients were given. Everything here is a pure function of that log, so each
//! checker is unit-tested on synthetic logs and a run can be re-judged from its saved log.
//!
//! # Layout
//! - [`record`]: the run log, and how it is recorded: the process events the lab causes (kill,
//!   start, pause…) and the promises a client of every node was given (the crash loop, the
//!   simulator and the etcd comparison use it too).
//! - [`checkers`]: C1 election safety, C2 split brain, C4 convergence after heal and C6
//!   promises, which fail a run; C3 availability (leaderless time, leaderless time on the
//!   majority side, failover), C5 disruption and the cost in leader changes, which are
//!   measurements (reported, bounded per scenario by the chaos tests, never failing a run by
//!   themselves); and how they read a node's state and its reach from the log.
//! - [`verdict`]: [`verdict::evaluate`] folds the checkers into one [`verdict::RunResult`].
//! - [`scenario`]: the scenarios S1–S26, one variant and one function each; [`harness`]: the
//!   live cluster they act through, and the fault layers.
//! - [`runner`]: runs the matrix on real 5-node clusters (`electd-lab chaos`, `scripts/chaos.sh`);
//!   [`kernel`]: the iptables fault layer.
//! - [`report`]: writes `report.json`, `report.md` and one SVG timeline per run picked by the
//!   caller; [`timeline`]: draws that SVG timeline.

pub mod checkers;
#[cfg(test)]
mod fixtures;
pub mod harness;
pub mod kernel;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod timeline;
pub mod verdict;
