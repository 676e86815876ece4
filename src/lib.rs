//! electd: the leader-election node that runs beside each instance of a clustered service, so
//! that exactly one instance does the coordinator's work, and no network partition ever leaves
//! two instances both believing they hold that role.
//!
//! # Layout
//! - [`config`]: the TOML config, flag overrides, validation that names the field.
//! - [`role`]: node ids, roles, the (role, term, leader) triple.
//! - [`clock`]: `CLOCK_BOOTTIME` for claims and leases, `CLOCK_MONOTONIC` for event stamps.
//! - [`events`]: the event log (`/v1/events`, `<data_dir>/events.jsonl`).
//! - [`faults`]: the application-layer fault set (block to/from, drop rate, delay).
//! - [`transport`]: the one peer transport (HTTP), with the fault layer inside it.
//! - [`auth`]: peer authentication (HMAC-SHA256 over each request, replay window).
//! - [`stats`]: counters by message type; [`metrics`]: `/metrics`.
//! - [`quorum`]: quorum mode on openraft, with lease-bound claims and self-demotion.
//! - [`legacy`]: bully and ring as I/O-free state machines, their simulator, and the one driver
//!   that runs either on the shared transport.
//! - [`node`]: a running node: engine of the configured mode, view, shutdown.
//! - [`chaos`]: the partition chaos suite: checkers C1–C4 over merged event logs, the report.
//! - [`api`]: the HTTP API of `docs/design/api-v1.md`, built by [`api::app`]; [`server`]: the loop that
//!   serves it (header read timeout, drain at shutdown).
//! - [`cluster`]: local cluster control by pid file (tests, chaos runner, `electd ctl`); [`ctl`]: its CLI.
//! - [`fuzzing`]: the entry points of the fuzz targets in `fuzz/` (peer messages, config, auth).
//! - [`bench`]: failover, graceful handoff and isolation benchmarks on a running cluster
//!   (`electd ctl bench`); [`versus`]: failover against etcd with one poller;
//!   [`crashloop`]: SIGKILL at random moments, then judge the run.

pub mod api;
pub mod auth;
pub mod bench;
pub mod chaos;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod crashloop;
pub mod ctl;
pub mod events;
pub mod faults;
pub mod fuzzing;
pub mod legacy;
pub mod metrics;
pub mod node;
pub mod quorum;
pub mod role;
pub mod server;
pub mod stats;
pub mod transport;
pub mod versus;
