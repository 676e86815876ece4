//! `electd doctor`'s report: each check's line (`OK`, `WARN`, `FAIL`, naming the member) and
//! how ids are said in them.

use std::collections::BTreeMap;

use electd_client::NodeId;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(super) enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// One line of the report (`--json`: one object of the array).
#[derive(Debug, Serialize)]
pub(super) struct Check {
    pub(super) check: &'static str,
    /// The member checked; `null` for a check of the whole cluster.
    pub(super) member: Option<NodeId>,
    pub(super) status: Level,
    pub(super) detail: String,
}

pub(super) struct Report {
    pub(super) checks: Vec<Check>,
    /// Member ids to their addresses, for the human lines.
    pub(super) names: BTreeMap<NodeId, String>,
}

impl Report {
    pub(super) fn add(
        &mut self,
        check: &'static str,
        member: Option<NodeId>,
        status: Level,
        detail: String,
    ) {
        self.checks.push(Check {
            check,
            member,
            status,
            detail,
        });
    }

    pub(super) fn worst(&self) -> Level {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Level::Ok)
    }

    pub(super) fn who(&self, member: Option<NodeId>) -> String {
        match member {
            None => "cluster".to_string(),
            Some(id) => match self.names.get(&id) {
                Some(addr) => format!("node {id} ({addr})"),
                None => format!("node {id}"),
            },
        }
    }
}

/// "1, 2, 3".
pub(super) fn list(ids: impl IntoIterator<Item = NodeId>) -> String {
    ids.into_iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// "node 3", "nodes 1 and 2", "nodes 1, 2 and 4".
pub(super) fn nodes(ids: &[NodeId]) -> String {
    match ids {
        [] => "no node".to_string(),
        [one] => format!("node {one}"),
        [init @ .., last] => format!("nodes {} and {last}", list(init.iter().copied())),
    }
}
