//! Durable Raft state for quorum mode: the vote, the log, the commit index and the state machine
//! (the membership, the members' incarnations, the named roles), as one JSON document.
//!
//! An election-only node has a tiny log (the membership entry plus one blank entry per elected
//! leader, purged behind snapshots), so the whole state is written on every durable change
//! (the vote, the log, snapshots; the commit index and the applied id ride along with the next
//! one, as openraft can rebuild them).
//!
//! Where the bytes go is `storage/slots.rs` (two slots, one fdatasync); how openraft reads and
//! writes the store is `storage/raft.rs`.
//!

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::{BasicNode, Entry, EntryPayload, LogId, SnapshotMeta, StoredMembership, Vote};
use serde::{Deserialize, Serialize};

use super::identity::{recognise, Identity, Recognition};
use super::types::TypeConfig;
use crate::role::NodeId;
use crate::roles::feed::RoleEvents;
use crate::roles::table::RoleTable;

mod raft;
mod slots;

pub use raft::{LogStore, StateMachine};
pub use slots::{Disk, MemDisk, StateFile, SLOT_FILES, STATE_FILE};

const FORMAT: u32 = 1;

/// Why the state could not be opened at start.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read state file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state file {path} is corrupt ({reason}); refusing to start rather than forget a vote. Restore it from a backup, or delete the whole data dir to rejoin as a new node")]
    Corrupt { path: PathBuf, reason: String },
    #[error("state file {path} belongs to node {found_id} of cluster {found_cluster:?}, not node {id} of cluster {cluster:?}")]
    Foreign {
        path: PathBuf,
        found_id: NodeId,
        found_cluster: String,
        id: NodeId,
        cluster: String,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// Everything that is persisted.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Persisted {
    format: u32,
    node_id: NodeId,
    cluster_id: String,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    log: BTreeMap<u64, Entry<TypeConfig>>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    snapshot: Option<StoredSnapshot>,
    snapshot_seq: u64,
    /// This data dir's incarnation (identity.rs); `None` until the node first starts on it.
    #[serde(default)]
    identity: Option<Identity>,
    /// The incarnation first heard from each other member (identity.rs).
    #[serde(default)]
    known: BTreeMap<NodeId, u64>,
    /// The members' incarnations as the applied log holds them (identity.rs, rule 5): the
    /// replicated record, which every member, one added later too, has once it applied the log.
    #[serde(default)]
    logged: BTreeMap<NodeId, u64>,
    /// The named roles as the applied log holds them (roles/table.rs).
    #[serde(default)]
    roles: RoleTable,
}

/// What a snapshot holds: an election-only state machine is its applied id and membership.
#[derive(Serialize, Deserialize)]
struct SnapshotData {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    /// The incarnations the log held (identity.rs, rule 5).
    #[serde(default)]
    logged: BTreeMap<NodeId, u64>,
    /// The named roles the log held (roles/table.rs).
    #[serde(default)]
    roles: RoleTable,
}

impl Persisted {
    /// The incarnation held for `peer`: the applied log's, which every member that applied as
    /// far agrees on, else the one this node recorded from a hello.
    fn recorded(&self, peer: NodeId) -> Option<u64> {
        self.logged.get(&peer).or(self.known.get(&peer)).copied()
    }

    /// What this node makes of `peer`'s `incarnation` (identity.rs): a stranger when the
    /// applied membership names members but not `peer` (none applied yet: a new cluster's
    /// members record each other before their first membership is committed).
    fn recognise(&self, peer: NodeId, incarnation: u64) -> Recognition {
        let m = self.membership.membership();
        if m.voter_ids().next().is_some() && m.get_node(&peer).is_none() {
            return Recognition::Stranger;
        }
        recognise(self.recorded(peer), incarnation)
    }

    /// Forgets the incarnations of the nodes that are not members of `m` (identity.rs, rule
    /// 3): they may come back on a new data dir once added again.
    fn forget_outside(&mut self, m: &openraft::Membership<NodeId, BasicNode>) {
        self.known.retain(|id, _| m.get_node(id).is_some());
        self.logged.retain(|id, _| m.get_node(id).is_some());
    }

    fn empty(node_id: NodeId, cluster_id: &str) -> Self {
        Persisted {
            format: FORMAT,
            node_id,
            cluster_id: cluster_id.to_string(),
            vote: None,
            committed: None,
            last_purged: None,
            log: BTreeMap::new(),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
            snapshot_seq: 0,
            identity: None,
            known: BTreeMap::new(),
            logged: BTreeMap::new(),
            roles: RoleTable::default(),
        }
    }
}

/// The shared store behind [`LogStore`] and [`StateMachine`].
pub struct Store {
    disk: Arc<dyn Disk>,
    /// The state as last made durable, or about to be: locked only inside `read`, `mutate`
    /// and `note`, never across an `.await`, so that openraft's tasks and the node's handlers
    /// each see a whole state (a vote with its log, a record with the membership it was
    /// judged by: identity.rs, rule 3).
    state: Mutex<Persisted>,
    /// Serialises writers so that writes reach the disk in the order openraft issued them.
    write_lock: tokio::sync::Mutex<()>,
    /// The lab's deliberate flaws (src/engine.rs), handed over by the node once it runs.
    flaws: std::sync::OnceLock<crate::engine::Flaws>,
    /// What the applied role entries changed, for `GET /v1/roles/watch` (roles/feed.rs).
    pub(crate) role_events: RoleEvents,
}

impl Store {
    /// Opens the state in `data_dir` (creating the dir), or fails with an error naming the file.
    pub fn open(
        data_dir: &Path,
        node_id: NodeId,
        cluster_id: &str,
    ) -> Result<Arc<Store>, StoreError> {
        fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        Store::open_on(Arc::new(StateFile::new(data_dir)), node_id, cluster_id)
    }

    /// Opens the state kept on `disk`.
    pub fn open_on(
        disk: Arc<dyn Disk>,
        node_id: NodeId,
        cluster_id: &str,
    ) -> Result<Arc<Store>, StoreError> {
        let state = match disk.read()? {
            None => Persisted::empty(node_id, cluster_id),
            Some((path, bytes)) => {
                let p: Persisted =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                        path: path.clone(),
                        reason: if bytes.is_empty() {
                            "the file is empty".to_string()
                        } else {
                            e.to_string()
                        },
                    })?;
                if p.format != FORMAT {
                    return Err(StoreError::Corrupt {
                        path: path.clone(),
                        reason: format!("unknown format {}", p.format),
                    });
                }
                if p.node_id != node_id || p.cluster_id != cluster_id {
                    return Err(StoreError::Foreign {
                        path,
                        found_id: p.node_id,
                        found_cluster: p.cluster_id,
                        id: node_id,
                        cluster: cluster_id.to_string(),
                    });
                }
                p
            }
        };
        Ok(Arc::new(Store {
            disk,
            state: Mutex::new(state),
            write_lock: tokio::sync::Mutex::new(()),
            flaws: std::sync::OnceLock::new(),
            role_events: RoleEvents::default(),
        }))
    }

    /// The lab's deliberate flaws for this store (the first ones handed over stay).
    pub(super) fn set_flaws(&self, flaws: &crate::engine::Flaws) {
        let _ = self.flaws.set(flaws.clone());
    }

    fn read<R>(&self, f: impl FnOnce(&Persisted) -> R) -> R {
        f(&self.state.lock().expect("store lock"))
    }

    /// Applies `f` to the state and makes the result durable before returning.
    async fn mutate<R>(&self, f: impl FnOnce(&mut Persisted) -> R) -> std::io::Result<R> {
        let _w = self.write_lock.lock().await;
        let (r, bytes) = {
            let mut s = self.state.lock().expect("store lock");
            let r = f(&mut s);
            (r, serde_json::to_vec(&*s).expect("state serialises"))
        };
        if self.disk.blocks() {
            let disk = self.disk.clone();
            tokio::task::spawn_blocking(move || disk.write(&bytes))
                .await
                .map_err(std::io::Error::other)??;
        } else {
            self.disk.write(&bytes)?;
        }
        Ok(r)
    }

    /// Applies `f` to the state in memory only: bookkeeping that openraft can rebuild after a
    /// crash (the commit index, what was applied), so no fsync is worth waiting for. It
    /// reaches the disk with the next durable write.
    fn note<R>(&self, f: impl FnOnce(&mut Persisted) -> R) -> R {
        f(&mut self.state.lock().expect("store lock"))
    }

    /// The vote on disk (for tests and status).
    pub fn vote(&self) -> Option<Vote<NodeId>> {
        self.read(|s| s.vote)
    }

    /// This data dir's identity, drawing `incarnation` for it (durably) if it has none yet.
    pub async fn take_identity(&self, incarnation: u64) -> std::io::Result<Identity> {
        if let Some(id) = self.identity() {
            return Ok(id);
        }
        self.mutate(|s| {
            *s.identity.get_or_insert(Identity {
                incarnation,
                confirmed: false,
            })
        })
        .await
    }

    /// This data dir's identity (`None` before [`Store::take_identity`]).
    pub fn identity(&self) -> Option<Identity> {
        self.read(|s| s.identity)
    }

    /// Whether this node may vote: its incarnation was confirmed (identity.rs).
    pub fn confirmed(&self) -> bool {
        self.identity().is_some_and(|i| i.confirmed)
    }

    /// This data dir's incarnation once it is confirmed (the one its hellos tell, and a leader
    /// writes into the log).
    pub fn confirmed_incarnation(&self) -> Option<u64> {
        self.identity()
            .filter(|i| i.confirmed)
            .map(|i| i.incarnation)
    }

    /// Marks the incarnation confirmed, durably.
    pub async fn confirm_identity(&self) -> std::io::Result<()> {
        self.mutate(|s| {
            if let Some(i) = &mut s.identity {
                i.confirmed = true;
            }
        })
        .await
    }

    /// What this node makes of `peer`'s `incarnation`; a new one is recorded durably first.
    /// Judged against the membership applied, in the same step as the record (identity.rs,
    /// rule 3): a node the applied membership does not name is a stranger, never recorded, so
    /// no record made after a removal was applied outlives it.
    pub async fn recognise_peer(
        &self,
        peer: NodeId,
        incarnation: u64,
    ) -> std::io::Result<Recognition> {
        let r = self.read(|s| s.recognise(peer, incarnation));
        if r == Recognition::New {
            // Judged again and recorded by the mutation itself, so that two racing hellos
            // record one and an apply in between is seen.
            return self
                .mutate(|s| {
                    let r = s.recognise(peer, incarnation);
                    if r == Recognition::New {
                        s.known.insert(peer, incarnation);
                    }
                    r
                })
                .await;
        }
        Ok(r)
    }

    /// The incarnation this node holds for `peer`: the log's, else its own record.
    pub fn recorded(&self, peer: NodeId) -> Option<u64> {
        self.read(|s| s.recorded(peer))
    }

    /// The incarnation held for every peer, and whether it is the applied log's (else this
    /// node's own record from a hello).
    pub fn recorded_all(&self) -> BTreeMap<NodeId, (u64, bool)> {
        self.read(|s| {
            let mut all: BTreeMap<_, _> =
                s.known.iter().map(|(id, i)| (*id, (*i, false))).collect();
            all.extend(s.logged.iter().map(|(id, i)| (*id, (*i, true))));
            all
        })
    }

    /// The incarnations the applied log holds (identity.rs, rule 5).
    pub fn logged(&self) -> BTreeMap<NodeId, u64> {
        self.read(|s| s.logged.clone())
    }

    /// Whether this node holds incarnation entries it has not applied yet: it may not know
    /// yet what they record, and abstains from judging an incarnation meanwhile (identity.rs,
    /// rule 5). (Other entries do not count: a new cluster's first membership, say, is not
    /// applied before its first leader commits it, and that leader needs confirmed voters.)
    pub fn unapplied(&self) -> bool {
        self.read(|s| {
            let from = s.last_applied.map_or(0, |l| l.index + 1);
            s.log
                .range(from..)
                .any(|(_, e)| matches!(e.payload, EntryPayload::Normal(_)))
        })
    }

    /// This node's identity as `/v1/status` shows it: its incarnation, what it holds for the
    /// others (the applied log's first, identity.rs rule 5), and whether it abstains from
    /// judging a hello meanwhile.
    pub fn identity_status(&self) -> Option<serde_json::Value> {
        self.identity().map(|i| {
            let peers: serde_json::Map<_, _> = self
                .recorded_all()
                .into_iter()
                .map(|(id, (inc, in_log))| {
                    let peer =
                        serde_json::json!({"incarnation": format!("{inc:#x}"), "in_log": in_log});
                    (id.to_string(), peer)
                })
                .collect();
            serde_json::json!({
                "incarnation": format!("{:#x}", i.incarnation),
                "confirmed": i.confirmed,
                "peers": peers,
                "abstains": self.unapplied(),
            })
        })
    }

    /// The index of the last log entry applied: what this node has forgotten and recorded
    /// goes with it (identity.rs, rule 3).
    /// Reads the named roles as the applied log holds them (roles/table.rs).
    pub fn roles<R>(&self, f: impl FnOnce(&RoleTable) -> R) -> R {
        self.read(|s| f(&s.roles))
    }

    pub fn applied_index(&self) -> Option<u64> {
        self.read(|s| s.last_applied.map(|l| l.index))
    }

    /// The id of the last log entry (or of the last purged one): what a pre-vote compares.
    pub fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.read(|s| {
            s.log
                .values()
                .next_back()
                .map(|e| e.log_id)
                .or(s.last_purged)
        })
    }

    /// The highest term this data dir knows of: its vote's, its last log entry's.
    pub fn highest_term(&self) -> u64 {
        let vote = self.vote().map_or(0, |v| v.leader_id().term);
        let log = self.last_log_id().map_or(0, |l| l.leader_id.term);
        vote.max(log)
    }

    /// `electd --force-new-cluster` (docs/operations.md, "Disaster recovery"): makes this data
    /// dir, of member `id` at `addr`, the whole of a one-member cluster at a term above every
    /// term it knows and above `term_above`, by [`RECOVERY_TERM_GAP`] at least: a membership of
    /// `id` alone appended after its log (and after its snapshot, whose entries count as
    /// purged) at that term, committed and applied, a committed vote of its own in that term,
    /// the incarnations of every other member forgotten and its own confirmed. Unsafe by
    /// design: whatever the lost members committed after this log is gone, and a lost member
    /// that comes back holds votes of its own (it must be wiped). Gives back the old last log
    /// id and the new term; `None` when the term would pass `u64::MAX`.
    pub async fn force_new_cluster(
        &self,
        id: NodeId,
        addr: &str,
        term_above: u64,
    ) -> std::io::Result<Option<(Option<LogId<NodeId>>, u64)>> {
        use openraft::{CommittedLeaderId, Membership};
        let old_last = self.last_log_id();
        // The lost members may have elected leaders among themselves in terms this data dir
        // never heard of (a refused vote request leaves no trace): the gap keeps the new term
        // above them, so that no term, the fencing token, is ever used twice.
        let Some(term) = self
            .highest_term()
            .max(term_above)
            .checked_add(RECOVERY_TERM_GAP)
        else {
            return Ok(None);
        };
        // Everything up to the snapshot counts as purged (a snapshot installed just before a
        // crash may reach past the log): the new entry follows without a gap that openraft
        // would read as a missing entry, and every purged entry is in the snapshot.
        let purged = self.read(|s| {
            s.last_purged
                .max(s.snapshot.as_ref().and_then(|x| x.meta.last_log_id))
        });
        let next = old_last.max(purged).map_or(0, |l| l.index + 1);
        let log_id = LogId::new(CommittedLeaderId::new(term, id), next);
        let nodes = BTreeMap::from([(id, BasicNode::new(addr))]);
        let members = Membership::new(vec![std::collections::BTreeSet::from([id])], nodes);
        self.mutate(|s| {
            if let Some(p) = purged {
                s.log.retain(|index, _| *index > p.index);
                s.last_purged = Some(p);
            }
            s.log.insert(
                next,
                Entry {
                    log_id,
                    payload: EntryPayload::Membership(members.clone()),
                },
            );
            s.vote = Some(Vote::new_committed(term, id));
            s.committed = Some(log_id);
            s.last_applied = Some(log_id);
            s.membership = StoredMembership::new(Some(log_id), members);
            s.known.clear();
            let own = s.identity.map(|i| i.incarnation);
            s.logged.clear();
            if let Some(i) = &mut s.identity {
                i.confirmed = true;
            }
            if let Some(own) = own {
                s.logged.insert(id, own);
            }
        })
        .await?;
        Ok(Some((old_last, term)))
    }
}

/// How far above every term it knows `--force-new-cluster` puts the new term (2^20): the
/// elections a lost majority may have held without this member would have to number more.
pub const RECOVERY_TERM_GAP: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Cursor;

    use openraft::storage::{RaftLogStorage, RaftStateMachine};
    use openraft::{CommittedLeaderId, RaftLogReader};

    use super::*;
    use crate::quorum::types::Command;

    /// Applies a membership of `ids` at log `index`.
    async fn apply_members(sm: &mut StateMachine, index: u64, ids: &[NodeId]) {
        sm.apply(vec![entry(index, EntryPayload::Membership(members(ids)))])
            .await
            .unwrap();
    }

    /// A membership of voters `ids` (at `127.0.0.1:700N`).
    fn members(ids: &[NodeId]) -> openraft::Membership<NodeId, BasicNode> {
        let nodes: BTreeMap<NodeId, BasicNode> = ids
            .iter()
            .map(|id| (*id, BasicNode::new(format!("127.0.0.1:700{id}"))))
            .collect();
        let voters: BTreeSet<NodeId> = ids.iter().copied().collect();
        openraft::Membership::new(vec![voters], nodes)
    }

    fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload,
        }
    }

    /// Rule 5 (identity.rs): the log's incarnations are applied in log order, the first one
    /// for a member stays, only members are recorded, and a removal forgets; what the log holds
    /// is what a hello is judged by, over this node's own record.
    #[tokio::test]
    async fn the_log_holds_the_first_incarnation_of_each_member() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, "c").unwrap();
        let mut sm = StateMachine(store.clone());
        let incarnations = |m: &[(NodeId, u64)]| {
            EntryPayload::Normal(Command::Incarnations(m.iter().copied().collect()))
        };
        sm.apply(vec![
            entry(1, EntryPayload::Membership(members(&[1, 2, 3]))),
            entry(2, incarnations(&[(3, 0x33), (9, 0x99)])),
            entry(3, incarnations(&[(3, 0x34), (2, 0x22)])),
        ])
        .await
        .unwrap();
        assert_eq!(store.logged(), BTreeMap::from([(2, 0x22), (3, 0x33)]));
        assert!(
            matches!(
                store.recognise_peer(3, 0x35).await.unwrap(),
                Recognition::Replaced { was: 0x33 }
            ),
            "a new data dir of node 3 is refused by what the log holds"
        );
        apply_members(&mut sm, 4, &[1, 2]).await;
        assert_eq!(store.logged(), BTreeMap::from([(2, 0x22)]), "3 removed");
    }

    /// Issue 29, found by the 10,000-schedule soak (seed 626 of `sim --membership`): a hello
    /// from a node being removed, judged against the membership openraft reports (which lags
    /// the apply), was recorded just after this member applied the removal, and the stale
    /// record refused the node's new data dir once it was added back, for ever. Now the record
    /// is judged against the applied membership under the same lock as the apply.
    #[tokio::test]
    async fn a_hello_after_the_removal_was_applied_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, "c").unwrap();
        let mut sm = StateMachine(store.clone());
        apply_members(&mut sm, 1, &[1, 2, 3]).await;
        assert_eq!(
            store.recognise_peer(3, 0x33).await.unwrap(),
            Recognition::New
        );
        apply_members(&mut sm, 2, &[1, 2]).await;
        assert_eq!(store.recorded(3), None, "the removal forgot it");
        // The removed node's last hello arrives after the apply.
        assert_eq!(
            store.recognise_peer(3, 0x33).await.unwrap(),
            Recognition::Stranger
        );
        assert_eq!(store.recorded(3), None, "and is not recorded again");
        apply_members(&mut sm, 3, &[1, 2, 3]).await;
        assert_eq!(
            store.recognise_peer(3, 0x34).await.unwrap(),
            Recognition::New,
            "added back on a new data dir: accepted"
        );
    }

    /// Issue 29, finding 3: a member that learns a removal from a snapshot forgets the removed
    /// node's incarnation, as one that applied the entry does, and takes the log's
    /// incarnations from the snapshot. (It kept its record, and refused the node's new data
    /// dir until a later removal.)
    #[tokio::test]
    async fn a_snapshot_that_removed_a_member_forgets_its_incarnation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, "c").unwrap();
        let mut sm = StateMachine(store.clone());
        apply_members(&mut sm, 1, &[1, 2, 3]).await;
        assert_eq!(
            store.recognise_peer(3, 0x33).await.unwrap(),
            Recognition::New
        );
        let last = LogId::new(CommittedLeaderId::new(2, 2), 40);
        let membership = StoredMembership::new(Some(last), members(&[1, 2]));
        let data = serde_json::to_vec(&SnapshotData {
            last_applied: Some(last),
            membership: membership.clone(),
            logged: BTreeMap::from([(2, 0x22)]),
            roles: RoleTable::default(),
        })
        .unwrap();
        let meta = SnapshotMeta {
            last_log_id: Some(last),
            last_membership: membership,
            snapshot_id: "s".into(),
        };
        sm.install_snapshot(&meta, Box::new(Cursor::new(data)))
            .await
            .unwrap();
        assert_eq!(
            store.recorded(3),
            None,
            "node 3's old incarnation is forgotten"
        );
        assert_eq!(store.logged(), BTreeMap::from([(2, 0x22)]));
        assert_eq!(
            store.recognise_peer(3, 0x36).await.unwrap(),
            Recognition::Stranger,
            "the snapshot's membership does not name 3"
        );
    }

    #[tokio::test]
    async fn log_append_truncate_purge() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, "c").unwrap();
        let mut log = LogStore(store.clone());
        let entries: Vec<Entry<TypeConfig>> = (1..=5)
            .map(|i| Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
                payload: EntryPayload::Blank,
            })
            .collect();
        {
            let mut s = store.state.lock().unwrap();
            for e in entries {
                s.log.insert(e.log_id.index, e);
            }
        }
        log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 4))
            .await
            .unwrap();
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
            .await
            .unwrap();
        let st = log.get_log_state().await.unwrap();
        assert_eq!(st.last_log_id.unwrap().index, 3);
        assert_eq!(st.last_purged_log_id.unwrap().index, 1);
        let got = log.try_get_log_entries(0..10).await.unwrap();
        assert_eq!(
            got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
            vec![2, 3]
        );
        drop((log, store));
        let mut log = LogStore(Store::open(dir.path(), 1, "c").unwrap());
        assert_eq!(
            log.get_log_state()
                .await
                .unwrap()
                .last_log_id
                .unwrap()
                .index,
            3
        );
    }
}
