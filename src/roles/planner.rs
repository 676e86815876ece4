//! [`plan`]: where roles should go, as a pure function of the role table and of which nodes are
//! live. The leader runs it (`ledger.rs` then decides *when* a grant is safe); it only proposes.
//!
//! - **Grants.** A role with no holder goes to its preferred node if that is a live candidate
//!   with room (the table's `max_roles`); else to a live candidate with room, the one holding
//!   fewest roles of the role's *group* (the roles with the same candidates), ties broken by a
//!   hash of (role, node), so that the choice does not depend on the order roles were created
//!   or on which node leads (rendezvous hashing).
//! - **Preference.** A role held elsewhere while its preferred node is a live candidate with
//!   room moves there; a role on its preferred node stays (balance does not move it).
//! - **Limits.** A node over its `max_roles` (the limit lowered) gives roles up.
//! - **Balance.** In each group, with `c` live candidates and `r` roles, a node holding more than
//!   ⌈r/c⌉ gives a role it does not prefer up to a node holding fewer than ⌈r/c⌉: every move
//!   strictly narrows the spread, and a role moves to its preferred node once, after which
//!   balance leaves it, so plans converge and never flap, and nothing moves that balance or a
//!   setting does not need (sticky).
//! - **Withdrawn holders** give their roles up to a candidate.
//! - Moves are at most `max_moves` a plan (rate-limited by how often the leader plans).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::table::{RoleState, RoleTable};
use crate::role::NodeId;
use electd_client::RoleName;

/// What the planner knows beyond the table (which also holds the placement settings: each
/// node's `max_roles`, each role's preferred node).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The nodes that renew (`ledger.rs`): only they are granted or given roles.
    pub live: BTreeSet<NodeId>,
    /// The most moves one plan makes.
    pub max_moves: usize,
}

/// What the leader should do: grants of free roles, and planned moves (the holder is asked to
/// release; the planner grants the role anew once it is free).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub grants: Vec<(RoleName, NodeId)>,
    pub moves: Vec<RoleName>,
}

/// A score for `role` on `node`: the tie-break between equally loaded candidates. std's
/// `DefaultHasher::new` hashes with fixed keys, so every node of one build scores alike; a
/// leader of another build may place differently, which moves roles (rate-limited), never
/// breaks a promise (placement only proposes: `ledger.rs` decides when a grant is safe).
fn score(role: &RoleName, node: NodeId) -> u64 {
    let mut h = DefaultHasher::new();
    (role.as_str(), node).hash(&mut h);
    h.finish()
}

/// A group of roles: how many roles it has, and how many of them each node holds.
type Group = (usize, BTreeMap<NodeId, usize>);

/// The groups of `table`'s roles, keyed by their live candidates.
fn groups(table: &RoleTable, live: &BTreeSet<NodeId>) -> BTreeMap<Vec<NodeId>, Group> {
    let mut groups: BTreeMap<Vec<NodeId>, Group> = BTreeMap::new();
    for (_, r) in table.iter() {
        let cands: Vec<NodeId> = r.candidates.intersection(live).copied().collect();
        let g = groups.entry(cands).or_default();
        g.0 += 1;
        if let Some((h, _)) = r.holder {
            *g.1.entry(h).or_default() += 1;
        }
    }
    groups
}

/// A plan being made: the loads so far, counting the grants and moves already planned.
struct Planning<'a> {
    table: &'a RoleTable,
    /// Roles held by each live node.
    load: BTreeMap<NodeId, usize>,
    max_moves: usize,
    out: Plan,
}

impl Planning<'_> {
    /// Whether live node `n` may take one more role.
    fn room(&self, n: NodeId) -> bool {
        let load = self.load.get(&n).copied().unwrap_or(0);
        self.table.max_roles(n).is_none_or(|m| load < m as usize)
    }

    /// Whether `n` holds more roles than its limit.
    fn over(&self, n: NodeId) -> bool {
        let load = (self.load.get(&n).copied()).unwrap_or_else(|| self.table.count_held_by(n));
        self.table.max_roles(n).is_some_and(|m| load > m as usize)
    }

    /// The candidate of `cands` with room that holds fewest of the group's roles, below
    /// `below` of them.
    fn pick(
        &self,
        name: &RoleName,
        cands: &[NodeId],
        held: &BTreeMap<NodeId, usize>,
        below: usize,
    ) -> Option<NodeId> {
        let n_held = |n: &NodeId| held.get(n).copied().unwrap_or(0);
        (cands.iter().copied())
            .filter(|n| self.room(*n) && n_held(n) < below)
            .min_by_key(|n| (n_held(n), score(name, *n)))
    }

    /// Counts `name` as moved from `from` to `to` (when known), so that one plan does not
    /// overshoot.
    fn moved(
        &mut self,
        name: &RoleName,
        held: &mut BTreeMap<NodeId, usize>,
        from: NodeId,
        to: Option<NodeId>,
    ) {
        self.out.moves.push(name.clone());
        *held.entry(from).or_default() -= 1;
        if let Some(l) = self.load.get_mut(&from) {
            *l -= 1;
        }
        if let Some(to) = to {
            *held.entry(to).or_default() += 1;
            *self.load.entry(to).or_default() += 1;
        }
    }

    /// Places one role of the group `held` (`count` roles) on its live candidates `cands`.
    fn place(
        &mut self,
        name: &RoleName,
        r: &RoleState,
        cands: &[NodeId],
        (count, held): &mut Group,
    ) {
        let cap = count.div_ceil(cands.len().max(1));
        let preferred = r.preferred.filter(|n| cands.contains(n) && self.room(*n));
        let Some((h, _)) = r.holder else {
            if let Some(n) = preferred.or_else(|| self.pick(name, cands, held, usize::MAX)) {
                self.out.grants.push((name.clone(), n));
                *held.entry(n).or_default() += 1;
                *self.load.entry(n).or_default() += 1;
            }
            return;
        };
        if self.out.moves.len() >= self.max_moves || r.preferred == Some(h) && !self.over(h) {
            return;
        }
        let to = if !r.candidates.contains(&h) || self.over(h) {
            preferred.or_else(|| self.pick(name, cands, held, usize::MAX))
        } else if preferred.is_some() {
            preferred
        } else if held.get(&h).copied().unwrap_or(0) > cap {
            self.pick(name, cands, held, cap)
        } else {
            None
        };
        if let Some(to) = to.filter(|to| *to != h) {
            self.moved(name, held, h, Some(to));
        }
    }
}

/// The plan for `table` under `p`.
pub fn plan(table: &RoleTable, p: &Placement) -> Plan {
    let load = (p.live.iter())
        .map(|n| (*n, table.count_held_by(*n)))
        .collect();
    let mut groups = groups(table, &p.live);
    let mut planning = Planning {
        table,
        load,
        out: Plan::default(),
        max_moves: p.max_moves,
    };
    for (name, r) in table.iter() {
        let cands: Vec<NodeId> = r.candidates.intersection(&p.live).copied().collect();
        if let Some(g) = groups.get_mut(&cands) {
            planning.place(name, r, &cands, g);
        }
    }
    planning.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::table::{RoleCommand, Setting};

    fn n(i: usize) -> RoleName {
        RoleName::new(format!("r{i}")).unwrap()
    }

    fn placement(live: &[NodeId]) -> Placement {
        Placement {
            live: live.iter().copied().collect(),
            max_moves: usize::MAX,
        }
    }

    /// `roles` roles, every node of `nodes` standing for each.
    fn table(roles: usize, nodes: &[NodeId]) -> (RoleTable, u64) {
        let mut t = RoleTable::default();
        let mut index = 0;
        for node in nodes {
            index += 1;
            t.apply(
                index,
                &RoleCommand::Stand {
                    node: *node,
                    roles: (0..roles).map(n).collect(),
                },
            );
        }
        (t, index)
    }

    /// Applies the plan's grants; returns the moves.
    fn carry_out(t: &mut RoleTable, index: &mut u64, plan: Plan) -> Vec<RoleName> {
        *index += 1;
        t.apply(
            *index,
            &RoleCommand::Grant {
                grants: plan.grants,
            },
        );
        plan.moves
    }

    fn most(t: &RoleTable, nodes: &[NodeId]) -> usize {
        nodes.iter().map(|n| t.count_held_by(*n)).max().unwrap()
    }

    #[test]
    fn roles_spread_evenly_and_a_second_plan_changes_nothing() {
        let nodes = [1, 2, 3, 4, 5];
        let (mut t, mut i) = table(1_000, &nodes);
        let first = plan(&t, &placement(&nodes));
        assert_eq!(first.grants.len(), 1_000);
        assert!(carry_out(&mut t, &mut i, first).is_empty());
        assert_eq!(most(&t, &nodes), 200);
        assert_eq!(plan(&t, &placement(&nodes)), Plan::default());
    }

    #[test]
    fn a_restart_or_a_join_moves_only_what_balance_needs() {
        let (mut t, mut i) = table(100, &[1, 2, 3, 4]);
        let p = plan(&t, &placement(&[1, 2, 3]));
        carry_out(&mut t, &mut i, p);
        assert_eq!(most(&t, &[1, 2, 3]), 34);
        // 4 comes up (a join, or a restart after its roles moved): it takes 25 roles, and
        // nothing moves between 1, 2 and 3.
        let p = plan(&t, &placement(&[1, 2, 3, 4]));
        assert!(p.grants.is_empty());
        let moved = p.moves.len();
        assert!((24..=26).contains(&moved), "{moved} moves");
        // The holders give them up; the next plan grants them, to 4 only.
        i += 1;
        let taken: Vec<_> = p
            .moves
            .iter()
            .map(|r| (r.clone(), t.holder(r).unwrap().1))
            .collect();
        t.apply(i, &RoleCommand::Revoke { roles: taken });
        let p = plan(&t, &placement(&[1, 2, 3, 4]));
        assert!(p.grants.iter().all(|(_, node)| *node == 4), "{p:?}");
        carry_out(&mut t, &mut i, p);
        assert!(most(&t, &[1, 2, 3, 4]) <= 26);
        assert!(plan(&t, &placement(&[1, 2, 3, 4])).moves.is_empty());
    }

    /// Applies placement settings at the next indexes.
    fn set(t: &mut RoleTable, index: &mut u64, settings: Vec<Setting>) {
        for s in settings {
            *index += 1;
            t.apply(*index, &RoleCommand::Set(s));
        }
    }

    /// The holders give up the planned moves (as their releases would).
    fn give_up(t: &mut RoleTable, index: &mut u64, moves: &[RoleName]) {
        *index += 1;
        let taken = (moves.iter())
            .map(|r| (r.clone(), t.holder(r).unwrap().1))
            .collect();
        t.apply(*index, &RoleCommand::Revoke { roles: taken });
    }

    /// Plans, grants and gives up moves until a plan is empty (at most `rounds`); the rounds
    /// it took.
    fn settle(t: &mut RoleTable, index: &mut u64, p: &Placement, rounds: usize) -> usize {
        for round in 0..rounds {
            let q = plan(t, p);
            if q == Plan::default() {
                return round;
            }
            let moves = carry_out(t, index, q);
            give_up(t, index, &moves);
        }
        panic!("no fixed point in {rounds} rounds: {:?}", plan(t, p));
    }

    fn limit(node: NodeId, max_roles: Option<u32>) -> Setting {
        Setting::Limit { node, max_roles }
    }

    #[test]
    fn max_roles_and_max_moves_bound_the_plan() {
        let (mut t, mut i) = table(10, &[1, 2]);
        set(&mut t, &mut i, vec![limit(1, Some(2)), limit(2, Some(3))]);
        let p = placement(&[1, 2]);
        let first = plan(&t, &p);
        assert_eq!(first.grants.len(), 5, "2 + 3 roles fit");
        carry_out(&mut t, &mut i, first);
        // A third node joins with room: at most one move per plan.
        let (t3, _) = {
            let mut t3 = t.clone();
            t3.apply(
                i + 1,
                &RoleCommand::Stand {
                    node: 3,
                    roles: (0..10).map(n).collect(),
                },
            );
            (t3, ())
        };
        let mut p = placement(&[1, 2, 3]);
        p.max_moves = 1;
        let q = plan(&t3, &p);
        assert_eq!(q.grants.len(), 5, "the free roles go to 3");
        assert!(q.moves.len() <= 1);
    }

    /// A limit lowered below what a node holds: it gives the surplus up, to nodes with room,
    /// and no more than that.
    #[test]
    fn a_node_over_its_limit_gives_roles_up() {
        let nodes = [1, 2, 3];
        let (mut t, mut i) = table(9, &nodes);
        settle(&mut t, &mut i, &placement(&nodes), 5);
        assert_eq!(most(&t, &nodes), 3);
        set(&mut t, &mut i, vec![limit(1, Some(1))]);
        let q = plan(&t, &placement(&nodes));
        assert_eq!(q.moves.len(), 2, "{q:?}");
        settle(&mut t, &mut i, &placement(&nodes), 5);
        assert_eq!(t.count_held_by(1), 1);
        assert_eq!(t.count_held_by(2) + t.count_held_by(3), 8);
        assert!(most(&t, &[2, 3]) <= 4);
    }

    /// Preferred nodes: a free role goes there, a held one moves there once the node is live,
    /// balance never moves it away, a full preferred node is passed over, and the plans reach a
    /// fixed point (no flapping).
    #[test]
    fn a_role_goes_to_its_preferred_node_and_stays() {
        let nodes = [1, 2, 3];
        let (mut t, mut i) = table(12, &nodes);
        // Six roles prefer node 3, which is down at first.
        let prefs = (0..6).map(|r| Setting::Prefer {
            role: n(r),
            node: Some(3),
        });
        set(&mut t, &mut i, prefs.collect());
        settle(&mut t, &mut i, &placement(&[1, 2]), 5);
        assert_eq!(t.count_held_by(3), 0);
        // 3 comes up: its six preferred roles move to it, and balance takes none of them away.
        let rounds = settle(&mut t, &mut i, &placement(&nodes), 10);
        assert!(rounds >= 1);
        for r in 0..6 {
            assert_eq!(t.holder(&n(r)).unwrap().0, 3, "role {r}");
        }
        assert!(most(&t, &[1, 2]) <= 3, "the other six spread over 1 and 2");
        // A limit of 4 on node 3: two preferred roles leave it, and stay away.
        set(&mut t, &mut i, vec![limit(3, Some(4))]);
        settle(&mut t, &mut i, &placement(&nodes), 10);
        assert_eq!(t.count_held_by(3), 4);
        assert_eq!(plan(&t, &placement(&nodes)), Plan::default());
        // A free role whose preferred node has room goes there directly.
        let (mut u, mut j) = table(1, &nodes);
        set(
            &mut u,
            &mut j,
            vec![Setting::Prefer {
                role: n(0),
                node: Some(2),
            }],
        );
        assert_eq!(plan(&u, &placement(&nodes)).grants, vec![(n(0), 2)]);
    }

    #[test]
    fn a_withdrawn_holder_gives_its_role_to_a_candidate() {
        let (mut t, mut i) = table(1, &[1, 2]);
        let p = plan(&t, &placement(&[1, 2]));
        carry_out(&mut t, &mut i, p);
        let (holder, _) = t.holder(&n(0)).unwrap();
        i += 1;
        t.apply(
            i,
            &RoleCommand::Withdraw {
                node: holder,
                roles: vec![n(0)],
            },
        );
        assert_eq!(plan(&t, &placement(&[1, 2])).moves, vec![n(0)]);
        // With no other live candidate, it stays where it is.
        assert!(plan(&t, &placement(&[holder])).moves.is_empty());
    }
}
