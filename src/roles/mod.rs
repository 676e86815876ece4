//! Named roles: elections the cluster holds beside its own, each with the promise of
//! `/v1/claim` (docs/design/roles.md; the argument is docs/safety.md, "Roles"). Quorum mode only.
//! Every part is an I/O-free state machine or a pure function, stepped by the driver that owns
//! the quorum core:
//! - [`table`]: the durable facts (candidacies, grants, releases, revocations), applied from
//!   the replicated log, with the fencing tokens.
//! - [`holder`]: a node's claims on the roles it holds, renewed all at once by one renewal to
//!   the leader per beat.
//! - [`ledger`]: the leader's memory of renewals and stops, which decides when a grant is safe.
//! - [`planner`]: where roles should go (balanced, sticky, bounded).
//! - [`steward`]: all of it for one node, with what its renewals ask of the leader.
//! - [`feed`]: the grants, releases and revocations the node applied, for the watch stream.

pub mod feed;
pub mod holder;
pub mod ledger;
pub mod planner;
pub mod steward;
pub mod table;

pub use electd_client::{RoleName, Token};
