//! Members that don't vote: the leader's rules for them (docs/design/nonvoters.md):
//! which join to admit ([`admit`]), and which non-voter to remove after an absence
//! ([`Absence`]). Plain logic on the
//! leader's MONOTONIC clock, no I/O; the driver feeds it the membership in force and the last
//! contact with each node, and writes what it decides.
//!
//! A non-voter is an openraft learner that is never promoted. Both changes decided here are
//! learner changes only (`AddNodes`, `RemoveNodes`): no voter set moves, so no claim, commit,
//! election or confirmation is touched (docs/safety.md, "Non-voters", N2). The rules:
//! 1. A join is admitted only on a leader, from a node that is not a voter, under an id that
//!    no member holds at another address and at an address no other member has (N3), while
//!    no other change is in progress, and while fewer than `max` non-voters are members.
//! 2. A join of a member at its own address is answered at once: nothing is written.
//! 3. A non-voter is absent once the leader has heard nothing from it for `remove_after`,
//!    counted from the later of its last contact and this leadership's start (a new leader
//!    only postpones a removal); a voter is never named, whatever its silence (N4).

use std::collections::{BTreeMap, BTreeSet};

use crate::role::NodeId;

/// The membership in force, as the leader sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Every voter of every voter set (two in a joint config).
    pub voters: BTreeSet<NodeId>,
    /// Every member with its address, voters and learners.
    pub nodes: BTreeMap<NodeId, String>,
    /// A change is in progress: a joint config, or a membership not yet committed.
    pub changing: bool,
}

impl Members {
    /// The members that are not voters.
    pub fn learners(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .keys()
            .copied()
            .filter(|id| !self.voters.contains(id))
    }
}

/// Why a join is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// This cluster takes no non-voters (`max = 0`).
    Disabled,
    /// The id is a voter's: only the admin token changes a voter.
    Voter,
    /// The id is a member at another address, until the absence rule removes it.
    IdInUse { addr: String },
    /// Another member has the address.
    AddressInUse { id: NodeId },
    /// As many non-voters as `max` are members already.
    Full { max: usize },
    /// Another change of the membership is in progress.
    InProgress,
}

impl Refusal {
    /// The contract's error code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Disabled => "nonvoters_disabled",
            Refusal::Voter => "voter",
            Refusal::IdInUse { .. } => "id_in_use",
            Refusal::AddressInUse { .. } => "address_in_use",
            Refusal::Full { .. } => "nonvoters_full",
            Refusal::InProgress => "change_in_progress",
        }
    }

    /// What the joiner's log says.
    pub fn message(&self) -> String {
        match self {
            Refusal::Disabled => "this cluster takes no non-voters (nonvoters.max = 0)".into(),
            Refusal::Voter => "the id is a voter's: only the admin token changes voters".into(),
            Refusal::IdInUse { addr } => format!(
                "the id is a member at {addr}: it joins again once that one has been removed"
            ),
            Refusal::AddressInUse { id } => format!("member {id} has this address"),
            Refusal::Full { max } => format!("{max} non-voters are members (nonvoters.max)"),
            Refusal::InProgress => "another membership change is in progress".into(),
        }
    }
}

/// What the leader does with a join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admit {
    /// A member already, at this address: nothing is written.
    Member,
    /// To be added as a learner (`AddNodes`).
    Add,
    Refused(Refusal),
}

/// A join of `id` at `addr` by rules 1 and 2, with `max` the most non-voters the cluster takes
/// (`nonvoters.max`); the caller has checked that this node leads, and writes one change at a
/// time.
pub fn admit(max: usize, m: &Members, id: NodeId, addr: &str) -> Admit {
    if max == 0 {
        return Admit::Refused(Refusal::Disabled);
    }
    if m.voters.contains(&id) {
        return Admit::Refused(Refusal::Voter);
    }
    match m.nodes.get(&id) {
        Some(a) if a == addr => return Admit::Member,
        Some(a) => return Admit::Refused(Refusal::IdInUse { addr: a.clone() }),
        None => {}
    }
    if let Some((other, _)) = m.nodes.iter().find(|(_, a)| *a == addr) {
        return Admit::Refused(Refusal::AddressInUse { id: *other });
    }
    if m.changing {
        return Admit::Refused(Refusal::InProgress);
    }
    if m.learners().count() >= max {
        return Admit::Refused(Refusal::Full { max });
    }
    Admit::Add
}

/// The leader's memory for rule 3: the leadership's term and start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Absence {
    /// How long a non-voter may be unheard before it is removed (`nonvoters.remove_after_ms`).
    pub remove_after_ns: u64,
    /// This leadership's term and start (MONOTONIC).
    leading: Option<(u64, u64)>,
}

impl Absence {
    pub fn new(remove_after_ns: u64) -> Absence {
        Absence {
            remove_after_ns,
            leading: None,
        }
    }

    /// This node leads `term` from `now_ns`; a new term starts a fresh memory.
    pub fn lead(&mut self, term: u64, now_ns: u64) {
        if self.leading.is_none_or(|(t, _)| t != term) {
            self.leading = Some((term, now_ns));
        }
    }

    /// This node no longer leads.
    pub fn follow(&mut self) {
        self.leading = None;
    }

    /// The non-voters absent at `now_ns` by rule 3, with `contact(id)` the last instant anything
    /// was heard from `id` (MONOTONIC). Empty while this node does not lead or a change is in
    /// progress.
    pub fn absent(
        &self,
        m: &Members,
        contact: impl Fn(NodeId) -> Option<u64>,
        now_ns: u64,
    ) -> BTreeSet<NodeId> {
        let Some((_, led_since)) = self.leading else {
            return BTreeSet::new();
        };
        if m.changing {
            return BTreeSet::new();
        }
        m.learners()
            .filter(|id| {
                let heard = contact(*id).map_or(led_since, |c| c.max(led_since));
                now_ns.saturating_sub(heard) >= self.remove_after_ns
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn members(voters: &[NodeId], learners: &[NodeId]) -> Members {
        let addr = |id: &NodeId| (*id, format!("127.0.0.1:{}", 7000 + id));
        Members {
            voters: voters.iter().copied().collect(),
            nodes: voters.iter().chain(learners).map(addr).collect(),
            changing: false,
        }
    }

    #[test]
    fn a_join_is_added_and_a_member_at_its_address_writes_nothing() {
        let m = members(&[1, 2, 3], &[]);
        assert_eq!(admit(2, &m, 4, "127.0.0.1:7004"), Admit::Add);
        let m = members(&[1, 2, 3], &[4]);
        assert_eq!(admit(2, &m, 4, "127.0.0.1:7004"), Admit::Member);
    }

    #[test]
    fn a_voter_another_address_or_a_taken_address_is_refused() {
        let m = members(&[1, 2, 3], &[4]);
        assert_eq!(
            admit(2, &m, 2, "127.0.0.1:7002"),
            Admit::Refused(Refusal::Voter)
        );
        let other = admit(2, &m, 4, "127.0.0.1:9999");
        let addr = "127.0.0.1:7004".to_string();
        assert_eq!(other, Admit::Refused(Refusal::IdInUse { addr }));
        let taken = admit(2, &m, 5, "127.0.0.1:7001");
        assert_eq!(taken, Admit::Refused(Refusal::AddressInUse { id: 1 }));
    }

    #[test]
    fn joins_stop_at_max_during_a_change_and_when_disabled() {
        let m = members(&[1, 2, 3], &[4, 5]);
        let full = admit(2, &m, 6, "127.0.0.1:7006");
        assert_eq!(full, Admit::Refused(Refusal::Full { max: 2 }));
        assert_eq!(admit(3, &m, 6, "127.0.0.1:7006"), Admit::Add);
        let changing = Members {
            changing: true,
            ..m.clone()
        };
        let busy = admit(3, &changing, 6, "127.0.0.1:7006");
        assert_eq!(busy, Admit::Refused(Refusal::InProgress));
        assert_eq!(admit(0, &m, 6, "x:1"), Admit::Refused(Refusal::Disabled));
    }

    #[test]
    fn only_learners_are_absent_counted_from_the_later_of_contact_and_the_leadership() {
        let m = members(&[1, 2, 3], &[4, 5]);
        let mut n = Absence::new(30 * S);
        n.lead(3, 100 * S);
        // Voter 2 silent for ever, learner 4 last heard at 90 s, learner 5 at 120 s.
        let contact = |id: NodeId| match id {
            4 => Some(90 * S),
            5 => Some(120 * S),
            _ => None,
        };
        // Led since 100 s: 4 counts from 100 s, not 90 s.
        assert!(n.absent(&m, contact, 129 * S).is_empty());
        assert_eq!(n.absent(&m, contact, 130 * S), BTreeSet::from([4]));
        assert_eq!(n.absent(&m, contact, 150 * S), BTreeSet::from([4, 5]));
        let changing = Members {
            changing: true,
            ..m.clone()
        };
        assert!(n.absent(&changing, contact, 500 * S).is_empty());
        // The same leadership keeps its start; a new one only postpones.
        n.lead(3, 120 * S);
        assert_eq!(n.absent(&m, contact, 130 * S), BTreeSet::from([4]));
        n.lead(4, 140 * S);
        assert!(n.absent(&m, contact, 169 * S).is_empty());
        n.follow();
        assert!(
            n.absent(&m, contact, 1000 * S).is_empty(),
            "a follower removes nothing"
        );
    }
}
