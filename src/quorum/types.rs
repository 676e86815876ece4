//! openraft's configuration for electd: its types (elections, and two kinds of application
//! entry: the members' incarnations, identity.rs, rule 5; the named roles, roles/table.rs) and its runtime config (electd's
//! timings, its own elections and heartbeats off); and how electd reads what openraft says: the
//! membership its metrics name, and a membership change's answer (`changed`). Below storage,
//! network and the node, which all import it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ConfigError, RaftMetrics, SnapshotPolicy};
use serde::{Deserialize, Serialize};

use super::election;
use crate::config::Timing;
use crate::engine::MembershipError;
use crate::role::NodeId;
use crate::roles::table::RoleCommand;

/// The application entries of electd's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// The incarnations of these members' data dirs, as the leader that wrote the entry had
    /// recorded them (identity.rs, rule 5). Applied, each one is kept unless the log already
    /// holds one for that member, and only while the member is one.
    Incarnations(BTreeMap<NodeId, u64>),
    /// A fact about the named roles (roles/table.rs): a candidacy, grants, a release, a
    /// revocation.
    Roles(RoleCommand),
}

// `declare_raft_types!` in 0.9 expects `Cursor` in scope for the default snapshot data type.
openraft::declare_raft_types!(
    /// openraft's type configuration: elections, the members' incarnations, the named roles.
    pub TypeConfig: D = Command, R = ()
);

/// The most an append's body may be (`/peer/raft/append`): 40 entries of a membership of
/// a few hundred members fit.
pub const APPEND_BODY_LIMIT: usize = 512 << 10;

/// openraft's config for electd's timings: its own elections and heartbeats off, its follower
/// lease the follower lease, its RPC deadlines from `election`. Every timing that
/// `Config::validate` accepts passes openraft's own validation (test below).
pub fn raft_config(cluster_id: &str, t: &Timing) -> Result<openraft::Config, Box<ConfigError>> {
    openraft::Config {
        cluster_name: cluster_id.to_string(),
        // Not the beat (the driver's role turn keeps that, every `heartbeat_ms`): openraft uses this
        // value as the deadline of each AppendEntries, the probes' included (3/4 of it).
        // A third of the follower lease, so that a follower that answers a little late on
        // a busy host does not fail the probe, and so demote, a leader it still hears.
        heartbeat_interval: election::rpc_interval_ms(t),
        // electd decides when to campaign (election/mod.rs): openraft's own timer is off. Its
        // heartbeats are sent by the driver, in step with the quorum probes.
        enable_elect: false,
        enable_heartbeat: false,
        // Only the vote RPC deadline and the follower lease are still openraft's: its
        // `election_timeout_max` *is* the follower lease, and `election_timeout_min` is the
        // deadline of a vote request (half the lease).
        election_timeout_min: election::vote_deadline_ms(t),
        election_timeout_max: t.follower_lease_ms,
        install_snapshot_timeout: t.follower_lease_ms,
        // One blank entry per elected leader: snapshot and purge often, so that the state
        // written on every vote stays a few KiB over thousands of elections.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(32),
        max_in_snapshot_log_to_keep: 8,
        ..Default::default()
    }
    .validate()
    .map_err(Box::new)
}

/// The log index of the membership entry openraft's metrics `m` name (`None` before the log
/// names one).
pub fn membership_index(m: &RaftMetrics<NodeId, BasicNode>) -> Option<u64> {
    m.membership_config.log_id().map(|l| l.index)
}

/// The voter sets of `m`, each in id order.
pub fn sets_of(m: &openraft::Membership<NodeId, BasicNode>) -> Vec<Vec<NodeId>> {
    m.get_joint_config()
        .iter()
        .map(|set| set.iter().copied().collect())
        .collect()
}

/// Every voter of the sets in force in `m`, in id order.
pub fn voters_of(m: &RaftMetrics<NodeId, BasicNode>) -> Vec<NodeId> {
    let sets = sets_of(m.membership_config.membership());
    let ids: BTreeSet<NodeId> = sets.into_iter().flatten().collect();
    ids.into_iter().collect()
}

/// One step of a change as openraft answers it, within its time limit.
pub type Step<T> = Result<
    Result<T, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>,
    tokio::time::error::Elapsed,
>;

/// A change's step, as a membership error: openraft's refusal, or the time limit.
pub fn changed<T>(me: NodeId, r: Step<T>) -> Result<T, MembershipError> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
            Err(MembershipError::NotLeader {
                me,
                leader: f.leader_id.map(|id| {
                    let addr = f.leader_node.map(|n| n.addr).unwrap_or_default();
                    (id, addr)
                }),
            })
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(_),
        )))) => Err(MembershipError::InProgress),
        Ok(Err(e)) => Err(MembershipError::Failed(e.to_string())),
        Err(_) => Err(MembershipError::Failed(
            "timed out (the change may still complete: see GET /v1/members)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Config::validate` accepts no timing that openraft would refuse at start: every beat
    /// up to 100 ms against every follower lease up to 400 ms and a spread up to 3 s, default
    /// and explicit leases, and the longest lease allowed.
    #[test]
    fn every_accepted_timing_is_accepted_by_openraft() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::single_member(dir.path(), crate::role::Mode::Quorum);
        let mut accepted = 0;
        let leases = |f: u64| [0, f / 2, f - f / 10, f.saturating_sub(2), 540_000];
        for hb in 1..=100 {
            for f in (1..=400).chain((400..=3000).step_by(37)).chain([600_000]) {
                for lease_ms in leases(f) {
                    cfg.timing = Timing {
                        heartbeat_ms: hb,
                        follower_lease_ms: f,
                        lease_ms,
                    };
                    if cfg.validate().is_ok() {
                        accepted += 1;
                        if let Err(e) = raft_config("t", &cfg.timing) {
                            panic!("{:?} passes validation but openraft says: {e}", cfg.timing);
                        }
                    }
                }
            }
        }
        assert!(accepted > 20_000, "only {accepted} timings were accepted");
    }
}
