//! electd: the leader-election node that runs beside each instance of a clustered service, so
//! that exactly one instance does the coordinator's work, and no network partition ever leaves
//! two instances both believing they hold that role.
//!
//! # Layout
//! Layers, lowest first; a module imports only from its own layer or below (checked by
//! `tests/layers.rs`). The wire types of `docs/design/api-v1.md` live in the `electd-client` crate
//! (`client/`), the lab (cluster control, chaos, benchmarks, simulators) in `electd-lab`
//! (`lab/`); neither is part of this library.
//!
//! | layer | module | what it holds |
//! |---|---|---|
//! | 0 vocabulary | `role` | node ids, roles, modes, the (role, term, leader) `View`: the wire types of `electd-client`, used as they are |
//! | | [`config`] | the TOML config and the validation that names the field |
//! | | [`clock`] | `CLOCK_BOOTTIME` for claims and leases, `CLOCK_MONOTONIC` for event stamps |
//! | | `error` | the error answer of every route, and the request limits |
//! | | `lease` | the lease-bound claim and the promises it makes (quorum and mutex modes) |
//! | | [`data_dir`] | the data dir's lock: one process at a time in a data dir |
//! | | [`roles`] | named roles (quorum mode): the table applied from the log, a holder's claims, the leader's ledger, the planner |
//! | 1 plumbing | `events` | the event log (`/v1/events`, `<data_dir>/events.jsonl`) |
//! | | `faults` | the application-layer fault set (block to/from, drop rate, delay) |
//! | | [`auth`] | peer authentication (HMAC-SHA256 over each request, replay window) |
//! | | `counters` | counters by message type, and when each peer was last heard from |
//! | | `wire` | how a peer request travels: HTTP, or in memory in the lab's simulator |
//! | | [`connections`] | how many connections a node serves at once, and the members' reserve |
//! | 2 transport | `transport` | the one peer transport (HTTP), with the fault layer inside it |
//! | 3 engines | `engine` | the [`Engine`] interface every mode implements, what it is given (`Plumbing`), the lab's deliberate [`Flaws`] |
//! | | [`quorum`] | quorum mode on openraft, with lease-bound claims and self-demotion |
//! | | [`legacy`] | bully, ring and invitation as I/O-free state machines, and the one node that runs either |
//! | | `mutex` | mutex mode: a lease on a PostgreSQL row, through the shared claim |
//! | 4 node | `node` | a running node: the engine of its mode, its view, its shutdown |
//! | 5 serving | `api` | the HTTP API of `docs/design/api-v1.md`, built by [`app`] |
//! | | `watch` | `GET /v1/watch`: the view as Server-Sent Events, resumable from the event log |
//! | | `page` | `GET /`: the status page (one embedded HTML file) |
//! | | `metrics` | `/metrics` in Prometheus form |
//! | | `server` | the loop that serves it (header read timeout, drain at shutdown) |
//! | 6 binary | `bin/electd/` | `electd`: flags, client commands, `electd run`, one node |
//!
//! [`fuzzing`] holds the entry points of the fuzz targets in `fuzz/` (peer messages, config,
//! auth); it is public for them only.

// The public surface: the modules a caller works with, and the few items of the others that
// the binary, the lab and the fuzz targets need. Everything else stays inside the crate.
pub mod auth;
pub mod clock;
pub mod config;
pub mod connections;
pub mod data_dir;
pub mod legacy;
pub mod quorum;
mod role;
pub mod roles;

mod api;
mod counters;
mod engine;
mod error;
mod events;
mod faults;
#[doc(hidden)]
pub mod fuzzing;
mod lease;
mod metrics;
mod mutex;
mod node;
mod page;
mod role_watch;
mod server;
pub mod tls;
mod transport;
mod watch;
mod wire;

pub use crate::api::app;
pub use crate::config::{Config, ConfigError, Timing};
pub use crate::engine::{Engine, Flaws, Judged, ResignError};
pub use crate::error::{ApiError, BODY_LIMIT, REQUEST_TIMEOUT};
pub use crate::events::{read_events_counted, read_events_file, EVENTS_FILE};
pub use crate::node::{terminate_signal, Node, NodeError, Surroundings};

pub use crate::server::{serve, HEADER_READ_TIMEOUT};
pub use crate::transport::{HDR_CLUSTER, HDR_FROM};
pub use crate::wire::{HttpWire, Wire, WireError};
