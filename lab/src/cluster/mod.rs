//! Local cluster control: start, stop, kill, pause and partition the nodes of a cluster
//! directory (`node*.toml` files, runtime files under `run/`), by pid file, never by name.
//!
//! `electd-lab ctl ...` (and so `scripts/cluster.sh`), the integration tests and the chaos
//! runner all drive clusters through this one module. Each job has its own file:
//! - [`addr`]: loopback address blocks for test and chaos clusters;
//! - [`process`]: the nodes as processes (start, signal, stop, kill, by pid file);
//! - [`configs`]: node configs and timing flags;
//! - [`secrets`]: the admin token and cluster secret;
//! - [`state`]: what the nodes say, the agreed leader, the `status` rows;
//! - [`dir`]: the cluster directory, its members and runtime files, [`CtlError`];
//! - [`control`]: the members' API through the typed client (faults, partitions, heals);
//! - [`wallclock`]: each node's wall clock, moved apart from the host's (libfaketime);
//! - [`certs`]: the cluster's CA and its members' certificates (`up --tls`);
//! - `postgres`: a PostgreSQL server of the lab's own; `store`: the cluster's store (mutex
//!   mode).
//!
//! This file only declares the parts and re-exports what callers use.

mod addr;
mod certs;
mod configs;
mod control;
mod dir;
mod postgres;
mod process;
mod secrets;
mod state;
mod store;
mod wallclock;

pub use self::addr::{claim_addrs, AddrBlock, BLOCK_NODE_PORT};
pub use self::configs::Shape;
pub use self::dir::{Cluster, CtlError, Member};
pub use self::postgres::{bin_dir as postgres_bin_dir, Postgres, BLOCK_STORE_PORT};
pub use self::state::{agreed, claimants, status_row, Observed};
pub use self::wallclock::libfaketime;
