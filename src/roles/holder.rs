//! [`Holder`]: a node's claims on the roles the log grants it, as plain logic on
//! `CLOCK_BOOTTIME` without I/O. One renewal covers every role the node holds: the node reads
//! the time, then asks the leader ([`Holder::ask`]); when the leader answers
//! ([`Holder::answered`]), the node may claim each role its own table grants it until that send
//! instant plus the claim lease, as a leader claims the cluster's election from a probe's send
//! instant (`lease.rs`). The argument, and why the leader's answer carries `taken_at`, is in
//! docs/safety.md ("Roles"); the leader's side is `ledger.rs`.

use std::collections::BTreeMap;

use super::table::RoleTable;
use super::RoleFlaw;
use crate::role::NodeId;
use electd_client::{RoleName, Token};

/// The leader's answer to a renewal (`ledger.rs`, [`Ledger::renew`](super::ledger::Ledger::renew)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Renewed {
    /// The log index of the last entry that took a role from the asker, as the leader has
    /// applied it: the answer covers the asker's roles only once its own table has applied
    /// that far, so that a role taken from it (and perhaps granted to another) is not among them.
    pub taken_at: u64,
    /// Roles the leader stopped renewing for the asker (a planned move): the asker stops
    /// claiming them and releases each once every promise it answered for it has ended.
    pub stop: Vec<(RoleName, Token)>,
}

/// One claim on a role, as an answer to `GET /v1/claim/{name}` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoleClaim {
    pub token: Token,
    /// The claim holds while `now < until_ns` (BOOTTIME).
    pub until_ns: u64,
}

/// Renewals asked and not answered, at most this many (older ones are forgotten: an answer to
/// them would renew little or nothing).
const ASKED_KEPT: usize = 64;

/// The role claims of one node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    me: NodeId,
    lease_ns: u64,
    next_ask: u64,
    /// Renewals asked and not yet answered: id → send instant (BOOTTIME).
    asked: BTreeMap<u64, u64>,
    /// The latest end the answered renewals give this node's roles (BOOTTIME).
    renewed_until_ns: u64,
    /// The index this node's table had applied when that renewal was answered: the roles it
    /// granted this node by then (tokens up to it) were claimable ([`Holder::lapsed`]).
    covered: u64,
    /// The end of claims [`Holder::lapsed`] last told as lost (BOOTTIME; 0: none).
    told_ns: u64,
    /// Roles this node stopped claiming (the leader moves them, or it withdraws), by the token
    /// of the grant it stopped: once every promise answered for one has ended, it releases it.
    stopping: BTreeMap<RoleName, Token>,
    /// For each role this node answered a claim on: the latest end any of those answers
    /// promised. A stop does not move it ([`Holder::promised_until`]).
    promised: BTreeMap<RoleName, u64>,
    /// The node is stopping: no claim ever again in this process.
    closed: bool,
    /// This process started at this instant less L (BOOTTIME): an earlier process of this node
    /// may have answered promises up to here, which this one knows nothing of, so it releases
    /// nothing before ([`Holder::releasable`]).
    quiet_until_ns: u64,
    /// The lab's broken variant, if any (`RoleFlaw`; never set in the node).
    flaw: Option<RoleFlaw>,
}

impl Holder {
    /// The claims of a process: none until a renewal is answered, and no release before
    /// `quiet_until_ns` (BOOTTIME, which runs on across a restart of the process), its start
    /// plus L: by then every promise an earlier process of this node answered has ended (0 for
    /// a node that never ran before).
    pub fn new(me: NodeId, lease_ns: u64, quiet_until_ns: u64) -> Holder {
        Holder {
            me,
            lease_ns,
            next_ask: 1,
            asked: BTreeMap::new(),
            renewed_until_ns: 0,
            covered: 0,
            told_ns: 0,
            stopping: BTreeMap::new(),
            promised: BTreeMap::new(),
            closed: false,
            quiet_until_ns,
            flaw: None,
        }
    }

    /// This holder with the lab's broken variant `flaw` (R1, R2 or R5 left out), if any.
    pub fn flawed(mut self, flaw: Option<RoleFlaw>) -> Holder {
        self.flaw = flaw;
        self
    }

    /// A renewal is sent now (`now_ns` read *before* it is sent): its id, which the answer
    /// carries back.
    pub fn ask(&mut self, now_ns: u64) -> u64 {
        let id = self.next_ask;
        self.next_ask += 1;
        self.asked.insert(id, now_ns);
        while self.asked.len() > ASKED_KEPT {
            self.asked.pop_first();
        }
        id
    }

    /// The leader answered renewal `id`. Its stops take effect at once; it renews this node's
    /// roles only if `table` has applied every entry the leader had applied that took a role
    /// from this node. Returns whether it renewed them. An unknown or repeated id (a replay, an
    /// answer to a forgotten ask) changes nothing.
    pub fn answered(&mut self, id: u64, answer: &Renewed, table: &RoleTable) -> bool {
        let Some(sent_ns) = self.asked.remove(&id) else {
            return false;
        };
        // Every stop counts, also one for a grant this node's table has not applied yet: the
        // leader renews this node's other roles after it stopped that one, and once the grant
        // is applied, those renewals must not cover it (the model checker's first finding).
        for (role, token) in &answer.stop {
            self.stopping.insert(role.clone(), *token);
        }
        let behind = table.applied() < answer.taken_at;
        if (behind && self.flaw != Some(RoleFlaw::IgnoreTakenAt)) || self.closed {
            return false;
        }
        if sent_ns + self.lease_ns > self.renewed_until_ns {
            self.renewed_until_ns = sent_ns + self.lease_ns;
            self.covered = table.applied();
        }
        true
    }

    /// The renewal [`Holder::answered`] just took came back at `now_ns`. Nothing changes: its
    /// claims count from its send instant (R1); only the lab's flaw `claim-from-receipt`
    /// counts them from now.
    pub fn received(&mut self, now_ns: u64) {
        let until = now_ns + self.lease_ns;
        if self.flaw == Some(RoleFlaw::ClaimFromReceipt) && until > self.renewed_until_ns {
            self.renewed_until_ns = until;
        }
    }

    /// The roles whose claims lapsed at `now_ns`, once per lapse: the answered renewals ran
    /// out while `table` still grants them to this node, which claimed them (granted before
    /// the last answered renewal, not stopped). The role watch tells each as `lost` (its
    /// claim ended without a release; the leader revokes it once its last promise has ended,
    /// and may grant it on). Nothing while renewals hold, nor before the first one.
    pub fn lapsed(&mut self, table: &RoleTable, now_ns: u64) -> Vec<(RoleName, Token)> {
        let until = self.renewed_until_ns;
        if self.closed || until == 0 || now_ns < until || self.told_ns == until {
            return Vec::new();
        }
        self.told_ns = until;
        (table.held_by(self.me))
            .filter_map(|role| Some((role.clone(), table.holder(role)?.1)))
            .filter(|(role, token)| {
                *token <= self.covered && self.stopping.get(role) != Some(token)
            })
            .collect()
    }

    /// The claim on `role` at `now_ns`: `table` grants it to this node, it has not stopped
    /// claiming it, and a renewal still runs. An answer given from it is a promise until
    /// `until_ns` at most, recorded as such.
    pub fn claim(&mut self, role: &RoleName, table: &RoleTable, now_ns: u64) -> Option<RoleClaim> {
        let (node, token) = table.holder(role)?;
        if node != self.me
            || self.closed
            || self.stopping.get(role) == Some(&token)
            || now_ns >= self.renewed_until_ns
        {
            return None;
        }
        let until_ns = self.renewed_until_ns;
        let p = self.promised.entry(role.clone()).or_default();
        *p = (*p).max(until_ns);
        Some(RoleClaim { token, until_ns })
    }

    /// How many roles a claim would be answered on at `now_ns` (what [`Holder::claim`] grants,
    /// counted without answering: nothing is promised). O(roles this node stopped).
    pub fn claimable(&self, table: &RoleTable, now_ns: u64) -> u64 {
        if self.closed || now_ns >= self.renewed_until_ns {
            return 0;
        }
        let stopped = (self.stopping.iter())
            .filter(|(role, token)| table.holder(role) == Some((self.me, **token)))
            .count();
        (table.count_held_by(self.me) - stopped) as u64
    }

    /// This node stops claiming `role` (held with `token`): a withdrawal, or a resign.
    pub fn stop(&mut self, role: &RoleName, token: Token) {
        self.stopping.insert(role.clone(), token);
    }

    /// Until when (BOOTTIME) an answer this process gave on `role` may promise it (0: none).
    pub fn promised_until(&self, role: &RoleName) -> u64 {
        self.promised.get(role).copied().unwrap_or(0)
    }

    /// The roles this node stopped claiming that `table` still grants it and whose every
    /// promise has ended at `now_ns`, this process's and an earlier one's: what it may release
    /// now, with no wait left for anyone.
    /// Forgets the stops the table no longer needs: the grant was applied here and the role is
    /// no longer this node's with that token (taken, or granted anew).
    pub fn releasable(&mut self, table: &RoleTable, now_ns: u64) -> Vec<(RoleName, Token)> {
        let me = self.me;
        self.stopping.retain(|role, token| {
            *token > table.last_token() || table.holder(role) == Some((me, *token))
        });
        let promised = &self.promised;
        let at_once = self.flaw == Some(RoleFlaw::ReleaseAtOnce);
        let started = now_ns >= self.quiet_until_ns || at_once;
        let out: Vec<(RoleName, Token)> = self
            .stopping
            .iter()
            .filter(|_| started)
            .filter(|(role, token)| table.holder(role) == Some((me, **token)))
            .filter(|(role, _)| at_once || promised.get(*role).is_none_or(|p| *p <= now_ns))
            .map(|(r, t)| (r.clone(), *t))
            .collect();
        self.promised
            .retain(|role, p| *p > now_ns || table.holder(role).is_some_and(|(n, _)| n == me));
        out
    }

    /// The node is stopping: no claim ever again. The promises already answered still run
    /// ([`Holder::promised_until`]).
    pub fn close(&mut self) {
        self.closed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::table::RoleCommand;

    const MS: u64 = 1_000_000;
    const L: u64 = 120 * MS;

    fn n(s: &str) -> RoleName {
        RoleName::new(s).unwrap()
    }

    /// Node 1 stands for a and b and holds both (tokens 1 and 2); node 2 stands for a.
    fn table() -> RoleTable {
        let mut t = RoleTable::default();
        t.apply(
            1,
            &RoleCommand::Stand {
                node: 1,
                roles: vec![n("a"), n("b")],
            },
        );
        t.apply(
            2,
            &RoleCommand::Stand {
                node: 2,
                roles: vec![n("a")],
            },
        );
        t.apply(
            3,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 1), (n("b"), 1)],
            },
        );
        t
    }

    #[test]
    fn a_renewal_claims_from_its_send_instant_for_the_lease() {
        let t = table();
        let mut h = Holder::new(1, L, 0);
        assert_eq!(h.claim(&n("a"), &t, 0), None, "nothing before a renewal");
        let id = h.ask(1_000 * MS);
        // The answer arrives 50 ms later: the claim still runs from the send instant.
        assert!(h.answered(id, &Renewed::default(), &t));
        let c = h.claim(&n("a"), &t, 1_050 * MS).unwrap();
        assert_eq!(
            c,
            RoleClaim {
                token: 1,
                until_ns: 1_000 * MS + L
            }
        );
        assert_eq!(h.claim(&n("a"), &t, 1_000 * MS + L), None, "ended");
        assert_eq!(h.promised_until(&n("a")), 1_000 * MS + L);
        // The same answer again (a replay) renews nothing.
        assert!(!h.answered(id, &Renewed::default(), &t));
        // Node 2 claims nothing from a renewal: the table does not grant it a.
        let mut h2 = Holder::new(2, L, 0);
        let id = h2.ask(1_000 * MS);
        h2.answered(id, &Renewed::default(), &t);
        assert_eq!(h2.claim(&n("a"), &t, 1_001 * MS), None);
    }

    /// The count agrees with the claims answered, role by role, and promises nothing.
    #[test]
    fn claimable_counts_what_a_claim_would_answer() {
        let t = table();
        let mut h = Holder::new(1, L, 0);
        assert_eq!(h.claimable(&t, 0), 0, "nothing before a renewal");
        let id = h.ask(1_000 * MS);
        h.answered(id, &Renewed::default(), &t);
        assert_eq!(h.claimable(&t, 1_001 * MS), 2);
        assert_eq!(h.promised_until(&n("a")), 0, "a count promises nothing");
        h.stop(&n("b"), 2);
        assert_eq!(h.claimable(&t, 1_001 * MS), 1);
        assert!(h.claim(&n("b"), &t, 1_001 * MS).is_none());
        assert_eq!(h.claimable(&t, 1_000 * MS + L), 0, "the renewal ran out");
        h.close();
        assert_eq!(h.claimable(&t, 1_001 * MS), 0, "closed");
    }

    #[test]
    fn an_answer_covers_nothing_until_the_table_has_applied_what_the_leader_took() {
        // The leader revoked a from 1 at index 4 and granted it to 2 at index 5; node 1's
        // table has not applied either yet. Read as "all your roles", the answer would let 1
        // claim a beside 2.
        let behind = table();
        let mut h = Holder::new(1, L, 0);
        let id = h.ask(0);
        let answer = Renewed {
            taken_at: 4,
            stop: vec![],
        };
        assert!(!h.answered(id, &answer, &behind));
        assert_eq!(h.claim(&n("a"), &behind, MS), None);
        assert_eq!(h.claim(&n("b"), &behind, MS), None);
        // Once its table has applied the revocation, the next answer renews b only.
        let mut caught_up = behind.clone();
        caught_up.apply(
            4,
            &RoleCommand::Revoke {
                roles: vec![(n("a"), 1)],
            },
        );
        let id = h.ask(2 * MS);
        assert!(h.answered(id, &answer, &caught_up));
        assert_eq!(h.claim(&n("a"), &caught_up, 3 * MS), None);
        assert!(h.claim(&n("b"), &caught_up, 3 * MS).is_some());
    }

    #[test]
    fn a_stopped_role_is_released_only_after_every_promise_answered_for_it() {
        let t = table();
        let mut h = Holder::new(1, L, 0);
        let id = h.ask(0);
        h.answered(id, &Renewed::default(), &t);
        let c = h.claim(&n("a"), &t, 10 * MS).unwrap();
        // The leader moves a: the next answer says stop.
        let id = h.ask(30 * MS);
        let stop = Renewed {
            taken_at: 0,
            stop: vec![(n("a"), 1)],
        };
        assert!(h.answered(id, &stop, &t));
        assert_eq!(h.claim(&n("a"), &t, 40 * MS), None, "stopped");
        assert!(h.claim(&n("b"), &t, 40 * MS).is_some(), "b runs on");
        // The answer at 10 ms promised a until 120 ms: no release before.
        assert!(h.releasable(&t, 40 * MS).is_empty());
        assert!(h.releasable(&t, c.until_ns - 1).is_empty());
        assert_eq!(h.releasable(&t, c.until_ns), vec![(n("a"), 1)]);
        // A role never answered is releasable at once; a stop naming a grant not applied here
        // is kept, and released only once it is.
        let mut h = Holder::new(1, L, 0);
        h.stop(&n("b"), 2);
        h.stop(&n("a"), 9);
        assert_eq!(h.releasable(&t, 0), vec![(n("b"), 2)]);
        assert_eq!(h.stopping.get(&n("a")), Some(&9));
    }

    /// The model checker's first finding (lab/src/model/roles.rs): the leader stops a role it
    /// just granted, and answers the holder's renewal with the stop before the holder's table
    /// has applied the grant. Dropped as "not mine", the stop was lost: once the grant was
    /// applied, that renewal covered the role, past the stop's end, while the leader granted
    /// it to another.
    #[test]
    fn a_stop_that_comes_before_its_grant_is_applied_still_stops_it() {
        let mut t = RoleTable::default();
        t.apply(
            1,
            &RoleCommand::Stand {
                node: 1,
                roles: vec![n("a")],
            },
        );
        let mut h = Holder::new(1, L, 0);
        let id = h.ask(0);
        let stop = Renewed {
            taken_at: 0,
            stop: vec![(n("a"), 1)],
        };
        assert!(h.answered(id, &stop, &t));
        assert!(h.releasable(&t, 0).is_empty(), "not granted here yet");
        t.apply(
            2,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 1)],
            },
        );
        assert_eq!(h.claim(&n("a"), &t, MS), None);
        assert_eq!(h.releasable(&t, MS), vec![(n("a"), 1)]);
    }

    #[test]
    fn a_closed_holder_claims_nothing_but_its_promises_still_count() {
        let t = table();
        let mut h = Holder::new(1, L, 0);
        let id = h.ask(0);
        h.answered(id, &Renewed::default(), &t);
        h.claim(&n("a"), &t, MS).unwrap();
        h.close();
        assert_eq!(h.claim(&n("a"), &t, 2 * MS), None);
        let id = h.ask(3 * MS);
        assert!(!h.answered(id, &Renewed::default(), &t));
        assert_eq!(h.promised_until(&n("a")), L);
    }

    #[test]
    fn only_the_latest_asks_are_kept() {
        let t = table();
        let mut h = Holder::new(1, L, 0);
        let first = h.ask(0);
        for i in 1..=ASKED_KEPT as u64 {
            h.ask(i);
        }
        assert!(!h.answered(first, &Renewed::default(), &t));
    }

    /// A process of a node that held a role restarts (its earlier process may have answered
    /// promises up to its death + L, which this one knows nothing of) and is asked to give the
    /// role up at once: it releases nothing before its start + L. (Before, `promised` was
    /// empty in the new process, and the role was released and granted to another inside the
    /// earlier process's promise: a review's finding.)
    #[test]
    fn a_restarted_process_releases_nothing_before_its_start_plus_l() {
        let mut t = RoleTable::default();
        t.apply(
            1,
            &RoleCommand::Stand {
                node: 1,
                roles: vec![n("a")],
            },
        );
        t.apply(
            2,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 1)],
            },
        );
        let start = 1_000 * MS;
        let mut h = Holder::new(1, L, start + L);
        h.stop(&n("a"), 1);
        assert!(
            h.releasable(&t, start + MS).is_empty(),
            "inside an earlier process's promise"
        );
        assert!(h.releasable(&t, start + L - 1).is_empty());
        assert_eq!(h.releasable(&t, start + L), vec![(n("a"), 1)]);
    }

    /// Claims that lapse are told once per lapse, for the roles the lapsed renewal covered and
    /// the node did not stop; not while a renewal holds, and again after a later one lapses.
    #[test]
    fn a_lapse_is_told_once_for_the_roles_claimed() {
        let mut t = table();
        let mut h = Holder::new(1, L, 0);
        assert!(h.lapsed(&t, 10 * MS).is_empty(), "no renewal yet");
        let id = h.ask(10 * MS);
        assert!(h.answered(id, &Renewed::default(), &t));
        assert!(h.lapsed(&t, 10 * MS + L - 1).is_empty(), "the claims hold");
        h.stop(&n("b"), t.holder(&n("b")).unwrap().1);
        let lost = h.lapsed(&t, 10 * MS + L);
        assert_eq!(lost, vec![(n("a"), t.holder(&n("a")).unwrap().1)]);
        assert!(h.lapsed(&t, 20 * MS + L).is_empty(), "told once");
        // Renewed again, after a role granted since: only what that renewal covered.
        t.apply(
            4,
            &RoleCommand::Stand {
                node: 1,
                roles: vec![n("c")],
            },
        );
        t.apply(
            5,
            &RoleCommand::Grant {
                grants: vec![(n("c"), 1)],
            },
        );
        let covered = t.applied();
        let id = h.ask(200 * MS);
        assert!(h.answered(id, &Renewed::default(), &t));
        assert!(h.lapsed(&t, 200 * MS + L - 1).is_empty());
        let lost: Vec<RoleName> = h
            .lapsed(&t, 200 * MS + L)
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(lost, vec![n("a"), n("c")], "covered to {covered}");
    }
}
