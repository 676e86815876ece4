//! The vocabulary every mode shares: node ids, roles, modes, and the (role, term, leader)
//! [`View`] whose every change becomes an event. They are the wire types of `docs/design/api-v1.md`,
//! defined once in the client crate and used here as they are.

pub use electd_client::{Mode, NodeId, Resigned, Role, View};
