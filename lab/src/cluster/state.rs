//! What the nodes say: each running node's `/v1/leader`, the leader they agree on, who claims,
//! and the `status` rows.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use electd_client::{LeaderInfo, Mode, NodeId, Role};

use super::dir::Cluster;
use super::process::process_state;

/// One row of `status`.
#[derive(Clone, Debug)]
pub enum Observed {
    Down,
    Paused,
    Unreachable(String),
    Up(LeaderInfo),
}

impl Observed {
    /// The term the node reports, when it answers.
    pub fn term(&self) -> Option<u64> {
        match self {
            Observed::Up(info) => Some(info.term),
            _ => None,
        }
    }
}

impl Cluster {
    /// The state of every node.
    pub async fn states(&self) -> BTreeMap<NodeId, Observed> {
        let mut out = BTreeMap::new();
        for m in &self.members {
            let st = match self.pid(m.id) {
                None => Observed::Down,
                Some(pid) if process_state(pid) == Some('T') => Observed::Paused,
                Some(_) => match self.leader_info(m.id).await {
                    Ok(info) => Observed::Up(info),
                    Err(e) => Observed::Unreachable(e.to_string()),
                },
            };
            out.insert(m.id, st);
        }
        out
    }

    /// The leader every running, unpaused node agrees on, which itself claims the role.
    pub async fn agreed_leader(&self) -> Option<NodeId> {
        agreed(&self.states().await)
    }

    /// Waits at most `limit` for an agreed leader (polling every 50 ms).
    pub async fn wait_agreed(&self, limit: Duration) -> Option<NodeId> {
        self.wait_agreed_other_than(None, limit).await
    }

    /// Waits at most `limit` for the leader the running nodes among `ids` agree on (polling
    /// every 50 ms): the voters of a cluster with members that don't vote, which name no leader
    /// while cut off or removed.
    pub async fn wait_agreed_among(&self, ids: &[NodeId], limit: Duration) -> Option<NodeId> {
        let until = Instant::now() + limit;
        loop {
            let mut states = self.states().await;
            states.retain(|id, _| ids.contains(id));
            if let Some(l) = agreed(&states) {
                return Some(l);
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits at most `limit` for an agreed leader other than `not` (polling every 50 ms).
    pub async fn wait_agreed_other_than(
        &self,
        not: Option<NodeId>,
        limit: Duration,
    ) -> Option<NodeId> {
        let until = Instant::now() + limit;
        loop {
            match self.agreed_leader().await {
                Some(l) if Some(l) != not => return Some(l),
                _ => {}
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The members in force (voters and learners), as the answering node with the newest
    /// membership reports it (`GET /v1/members`); `None` outside quorum mode, whose members are
    /// its configs, or when no node answers.
    pub async fn members_in_force(
        &self,
        states: &BTreeMap<NodeId, Observed>,
    ) -> Option<BTreeSet<NodeId>> {
        if self.mode() != Mode::Quorum {
            return None;
        }
        let mut newest: Option<electd_client::Members> = None;
        for (&id, st) in states {
            if !matches!(st, Observed::Up(_)) {
                continue;
            }
            let Ok(m) = self.client(id).ok()?.members().await else {
                continue;
            };
            if newest.as_ref().is_none_or(|n| m.log_index > n.log_index) {
                newest = Some(m);
            }
        }
        newest.map(|m| m.members.iter().map(|m| m.id).collect())
    }

    /// The states of the members in force, and the nodes of the cluster's configs that are
    /// not members (removed at run time, but their configs still start them).
    pub async fn member_states(&self) -> (BTreeMap<NodeId, Observed>, Vec<NodeId>) {
        let mut states = self.states().await;
        let Some(members) = self.members_in_force(&states).await else {
            return (states, Vec::new());
        };
        let outside: Vec<NodeId> = states
            .keys()
            .copied()
            .filter(|id| !members.contains(id))
            .collect();
        states.retain(|id, _| members.contains(id));
        (states, outside)
    }

    /// Waits at most `limit` for a leader the members in force agree on (polling every
    /// 50 ms); also answers the nodes that are not members.
    pub async fn wait_agreed_members(&self, limit: Duration) -> (Option<NodeId>, Vec<NodeId>) {
        let until = Instant::now() + limit;
        loop {
            let (states, outside) = self.member_states().await;
            let leader = agreed(&states);
            if leader.is_some() || Instant::now() >= until {
                return (leader, outside);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits at most `limit` until `pred` holds for the states.
    pub async fn wait_for(
        &self,
        limit: Duration,
        pred: impl Fn(&BTreeMap<NodeId, Observed>) -> bool,
    ) -> bool {
        let until = Instant::now() + limit;
        loop {
            if pred(&self.states().await) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// The leader all answering nodes agree on, if it claims the role itself. Down and paused
/// nodes are left out; a running node that does not answer breaks the agreement.
pub fn agreed(states: &BTreeMap<NodeId, Observed>) -> Option<NodeId> {
    let mut leader = None;
    let mut any = false;
    for st in states.values() {
        match st {
            Observed::Down | Observed::Paused => {}
            Observed::Unreachable(_) => return None,
            Observed::Up(info) => {
                let l = info.leader.as_ref()?.id;
                if leader.is_some_and(|x| x != l) {
                    return None;
                }
                leader = Some(l);
                any = true;
            }
        }
    }
    let l = leader?;
    match states.get(&l) {
        Some(Observed::Up(info)) if any && info.role == Role::Leader => Some(l),
        _ => None,
    }
}

/// Ids of the nodes that claim `role = leader` right now.
pub fn claimants(states: &BTreeMap<NodeId, Observed>) -> Vec<NodeId> {
    states
        .iter()
        .filter_map(|(id, s)| match s {
            Observed::Up(i) if i.role == Role::Leader => Some(*id),
            _ => None,
        })
        .collect()
}

/// Formats one `status` row.
pub fn status_row(id: NodeId, st: &Observed) -> String {
    match st {
        Observed::Down => format!("{id:<4} {:<10}", "down"),
        Observed::Paused => format!("{id:<4} {:<10}", "paused"),
        Observed::Unreachable(e) => format!("{id:<4} {:<10} {e}", "unreachable"),
        Observed::Up(i) => format!(
            "{id:<4} {:<10} term={:<5} leader={}",
            i.role.as_str(),
            i.term,
            i.leader
                .as_ref()
                .map(|l| l.id.to_string())
                .unwrap_or_else(|| "-".into())
        ),
    }
}
