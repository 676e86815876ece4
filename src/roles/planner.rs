//! [`plan`]: where roles should go, as a pure function of the role table and of which nodes are
//! live. The leader runs it (`ledger.rs` then decides *when* a grant is safe); it only proposes.
//!
//! - **Grants.** A role with no holder goes to a live candidate with room (`max_roles`), the one
//!   holding fewest roles of the role's *group* (the roles with the same candidates), ties
//!   broken by a hash of (role, node), so that the choice does not depend on the order roles
//!   were created or on which node leads (rendezvous hashing).
//! - **Balance.** In each group, with `c` live candidates and `r` roles, a node holding more than
//!   ⌈r/c⌉ gives one up to a node holding fewer than ⌈r/c⌉: every move strictly narrows the
//!   spread, so plans converge and never flap, and nothing moves that balance does not need
//!   (sticky).
//! - **Withdrawn holders** give their roles up to a candidate.
//! - Moves are at most `max_moves` a plan (rate-limited by how often the leader plans).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::table::RoleTable;
use crate::role::NodeId;
use electd_client::RoleName;

/// What the planner knows beyond the table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The nodes that renew (`ledger.rs`): only they are granted or given roles.
    pub live: BTreeSet<NodeId>,
    /// The most roles a node holds, per node (absent: no limit).
    pub max_roles: BTreeMap<NodeId, usize>,
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

/// The plan for `table` under `p`.
pub fn plan(table: &RoleTable, p: &Placement) -> Plan {
    let mut load: BTreeMap<NodeId, usize> = p
        .live
        .iter()
        .map(|n| (*n, table.count_held_by(*n)))
        .collect();
    let mut groups = groups(table, &p.live);
    let room = |load: &BTreeMap<NodeId, usize>, n: NodeId| {
        p.max_roles.get(&n).is_none_or(|m| load[&n] < *m)
    };
    let mut out = Plan::default();
    for (name, r) in table.iter() {
        let cands: Vec<NodeId> = r.candidates.intersection(&p.live).copied().collect();
        let Some((count, held)) = groups.get_mut(&cands) else {
            continue;
        };
        let cap = count.div_ceil(cands.len().max(1));
        let pick =
            |held: &BTreeMap<NodeId, usize>, load: &BTreeMap<NodeId, usize>, below: usize| {
                cands
                    .iter()
                    .copied()
                    .filter(|n| room(load, *n) && held.get(n).copied().unwrap_or(0) < below)
                    .min_by_key(|n| (held.get(n).copied().unwrap_or(0), score(name, *n)))
            };
        match r.holder {
            None => {
                if let Some(n) = pick(held, &load, usize::MAX) {
                    out.grants.push((name.clone(), n));
                    *held.entry(n).or_default() += 1;
                    *load.get_mut(&n).expect("a live node") += 1;
                }
            }
            Some(_) if out.moves.len() >= p.max_moves => {}
            Some((h, _)) if !r.candidates.contains(&h) => {
                if pick(held, &load, usize::MAX).is_some() {
                    out.moves.push(name.clone());
                }
            }
            Some((h, _)) => {
                let mine = held.get(&h).copied().unwrap_or(0);
                if mine > cap {
                    if let Some(n) = pick(held, &load, cap) {
                        out.moves.push(name.clone());
                        // Counted as if done, so that one plan does not overshoot.
                        *held.entry(h).or_default() -= 1;
                        *held.entry(n).or_default() += 1;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::table::RoleCommand;

    fn n(i: usize) -> RoleName {
        RoleName::new(format!("r{i}")).unwrap()
    }

    fn placement(live: &[NodeId]) -> Placement {
        Placement {
            live: live.iter().copied().collect(),
            max_roles: BTreeMap::new(),
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

    #[test]
    fn max_roles_and_max_moves_bound_the_plan() {
        let (mut t, mut i) = table(10, &[1, 2]);
        let mut p = placement(&[1, 2]);
        p.max_roles.insert(1, 2);
        p.max_roles.insert(2, 3);
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
