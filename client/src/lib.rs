//! electd's public contract, typed: the wire types of `docs/design/api-v1.md` and an HTTP client for one
//! node. The node serves these types, and everyone who talks to a node (the lab, tests, the
//! `electd` client commands) reads them, so a field cannot drift between server and client.
//!
//! # Layout
//! - [`wire`]: a node's role (leader, follower, candidate), modes, the (role, term, leader) [`View`], `/v1/leader`, `/v1/status`,
//!   `/v1/events`, fault sets, resign, the error body.
//! - [`http`]: [`Client`] for one node, and [`http_client`] (and [`tls_client`] over TLS), the one place where electd's HTTP
//!   clients (peers included) are configured.
//! - [`watch`]: [`Watch`], a `/v1/watch` stream read as views.
//! - [`roles`]: a named role's [`RoleName`], its fencing [`Token`], and the answers about roles.
//! - [`election`]: [`Election`], the cluster's claim or a named role kept as a promise on a
//!   local timer for an application, and [`Promise`], its arithmetic without I/O.

pub mod election;
mod error;
pub mod http;
pub mod roles;
pub mod watch;
pub mod wire;

pub use election::{boot_ns, Change, Election, ElectionOptions, Leadership, Promise};
pub use error::{causes, Error};
pub use http::{http_client, tls_client, Client, CLIENT_IDLE};
pub use roles::{
    NodeRoleLimit, RoleClaimInfo, RoleEvent, RoleEventKind, RoleInfo, RoleLimit, RoleName,
    RoleNameError, RolePreferred, RoleResign, RoleResigned, RolesPage, Token,
};
pub use watch::{RoleWatch, RoleWatched, Watch, Watched, WATCH_SILENCE};
pub use wire::{
    AddMember, Counters, ErrorBody, ErrorDetail, Event, EventsPage, FaultSet, Gap, Health,
    LeaderInfo, LeaderRef, Member, Members, Mode, NodeId, PeerStatus, ResignRequest, Resigned,
    Role, Status, Timings, View, MAX_DELAY_MS,
};
