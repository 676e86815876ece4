//! [`Steward`]: all one node keeps about named roles beside its applied table: its claims
//! ([`Holder`]), the leader's memory while it leads ([`Ledger`]), the candidacy changes asked of
//! it, and, while it leads, what the members' renewals asked it to write to the log. Plain
//! logic on `CLOCK_BOOTTIME`, no I/O: the driver's roles turn (`src/quorum/driver/roles.rs`)
//! steps it once a beat and does the sending and the writing; the node's handlers
//! (`src/quorum/node/roles.rs`) answer claims, renewals and resigns from it.
//!
//! One renewal per node per beat carries everything a node asks of the leader: the renewal of
//! every role it holds (`holder.rs`), the candidacy changes asked on it, and the releases its
//! holder may make (R5). Each is asked again in every renewal until the node's own table shows
//! it applied, so a lost renewal or a leader that fails over loses nothing.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::holder::{Holder, Renewed, RoleClaim};
use super::ledger::{Ledger, StopReason};
use super::planner::{plan, Placement, Plan};
use super::table::{RoleChange, RoleCommand, RoleTable, Setting, SettingKey};
use super::RoleFlaw;
use crate::role::NodeId;
use electd_client::{RoleName, Token};

/// A renewal: a node asks the leader, once a beat (`POST /peer/roles/renew`, protocol.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewRequest {
    /// The holder's id of this ask ([`Holder::ask`]): the answer is matched to it.
    pub id: u64,
    /// Candidacy changes asked on the sender, not yet in its table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidacy: Vec<Candidacy>,
    /// Placement settings asked on the sender, not yet in its table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<Setting>,
    /// Roles the sender gives up, each after every promise it answered for it ended (R5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release: Vec<(RoleName, Token)>,
    /// The log index the sender's table has applied: the leader answers (and counts the sender
    /// as renewed) only when it covers every entry that took a role from the sender, so that a
    /// sender whose log stalls is taken for silent and its roles move, rather than being
    /// renewed in name while it can claim none of them.
    #[serde(default)]
    pub applied: u64,
}

/// "`node` stands for `role`" (or no longer does).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Candidacy {
    pub role: RoleName,
    pub node: NodeId,
    pub stands: bool,
}

/// What the node asks of its steward, through the driver that owns it (`src/quorum/driver/roles.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolesAsk {
    /// `GET /v1/claim/{name}`. Answered [`RolesAnswer::Claim`].
    Claim(RoleName),
    /// As the leader: `from`'s renewal. Answered [`RolesAnswer::Renewed`].
    Renew { from: NodeId, req: RenewRequest },
    /// `node` should stand for `role` (or not). Answered [`RolesAnswer::Done`].
    Want {
        role: RoleName,
        node: NodeId,
        stands: bool,
    },
    /// A placement setting (a later one of the same key replaces it). Answered
    /// [`RolesAnswer::Done`].
    Set(Setting),
    /// A resign of the grant `token` of `role`. Answered [`RolesAnswer::Resigning`].
    Resign { role: RoleName, token: Token },
    /// A resigned grant was released. Answered [`RolesAnswer::Done`].
    Released { role: RoleName, token: Token },
    /// How many roles this node would answer a claim on now. Answered [`RolesAnswer::Claimable`].
    Claimable,
}

/// The steward's answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RolesAnswer {
    Claim(Option<RoleClaim>),
    Renewed(Option<Renewed>),
    Resigning(Resigning),
    Claimable(u64),
    Done,
}

/// What a resign of a role's grant comes to, now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resigning {
    /// The grant is this node's: it stopped claiming it, and releases it once its promises end.
    Stopped,
    /// This node released that grant (a resign asked again).
    Released,
    /// The grant is not this node's current one: who holds the role now, if anyone.
    Stale(Option<(NodeId, Token)>),
}

/// Tokens this node released that a resign asked again still answers as released.
const RELEASED_KEPT: usize = 1024;

/// The placement's knobs, from the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// The most planned moves a turn starts.
    pub max_moves: usize,
    /// How long past the end of its promises a moved role's holder has to release it before
    /// the leader revokes it.
    pub release_grace_ns: u64,
    /// The lab's broken variant, if any (src/engine.rs, `Flaws`; never set in the node).
    pub flaw: Option<RoleFlaw>,
}

/// What a leader's turn writes, in this order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub commands: Vec<RoleCommand>,
    /// The releases among them (the ledger ends their stops once written: `Steward::written`).
    pub releases: Vec<(NodeId, RoleName, Token)>,
}

/// One node's roles.
#[derive(Clone, Debug)]
pub struct Steward {
    me: NodeId,
    holder: Holder,
    ledger: Ledger,
    knobs: Knobs,
    /// Candidacy changes asked on this node, until its table shows them.
    wants: BTreeMap<(RoleName, NodeId), bool>,
    /// Placement settings asked on this node, until its table shows them.
    wanted_settings: BTreeMap<SettingKey, Setting>,
    /// While leading: candidacy changes, settings and releases the renewals asked for, until
    /// written.
    asked_candidacy: BTreeMap<(RoleName, NodeId), bool>,
    asked_settings: BTreeMap<SettingKey, Setting>,
    asked_release: BTreeMap<(RoleName, Token), NodeId>,
    /// Grants this node released after a resign, the latest last.
    released: VecDeque<(RoleName, Token)>,
    /// The last plan, for the table's applied index and the live members it was made for.
    planned: Option<(u64, BTreeSet<NodeId>, Plan)>,
}

impl Steward {
    /// The roles of node `me`'s process that starts at `started_ns` (BOOTTIME).
    pub fn new(
        me: NodeId,
        (lease_ns, follower_lease_ns): (u64, u64),
        knobs: Knobs,
        started_ns: u64,
    ) -> Steward {
        Steward {
            me,
            holder: Holder::new(me, lease_ns, started_ns + lease_ns).flawed(knobs.flaw),
            ledger: Ledger::new(follower_lease_ns).flawed(knobs.flaw),
            knobs,
            wants: BTreeMap::new(),
            wanted_settings: BTreeMap::new(),
            asked_candidacy: BTreeMap::new(),
            asked_settings: BTreeMap::new(),
            asked_release: BTreeMap::new(),
            released: VecDeque::new(),
            planned: None,
        }
    }

    /// Steps `ask` at `now_ns` with the applied `table`; the cluster's election is in `term`,
    /// and this node's claim on it holds or not (`claim_holds`: what a renewal needs).
    pub fn step(
        &mut self,
        ask: RolesAsk,
        table: &RoleTable,
        now_ns: u64,
        (term, claim_holds): (u64, bool),
    ) -> RolesAnswer {
        match ask {
            RolesAsk::Claim(role) => RolesAnswer::Claim(self.holder.claim(&role, table, now_ns)),
            RolesAsk::Claimable => RolesAnswer::Claimable(self.holder.claimable(table, now_ns)),
            RolesAsk::Renew { from, req } => {
                RolesAnswer::Renewed(self.renew(from, term, &req, table, claim_holds, now_ns))
            }
            RolesAsk::Want { role, node, stands } => {
                self.wants.insert((role, node), stands);
                RolesAnswer::Done
            }
            RolesAsk::Set(setting) => {
                self.wanted_settings.insert(setting.key(), setting);
                RolesAnswer::Done
            }
            RolesAsk::Resign { role, token } => {
                RolesAnswer::Resigning(self.resign(&role, token, table))
            }
            RolesAsk::Released { role, token } => {
                self.released.push_back((role, token));
                while self.released.len() > RELEASED_KEPT {
                    self.released.pop_front();
                }
                RolesAnswer::Done
            }
        }
    }

    /// Whether `table` shows `node` standing for `role` as `stands` says.
    pub fn shows(table: &RoleTable, role: &RoleName, node: NodeId, stands: bool) -> bool {
        table
            .get(role)
            .is_some_and(|r| r.candidates.contains(&node))
            == stands
    }

    /// Whether this node has anything to renew or ask: a role it stands for or holds, or a
    /// change it waits for.
    pub fn renews(&self, table: &RoleTable) -> bool {
        !self.wants.is_empty()
            || !self.wanted_settings.is_empty()
            || table.count_held_by(self.me) > 0
            || table.stands_for_any(self.me)
    }

    /// The renewal to send now (`now_ns` read before it is sent).
    pub fn renewal(&mut self, table: &RoleTable, now_ns: u64) -> RenewRequest {
        self.wants
            .retain(|(role, node), stands| !Self::shows(table, role, *node, *stands));
        let candidacy = self
            .wants
            .iter()
            .map(|((role, node), stands)| Candidacy {
                role: role.clone(),
                node: *node,
                stands: *stands,
            })
            .collect();
        self.wanted_settings.retain(|_, s| !s.shown_in(table));
        let release = self.holder.releasable(table, now_ns);
        RenewRequest {
            id: self.holder.ask(now_ns),
            candidacy,
            settings: self.wanted_settings.values().cloned().collect(),
            release,
            applied: table.applied(),
        }
    }

    /// The roles whose claims lapsed at `now_ns`, once per lapse ([`Holder::lapsed`]).
    pub fn lapsed(&mut self, table: &RoleTable, now_ns: u64) -> Vec<(RoleName, Token)> {
        self.holder.lapsed(table, now_ns)
    }

    /// The leader answered renewal `id` (or did not: `None`), the answer taken at `now_ns`;
    /// whether it renewed this node's roles.
    pub fn answered(
        &mut self,
        id: u64,
        answer: Option<&Renewed>,
        table: &RoleTable,
        now_ns: u64,
    ) -> bool {
        let renewed = answer.is_some_and(|a| self.holder.answered(id, a, table));
        if renewed {
            self.holder.received(now_ns);
        }
        renewed
    }

    /// As the leader of `term`: `from` asks for a renewal at `now_ns`; this node's claim on the
    /// cluster's election `claim_holds`. The answer (`None`: none is given, also when the
    /// ledger does not lead `term`), and what it asked is kept to be written.
    fn renew(
        &mut self,
        from: NodeId,
        term: u64,
        req: &RenewRequest,
        table: &RoleTable,
        claim_holds: bool,
        now_ns: u64,
    ) -> Option<Renewed> {
        // The asker must have applied what was taken from it (R2; its holder checks again
        // against the answer's `taken_at`): both checks are left out by `ignore-taken-at`.
        let behind =
            req.applied < table.taken_at(from) && self.knobs.flaw != Some(RoleFlaw::IgnoreTakenAt);
        if self.ledger.term() != Some(term) || behind {
            return None;
        }
        let answer = self.ledger.renew(from, table, claim_holds, now_ns)?;
        for c in &req.candidacy {
            self.asked_candidacy
                .insert((c.role.clone(), c.node), c.stands);
        }
        for (role, token) in &req.release {
            self.asked_release.insert((role.clone(), *token), from);
        }
        for s in &req.settings {
            self.asked_settings.insert(s.key(), s.clone());
        }
        Some(answer)
    }

    /// openraft has this node as the leader of `term`, its claim holding, and its table holds
    /// every entry of earlier terms or not (`ready`); `None`: it does not lead.
    pub fn leads(&mut self, leading: Option<(u64, bool)>, now_ns: u64) {
        match leading {
            Some((term, ready)) => {
                self.ledger.lead(term, now_ns);
                if ready {
                    self.ledger.ready();
                }
            }
            None => {
                self.ledger.follow();
                self.asked_candidacy.clear();
                self.asked_settings.clear();
                self.asked_release.clear();
            }
        }
    }

    /// As the leader, at `now_ns`: what to write now. Revocations first (silent holders, and
    /// moves not released in time), each stopped before it is written (R2); the releases and
    /// candidacy changes the renewals asked for; then the grants the ledger allows (R3, R4).
    /// Planned moves are stopped here and written by their holders' releases.
    pub fn writes(&mut self, table: &RoleTable, members: &BTreeSet<NodeId>, now_ns: u64) -> Writes {
        let mut out = Writes::default();
        let (mut revoke, forget) = self.removals(table, members);
        revoke.extend(self.revocations(table, now_ns));
        revoke.sort();
        revoke.dedup();
        if !revoke.is_empty() {
            out.commands.push(RoleCommand::Revoke { roles: revoke });
        }
        let mut releases: BTreeMap<NodeId, Vec<(RoleName, Token)>> = BTreeMap::new();
        for ((role, token), node) in std::mem::take(&mut self.asked_release) {
            if table.holder(&role) == Some((node, token)) {
                out.releases.push((node, role.clone(), token));
                releases.entry(node).or_default().push((role, token));
            }
        }
        for (node, roles) in releases {
            out.commands.push(RoleCommand::Release { node, roles });
        }
        out.commands.extend(self.asked_changes(table, members));
        out.commands
            .extend(forget.into_iter().map(|node| RoleCommand::Forget { node }));
        // The flaw judges liveness as hastily as it revokes.
        let live = self.ledger.live(now_ns + self.hasty_lead_ns());
        let placement = Placement {
            live: live.intersection(members).copied().collect(),
            max_moves: self.knobs.max_moves,
        };
        let p = self.plan(table, &placement);
        for role in &p.moves {
            self.ledger.stop(role, table, StopReason::Move);
        }
        let grants: Vec<(RoleName, NodeId)> = p
            .grants
            .into_iter()
            .filter(|(role, _)| self.ledger.may_grant(role, table, now_ns))
            .collect();
        if !grants.is_empty() {
            out.commands.push(RoleCommand::Grant { grants });
        }
        out
    }

    /// The candidacy changes and settings the renewals asked for that `table` does not show
    /// yet, as entries to write; those of a node that is not a member (any more) are dropped:
    /// nothing to stand for, and nothing to forget again.
    fn asked_changes(&mut self, table: &RoleTable, members: &BTreeSet<NodeId>) -> Vec<RoleCommand> {
        let mut changes: BTreeMap<(NodeId, bool), Vec<RoleName>> = BTreeMap::new();
        for ((role, node), stands) in std::mem::take(&mut self.asked_candidacy) {
            if !Self::shows(table, &role, node, stands) && members.contains(&node) {
                changes.entry((node, stands)).or_default().push(role);
            }
        }
        let mut out: Vec<RoleCommand> = (changes.into_iter())
            .map(|((node, stands), roles)| match stands {
                true => RoleCommand::Stand { node, roles },
                false => RoleCommand::Withdraw { node, roles },
            })
            .collect();
        let settings = std::mem::take(&mut self.asked_settings).into_values();
        out.extend(
            settings
                .filter(|s| !s.shown_in(table))
                .filter(|s| !matches!(s, Setting::Limit { node, .. } if !members.contains(node)))
                .map(RoleCommand::Set),
        );
        out
    }

    /// The plan for `table` under `placement`: a function of the table and the live members,
    /// reused while neither changed (the table's applied index names its contents), so that a
    /// quiet turn walks no roles.
    fn plan(&mut self, table: &RoleTable, placement: &Placement) -> Plan {
        match &self.planned {
            Some((at, live, p)) if *at == table.applied() && *live == placement.live => p.clone(),
            _ => {
                let p = plan(table, placement);
                self.planned = Some((table.applied(), placement.live.clone(), p.clone()));
                p
            }
        }
    }

    /// Nodes of `table` that are no longer `members`: the roles they hold, to revoke (each
    /// stopped first, so that it is granted again only after the removed holder's last
    /// promise: R4), and those that hold none, to forget (their candidacies go).
    fn removals(
        &mut self,
        table: &RoleTable,
        members: &BTreeSet<NodeId>,
    ) -> (Vec<(RoleName, Token)>, Vec<NodeId>) {
        let named: BTreeSet<NodeId> = (table.named().into_iter())
            .filter(|n| !members.contains(n))
            .collect();
        let mut revoke = Vec::new();
        let mut forget = Vec::new();
        for node in named {
            let held: Vec<RoleName> = table.held_by(node).cloned().collect();
            if held.is_empty() {
                forget.push(node);
            }
            for role in held {
                if let Some(s) = self.ledger.stop(&role, table, StopReason::Revoke) {
                    revoke.push((role, s.token));
                }
            }
        }
        (revoke, forget)
    }

    /// Whether the flaw `hasty-revoke` is on.
    fn hasty(&self) -> bool {
        self.knobs.flaw == Some(RoleFlaw::HastyRevoke)
    }

    /// How much sooner than F the flaw `hasty-revoke` takes a node for dead (0 without it): it
    /// judges a node silent for F/6, and the live nodes it grants to by the same measure. At
    /// the defaults that is less than a beat: live holders are revoked too, which the checkers
    /// must catch as well; where F/6 is a beat or less, the live set flickers with each beat's
    /// jitter, so the lab's cut-off test runs at a longer F (lab/tests/roles.rs, `CUT_TIMING`).
    fn hasty_lead_ns(&self) -> u64 {
        self.hasty() as u64 * self.ledger.follower_lease_ns() * 5 / 6
    }

    /// The roles to revoke now: those of holders silent for F, and planned moves not released
    /// by the grace past their promises; each stopped (as revoked) before it is written.
    fn revocations(&mut self, table: &RoleTable, now_ns: u64) -> Vec<(RoleName, Token)> {
        let holders: Vec<NodeId> = table.holders().collect();
        let mut roles: Vec<RoleName> = Vec::new();
        if self.hasty() {
            let soon = now_ns + self.hasty_lead_ns();
            // Its roles go to others at once: no stop, no wait.
            let mut hasty = Vec::new();
            for h in self.ledger.silent(table, &holders, soon) {
                hasty.extend(
                    table
                        .held_by(h)
                        .filter_map(|r| Some((r.clone(), table.holder(r)?.1))),
                );
            }
            return hasty;
        }
        for h in self.ledger.silent(table, &holders, now_ns) {
            roles.extend(table.held_by(h).cloned());
        }
        let grace = self.knobs.release_grace_ns;
        roles.extend(
            self.ledger
                .overdue(grace, now_ns)
                .into_iter()
                .map(|(r, _)| r),
        );
        roles.sort();
        roles.dedup();
        roles
            .into_iter()
            .filter_map(|role| {
                let s = self.ledger.stop(&role, table, StopReason::Revoke)?;
                Some((role, s.token))
            })
            .collect()
    }

    /// A turn's writes are done (applied, or failed) at `now_ns`: the releases among them that
    /// the table applied end their stops, so those roles may be granted at once (R5).
    pub fn written(
        &mut self,
        releases: &[(NodeId, RoleName, Token)],
        table: &RoleTable,
        now_ns: u64,
    ) {
        let changes: Vec<RoleChange> = releases
            .iter()
            .filter(|(node, role, token)| table.holder(role) != Some((*node, *token)))
            .map(|(node, role, token)| RoleChange::Released {
                role: role.clone(),
                node: *node,
                token: *token,
            })
            .collect();
        self.ledger.applied(&changes, table, now_ns);
    }

    /// A resign of `role`'s grant `token` (`POST /v1/roles/{name}/resign`).
    fn resign(&mut self, role: &RoleName, token: Token, table: &RoleTable) -> Resigning {
        if table.holder(role) == Some((self.me, token)) {
            self.holder.stop(role, token);
            Resigning::Stopped
        } else if self.released.iter().any(|(r, t)| r == role && *t == token) {
            Resigning::Released
        } else {
            Resigning::Stale(table.holder(role))
        }
    }

    /// The node stops: no claim ever again.
    pub fn close(&mut self) {
        self.holder.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const F: u64 = 150 * MS;
    const L: u64 = 120 * MS;

    fn n(s: &str) -> RoleName {
        RoleName::new(s).unwrap()
    }

    /// The members of the tests' cluster.
    fn all() -> BTreeSet<NodeId> {
        [1, 2, 3].into()
    }

    fn steward(me: NodeId) -> Steward {
        let knobs = Knobs {
            max_moves: 8,
            release_grace_ns: F,
            flaw: None,
        };
        Steward::new(me, (L, F), knobs, 0)
    }

    /// Applies `writes` to `table` from log index `at` on.
    fn apply(table: &mut RoleTable, at: &mut u64, writes: &Writes) {
        for cmd in &writes.commands {
            *at += 1;
            table.apply(*at, cmd);
        }
    }

    /// A candidacy asked on a node rides its renewals until its table shows it; the leader
    /// writes it, and grants the role only once its first F has passed (R3), to a live node.
    #[test]
    fn a_candidacy_rides_the_renewals_and_the_grant_waits_for_the_gate() {
        let (mut table, mut at) = (RoleTable::default(), 0);
        let mut leader = steward(1);
        let mut other = steward(2);
        let want = RolesAsk::Want {
            role: n("a"),
            node: 2,
            stands: true,
        };
        other.step(want, &table, 0, (1, false));
        leader.leads(Some((1, true)), 0);
        let req = other.renewal(&table, 10 * MS);
        assert_eq!(req.candidacy.len(), 1, "{req:?}");
        let renew = RolesAsk::Renew { from: 2, req };
        let answer = leader.step(renew, &table, 11 * MS, (1, true));
        assert!(
            matches!(answer, RolesAnswer::Renewed(Some(_))),
            "{answer:?}"
        );
        let w = leader.writes(&table, &all(), 12 * MS);
        assert_eq!(w.commands.len(), 1, "the stand only: {w:?}");
        apply(&mut table, &mut at, &w);
        assert!(Steward::shows(&table, &n("a"), 2, true));
        assert!(
            other.renewal(&table, 20 * MS).candidacy.is_empty(),
            "shown: asked no more"
        );
        // Inside the first F: no grant; after it, to node 2 (renewed within F).
        let req = other.renewal(&table, 100 * MS);
        leader.step(
            RolesAsk::Renew { from: 2, req },
            &table,
            100 * MS,
            (1, true),
        );
        assert!(leader.writes(&table, &all(), 120 * MS).commands.is_empty());
        let w = leader.writes(&table, &all(), F + MS);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Grant {
                grants: vec![(n("a"), 2)]
            }]
        );
    }

    /// A setting asked on a node rides its renewals (the latest of a key only) until its table
    /// shows it; the leader writes it; a limit of a node that is no member is dropped.
    #[test]
    fn a_setting_rides_the_renewals_until_the_table_shows_it() {
        let (mut table, mut at) = (RoleTable::default(), 0);
        let mut leader = steward(1);
        let mut other = steward(2);
        let limit = |node, m| Setting::Limit {
            node,
            max_roles: Some(m),
        };
        for s in [limit(2, 5), limit(2, 3), limit(9, 1)] {
            other.step(RolesAsk::Set(s), &table, 0, (1, false));
        }
        assert!(other.renews(&table));
        leader.leads(Some((1, true)), 0);
        let req = other.renewal(&table, 10 * MS);
        assert_eq!(
            req.settings,
            vec![limit(2, 3), limit(9, 1)],
            "the latest of each"
        );
        leader.step(RolesAsk::Renew { from: 2, req }, &table, 11 * MS, (1, true));
        let w = leader.writes(&table, &all(), 12 * MS);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Set(limit(2, 3))],
            "9 is no member"
        );
        apply(&mut table, &mut at, &w);
        assert_eq!(table.max_roles(2), Some(3));
        let req = other.renewal(&table, 20 * MS);
        assert_eq!(req.settings, vec![limit(9, 1)], "shown: asked no more");
    }

    /// A renewal is answered only by a ledger that leads the asked term with its claim holding.
    #[test]
    fn only_a_leader_of_the_term_whose_claim_holds_renews() {
        let table = RoleTable::default();
        let mut s = steward(1);
        let ask = |s: &mut Steward, term, holds| {
            let req = RenewRequest::default();
            s.step(RolesAsk::Renew { from: 2, req }, &table, MS, (term, holds))
        };
        assert_eq!(
            ask(&mut s, 1, true),
            RolesAnswer::Renewed(None),
            "not leading"
        );
        s.leads(Some((1, true)), 0);
        assert_eq!(
            ask(&mut s, 1, false),
            RolesAnswer::Renewed(None),
            "claim lapsed"
        );
        assert_eq!(
            ask(&mut s, 2, true),
            RolesAnswer::Renewed(None),
            "another term"
        );
        assert!(matches!(
            ask(&mut s, 1, true),
            RolesAnswer::Renewed(Some(_))
        ));
        s.leads(None, 0);
        assert_eq!(
            ask(&mut s, 1, true),
            RolesAnswer::Renewed(None),
            "no longer leading"
        );
    }

    /// A table where nodes 2 and 3 stand for role `a` and node 2 holds it (token 1), and the
    /// index it applied.
    fn held_by_2_of_2_and_3() -> (RoleTable, u64) {
        let (mut table, mut at) = (RoleTable::default(), 0);
        for node in [2, 3] {
            at += 1;
            let roles = vec![n("a")];
            table.apply(at, &RoleCommand::Stand { node, roles });
        }
        at += 1;
        let grants = vec![(n("a"), 2)];
        table.apply(at, &RoleCommand::Grant { grants });
        (table, at)
    }

    /// A silent holder's roles are revoked, stopped before the entry is written, and granted
    /// again only in a later turn, once the revocation is applied.
    #[test]
    fn a_silent_holder_is_revoked_and_its_role_granted_after() {
        let (mut table, mut at) = held_by_2_of_2_and_3();
        let mut leader = steward(1);
        leader.leads(Some((1, true)), 0);
        // Node 3 renews; node 2 (the holder) never does.
        let t = F + 10 * MS;
        let req = RenewRequest::default();
        leader.step(RolesAsk::Renew { from: 3, req }, &table, t, (1, true));
        let w = leader.writes(&table, &all(), t);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Revoke {
                roles: vec![(n("a"), 1)]
            }],
            "revoked, not granted in the same turn"
        );
        apply(&mut table, &mut at, &w);
        let w = leader.writes(&table, &all(), t + MS);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Grant {
                grants: vec![(n("a"), 3)]
            }]
        );
    }

    /// The lab's flaw `grant-in-first-lease` (R3 left out): a new leadership takes a holder it
    /// has not renewed for silent at once, and grants its role in its first follower lease.
    #[test]
    fn the_flaw_grant_in_first_lease_grants_at_once() {
        let (mut table, mut at) = held_by_2_of_2_and_3();
        let knobs = Knobs {
            max_moves: 8,
            release_grace_ns: F,
            flaw: Some(RoleFlaw::GrantInFirstLease),
        };
        let mut leader = Steward::new(1, (L, F), knobs, 0);
        leader.leads(Some((1, true)), 0);
        let t = 10 * MS;
        let req = RenewRequest::default();
        leader.step(RolesAsk::Renew { from: 3, req }, &table, t, (1, true));
        let w = leader.writes(&table, &all(), t);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Revoke {
                roles: vec![(n("a"), 1)]
            }]
        );
        apply(&mut table, &mut at, &w);
        let w = leader.writes(&table, &all(), t + MS);
        assert_eq!(
            w.commands,
            vec![RoleCommand::Grant {
                grants: vec![(n("a"), 3)]
            }],
            "granted inside the first follower lease"
        );
    }

    /// A member removed: the roles it holds are revoked (stopped first: granted again only
    /// after its last promise), and once it holds none its candidacies are forgotten.
    #[test]
    fn a_removed_member_s_roles_are_revoked_then_it_is_forgotten() {
        let (mut table, mut at) = (RoleTable::default(), 0);
        for node in [2, 3] {
            at += 1;
            let roles = vec![n("a"), n("b")];
            table.apply(at, &RoleCommand::Stand { node, roles });
        }
        at += 1;
        let grants = vec![(n("a"), 2)];
        table.apply(at, &RoleCommand::Grant { grants });
        let mut leader = steward(1);
        leader.leads(Some((1, true)), 0);
        let t = 10 * MS;
        for from in [2, 3] {
            let req = RenewRequest::default();
            leader.step(RolesAsk::Renew { from, req }, &table, t, (1, true));
        }
        let members: BTreeSet<NodeId> = [1, 3].into();
        let w = leader.writes(&table, &members, t);
        assert_eq!(
            w.commands[0],
            RoleCommand::Revoke {
                roles: vec![(n("a"), 1)]
            },
            "{w:?}"
        );
        assert!(
            !w.commands.contains(&RoleCommand::Forget { node: 2 }),
            "not while it holds a role: {w:?}"
        );
        apply(&mut table, &mut at, &w);
        // Node 2's promises may run until its last renewal + F: no grant of a before then.
        let w = leader.writes(&table, &members, t + MS);
        assert!(
            w.commands.contains(&RoleCommand::Forget { node: 2 }),
            "{w:?}"
        );
        assert!(
            !w.commands
                .iter()
                .any(|c| matches!(c, RoleCommand::Grant { grants } if grants.iter().any(|(r, _)| *r == n("a")))),
            "{w:?}"
        );
        apply(&mut table, &mut at, &w);
        assert!(table.iter().all(|(_, r)| !r.candidates.contains(&2)));
        let req = RenewRequest::default();
        leader.step(RolesAsk::Renew { from: 3, req }, &table, t + F, (1, true));
        let w = leader.writes(&table, &members, t + F);
        assert!(
            w.commands.contains(&RoleCommand::Grant {
                grants: vec![(n("a"), 3), (n("b"), 3)]
            }),
            "{w:?}"
        );
    }

    /// A node whose table has not applied the entry that took a role from it is not renewed
    /// (its answer would renew nothing it could claim), and so is taken for silent after F and
    /// its other roles move, rather than being counted live while it claims none of them.
    #[test]
    fn a_node_behind_on_what_was_taken_from_it_is_not_renewed() {
        let (mut table, mut at) = (RoleTable::default(), 0);
        at += 1;
        let roles = vec![n("a"), n("b")];
        table.apply(at, &RoleCommand::Stand { node: 2, roles });
        at += 1;
        table.apply(
            at,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 2), (n("b"), 2)],
            },
        );
        let behind = table.applied();
        at += 1;
        table.apply(
            at,
            &RoleCommand::Release {
                node: 2,
                roles: vec![(n("a"), 1)],
            },
        );
        let mut leader = steward(1);
        leader.leads(Some((1, true)), 0);
        let req = RenewRequest {
            applied: behind,
            ..RenewRequest::default()
        };
        let ask = RolesAsk::Renew { from: 2, req };
        assert_eq!(
            leader.step(ask, &table, MS, (1, true)),
            RolesAnswer::Renewed(None)
        );
        let req = RenewRequest {
            applied: table.applied(),
            ..RenewRequest::default()
        };
        let ask = RolesAsk::Renew { from: 2, req };
        assert!(matches!(
            leader.step(ask, &table, MS, (1, true)),
            RolesAnswer::Renewed(Some(_))
        ));
    }
}
