//! The vocabulary every mode shares: node ids, roles, and the (role, term, leader) triple
//! whose every change becomes an event.

/// A node's effective role as the API reports it (see `docs/design/api-v1.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leader,
    Follower,
    Candidate,
}

/// Node ids are small positive integers taken from the config (`[[peers]] id`).
pub type NodeId = u64;

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
        }
    }
}

/// What a node says about itself: one event is recorded per change of this triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleState {
    pub role: Role,
    /// Quorum: the Raft term. Bully and ring: the coordinator epoch.
    pub term: u64,
    /// The node this node takes to be the leader, if it knows one.
    pub leader: Option<NodeId>,
}

impl RoleState {
    /// The state of a node that has just started and knows nothing yet.
    pub fn initial() -> Self {
        RoleState {
            role: Role::Follower,
            term: 0,
            leader: None,
        }
    }
}
