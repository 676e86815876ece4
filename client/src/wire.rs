//! The wire types of `docs/design/api-v1.md`. Field names and JSON forms are the contract: change a
//! field's meaning only with a new API version.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Node ids are small positive integers taken from the config (`[[peers]] id`).
pub type NodeId = u64;

/// A node's effective role as the API reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leader,
    Follower,
    Candidate,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
        }
    }
}

/// The election algorithm a cluster runs. One per cluster: every node must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Raft-style majority vote on openraft, plus lease-bound claims (self-demotion).
    #[default]
    Quorum,
    /// Garcia-Molina's bully algorithm, textbook form, no quorum.
    Bully,
    /// Ring election that skips dead successors, textbook form, no quorum.
    Ring,
    /// Garcia-Molina's invitation algorithm: groups per partition, merged by invitation when
    /// coordinators find each other; textbook form, no quorum.
    Invitation,
    /// A lease on a row of a PostgreSQL database (`store_url`): whoever holds the row claims.
    Mutex,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Quorum,
        Mode::Mutex,
        Mode::Bully,
        Mode::Ring,
        Mode::Invitation,
    ];

    /// Whether the mode's claims are lease-bound promises (`lease_ms` in `/v1/leader`): quorum
    /// and mutex. The others claim without a lease, and may claim twice under a partition.
    pub fn leased(self) -> bool {
        matches!(self, Mode::Quorum | Mode::Mutex)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Quorum => "quorum",
            Mode::Bully => "bully",
            Mode::Ring => "ring",
            Mode::Invitation => "invitation",
            Mode::Mutex => "mutex",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "quorum" => Ok(Mode::Quorum),
            "bully" => Ok(Mode::Bully),
            "ring" => Ok(Mode::Ring),
            "invitation" => Ok(Mode::Invitation),
            "mutex" => Ok(Mode::Mutex),
            other => Err(format!(
                "unknown mode {other:?}: expected quorum, mutex, bully, ring or invitation"
            )),
        }
    }
}

/// What a node says about itself at one moment: (role, term, leader). Every change of it is
/// one event. In bully and ring modes `term` is the coordinator epoch; in invitation mode the
/// group number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct View {
    pub role: Role,
    /// Quorum: the Raft term. Bully and ring: the coordinator epoch.
    pub term: u64,
    /// The node this node takes to be the leader, if it knows one.
    pub leader: Option<NodeId>,
}

impl View {
    /// The view of a node that has just started and knows nothing yet.
    pub const INITIAL: View = View {
        role: Role::Follower,
        term: 0,
        leader: None,
    };

    /// A view with no known leader.
    pub fn without_leader(role: Role, term: u64) -> View {
        View {
            role,
            term,
            leader: None,
        }
    }

    /// Whether the node claims the leader role in this view.
    pub fn claims(&self) -> bool {
        self.role == Role::Leader
    }
}

/// `leader` in `/v1/leader`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRef {
    pub id: NodeId,
    pub addr: String,
}

/// The body of `GET /v1/leader` (and of `/v1/claim`, and the data of each `/v1/watch` event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    pub node_id: NodeId,
    pub mode: Mode,
    pub role: Role,
    pub term: u64,
    pub leader: Option<LeaderRef>,
    /// While this node claims the leader role: milliseconds of claim left, rounded down.
    pub lease_ms: Option<u64>,
    /// In the modes without a lease (bully, ring, invitation), on every answer: why this answer
    /// promises nothing (a leader answer holds at its instant only; another node may lead at
    /// once, on the other side of a partition). Absent in quorum and mutex modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_promise: Option<String>,
}

impl LeaderInfo {
    /// The (role, term, leader) of this answer.
    pub fn view(&self) -> View {
        View {
            role: self.role,
            term: self.term,
            leader: self.leader.as_ref().map(|l| l.id),
        }
    }
}

/// One entry of `peers` in `/v1/status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub id: NodeId,
    pub addr: String,
    /// Milliseconds since this node last heard from that peer; `null` when never.
    pub last_contact_ms: Option<u64>,
    /// How far that peer's wall clock was ahead of this node's (negative: behind) in its last
    /// request, network delay included; `null` when it has sent none. Nothing is refused for
    /// it: electd judges leases on monotonic clocks.
    #[serde(default)]
    pub clock_offset_ms: Option<i64>,
}

/// `counters` in `/v1/status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub elections_started: u64,
    pub leader_changes: u64,
    /// Peer messages sent, by message type.
    pub messages_sent: BTreeMap<String, u64>,
    /// Peer messages received, by message type.
    pub messages_received: BTreeMap<String, u64>,
    /// Peer requests refused, by reason.
    pub rejected_peer_requests: BTreeMap<String, u64>,
    /// This node's claims that ended, by cause: `lost` (the renewal failed: no quorum
    /// acknowledged in time, the store refused it, a higher term got this node's vote),
    /// `resigned`, `stopped`. Quorum and mutex modes; absent from servers before it.
    #[serde(default)]
    pub claims_ended: BTreeMap<String, u64>,
    /// Mutex mode: the store's answers whose lease row held a value out of range (written by
    /// hand, restored from elsewhere), by the first such field: `holder`, `term`, `wait_ms`,
    /// `version`. Absent from servers before it, and empty in the other modes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bad_store_rows: BTreeMap<String, u64>,
    /// Quorum mode: vote requests this node refused before openraft saw them, by reason:
    /// `promise` (a promise this node answered can still run, or it stops: docs/safety.md,
    /// step 4), `unconfirmed` (its data dir's incarnation is not confirmed). Absent from
    /// servers before it, and while none was refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub votes_refused: BTreeMap<String, u64>,
    /// Quorum mode: joins of members that do not vote this node judged, by outcome: `added`,
    /// `member` (one already), `not_leader`, or the code of a refusal (`nonvoters_disabled`,
    /// `voter`, `id_in_use`, `address_in_use`, `nonvoters_full`, `change_in_progress`,
    /// `invalid`, `failed`). Absent from servers before it, and while none was asked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nonvoter_joins: BTreeMap<String, u64>,
    /// Quorum mode: members that do not vote this node removed as absent
    /// (`nonvoters.remove_after_ms`). Absent from servers before it.
    #[serde(default)]
    pub nonvoters_removed: u64,
}

impl Counters {
    /// Messages sent, all types together.
    pub fn total_sent(&self) -> u64 {
        self.messages_sent.values().sum()
    }
}

/// `timings` in `/v1/status`, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    pub heartbeat_ms: u64,
    pub follower_lease_ms: u64,
    /// The leader's claim after an acknowledged probe.
    pub lease_ms: u64,
}

/// The body of `GET /v1/status`: everything in `/v1/leader`, plus the node's surroundings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    #[serde(flatten)]
    pub leader: LeaderInfo,
    pub cluster_id: String,
    pub peers: Vec<PeerStatus>,
    pub counters: Counters,
    pub timings: Timings,
    pub uptime_ms: u64,
    pub version: String,
    /// Seed of the node's random source (fault-layer drops, election jitter).
    pub seed: u64,
    /// The fault set in force.
    pub faults: FaultSet,
    /// The node runs in a cluster without a cluster secret (`insecure = true`): any process
    /// that reaches it may vote as a peer.
    #[serde(default)]
    pub insecure: bool,
    /// Whether the admin API is served (it needs an admin token; without one it answers 403).
    #[serde(default)]
    pub admin_api: bool,
    /// The mode may let two nodes lead at once under a partition (bully, ring, invitation:
    /// they are kept for comparison; docs/modes.md). False in quorum and mutex modes.
    #[serde(default)]
    pub two_leaders_possible: bool,
    /// What the mode's engine adds (openraft's state, tick settings); not part of the contract.
    pub engine: serde_json::Value,
}

/// One change of (role, term, leader) on one node: `GET /v1/events` and
/// `<data_dir>/events.jsonl`. `t_mono_ns` is CLOCK_MONOTONIC (one clock for the host).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub t_mono_ns: u64,
    pub node_id: NodeId,
    #[serde(flatten)]
    pub view: View,
}

/// The body of `GET /v1/events?since=SEQ`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsPage {
    pub events: Vec<Event>,
    /// The `since` of the next page.
    pub next: u64,
}

/// The body of `GET /v1/health`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
}

/// Longest delay the fault layer accepts.
pub const MAX_DELAY_MS: u64 = 60_000;

/// A node's fault set, as `PUT /v1/admin/faults` takes and answers it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSet {
    #[serde(default)]
    pub block_to: BTreeSet<NodeId>,
    #[serde(default)]
    pub block_from: BTreeSet<NodeId>,
    #[serde(default)]
    pub drop_rate: f64,
    #[serde(default)]
    pub delay_ms: u64,
    /// Mutex mode: statements this node sends its store are lost (the store never runs them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub block_to_store: bool,
    /// Mutex mode: the store's answers to this node are lost (it ran the statements).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub block_from_store: bool,
    /// The network adversary (src/faults.rs, "The forger"): an attacker without the cluster
    /// secret on the links between this node and these peers. It withholds this node's
    /// requests to them and answers them itself, with forged grants and acknowledgements and
    /// replayed answers; it delivers a withheld request much later; it rewrites their requests
    /// to this node (`x-electd-addr`, the sequence number in `x-electd-proof` near `u64::MAX`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub forge_to: BTreeSet<NodeId>,
    /// What the forger did since the node started, in answers only (absent while all are 0;
    /// a `PUT` naming it is refused, `invalid_fault_set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forger: Option<ForgerCounts>,
    /// Faults on this node's requests to one peer at one peer path, beside the others: a
    /// request lost, its answer lost (the peer ran it), or the request delayed. The lab's
    /// squeeze (chaos S24) builds the precondition of docs/safety.md's step 4 from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathFault>,
}

/// One fault on this node's requests to `to` at `path` ([`FaultSet::paths`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathFault {
    pub to: NodeId,
    /// A peer path, e.g. `/peer/raft/append` or `/peer/raft/vote`.
    pub path: String,
    /// Which leg is lost: the request (the peer never sees it) or the answer (the peer ran
    /// it). Without it, the request is delayed by `delay_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lose: Option<Leg>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// The answer delayed by this much once it came (the peer ran the request at once); one
    /// that would come after the request's deadline is lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub answer_delay_ms: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A leg of a peer request ([`PathFault::lose`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Leg {
    Request,
    Answer,
}

/// What the forger of a node did since it started ([`FaultSet::forger`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ForgerCounts {
    /// Answers it made up: a recorded genuine answer with the grant or success set.
    pub forged: u64,
    /// Answers it replayed: a genuine answer recorded earlier, verbatim.
    pub replayed: u64,
    /// Requests of this node it withheld and delivered later, verbatim.
    pub withheld: u64,
    /// Requests it rewrote (`x-electd-addr`, or the sequence number in `x-electd-proof`) before delivering them.
    pub rewritten: u64,
}

impl ForgerCounts {
    pub fn is_zero(&self) -> bool {
        *self == ForgerCounts::default()
    }
}

impl FaultSet {
    /// Checks the values against the membership; the error names the field.
    pub fn validate(&self, members: &[NodeId]) -> Result<(), (String, String)> {
        for (field, set) in [
            ("block_to", &self.block_to),
            ("block_from", &self.block_from),
            ("forge_to", &self.forge_to),
        ] {
            if let Some(bad) = set.iter().find(|id| !members.contains(id)) {
                return Err((
                    field.to_string(),
                    format!("node {bad} is not a member of the cluster {members:?}"),
                ));
            }
        }
        if self.forger.is_some() {
            return Err((
                "forger".into(),
                "the forger's counts are answered, not set".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.drop_rate) || self.drop_rate.is_nan() {
            return Err((
                "drop_rate".into(),
                format!("{} must be between 0.0 and 1.0", self.drop_rate),
            ));
        }
        if self.delay_ms > MAX_DELAY_MS {
            return Err((
                "delay_ms".into(),
                format!("{} must be at most {MAX_DELAY_MS}", self.delay_ms),
            ));
        }
        for (i, p) in self.paths.iter().enumerate() {
            let field = |name: &str| format!("paths[{i}].{name}");
            if !members.contains(&p.to) {
                let why = format!("node {} is not a member of the cluster {members:?}", p.to);
                return Err((field("to"), why));
            }
            if !p.path.starts_with("/peer/") {
                let why = format!("{:?} is not a peer path (/peer/...)", p.path);
                return Err((field("path"), why));
            }
            match (p.lose, p.delay_ms, p.answer_delay_ms) {
                (Some(_), d, _) if d > 0 => {
                    return Err((field("delay_ms"), "a lost leg has no delay".into()))
                }
                (Some(_), _, a) if a > 0 => {
                    return Err((field("answer_delay_ms"), "a lost leg has no delay".into()))
                }
                (None, 0, 0) => {
                    let why = "lose, delay_ms or answer_delay_ms is needed";
                    return Err((field("lose"), why.into()));
                }
                (None, d, _) if d > MAX_DELAY_MS => {
                    let why = format!("{d} must be at most {MAX_DELAY_MS}");
                    return Err((field("delay_ms"), why));
                }
                (None, _, a) if a > MAX_DELAY_MS => {
                    let why = format!("{a} must be at most {MAX_DELAY_MS}");
                    return Err((field("answer_delay_ms"), why));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The optional body of `POST /v1/admin/resign`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResignRequest {
    /// The member that should campaign first; default: the follower with the most of the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<NodeId>,
}

/// The answer of `POST /v1/admin/resign`, sent once the old claim is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resigned {
    /// The term whose claim was fenced.
    pub term: u64,
    /// The member asked to campaign first.
    pub successor: NodeId,
}

/// A `gap` event of `GET /v1/watch`: events `from..=to` were recorded by the node but could not
/// be written to its event log file (a full or failing disk) and are no longer in its memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    pub from: u64,
    pub to: u64,
    pub message: String,
}

/// The body of every 4xx/5xx answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// `error` in [`ErrorBody`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable snake_case code, e.g. `not_leader`.
    pub code: String,
    /// A human sentence.
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_json_keeps_its_flat_form() {
        let e = Event {
            seq: 1,
            t_mono_ns: 123,
            node_id: 1,
            view: View {
                role: Role::Leader,
                term: 3,
                leader: Some(1),
            },
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            text,
            r#"{"seq":1,"t_mono_ns":123,"node_id":1,"role":"leader","term":3,"leader":1}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);
    }

    #[test]
    fn leader_info_reads_the_contract_example() {
        let text = r#"{"node_id": 2, "mode": "quorum", "role": "follower", "term": 7,
                       "leader": {"id": 3, "addr": "127.0.0.1:7003"}, "lease_ms": null}"#;
        let info: LeaderInfo = serde_json::from_str(text).unwrap();
        assert_eq!(info.mode, Mode::Quorum);
        assert_eq!(
            info.view(),
            View {
                role: Role::Follower,
                term: 7,
                leader: Some(3)
            }
        );
    }

    #[test]
    fn fault_set_validation_names_the_field() {
        let bad = FaultSet {
            drop_rate: 1.5,
            ..Default::default()
        };
        assert_eq!(bad.validate(&[1, 2, 3]).unwrap_err().0, "drop_rate");
        let bad = FaultSet {
            block_to: [9].into(),
            ..Default::default()
        };
        assert_eq!(bad.validate(&[1, 2, 3]).unwrap_err().0, "block_to");
        let bad = FaultSet {
            delay_ms: MAX_DELAY_MS + 1,
            ..Default::default()
        };
        assert_eq!(bad.validate(&[1, 2, 3]).unwrap_err().0, "delay_ms");
        assert!(FaultSet::default().validate(&[1]).is_ok());
    }

    /// Path faults: a member, a peer path, and one of `lose` and `delay_ms`; each refusal
    /// names the rule and its field.
    #[test]
    fn path_faults_are_checked_rule_by_rule() {
        let set = |json: &str| serde_json::from_str::<FaultSet>(json).unwrap();
        let ok = set(
            r#"{"paths":[{"to":2,"path":"/peer/raft/vote","delay_ms":40},
            {"to":3,"path":"/peer/raft/append","lose":"answer"},
            {"to":3,"path":"/peer/roles/renew","answer_delay_ms":90}]}"#,
        );
        assert!(ok.validate(&[1, 2, 3]).is_ok());
        for (json, field) in [
            (
                r#"{"paths":[{"to":9,"path":"/peer/raft/vote","lose":"request"}]}"#,
                "paths[0].to",
            ),
            (
                r#"{"paths":[{"to":2,"path":"/v1/leader","lose":"request"}]}"#,
                "paths[0].path",
            ),
            (
                r#"{"paths":[{"to":2,"path":"/peer/x","lose":"answer","delay_ms":5}]}"#,
                "paths[0].delay_ms",
            ),
            (r#"{"paths":[{"to":2,"path":"/peer/x"}]}"#, "paths[0].lose"),
            (
                r#"{"paths":[{"to":2,"path":"/peer/x","delay_ms":60001}]}"#,
                "paths[0].delay_ms",
            ),
            (
                r#"{"paths":[{"to":2,"path":"/peer/x","lose":"request","answer_delay_ms":5}]}"#,
                "paths[0].answer_delay_ms",
            ),
            (
                r#"{"paths":[{"to":2,"path":"/peer/x","answer_delay_ms":60001}]}"#,
                "paths[0].answer_delay_ms",
            ),
        ] {
            assert_eq!(
                set(json).validate(&[1, 2, 3]).unwrap_err().0,
                field,
                "{json}"
            );
        }
        assert!(serde_json::from_str::<FaultSet>(
            r#"{"paths":[{"to":2,"path":"/peer/x","lose":"both"}]}"#
        )
        .is_err());
        let json = serde_json::to_value(FaultSet::default()).unwrap();
        assert!(json.get("paths").is_none(), "left out when empty: {json}");
    }

    #[test]
    fn unknown_fault_fields_are_refused() {
        assert!(serde_json::from_str::<FaultSet>(r#"{"block":[1]}"#).is_err());
    }

    #[test]
    fn the_forger_is_set_and_its_counts_only_answered() {
        let set: FaultSet = serde_json::from_str(r#"{"forge_to":[2,3]}"#).unwrap();
        assert_eq!(set.forge_to, [2, 3].into());
        assert_eq!(set.validate(&[1, 2]).unwrap_err().0, "forge_to");
        let named: FaultSet = serde_json::from_str(r#"{"forger":{"forged":1}}"#).unwrap();
        assert_eq!(named.validate(&[1]).unwrap_err().0, "forger");
        let json = serde_json::to_value(FaultSet::default()).unwrap();
        assert!(json.get("forge_to").is_none() && json.get("forger").is_none());
        let counted = FaultSet {
            forger: Some(ForgerCounts {
                forged: 2,
                ..Default::default()
            }),
            ..Default::default()
        };
        let json = serde_json::to_value(&counted).unwrap();
        assert_eq!(json["forger"]["forged"], 2);
        assert_eq!(json["forger"]["rewritten"], 0);
    }
}

/// One member of a quorum cluster (`GET /v1/members`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: NodeId,
    /// `host:port` of its API and peer RPC.
    pub addr: String,
    /// A voter (false: a non-voter, or a learner being caught up before it is promoted).
    pub voter: bool,
    /// On the leader, for a member that does not vote: milliseconds since it last answered
    /// one of the leader's requests (its removal comes at `nonvoters.remove_after_ms`, counted
    /// from this or from the leader's election, whichever is later). Absent elsewhere, and
    /// before its first answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent_ms: Option<u64>,
}

impl Member {
    /// A member as a membership names it (no absence told).
    pub fn new(id: NodeId, addr: String, voter: bool) -> Member {
        Member {
            id,
            addr,
            voter,
            absent_ms: None,
        }
    }
}

/// The membership in force on the answering node (`GET /v1/members`): what its log holds,
/// committed or not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    /// Every member, voters and learners, by id.
    pub members: Vec<Member>,
    /// The voter sets in force: one, or two during a change (joint consensus: a claim and an
    /// election need a majority of each).
    pub voter_sets: Vec<Vec<NodeId>>,
    /// The log index of the entry that holds this membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_index: Option<u64>,
    /// Whether the leader has committed it (as far as this node knows).
    pub committed: bool,
}

/// The body of `POST /v1/admin/members`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    pub id: NodeId,
    /// `host:port` where the new member serves its API and peer RPC.
    pub addr: String,
}
