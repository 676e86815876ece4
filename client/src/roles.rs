//! The wire types of named roles (`docs/design/roles.md`): a role's name and its fencing token.
//! A *role* here is a named election the cluster holds beside its own (the scheduler, the
//! compactor, the owner of queue partition 17); it is not the `role` of a [`View`](crate::View),
//! which says whether a node leads the cluster's own election.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A role's fencing token: drawn from one counter of the cluster's log as each grant is
/// applied, so it grows for every name and across names, and no two grants share one.
pub type Token = u64;

/// A role's name: 1 to [`RoleName::MAX_LEN`] ASCII letters, digits, `.`, `_` and `-`, starting
/// with a letter or a digit, so that it is one URL path segment (`/v1/claim/{name}`), a file
/// name and a metric label value as it is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RoleName(String);

/// Why a string is not a role name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoleNameError {
    #[error("a role name is empty")]
    Empty,
    #[error("a role name is at most {max} bytes long, not {len}", max = RoleName::MAX_LEN)]
    TooLong { len: usize },
    #[error("a role name starts with a letter or a digit, not {0:?}")]
    Start(char),
    #[error("a role name holds only ASCII letters, digits, '.', '_' and '-', not {0:?}")]
    Char(char),
}

impl RoleName {
    /// The longest name, in bytes.
    pub const MAX_LEN: usize = 128;

    /// `s` as a role name, or why it is not one.
    pub fn new(s: impl Into<String>) -> Result<RoleName, RoleNameError> {
        let s = s.into();
        let first = s.chars().next().ok_or(RoleNameError::Empty)?;
        if s.len() > Self::MAX_LEN {
            return Err(RoleNameError::TooLong { len: s.len() });
        }
        if !first.is_ascii_alphanumeric() {
            return Err(RoleNameError::Start(first));
        }
        match s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            Some(c) => Err(RoleNameError::Char(c)),
            None => Ok(RoleName(s)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RoleName {
    type Error = RoleNameError;
    fn try_from(s: String) -> Result<RoleName, RoleNameError> {
        RoleName::new(s)
    }
}

impl From<RoleName> for String {
    fn from(n: RoleName) -> String {
        n.0
    }
}

impl fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One role as `GET /v1/roles` lists it: who stands for it, who holds it and with which token,
/// as the answering node's applied log has them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleInfo {
    pub name: RoleName,
    pub candidates: Vec<crate::NodeId>,
    pub holder: Option<crate::NodeId>,
    pub token: Option<Token>,
    /// The node the role goes to whenever it is a live candidate with room
    /// (`PUT /v1/roles/{name}/preferred`); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<crate::NodeId>,
}

/// `PUT /v1/roles/{name}/preferred`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolePreferred {
    pub node: crate::NodeId,
}

/// `PUT /v1/members/{id}/max_roles`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleLimit {
    pub max_roles: u32,
}

/// How many roles a member holds and may hold (`/v1/members/{id}/max_roles`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRoleLimit {
    pub node: crate::NodeId,
    /// `null`: no limit.
    pub max_roles: Option<u32>,
    /// The roles it holds, as the answering node's applied log has them.
    pub held: u64,
}

/// `GET /v1/roles`: roles in name order, and the name to pass as `after` when more follow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolesPage {
    pub roles: Vec<RoleInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<RoleName>,
}

/// `GET /v1/claim/{name}`: 200 on the holder while its claim on the role holds (a promise of
/// `lease_ms` from the asker's send instant, as `/v1/claim`'s), 503 elsewhere with `lease_ms`
/// 0 and `node` the holder the answering node's log names, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleClaimInfo {
    pub name: RoleName,
    /// The holder: this node on a 200.
    pub node: Option<crate::NodeId>,
    pub token: Option<Token>,
    /// Milliseconds of claim left, rounded down (0 on a 503).
    pub lease_ms: u64,
}

/// `POST /v1/roles/{name}/resign`'s body: the token of the grant to give up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleResign {
    pub token: Token,
}

/// The answer to a resign: the grant `token` of `name` is released (the log has applied it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleResigned {
    pub name: RoleName,
    pub token: Token,
    pub released: bool,
}

/// What an applied log entry did to a role, or (`Lost`) to the watched node's own claim on it
/// (`GET /v1/roles/watch`, the SSE event type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleEventKind {
    /// The role was granted to `node` with `token`.
    Granted,
    /// `node` gave the role up (a resign, a withdrawal, a planned move) after every promise
    /// it answered for the grant had ended.
    Released,
    /// The leader took the role from `node` (silent past its renewals, removed, or not
    /// releasing a planned move); it is granted again only after `node`'s last possible promise.
    Revoked,
    /// `node`'s claim on the role lapsed (its renewals went unanswered: cut off, the leader
    /// gone) while its log still granted it: told only by `node` itself, once its last
    /// promise has ended, before its log releases or revokes the role (it may be granted on
    /// meanwhile). `index` is how far `node`'s log had applied.
    Lost,
}

impl RoleEventKind {
    /// The SSE event type: `granted`, `released`, `revoked`, `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoleEventKind::Granted => "granted",
            RoleEventKind::Released => "released",
            RoleEventKind::Revoked => "revoked",
            RoleEventKind::Lost => "lost",
        }
    }
}

/// One change of a role as the answering node's log applied it (`GET /v1/roles/watch`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleEvent {
    /// This node's sequence number of role events (the SSE `id`; give it back as
    /// `Last-Event-ID` to resume after it). It counts from 1 each time the node starts.
    pub seq: u64,
    pub kind: RoleEventKind,
    pub name: RoleName,
    pub node: crate::NodeId,
    pub token: Token,
    /// The log index of the entry that made the change (the same on every node).
    pub index: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_segments_and_label_values() {
        for ok in ["scheduler", "queue-17", "a", "v1.compactor_2", "9lives"] {
            assert_eq!(RoleName::new(ok).unwrap().as_str(), ok);
        }
        let long = "a".repeat(RoleName::MAX_LEN + 1);
        assert_eq!(
            RoleName::new(long),
            Err(RoleNameError::TooLong { len: 129 })
        );
        assert!(RoleName::new("a".repeat(RoleName::MAX_LEN)).is_ok());
        assert_eq!(RoleName::new(""), Err(RoleNameError::Empty));
        assert_eq!(RoleName::new(".hidden"), Err(RoleNameError::Start('.')));
        assert_eq!(RoleName::new("-x"), Err(RoleNameError::Start('-')));
        for (bad, c) in [("a/b", '/'), ("a b", ' '), ("a%2F", '%'), ("é", 'é')] {
            let e = RoleName::new(bad).unwrap_err();
            assert!(
                e == RoleNameError::Char(c) || e == RoleNameError::Start(c),
                "{bad}: {e}"
            );
        }
        // The JSON form is the string, and a bad one is refused when read.
        let n: RoleName = serde_json::from_str("\"queue-17\"").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"queue-17\"");
        assert!(serde_json::from_str::<RoleName>("\"a/b\"").is_err());
    }
}
