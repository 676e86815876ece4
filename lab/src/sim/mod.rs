//! Simulators: the algorithms run in simulated time, through seeded schedules of faults.
//! - [`legacy`]: bully and ring as state machines, over a simulated network of ticks.
//! - [`quorum`]: the real quorum node (openraft and electd's lease, pre-vote, election and
//!   handoff, unmodified) — N nodes in one process on a single-threaded tokio runtime with
//!   paused time ([`clock`]), their peer requests carried in memory ([`net`]), their durable
//!   state on in-memory disks; [`schedule`] draws the faults, and the run is judged as it goes;
//!   [`roles`]: named roles stood for and their promises judged, when a schedule asks.

pub mod clock;
pub mod cmd;
pub mod legacy;
pub mod net;
pub mod quorum;
pub mod roles;
pub mod schedule;
