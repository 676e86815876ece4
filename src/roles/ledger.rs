//! [`Ledger`]: what the leader must remember, beside the log, to grant and renew roles without
//! ever granting one inside its holder's promise: when it last renewed each node, when its
//! leadership began, and which roles it stopped renewing for their holder. Plain logic on
//! `CLOCK_BOOTTIME`, no I/O; nothing here is durable, by design (a new leader rebuilds it from
//! its own start, docs/safety.md, "Roles"). The holder's side is `holder.rs`.
//!
//! The rules, with F the follower lease (150 ms at the defaults) and L the claim lease (120 ms):
//! 1. The leader answers a renewal only while its own claim holds, and only once its table has
//!    applied every entry of earlier terms ([`Ledger::ready`]). It stamps the answer's instant
//!    per node (`renewed`); the holder's claims from it end by its send instant + L, before
//!    that stamp + L.
//! 2. A role stopped for its holder (a move, a revocation) is excluded from every later answer
//!    to it; its holder's promises end by `renewed[holder] + F`, or by the leadership's gate
//!    (its start + F) for a holder this leader never renewed.
//! 3. No grant in a leadership's first F: every promise an earlier leader renewed was renewed
//!    before that leader's claim ended, which was before this leadership began (docs/safety.md,
//!    steps 1-3).
//! 4. A role revoked is granted again only after its holder's promises ended (rule 2); a role
//!    its holder released (after its own promises ended, `holder.rs`) at once.

use std::collections::BTreeMap;

use super::holder::Renewed;
use super::table::{RoleChange, RoleTable};
use super::RoleFlaw;
use crate::role::NodeId;
use electd_client::{RoleName, Token};

/// Why a role was stopped for its holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// A planned move: the holder is asked to release it.
    Move,
    /// The holder is silent or gone: the leader revokes it.
    Revoke,
}

/// A role the leader no longer renews for its holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stop {
    pub holder: NodeId,
    pub token: Token,
    /// No promise the holder answered for the role runs past this instant (BOOTTIME).
    pub promised_until_ns: u64,
    pub why: StopReason,
}

/// One leadership's memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Leading {
    term: u64,
    /// No grant before this (BOOTTIME): the leadership's start + F (rule 3).
    gate_ns: u64,
    /// The table holds every entry of earlier terms.
    ready: bool,
    /// The instant each node's latest renewal was answered (BOOTTIME).
    renewed: BTreeMap<NodeId, u64>,
    stops: BTreeMap<RoleName, Stop>,
}

/// The leader's side of roles; empty while the node does not lead.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ledger {
    follower_lease_ns: u64,
    leading: Option<Leading>,
    /// The lab's broken variant, if any (`RoleFlaw`; never set in the node).
    flaw: Option<RoleFlaw>,
}

impl Ledger {
    pub fn new(follower_lease_ns: u64) -> Ledger {
        Ledger {
            follower_lease_ns,
            leading: None,
            flaw: None,
        }
    }

    /// This ledger with the lab's broken variant `flaw` (R3 left out), if any.
    pub fn flawed(mut self, flaw: Option<RoleFlaw>) -> Ledger {
        self.flaw = flaw;
        self
    }

    /// This node leads `term` from `now_ns` (read after it was elected): a fresh memory.
    pub fn lead(&mut self, term: u64, now_ns: u64) {
        if self.leading.as_ref().is_some_and(|l| l.term == term) {
            return;
        }
        self.leading = Some(Leading {
            term,
            gate_ns: match self.flaw {
                Some(RoleFlaw::GrantInFirstLease) => now_ns,
                _ => now_ns + self.follower_lease_ns,
            },
            ready: false,
            renewed: BTreeMap::new(),
            stops: BTreeMap::new(),
        });
    }

    /// F, the follower lease this ledger waits out.
    pub fn follower_lease_ns(&self) -> u64 {
        self.follower_lease_ns
    }

    /// The term this ledger leads, if any.
    pub fn term(&self) -> Option<u64> {
        self.leading.as_ref().map(|l| l.term)
    }

    /// This node no longer leads: it forgets everything.
    pub fn follow(&mut self) {
        self.leading = None;
    }

    /// The table has applied this leadership's first entry, so every entry of earlier terms.
    pub fn ready(&mut self) {
        if let Some(l) = &mut self.leading {
            l.ready = true;
        }
    }

    /// `node` asks for a renewal at `now_ns`, and this node's claim on the cluster's election
    /// `claim_holds` now: the answer, or `None` (no answer is given: not the leader, not ready,
    /// or its claim does not hold).
    pub fn renew(
        &mut self,
        node: NodeId,
        table: &RoleTable,
        claim_holds: bool,
        now_ns: u64,
    ) -> Option<Renewed> {
        let l = self.leading.as_mut().filter(|l| l.ready && claim_holds)?;
        let r = l.renewed.entry(node).or_default();
        *r = (*r).max(now_ns);
        let stop = l
            .stops
            .iter()
            .filter(|(role, s)| s.holder == node && table.holder(role) == Some((node, s.token)))
            .map(|(role, s)| (role.clone(), s.token))
            .collect();
        Some(Renewed {
            taken_at: table.taken_at(node),
            stop,
        })
    }

    /// Stops renewing `role` for its holder, for `why`: the stop, or `None` when the role has no
    /// holder or this node does not lead. Stopping again keeps the first stop's end (and a
    /// revocation overrides a move).
    pub fn stop(&mut self, role: &RoleName, table: &RoleTable, why: StopReason) -> Option<Stop> {
        let f = self.follower_lease_ns;
        let l = self.leading.as_mut()?;
        let (holder, token) = table.holder(role)?;
        let promised_until_ns = l.renewed.get(&holder).map_or(l.gate_ns, |r| r + f);
        let fresh = Stop {
            holder,
            token,
            promised_until_ns,
            why,
        };
        let s = l
            .stops
            .entry(role.clone())
            .and_modify(|s| {
                if s.token != token {
                    *s = fresh;
                }
            })
            .or_insert(fresh);
        if why == StopReason::Revoke {
            s.why = StopReason::Revoke;
        }
        Some(*s)
    }

    /// Whether `role` may be granted at `now_ns`: this node leads and is ready, the gate has
    /// passed, the table has the role and no holder for it, and a revoked holder's promises have ended.
    pub fn may_grant(&self, role: &RoleName, table: &RoleTable, now_ns: u64) -> bool {
        let Some(l) = self.leading.as_ref().filter(|l| l.ready) else {
            return false;
        };
        now_ns >= l.gate_ns
            && table.get(role).is_some_and(|r| r.holder.is_none())
            && l.stops
                .get(role)
                .is_none_or(|s| now_ns >= s.promised_until_ns)
    }

    /// Holders this leader has not renewed for F at `now_ns` (or, never renewed, since its
    /// gate): each of their promises has ended, so their roles may be revoked and granted again
    /// at once.
    pub fn silent(&self, table: &RoleTable, holders: &[NodeId], now_ns: u64) -> Vec<NodeId> {
        let Some(l) = self.leading.as_ref().filter(|l| l.ready) else {
            return Vec::new();
        };
        let f = self.follower_lease_ns;
        holders
            .iter()
            .copied()
            .filter(|h| table.count_held_by(*h) > 0)
            .filter(|h| l.renewed.get(h).map_or(l.gate_ns, |r| r + f) <= now_ns)
            .collect()
    }

    /// The nodes this leader renewed within the last F at `now_ns`: the live ones, which the
    /// planner places roles on.
    pub fn live(&self, now_ns: u64) -> std::collections::BTreeSet<NodeId> {
        let f = self.follower_lease_ns;
        self.leading.as_ref().map_or_else(Default::default, |l| {
            l.renewed
                .iter()
                .filter(|(_, r)| **r + f > now_ns)
                .map(|(n, _)| *n)
                .collect()
        })
    }

    /// Planned moves whose holder has not released by `grace_ns` past the end of its promises:
    /// to be revoked.
    pub fn overdue(&self, grace_ns: u64, now_ns: u64) -> Vec<(RoleName, Token)> {
        let Some(l) = &self.leading else {
            return Vec::new();
        };
        l.stops
            .iter()
            .filter(|(_, s)| s.why == StopReason::Move && s.promised_until_ns + grace_ns <= now_ns)
            .map(|(r, s)| (r.clone(), s.token))
            .collect()
    }

    /// The table applied these changes at `now_ns`: a release ends its stop (the holder's
    /// promises had ended); a revocation's stop stays until its promises end; stops whose
    /// role is no longer held by their holder and whose promises ended are forgotten.
    pub fn applied(&mut self, changes: &[RoleChange], table: &RoleTable, now_ns: u64) {
        let Some(l) = &mut self.leading else {
            return;
        };
        for c in changes {
            if let RoleChange::Released { role, token, .. } = c {
                if l.stops.get(role).is_some_and(|s| s.token == *token) {
                    l.stops.remove(role);
                }
            }
        }
        l.stops.retain(|role, s| {
            table.holder(role) == Some((s.holder, s.token)) || now_ns < s.promised_until_ns
        });
    }

    /// The stop in force for `role`, if any.
    pub fn stopped(&self, role: &RoleName) -> Option<Stop> {
        self.leading.as_ref()?.stops.get(role).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::holder::Holder;
    use crate::roles::table::RoleCommand;

    const MS: u64 = 1_000_000;
    const F: u64 = 150 * MS;
    const L: u64 = 120 * MS;

    fn n(s: &str) -> RoleName {
        RoleName::new(s).unwrap()
    }

    /// Nodes 1 and 2 stand for a; 1 holds it (token 1).
    fn table() -> RoleTable {
        let mut t = RoleTable::default();
        for node in [1, 2] {
            t.apply(
                node,
                &RoleCommand::Stand {
                    node,
                    roles: vec![n("a")],
                },
            );
        }
        t.apply(
            3,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 1)],
            },
        );
        t
    }

    #[test]
    fn no_renewal_before_ready_nor_without_the_leaders_claim() {
        let t = table();
        let mut l = Ledger::new(F);
        assert_eq!(l.renew(1, &t, true, 0), None, "not leading");
        l.lead(5, 0);
        assert_eq!(l.renew(1, &t, true, 0), None, "earlier terms not applied");
        l.ready();
        assert_eq!(l.renew(1, &t, false, 0), None, "claim lapsed");
        assert!(l.renew(1, &t, true, 0).is_some());
        l.follow();
        assert_eq!(l.renew(1, &t, true, 0), None);
    }

    #[test]
    fn a_new_leadership_grants_nothing_for_a_follower_lease() {
        let mut t = table();
        t.apply(
            4,
            &RoleCommand::Revoke {
                roles: vec![(n("a"), 1)],
            },
        );
        let mut l = Ledger::new(F);
        l.lead(5, 1_000 * MS);
        l.ready();
        // The earlier leader may have renewed 1 just before its claim ended, which was before
        // this leadership began: 1's promises end by then + L < start + F.
        assert!(!l.may_grant(&n("a"), &t, 1_000 * MS + F - 1));
        assert!(l.may_grant(&n("a"), &t, 1_000 * MS + F));
        assert!(!l.may_grant(&n("a"), &table(), 1_000 * MS + F), "a held");
        assert!(!l.may_grant(&n("b"), &t, 1_000 * MS + F), "no role b");
    }

    /// The whole exchange, holder and leader: a revoked role is granted again only after the
    /// revoked holder's last claim has ended.
    #[test]
    fn a_revoked_role_is_granted_again_only_after_its_holders_last_claim() {
        let mut t = table();
        let mut l = Ledger::new(F);
        l.lead(5, 0);
        l.ready();
        let mut h = Holder::new(1, L, 0);
        let start = F;
        // 1 renews at start (sent then, answered 5 ms later).
        let id = h.ask(start);
        let ans = l.renew(1, &t, true, start + 5 * MS).unwrap();
        assert!(h.answered(id, &ans, &t));
        let last = h.claim(&n("a"), &t, start + 6 * MS).unwrap();
        // The leader revokes a at once; the grant waits for the stop's end.
        let s = l.stop(&n("a"), &t, StopReason::Revoke).unwrap();
        assert_eq!(s.promised_until_ns, start + 5 * MS + F);
        assert!(s.promised_until_ns > last.until_ns);
        let changes = t.apply(
            4,
            &RoleCommand::Revoke {
                roles: vec![(n("a"), 1)],
            },
        );
        l.applied(&changes, &t, start + 8 * MS);
        assert!(!l.may_grant(&n("a"), &t, s.promised_until_ns - 1));
        assert!(l.may_grant(&n("a"), &t, s.promised_until_ns));
        // A renewal after the stop no longer covers a for 1.
        let id = h.ask(start + 9 * MS);
        let ans = l.renew(1, &t, true, start + 10 * MS).unwrap();
        assert_eq!(ans.taken_at, 4);
        assert!(h.answered(id, &ans, &t));
        assert_eq!(h.claim(&n("a"), &t, start + 11 * MS), None);
    }

    #[test]
    fn a_move_asks_the_holder_to_release_and_its_release_frees_the_role_at_once() {
        let mut t = table();
        let mut l = Ledger::new(F);
        l.lead(5, 0);
        l.ready();
        let mut h = Holder::new(1, L, 0);
        let id = h.ask(F);
        let ans = l.renew(1, &t, true, F).unwrap();
        h.answered(id, &ans, &t);
        let c = h.claim(&n("a"), &t, F + MS).unwrap();
        l.stop(&n("a"), &t, StopReason::Move).unwrap();
        // The next answer says stop; the holder releases once its promise on a has ended.
        let id = h.ask(F + 3 * MS);
        let ans = l.renew(1, &t, true, F + 3 * MS).unwrap();
        assert_eq!(ans.stop, vec![(n("a"), 1)]);
        h.answered(id, &ans, &t);
        assert!(h.releasable(&t, c.until_ns - 1).is_empty());
        let rel = h.releasable(&t, c.until_ns);
        assert_eq!(rel, vec![(n("a"), 1)]);
        let changes = t.apply(
            4,
            &RoleCommand::Release {
                node: 1,
                roles: rel.clone(),
            },
        );
        l.applied(&changes, &t, c.until_ns);
        assert_eq!(l.stopped(&n("a")), None);
        assert!(l.may_grant(&n("a"), &t, c.until_ns), "no lease wait");
        assert!(l.overdue(0, u64::MAX).is_empty());
    }

    #[test]
    fn a_holder_that_does_not_release_is_overdue_and_a_silent_one_is_found() {
        let t = table();
        let mut l = Ledger::new(F);
        l.lead(5, 0);
        l.ready();
        // Never renewed in this leadership: silent from the gate on.
        assert!(l.silent(&t, &[1, 2], F - 1).is_empty());
        assert_eq!(l.silent(&t, &[1, 2], F), vec![1], "2 holds nothing");
        l.renew(1, &t, true, F + 10 * MS);
        assert!(l.silent(&t, &[1], 2 * F + 9 * MS).is_empty());
        assert_eq!(l.silent(&t, &[1], 2 * F + 10 * MS), vec![1]);
        let s = l.stop(&n("a"), &t, StopReason::Move).unwrap();
        assert!(l.overdue(50 * MS, s.promised_until_ns + 49 * MS).is_empty());
        assert_eq!(
            l.overdue(50 * MS, s.promised_until_ns + 50 * MS),
            vec![(n("a"), 1)]
        );
        // A revocation overrides the move and keeps its instant.
        let r = l.stop(&n("a"), &t, StopReason::Revoke).unwrap();
        assert_eq!(r.promised_until_ns, s.promised_until_ns);
        assert_eq!(r.why, StopReason::Revoke);
    }
}
