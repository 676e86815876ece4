//! [`Plan`]: when `electd run`'s child starts and stops, decided from the node's answers and
//! the clock only (no I/O), as a state machine the supervisor (`run.rs`) feeds and whose
//! [`Action`]s it carries out. The argument for its deadlines is in run.rs's opening comment.

use electd::clock::ms;
use electd_client::{LeaderInfo, Promise};

/// SIGKILL goes out this long before the deadline: tokio's timers fire up to a millisecond
/// late, the kernel delivers a signal at the target's next scheduling, and a busy host may
/// run the supervisor a few milliseconds late. (A supervisor stalled for longer than this can
/// miss the deadline; docs/applications.md, "electd run", says what is covered.)
pub const KILL_EARLY_MS: u64 = 5;

/// What the supervisor must do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start CMD for the claim of `term`.
    Start { term: u64 },
    /// SIGTERM to CMD's group.
    Term,
    /// SIGKILL to CMD's group.
    Kill,
}

/// The child as the plan sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Supervised {
    term: u64,
    /// The end of the latest promise of `term` (boot ns): the child never outlives it.
    deadline_ns: u64,
    termed: bool,
    killed: bool,
}

/// When the child starts and stops, decided from the node's answers and the clock only (no
/// I/O): the supervisor feeds it and carries out the [`Action`]s.
#[derive(Clone, Debug)]
pub struct Plan {
    grace_ns: u64,
    poll_ns: u64,
    /// The newest promise known, of its term (boot ns): the client crate's arithmetic, which
    /// applications that link `electd-client` keep with the same rules (`Election`).
    promise: Promise,
    child: Option<Supervised>,
    /// No start before this instant (boot ns): after CMD exited by itself.
    not_before_ns: u64,
    /// The node that answered first: the one beside the application. An answer from any other
    /// (a load-balanced address that reached another node) claims nothing for this
    /// application (issue 48, item 5): it is taken as the node saying it does not claim.
    pub node: Option<electd_client::NodeId>,
}

impl Plan {
    pub fn new(grace_ms: u64, poll_ms: u64) -> Plan {
        Plan {
            grace_ns: ms(grace_ms),
            poll_ns: ms(poll_ms.max(1)),
            promise: Promise::default(),
            child: None,
            not_before_ns: 0,
            node: None,
        }
    }

    /// Whether `info` comes from the node this supervisor follows (the first that answered).
    pub fn is_ours(&mut self, info: &LeaderInfo) -> bool {
        *self.node.get_or_insert(info.node_id) == info.node_id
    }

    /// The node answered `info` (claiming or not) to a question sent at `sent_ns`; it is
    /// `now_ns`. Answers what to do.
    pub fn answered(&mut self, sent_ns: u64, now_ns: u64, info: &LeaderInfo) -> Option<Action> {
        let claims = info.view().claims() && self.is_ours(info);
        if claims {
            // bully, ring and invitation give no lease: the claim holds until an answer says otherwise,
            // which comes within two polls.
            let lease_ms = info.lease_ms.unwrap_or(2 * self.poll_ns / ms(1));
            let until = sent_ns + ms(lease_ms);
            self.promise
                .answered(sent_ns, now_ns, Some((info.term, lease_ms)));
            if let Some(c) = &mut self.child {
                // Only a promise of the child's own term extends its deadline.
                if c.term == info.term {
                    c.deadline_ns = c.deadline_ns.max(until);
                }
            }
        }
        let promise_left = (self.promise.token)
            .filter(|_| self.promise.held(now_ns))
            .map(|t| (t, self.promise.deadline_ns));
        match self.child {
            Some(c) if !claims || c.term != info.term => self.stop_soon(now_ns),
            None if claims
                && now_ns >= self.not_before_ns
                && promise_left
                    .is_some_and(|(t, u)| t == info.term && u > now_ns + self.grace_ns) =>
            {
                Some(Action::Start { term: info.term })
            }
            _ => self.enforce(now_ns),
        }
    }

    /// CMD started for `term`: its deadline is the end of the newest promise of `term`.
    pub fn started(&mut self, term: u64) {
        let deadline_ns = match self.promise.token == Some(term) {
            true => self.promise.deadline_ns,
            false => 0,
        };
        self.child = Some(Supervised {
            term,
            deadline_ns,
            termed: false,
            killed: false,
        });
    }

    /// SIGTERM now; the deadline moves to `now + grace` if that is sooner.
    fn stop_soon(&mut self, now_ns: u64) -> Option<Action> {
        let grace = self.grace_ns;
        let c = self.child.as_mut()?;
        c.deadline_ns = c.deadline_ns.min(now_ns + grace);
        if c.termed {
            return self.enforce(now_ns);
        }
        c.termed = true;
        Some(Action::Term)
    }

    /// The claim must end for the child (SIGINT, SIGTERM to the supervisor): as
    /// [`Plan::answered`] with a refusal.
    pub fn stop(&mut self, now_ns: u64) -> Option<Action> {
        self.stop_soon(now_ns)
    }

    /// Enforces the deadline at `now_ns`: SIGKILL from [`KILL_EARLY_MS`] before it, SIGTERM
    /// from `grace` before it.
    pub fn enforce(&mut self, now_ns: u64) -> Option<Action> {
        let grace = self.grace_ns;
        let c = self.child.as_mut()?;
        if now_ns + ms(KILL_EARLY_MS) >= c.deadline_ns {
            if c.killed {
                return None;
            }
            c.killed = true;
            c.termed = true;
            return Some(Action::Kill);
        }
        if now_ns + grace >= c.deadline_ns && !c.termed {
            c.termed = true;
            return Some(Action::Term);
        }
        None
    }

    /// When [`Plan::enforce`] must run next (boot ns), if a child runs.
    pub fn due_ns(&self) -> Option<u64> {
        let c = self.child.as_ref().filter(|c| !c.killed)?;
        let kill_at = c.deadline_ns.saturating_sub(ms(KILL_EARLY_MS));
        Some(if c.termed {
            kill_at
        } else {
            c.deadline_ns.saturating_sub(self.grace_ns).min(kill_at)
        })
    }

    /// The child's deadline (boot ns), if one runs.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.child.map(|c| c.deadline_ns)
    }

    /// The child ended; `by_itself` when no signal of ours stopped it. A child that exits by
    /// itself starts again no sooner than `restart_ns`.
    pub fn ended(&mut self, restart_ns: u64) -> Option<u64> {
        let c = self.child.take()?;
        if !c.termed {
            self.not_before_ns = restart_ns;
        }
        Some(c.term)
    }

    /// Whether the running child was signalled by us.
    pub fn signalled(&self) -> bool {
        self.child.is_some_and(|c| c.termed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use electd_client::{LeaderRef, Mode, Role};

    const MS: u64 = 1_000_000;

    fn answer(role: Role, term: u64, lease_ms: Option<u64>) -> LeaderInfo {
        LeaderInfo {
            node_id: 1,
            mode: Mode::Quorum,
            role,
            term,
            leader: (role == Role::Leader).then(|| LeaderRef {
                id: 1,
                addr: "127.0.0.1:7001".into(),
            }),
            lease_ms,
            no_promise: None,
        }
    }

    /// A plan with a child started for term 7 whose deadline is 1,120 ms (asked at 1,000 ms,
    /// 120 ms of lease), grace 40 ms.
    fn running() -> Plan {
        let mut p = Plan::new(40, 20);
        let a = p.answered(1000 * MS, 1001 * MS, &answer(Role::Leader, 7, Some(120)));
        assert_eq!(a, Some(Action::Start { term: 7 }));
        p.started(7);
        assert_eq!(p.deadline_ns(), Some(1120 * MS));
        p
    }

    /// Issue 48, item 5: pointed at an address that reaches several nodes, the supervisor
    /// follows the first that answered; another node's claim stops the child as a refusal would.
    #[test]
    fn another_nodes_claim_is_no_claim_for_this_supervisor() {
        let mut p = running();
        let mut other = answer(Role::Leader, 7, Some(120));
        other.node_id = 2;
        assert_eq!(
            p.answered(1050 * MS, 1051 * MS, &other),
            Some(Action::Term),
            "node 2's claim stops node 1's child"
        );
        let mut fresh = Plan::new(40, 20);
        assert_eq!(
            fresh.answered(1000 * MS, 1001 * MS, &answer(Role::Leader, 7, Some(120))),
            Some(Action::Start { term: 7 })
        );
        fresh.started(7);
        assert_eq!(
            fresh.answered(1010 * MS, 1011 * MS, &other),
            Some(Action::Term)
        );
        let mut never = Plan::new(40, 20);
        assert!(never.is_ours(&other), "the first to answer is followed");
        let ours = answer(Role::Leader, 7, Some(120));
        assert_eq!(
            never.answered(1000 * MS, 1001 * MS, &ours),
            None,
            "node 1 claims, but this supervisor follows node 2"
        );
    }

    #[test]
    fn an_answer_in_a_new_term_never_extends_the_old_childs_deadline() {
        let mut p = running();
        // At 1,110 ms the node claims in term 8 with a fresh lease: the term-7 child must stop
        // by its own deadline (1,120), not by now + grace (1,150).
        let a = p.answered(1110 * MS, 1111 * MS, &answer(Role::Leader, 8, Some(120)));
        assert_eq!(a, Some(Action::Term));
        assert_eq!(p.deadline_ns(), Some(1120 * MS));
        assert_eq!(
            p.due_ns(),
            Some(1115 * MS),
            "SIGKILL 5 ms before the deadline"
        );
        assert_eq!(p.enforce(1115 * MS), Some(Action::Kill));
    }

    #[test]
    fn renewals_of_the_same_term_extend_the_deadline() {
        let mut p = running();
        assert_eq!(
            p.answered(1020 * MS, 1021 * MS, &answer(Role::Leader, 7, Some(119))),
            None
        );
        assert_eq!(p.deadline_ns(), Some(1139 * MS));
        assert_eq!(p.due_ns(), Some(1099 * MS), "SIGTERM a grace before it");
    }

    #[test]
    fn an_unrenewed_claim_is_enforced_at_its_instant() {
        let mut p = running();
        assert_eq!(p.enforce(1079 * MS), None);
        assert_eq!(p.enforce(1080 * MS), Some(Action::Term));
        assert_eq!(p.due_ns(), Some(1115 * MS));
        assert_eq!(p.enforce(1114 * MS), None);
        assert_eq!(p.enforce(1115 * MS), Some(Action::Kill));
        assert_eq!(p.enforce(1116 * MS), None, "killed once");
        assert_eq!(p.due_ns(), None);
    }

    #[test]
    fn a_refusal_stops_at_once_and_kills_no_later_than_the_deadline() {
        let mut p = running();
        let a = p.answered(1100 * MS, 1101 * MS, &answer(Role::Follower, 7, None));
        assert_eq!(a, Some(Action::Term));
        assert_eq!(
            p.deadline_ns(),
            Some(1120 * MS),
            "min(now + grace, deadline)"
        );
        let mut p = running();
        p.answered(1010 * MS, 1011 * MS, &answer(Role::Follower, 7, None));
        assert_eq!(p.deadline_ns(), Some(1051 * MS), "the grace, when sooner");
    }

    #[test]
    fn stopping_the_supervisor_waits_no_longer_than_the_deadline() {
        let mut p = running();
        assert_eq!(p.stop(1110 * MS), Some(Action::Term));
        assert_eq!(p.due_ns(), Some(1115 * MS));
    }

    #[test]
    fn a_child_starts_only_with_more_promise_left_than_the_grace() {
        let mut p = Plan::new(40, 20);
        let a = p.answered(1000 * MS, 1001 * MS, &answer(Role::Leader, 7, Some(30)));
        assert_eq!(a, None);
        let a = p.answered(1020 * MS, 1021 * MS, &answer(Role::Leader, 7, Some(100)));
        assert_eq!(a, Some(Action::Start { term: 7 }));
    }
}
