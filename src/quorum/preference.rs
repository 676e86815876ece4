//! The preferred leader (docs/operations.md, "Preferred leader"): members may have a `priority`; a leader
//! hands over, through the resign path, to the member of the highest priority above its own
//! once that member has been connected and up to date for `priority_settle_ms`, and never
//! twice within that time. Like Kafka's preferred-replica election and the `preferredHolder`
//! of Kubernetes' coordinated leader election (KEP-4355). Only *who* leads is decided here:
//! the handover is the resign path, whose safety docs/safety.md argues.
//!
//! Who can take over is judged here too ([`Followers`]): a resignation's successor and the
//! preferred leader's readiness both ask whether a follower holds the leader's whole log.
//!
//! Pure logic, held by the core (core/mod.rs); the driver's look (driver/prefer.rs) feeds it
//! what the leader sees every beat.

use openraft::{BasicNode, RaftMetrics};

use crate::engine::ResignError;
use crate::role::NodeId;

/// The other voters as the leader's replication shows them: how far each one's log reaches
/// (`None` before it first answered, and on a node that does not lead), and how far the
/// leader's own does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Followers {
    pub matched: Vec<(NodeId, Option<u64>)>,
    pub last: Option<u64>,
}

impl Followers {
    /// The `voters` other than `me`, as openraft's replication metrics `m` show them.
    pub fn of(m: &RaftMetrics<NodeId, BasicNode>, voters: &[NodeId], me: NodeId) -> Followers {
        let matched = |id: &NodeId| {
            let r = m.replication.as_ref()?;
            r.get(id).copied().flatten().map(|log_id| log_id.index)
        };
        Followers {
            matched: voters
                .iter()
                .filter(|id| **id != me)
                .map(|id| (*id, matched(id)))
                .collect(),
            last: m.last_log_index,
        }
    }

    /// How far `id`'s log reaches.
    fn matched(&self, id: NodeId) -> Option<u64> {
        self.matched
            .iter()
            .find(|(f, _)| *f == id)
            .and_then(|(_, m)| *m)
    }

    /// Whether follower `id` holds the leader's whole log.
    pub fn has_all(&self, id: NodeId) -> bool {
        let m = self.matched(id);
        m.is_some() && m >= self.last
    }

    /// A resignation's successor: `to` when it can take over, else the follower with the most
    /// of the log (lowest id on a tie), which must have all of it.
    pub fn successor(&self, to: Option<NodeId>) -> Result<NodeId, ResignError> {
        let show = |i: Option<u64>| i.map_or("none".into(), |i| i.to_string());
        match to {
            Some(n) if !self.matched.iter().any(|(f, _)| *f == n) => {
                Err(ResignError::UnknownTarget(n))
            }
            Some(n) if self.has_all(n) => Ok(n),
            Some(n) => Err(ResignError::Unsuitable(
                n,
                format!(
                    "its log reaches index {} of the leader's {}",
                    show(self.matched(n)),
                    show(self.last)
                ),
            )),
            None => self
                .matched
                .iter()
                .max_by_key(|(id, m)| (*m, std::cmp::Reverse(*id)))
                .map(|(id, _)| *id)
                .filter(|id| self.has_all(*id))
                .ok_or(ResignError::NoSuccessor),
        }
    }
}

/// A member as the leader sees it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seen {
    pub id: NodeId,
    pub priority: u32,
    /// Answered within a follower lease and holds the leader's whole log.
    pub ready: bool,
}

/// What a leader sees at a look, every beat: its own priority, the other voters, and the
/// settle time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Look {
    pub mine: u32,
    pub seen: Vec<Seen>,
    pub settle_ns: u64,
}

/// What a leader remembers between two looks: the member it is waiting for, since when, and
/// its own last handover.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Settle {
    waiting_for: Option<(NodeId, u64)>,
    last_handover_ns: Option<u64>,
}

impl Settle {
    /// The member to hand over to now, if any: the ready member of the highest priority
    /// above `mine` (the lowest id among equals), once it has been so for `settle_ns` without
    /// a break, and `settle_ns` after this leader's last handover.
    pub fn judge(
        &mut self,
        now_ns: u64,
        mine: u32,
        members: &[Seen],
        settle_ns: u64,
    ) -> Option<NodeId> {
        let best = members
            .iter()
            .filter(|m| m.ready && m.priority > mine)
            .max_by_key(|m| (m.priority, std::cmp::Reverse(m.id)));
        let Some(best) = best else {
            self.waiting_for = None;
            return None;
        };
        let since = match self.waiting_for {
            Some((id, since)) if id == best.id => since,
            _ => {
                self.waiting_for = Some((best.id, now_ns));
                now_ns
            }
        };
        let settled = now_ns.saturating_sub(since) >= settle_ns;
        let spaced = self
            .last_handover_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= settle_ns);
        if settled && spaced {
            self.last_handover_ns = Some(now_ns);
            self.waiting_for = None;
            Some(best.id)
        } else {
            None
        }
    }

    /// One look at `now_ns`: none while this node does not claim (whoever it waited for then
    /// starts over), else [`judge`](Self::judge).
    pub fn look(&mut self, now_ns: u64, claims: bool, look: &Look) -> Option<NodeId> {
        if !claims {
            self.not_leading();
            return None;
        }
        self.judge(now_ns, look.mine, &look.seen, look.settle_ns)
    }

    /// This node no longer leads: whoever it waited for starts over should it lead again.
    pub fn not_leading(&mut self) {
        self.waiting_for = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000;

    /// A resignation's successor: a named member with the whole log; else the follower with
    /// the most of it (lowest id on a tie), which must hold all of it.
    #[test]
    fn the_successor_holds_the_leaders_whole_log() {
        let f = |matched: Vec<(NodeId, Option<u64>)>| Followers {
            matched,
            last: Some(9),
        };
        let three = f(vec![(2, Some(9)), (3, Some(9)), (4, Some(5))]);
        assert_eq!(three.successor(None), Ok(2), "lowest id on a tie");
        assert_eq!(three.successor(Some(3)), Ok(3));
        assert_eq!(
            three.successor(Some(4)),
            Err(ResignError::Unsuitable(
                4,
                "its log reaches index 5 of the leader's 9".into()
            ))
        );
        // The leader itself (not among its followers), and a stranger.
        assert_eq!(three.successor(Some(1)), Err(ResignError::UnknownTarget(1)));
        assert_eq!(three.successor(Some(7)), Err(ResignError::UnknownTarget(7)));
        let behind = f(vec![(2, Some(8)), (3, None)]);
        assert_eq!(behind.successor(None), Err(ResignError::NoSuccessor));
        assert!(!behind.has_all(3) && !behind.has_all(2));
        assert_eq!(f(vec![(2, Some(8)), (3, Some(9))]).successor(None), Ok(3));
    }

    fn seen(id: NodeId, priority: u32, ready: bool) -> Seen {
        Seen {
            id,
            priority,
            ready,
        }
    }

    #[test]
    fn a_higher_priority_member_gets_the_role_once_it_has_been_ready_for_the_settle_time() {
        let mut s = Settle::default();
        let members = [seen(2, 0, true), seen(3, 10, true)];
        assert_eq!(s.judge(0, 0, &members, S), None);
        assert_eq!(s.judge(S - 1, 0, &members, S), None);
        assert_eq!(s.judge(S, 0, &members, S), Some(3));
    }

    #[test]
    fn equal_or_lower_priorities_and_members_not_ready_never_get_it() {
        let mut s = Settle::default();
        let members = [seen(2, 5, true), seen(3, 10, false)];
        for t in 0..5 {
            assert_eq!(s.judge(t * S, 5, &members, S), None);
        }
    }

    #[test]
    fn a_break_in_readiness_starts_the_settle_time_over() {
        let mut s = Settle::default();
        let up = [seen(3, 10, true)];
        let down = [seen(3, 10, false)];
        assert_eq!(s.judge(0, 0, &up, S), None);
        assert_eq!(s.judge(S / 2, 0, &down, S), None);
        assert_eq!(s.judge(S, 0, &up, S), None);
        assert_eq!(s.judge(S + S / 2, 0, &up, S), None);
        assert_eq!(s.judge(2 * S, 0, &up, S), Some(3));
    }

    /// A member that flaps (ready, gone, ready…) is handed the role at most once a settle
    /// time by one leader.
    #[test]
    fn handovers_are_a_settle_time_apart() {
        let mut s = Settle::default();
        let three = [seen(3, 10, true)];
        assert_eq!(s.judge(0, 0, &three, S), None);
        assert_eq!(s.judge(S, 0, &three, S), Some(3));
        // Back as leader at once (3 went away and came back): 3 is ready again at S + 1.
        assert_eq!(s.judge(S + 1, 0, &three, S), None);
        assert_eq!(s.judge(2 * S, 0, &three, S), None);
        assert_eq!(s.judge(2 * S + 1, 0, &three, S), Some(3));
    }

    #[test]
    fn the_highest_priority_wins_and_the_lowest_id_among_equals() {
        let mut s = Settle::default();
        let members = [seen(2, 7, true), seen(4, 9, true), seen(3, 9, true)];
        assert_eq!(s.judge(0, 0, &members, S), None);
        assert_eq!(s.judge(S, 0, &members, S), Some(3));
    }
}
