//! [`RoleTable`]: the durable facts of the cluster's named roles (who stands for each, who holds
//! it with which token, which roles each node gave up when), applied from the replicated log
//! ([`RoleCommand`] entries) in log order, the same on every member, and carried by snapshots.
//! No clock and no I/O: what a role's *promise* needs beyond these facts (renewals, waits) lives
//! in `holder.rs` and `ledger.rs`, never in the log (docs/safety.md, "Roles").

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::RoleFlaw;
use crate::role::NodeId;
use electd_client::{RoleName, Token};

/// An entry of the log about roles. Only the leader proposes them (a node's own stand,
/// withdraw and release reach it as requests); each is applied by the rule its variant names,
/// and an entry whose precondition no longer holds when it is applied changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RoleCommand {
    /// `node` stands for these roles (a role is created by its first candidate).
    Stand { node: NodeId, roles: Vec<RoleName> },
    /// `node` no longer stands for these roles. A holder keeps holding until it releases or is
    /// revoked: withdrawing changes who may be granted, not who holds.
    Withdraw { node: NodeId, roles: Vec<RoleName> },
    /// Each role goes to its node, if the role has no holder and the node stands for it; each
    /// grant applied draws the next token.
    Grant { grants: Vec<(RoleName, NodeId)> },
    /// `node` gave these roles up after every promise it answered for them had ended: applied
    /// where `node` still holds the role with that token.
    Release {
        node: NodeId,
        roles: Vec<(RoleName, Token)>,
    },
    /// The leader took these roles from their holders (silent, removed, or not releasing a
    /// planned move): applied where the role is still held with that token. A revoked role is
    /// granted again only after its holder's last possible promise (`ledger.rs`).
    Revoke { roles: Vec<(RoleName, Token)> },
    /// `node` left the members: it stands for nothing more, and its `max_roles` goes (its
    /// holdings are revoked by a [`RoleCommand::Revoke`] the leader writes first).
    Forget { node: NodeId },
    /// A placement setting (`planner.rs` reads them; none of them touches a holder or a token).
    Set(Setting),
}

/// A placement setting: an entry of the log, asked in renewals like a candidacy until the
/// asking node's table shows it (`Setting::shown_in`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// The role goes to `node` whenever it is a live candidate with room, and moves to it (a
    /// planned move) when it is not there; `None`: no preference. Applied where the role exists.
    Prefer {
        role: RoleName,
        node: Option<NodeId>,
    },
    /// `node` holds at most `max_roles` roles (`None`: no limit); a node over it gives roles up
    /// by planned moves.
    Limit {
        node: NodeId,
        max_roles: Option<u32>,
    },
}

/// What a [`Setting`] sets: a later setting with the same key replaces an earlier one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SettingKey {
    Prefer(RoleName),
    Limit(NodeId),
}

impl Setting {
    pub fn key(&self) -> SettingKey {
        match self {
            Setting::Prefer { role, .. } => SettingKey::Prefer(role.clone()),
            Setting::Limit { node, .. } => SettingKey::Limit(*node),
        }
    }

    /// Whether `table` has applied this setting (a `Prefer` of a role that does not exist
    /// counts as shown: applying it would change nothing).
    pub fn shown_in(&self, table: &RoleTable) -> bool {
        match self {
            Setting::Prefer { role, node } => table.get(role).is_none_or(|r| r.preferred == *node),
            Setting::Limit { node, max_roles } => table.max_roles(*node) == *max_roles,
        }
    }
}

/// One role's facts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RoleState {
    /// The nodes that stand for the role.
    pub candidates: BTreeSet<NodeId>,
    /// Who holds it, and the token of that grant.
    pub holder: Option<(NodeId, Token)>,
    /// The node it goes to when that node can take it (`Setting::Prefer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<NodeId>,
}

/// A change an applied entry made: the events and watch streams of roles are made of these.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RoleChange {
    Granted {
        role: RoleName,
        node: NodeId,
        token: Token,
    },
    Released {
        role: RoleName,
        node: NodeId,
        token: Token,
    },
    Revoked {
        role: RoleName,
        node: NodeId,
        token: Token,
    },
}

/// Every role's facts, as the log has them up to [`RoleTable::applied`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "TableData", into = "TableData")]
pub struct RoleTable {
    roles: BTreeMap<RoleName, RoleState>,
    /// The last token drawn (0: none yet).
    last_token: Token,
    /// The log index of the last role entry applied.
    applied: u64,
    /// For each node, the log index of the last entry that took a role from it (a release or a
    /// revocation): a node whose table has applied this far holds none of the roles the log
    /// took from it (`holder.rs`, how a renewal is read).
    taken_at: BTreeMap<NodeId, u64>,
    /// The most roles each node holds, for the nodes with a limit (`Setting::Limit`).
    limits: BTreeMap<NodeId, u32>,
    /// Derived: the roles each node holds.
    held: BTreeMap<NodeId, BTreeSet<RoleName>>,
    /// Derived: how many roles each node stands for (none: not a key), so that a turn asks
    /// "does it stand for any" without walking the roles.
    standing: BTreeMap<NodeId, usize>,
    /// The lab's flaw `reuse-token` (R6 left out; never set in the node, not in snapshots).
    reuse_tokens: bool,
}

/// What a snapshot keeps of a [`RoleTable`]: everything but what is derived from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct TableData {
    roles: BTreeMap<RoleName, RoleState>,
    last_token: Token,
    applied: u64,
    taken_at: BTreeMap<NodeId, u64>,
    /// Absent from the snapshots of builds before placement settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    limits: BTreeMap<NodeId, u32>,
}

impl From<TableData> for RoleTable {
    fn from(d: TableData) -> RoleTable {
        let mut held: BTreeMap<NodeId, BTreeSet<RoleName>> = BTreeMap::new();
        let mut standing: BTreeMap<NodeId, usize> = BTreeMap::new();
        for (name, r) in &d.roles {
            if let Some((node, _)) = r.holder {
                held.entry(node).or_default().insert(name.clone());
            }
            for c in &r.candidates {
                *standing.entry(*c).or_default() += 1;
            }
        }
        RoleTable {
            roles: d.roles,
            last_token: d.last_token,
            applied: d.applied,
            taken_at: d.taken_at,
            limits: d.limits,
            held,
            standing,
            reuse_tokens: false,
        }
    }
}

impl From<RoleTable> for TableData {
    fn from(t: RoleTable) -> TableData {
        TableData {
            roles: t.roles,
            last_token: t.last_token,
            applied: t.applied,
            taken_at: t.taken_at,
            limits: t.limits,
        }
    }
}

impl RoleTable {
    /// Applies the entry at log `index` and says what it changed. Entries come in log order;
    /// one at or below the last index applied (openraft applies committed entries again after
    /// a crash) changes nothing.
    pub fn apply(&mut self, index: u64, cmd: &RoleCommand) -> Vec<RoleChange> {
        if index <= self.applied {
            return Vec::new();
        }
        self.applied = index;
        let mut changes = Vec::new();
        match cmd {
            RoleCommand::Stand { node, roles } => {
                for name in roles {
                    let r = self.roles.entry(name.clone()).or_default();
                    if r.candidates.insert(*node) {
                        *self.standing.entry(*node).or_default() += 1;
                    }
                }
            }
            RoleCommand::Withdraw { node, roles } => {
                for name in roles {
                    self.unstand(name, *node);
                    self.forget_if_idle(name);
                }
            }
            RoleCommand::Grant { grants } => {
                for (name, node) in grants {
                    if let Some(token) = self.grant(name, *node) {
                        changes.push(RoleChange::Granted {
                            role: name.clone(),
                            node: *node,
                            token,
                        });
                    }
                }
            }
            RoleCommand::Release { node, roles } => {
                for (name, token) in roles {
                    if self.holder(name) == Some((*node, *token)) {
                        changes.push(self.take(index, name, *token, false));
                    }
                }
            }
            RoleCommand::Revoke { roles } => {
                for (name, token) in roles {
                    if self.holder(name).is_some_and(|(_, t)| t == *token) {
                        changes.push(self.take(index, name, *token, true));
                    }
                }
            }
            RoleCommand::Forget { node } => self.forget(*node),
            RoleCommand::Set(Setting::Prefer { role, node }) => {
                if let Some(r) = self.roles.get_mut(role) {
                    r.preferred = *node;
                }
            }
            RoleCommand::Set(Setting::Limit { node, max_roles }) => match max_roles {
                Some(m) => _ = self.limits.insert(*node, *m),
                None => _ = self.limits.remove(node),
            },
        }
        changes
    }

    /// The lab's broken variant `flaw`, if it is this table's (`reuse-token`, R6 left out).
    pub fn flawed(&mut self, flaw: Option<RoleFlaw>) {
        self.reuse_tokens = flaw == Some(RoleFlaw::ReuseToken);
    }

    /// Grants `name` to `node` if it has no holder and `node` stands for it: the new token.
    fn grant(&mut self, name: &RoleName, node: NodeId) -> Option<Token> {
        let r = self.roles.get_mut(name)?;
        if r.holder.is_some() || !r.candidates.contains(&node) {
            return None;
        }
        if !(self.reuse_tokens && self.last_token > 0) {
            self.last_token += 1;
        }
        r.holder = Some((node, self.last_token));
        self.held.entry(node).or_default().insert(name.clone());
        Some(self.last_token)
    }

    /// Takes `name` (held with `token`) from its holder by the entry at `index`: a revocation,
    /// or its holder's release.
    fn take(&mut self, index: u64, name: &RoleName, token: Token, revoked: bool) -> RoleChange {
        let node = self
            .roles
            .get_mut(name)
            .and_then(|r| r.holder.take())
            .map(|(n, _)| n)
            .expect("taken only while held");
        self.taken_at.insert(node, index);
        if let Some(held) = self.held.get_mut(&node) {
            held.remove(name);
            if held.is_empty() {
                self.held.remove(&node);
            }
        }
        self.forget_if_idle(name);
        let role = name.clone();
        if revoked {
            RoleChange::Revoked { role, node, token }
        } else {
            RoleChange::Released { role, node, token }
        }
    }

    /// `node` stands for nothing more, and has no limit.
    fn forget(&mut self, node: NodeId) {
        self.limits.remove(&node);
        let names: Vec<RoleName> = self
            .roles
            .iter()
            .filter(|(_, r)| r.candidates.contains(&node))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            self.unstand(&name, node);
            self.forget_if_idle(&name);
        }
    }

    /// `node` no longer stands for `name`.
    fn unstand(&mut self, name: &RoleName, node: NodeId) {
        let removed = (self.roles.get_mut(name)).is_some_and(|r| r.candidates.remove(&node));
        if let (true, Some(n)) = (removed, self.standing.get_mut(&node)) {
            *n -= 1;
            if *n == 0 {
                self.standing.remove(&node);
            }
        }
    }

    /// A role nobody stands for and nobody holds is gone (its name may come back, with new
    /// tokens: tokens never go back, because the counter is the table's, not the role's).
    fn forget_if_idle(&mut self, name: &RoleName) {
        if self
            .roles
            .get(name)
            .is_some_and(|r| r.holder.is_none() && r.candidates.is_empty())
        {
            self.roles.remove(name);
        }
    }

    /// Who holds `name`, with which token.
    pub fn holder(&self, name: &RoleName) -> Option<(NodeId, Token)> {
        self.roles.get(name).and_then(|r| r.holder)
    }

    pub fn get(&self, name: &RoleName) -> Option<&RoleState> {
        self.roles.get(name)
    }

    /// Every role, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&RoleName, &RoleState)> {
        self.roles.iter()
    }

    pub fn len(&self) -> usize {
        self.roles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }

    /// The roles `node` holds, in name order.
    pub fn held_by(&self, node: NodeId) -> impl Iterator<Item = &RoleName> {
        self.held.get(&node).into_iter().flatten()
    }

    /// The nodes that hold a role.
    pub fn holders(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.held
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(n, _)| *n)
    }

    /// Whether `node` stands for any role.
    pub fn stands_for_any(&self, node: NodeId) -> bool {
        self.standing.contains_key(&node)
    }

    /// The nodes the table names: those that stand for a role or hold one.
    pub fn named(&self) -> BTreeSet<NodeId> {
        (self.standing.keys().copied())
            .chain(self.holders())
            .collect()
    }

    /// How many roles `node` holds.
    pub fn count_held_by(&self, node: NodeId) -> usize {
        self.held.get(&node).map_or(0, |h| h.len())
    }

    /// The log index of the last role entry applied.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The log index of the last entry that took a role from `node` (0: none).
    pub fn taken_at(&self, node: NodeId) -> u64 {
        self.taken_at.get(&node).copied().unwrap_or(0)
    }

    /// The last token drawn.
    pub fn last_token(&self) -> Token {
        self.last_token
    }

    /// The most roles `node` holds (`None`: no limit).
    pub fn max_roles(&self, node: NodeId) -> Option<u32> {
        self.limits.get(&node).copied()
    }

    /// Every node's limit.
    pub fn limits(&self) -> &BTreeMap<NodeId, u32> {
        &self.limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> RoleName {
        RoleName::new(s).unwrap()
    }

    fn stand(node: NodeId, roles: &[&str]) -> RoleCommand {
        RoleCommand::Stand {
            node,
            roles: roles.iter().map(|r| n(r)).collect(),
        }
    }

    fn grant(role: &str, node: NodeId) -> RoleCommand {
        RoleCommand::Grant {
            grants: vec![(n(role), node)],
        }
    }

    #[test]
    fn a_role_goes_only_to_a_candidate_and_only_when_free() {
        let mut t = RoleTable::default();
        t.apply(1, &stand(1, &["a", "b"]));
        t.apply(2, &stand(2, &["a"]));
        assert!(
            t.apply(3, &grant("b", 2)).is_empty(),
            "2 does not stand for b"
        );
        let g = t.apply(4, &grant("a", 1));
        assert_eq!(
            g,
            vec![RoleChange::Granted {
                role: n("a"),
                node: 1,
                token: 1
            }]
        );
        assert!(t.apply(5, &grant("a", 2)).is_empty(), "a is held");
        assert_eq!(t.holder(&n("a")), Some((1, 1)));
        assert_eq!(t.held_by(1).collect::<Vec<_>>(), vec![&n("a")]);
        assert_eq!(t.applied(), 5);
    }

    #[test]
    fn releases_and_revocations_name_the_token_and_tokens_never_go_back() {
        let mut t = RoleTable::default();
        t.apply(1, &stand(1, &["a"]));
        t.apply(2, &stand(2, &["a"]));
        t.apply(3, &grant("a", 1));
        // A stale release (an old token) or one by another node changes nothing.
        let stale = RoleCommand::Release {
            node: 1,
            roles: vec![(n("a"), 7)],
        };
        assert!(t.apply(4, &stale).is_empty());
        let other = RoleCommand::Release {
            node: 2,
            roles: vec![(n("a"), 1)],
        };
        assert!(t.apply(5, &other).is_empty());
        assert_eq!(t.taken_at(1), 0);
        let revoke = RoleCommand::Revoke {
            roles: vec![(n("a"), 1)],
        };
        assert_eq!(t.apply(6, &revoke).len(), 1);
        assert_eq!(t.taken_at(1), 6);
        assert_eq!(t.count_held_by(1), 0);
        t.apply(7, &grant("a", 2));
        assert_eq!(t.holder(&n("a")), Some((2, 2)));
        // A revocation of the old grant, applied late, leaves the new one alone.
        assert!(t.apply(8, &revoke).is_empty());
        assert_eq!(t.holder(&n("a")), Some((2, 2)));
        // Every candidate gone and the role released: it is forgotten, and a new role of the
        // same name draws a token above every earlier one.
        t.apply(9, &RoleCommand::Forget { node: 1 });
        t.apply(
            10,
            &RoleCommand::Withdraw {
                node: 2,
                roles: vec![n("a")],
            },
        );
        assert!(t.get(&n("a")).is_some(), "still held by 2");
        let release = RoleCommand::Release {
            node: 2,
            roles: vec![(n("a"), 2)],
        };
        assert_eq!(t.apply(11, &release).len(), 1);
        assert!(t.is_empty());
        t.apply(12, &stand(3, &["a"]));
        t.apply(13, &grant("a", 3));
        assert_eq!(t.holder(&n("a")), Some((3, 3)));
    }

    #[test]
    fn a_snapshot_keeps_the_facts_and_rebuilds_what_derives_from_them() {
        let mut t = RoleTable::default();
        t.apply(1, &stand(1, &["a", "b", "c"]));
        t.apply(
            2,
            &RoleCommand::Grant {
                grants: vec![(n("a"), 1), (n("b"), 1)],
            },
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("held"), "derived, not stored: {json}");
        let back: RoleTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.count_held_by(1), 2);
        assert_eq!(back.last_token(), 2);
    }

    /// Placement settings apply where they can, show once applied, leave holders and tokens
    /// alone, survive a snapshot, and a snapshot of a build before them still reads.
    #[test]
    fn settings_apply_show_and_survive_a_snapshot() {
        let mut t = RoleTable::default();
        t.apply(1, &stand(1, &["a"]));
        t.apply(2, &grant("a", 1));
        let prefer = |role: &str, node| Setting::Prefer {
            role: n(role),
            node,
        };
        let limit = |node, max_roles| Setting::Limit { node, max_roles };
        assert!(!prefer("a", Some(2)).shown_in(&t));
        assert!(
            prefer("zz", Some(2)).shown_in(&t),
            "no such role: nothing to apply"
        );
        assert!(t
            .apply(3, &RoleCommand::Set(prefer("a", Some(2))))
            .is_empty());
        t.apply(4, &RoleCommand::Set(prefer("zz", Some(2))));
        assert!(t.get(&n("zz")).is_none(), "a preference creates no role");
        t.apply(5, &RoleCommand::Set(limit(3, Some(4))));
        assert!(prefer("a", Some(2)).shown_in(&t) && limit(3, Some(4)).shown_in(&t));
        assert_eq!(t.holder(&n("a")), Some((1, 1)));
        assert_eq!(t.last_token(), 1);
        let json = serde_json::to_string(&t).unwrap();
        let back: RoleTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.get(&n("a")).unwrap().preferred, Some(2));
        assert_eq!(back.max_roles(3), Some(4));
        // Lifted, and forgotten with the node.
        t.apply(6, &RoleCommand::Set(limit(3, None)));
        assert!(t.limits().is_empty());
        t.apply(7, &RoleCommand::Set(limit(3, Some(1))));
        t.apply(8, &RoleCommand::Forget { node: 3 });
        assert_eq!(t.max_roles(3), None);
        let old = r#"{"roles":{"a":{"candidates":[1],"holder":[1,1]}},"last_token":1,"applied":2,"taken_at":{}}"#;
        let old: RoleTable = serde_json::from_str(old).unwrap();
        assert_eq!(old.get(&n("a")).unwrap().preferred, None);
        assert!(old.limits().is_empty());
    }

    /// The count of roles each node stands for follows stands, withdrawals and forgets, and
    /// equals what a snapshot rebuilds.
    #[test]
    fn standing_follows_the_candidacies() {
        let mut t = RoleTable::default();
        t.apply(1, &stand(1, &["a", "b"]));
        t.apply(2, &stand(2, &["a"]));
        t.apply(3, &stand(1, &["a"]));
        t.apply(4, &grant("b", 1));
        assert!(t.stands_for_any(1) && t.stands_for_any(2) && !t.stands_for_any(3));
        t.apply(
            5,
            &RoleCommand::Withdraw {
                node: 2,
                roles: vec![n("a"), n("a"), n("zz")],
            },
        );
        assert!(!t.stands_for_any(2));
        assert_eq!(t.named(), [1].into());
        let back: RoleTable = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        t.apply(6, &stand(3, &["a"]));
        t.apply(7, &RoleCommand::Forget { node: 1 });
        assert!(!t.stands_for_any(1));
        assert_eq!(t.named(), [1, 3].into(), "1 still holds b");
        let back: RoleTable = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
