//! The store as openraft sees it: its log half ([`LogStore`]) and its state-machine half
//! ([`StateMachine`]), both over the one [`Store`].

use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, LogState, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
    Vote,
};

use super::{Persisted, SnapshotData, Store, StoredSnapshot};
use crate::quorum::types::{Command, TypeConfig};
use crate::role::NodeId;

/// The log half of the store, as openraft sees it.
#[derive(Clone)]
pub struct LogStore(pub Arc<Store>);

/// The state-machine half of the store: the applied log id and the membership.
#[derive(Clone)]
pub struct StateMachine(pub Arc<Store>);

fn io_err(e: std::io::Error) -> openraft::AnyError {
    openraft::AnyError::new(&e)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        Ok(self
            .0
            .read(|s| s.log.range(range).map(|(_, e)| e.clone()).collect()))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        Ok(self.0.read(|s| {
            let last = s.log.values().next_back().map(|e| e.log_id);
            LogState {
                last_purged_log_id: s.last_purged,
                last_log_id: last.or(s.last_purged),
            }
        }))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let vote = *vote;
        self.0
            .mutate(|s| s.vote = Some(vote))
            .await
            .map_err(|e| StorageIOError::write_vote(io_err(e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.0.vote())
    }

    /// Optional in openraft (its `storage::v2` trait): kept in memory, written with the next durable
    /// write. After a crash openraft learns the commit index again from the leader.
    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.0.note(|s| s.committed = committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.0.read(|s| s.committed))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        let res = self
            .0
            .mutate(move |s| {
                for e in entries {
                    s.log.insert(e.log_id.index, e);
                }
            })
            .await;
        match res {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let kind = e.kind();
                let msg = e.to_string();
                callback.log_io_completed(Err(std::io::Error::new(kind, msg)));
                Err(StorageIOError::write_logs(io_err(e)).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.0
            .mutate(|s| {
                let _ = s.log.split_off(&log_id.index);
            })
            .await
            .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.0
            .mutate(|s| {
                s.log = s.log.split_off(&(log_id.index + 1));
                s.last_purged = Some(log_id);
            })
            .await
            .map_err(|e| StorageIOError::write_logs(io_err(e)).into())
    }
}

impl StateMachine {
    fn snapshot_of(s: &Persisted) -> Option<Snapshot<TypeConfig>> {
        s.snapshot.as_ref().map(|snap| Snapshot {
            meta: snap.meta.clone(),
            snapshot: Box::new(Cursor::new(snap.data.clone())),
        })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let res = self
            .0
            .mutate(|s| {
                s.snapshot_seq += 1;
                let data = serde_json::to_vec(&SnapshotData {
                    last_applied: s.last_applied,
                    membership: s.membership.clone(),
                    logged: s.logged.clone(),
                    roles: s.roles.clone(),
                })
                .expect("snapshot serialises");
                let id = match s.last_applied {
                    Some(l) => format!("{}-{}-{}", l.leader_id, l.index, s.snapshot_seq),
                    None => format!("none-{}", s.snapshot_seq),
                };
                s.snapshot = Some(StoredSnapshot {
                    meta: SnapshotMeta {
                        last_log_id: s.last_applied,
                        last_membership: s.membership.clone(),
                        snapshot_id: id,
                    },
                    data,
                });
                Self::snapshot_of(s).expect("just stored")
            })
            .await;
        res.map_err(|e| StorageIOError::write_snapshot(None, io_err(e)).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok(self.0.read(|s| (s.last_applied, s.membership.clone())))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // An election-only state machine: applying is bookkeeping, not worth an fsync (a
        // crash only makes openraft apply the same committed entries again).
        let entries: Vec<_> = entries.into_iter().collect();
        let n = entries.len();
        let role_flaw = (self.0.flaws.get()).and_then(|f| f.role_flaw());
        let changed = self.0.note(move |s| {
            let mut changed = Vec::new();
            for e in entries {
                s.last_applied = Some(e.log_id);
                match e.payload {
                    EntryPayload::Membership(m) => {
                        // A node no longer a member may come back on a new data dir once it
                        // is added again (identity.rs): its incarnation is forgotten.
                        s.forget_outside(&m);
                        s.membership = StoredMembership::new(Some(e.log_id), m);
                    }
                    EntryPayload::Normal(Command::Incarnations(incarnations)) => {
                        // The first one the log holds for a member stays (rule 5); only
                        // members are recorded.
                        for (id, inc) in incarnations {
                            if s.membership.membership().get_node(&id).is_some() {
                                s.logged.entry(id).or_insert(inc);
                            }
                        }
                    }
                    EntryPayload::Normal(Command::Roles(cmd)) => {
                        // Applied again after a crash, an entry changes nothing (the table
                        // knows the last index it applied).
                        s.roles.flawed(role_flaw);
                        let changes = s.roles.apply(e.log_id.index, &cmd);
                        changed.push((e.log_id.index, changes));
                    }
                    EntryPayload::Blank => {}
                }
            }
            changed
        });
        self.0.role_events.record(&changed);
        Ok(vec![(); n])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let decoded: SnapshotData = serde_json::from_slice(&data).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), openraft::AnyError::new(&e))
        })?;
        let meta = meta.clone();
        let keep = (self.0.flaws.get()).is_some_and(|f| f.snapshot_keeps_incarnations());
        self.0
            .mutate(move |s| {
                s.last_applied = decoded.last_applied.or(meta.last_log_id);
                // What the log held, and the removals it applied: a member that learns a
                // removal from a snapshot forgets the removed node's incarnation as one that
                // applied the entry does (it refused the node's new data dir for ever).
                if !keep {
                    s.forget_outside(decoded.membership.membership());
                }
                s.logged = decoded.logged;
                s.roles = decoded.roles;
                s.membership = decoded.membership;
                s.snapshot = Some(StoredSnapshot { meta, data });
            })
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, io_err(e)))?;
        // What the snapshot changed has no role events: every role watch reads the roles again.
        self.0.role_events.reset();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.0.read(Self::snapshot_of))
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;
    use crate::roles::table::RoleCommand;
    use electd_client::RoleName;

    fn roles_entry(index: u64, cmd: RoleCommand) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Command::Roles(cmd)),
        }
    }

    /// The named roles are applied from the log, kept across a restart, carried by a snapshot to
    /// a member that installs it, and not changed by entries applied again after a crash.
    #[tokio::test]
    async fn roles_are_applied_from_the_log_and_carried_by_snapshots() {
        let a = RoleName::new("scheduler").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, "c").unwrap();
        let mut sm = StateMachine(store.clone());
        let entries = vec![
            roles_entry(
                1,
                RoleCommand::Stand {
                    node: 2,
                    roles: vec![a.clone()],
                },
            ),
            roles_entry(
                2,
                RoleCommand::Grant {
                    grants: vec![(a.clone(), 2)],
                },
            ),
        ];
        sm.apply(entries.clone()).await.unwrap();
        assert_eq!(store.roles(|t| t.holder(&a)), Some((2, 1)));
        // The grant is a role event, with the index of its entry.
        let granted = |store: &Store| match store.role_events.since(1) {
            crate::roles::feed::Since::Events(e) => e
                .iter()
                .map(|e| (e.kind.as_str(), e.node, e.token, e.index))
                .collect(),
            crate::roles::feed::Since::Reset { .. } => Vec::new(),
        };
        assert_eq!(granted(&store), vec![("granted", 2, 1, 2)]);
        // Applied again (openraft after a crash): no second token, no second event.
        sm.apply(entries).await.unwrap();
        assert_eq!(
            store.roles(|t| (t.holder(&a), t.last_token())),
            (Some((2, 1)), 1)
        );
        assert_eq!(granted(&store).len(), 1);
        let snap = sm.build_snapshot().await.unwrap();
        drop((sm, store));
        let store = Store::open(dir.path(), 1, "c").unwrap();
        assert_eq!(store.roles(|t| t.holder(&a)), Some((2, 1)), "durable");
        let other = tempfile::tempdir().unwrap();
        let store2 = Store::open(other.path(), 3, "c").unwrap();
        let mut sm2 = StateMachine(store2.clone());
        sm2.install_snapshot(&snap.meta, snap.snapshot)
            .await
            .unwrap();
        assert_eq!(store2.roles(|t| t.clone()), store.roles(|t| t.clone()));
        // What the snapshot changed has no events: a watch reads the roles again.
        assert!(matches!(
            store2.role_events.since(1),
            crate::roles::feed::Since::Reset { .. }
        ));
    }
}
