//! openraft's type configuration for electd: elections, and one kind of application entry, the
//! members' incarnations (identity.rs, rule 5). A leaf of its own so that storage, network and
//! the node all import it from below.

use std::collections::BTreeMap;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::role::NodeId;

/// The application entries of electd's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// The incarnations of these members' data dirs, as the leader that wrote the entry had
    /// recorded them (identity.rs, rule 5). Applied, each one is kept unless the log already
    /// holds one for that member, and only while the member is one.
    Incarnations(BTreeMap<NodeId, u64>),
}

// `declare_raft_types!` in 0.9 expects `Cursor` in scope for the default snapshot data type.
openraft::declare_raft_types!(
    /// openraft's type configuration: elections, and the members' incarnations.
    pub TypeConfig: D = Command, R = ()
);
