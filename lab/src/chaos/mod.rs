//! The chaos suite: its scenarios, the runner, the judges and the report (`docs/design/chaos.md`).
//!
//! A run of the matrix (mode × scenario × layer × seed) leaves a [`check::RunLog`]: every node's
//! event log on the one host-wide monotonic clock, the process faults the harness applied
//! (kill, stop, start, pause, resume) and the network fault windows with who could talk to whom.
//! Everything here is a pure function of that log, so each checker is unit-tested on synthetic logs
//! and a run can be re-judged from its saved log.
//!
//! # Layout
//! - [`check`]: the checkers: C1 election safety, C2 split brain, C3 availability (leaderless time,
//!   leaderless time on the majority side, failover), C4 convergence after heal, the cost in leader
//!   changes, and [`check::evaluate`], which folds them into one [`check::RunResult`].
//! - [`scenario`]: the scenarios S1–S14, one variant and one function each; [`harness`]: the
//!   live cluster they act through, and the fault layers.
//! - [`record`]: the process events the lab causes (kill, start, pause…), recorded for the
//!   checkers, and the run log they judge (the crash loop and the etcd comparison use it too).
//! - [`runner`]: runs the matrix on real 5-node clusters (`electd-lab chaos`, `scripts/chaos.sh`);
//!   [`kernel`]: the iptables fault layer.
//! - [`report`]: writes `report.json`, `report.md` and one SVG timeline per run picked by the
//!   caller; [`timeline`]: draws that SVG timeline.

pub mod check;
#[cfg(test)]
mod fixtures;
pub mod harness;
pub mod kernel;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod timeline;
