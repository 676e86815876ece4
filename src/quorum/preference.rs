//! The preferred leader (docs/operations.md, "Preferred leader"): members may have a `priority`; a leader
//! hands over, through the resign path, to the member of the highest priority above its own
//! once that member has been connected and up to date for `priority_settle_ms`, and never
//! twice within that time. Like Kafka's preferred-replica election and the `preferredHolder`
//! of Kubernetes' coordinated leader election (KEP-4355). Only *who* leads is decided here:
//! the handover is the resign path, whose safety docs/safety.md argues.
//!
//! Pure logic, held by the core (core/mod.rs); the driver's look (driver/prefer.rs) feeds it
//! what the leader sees every beat.

use crate::role::NodeId;

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
