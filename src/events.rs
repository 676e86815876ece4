//! The event log: one event per change of (role, term, leader), stamped on the shared monotonic
//! clock, kept in memory for `/v1/events` and written through to `<data_dir>/events.jsonl`
//! so that it survives the node being killed. Its followers (`/v1/watch`) are told of each new
//! event and read it from here at their own pace; [`Watchers`] bounds how many there are.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::role::{NodeId, View};

pub use electd_client::Event;

/// How many events stay in memory for `/v1/events`; the file keeps them all.
const KEEP_IN_MEMORY: usize = 10_000;

/// File name of the event log inside the data dir.
pub const EVENTS_FILE: &str = "events.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    #[error("cannot open event log {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The node's event log. `record` is the only writer; it is called from the one place per mode
/// where the role is decided.
pub struct EventLog {
    node_id: NodeId,
    path: PathBuf,
    inner: Mutex<Inner>,
    /// The `seq` of the last event recorded (0: none yet), for the log's followers.
    latest: watch::Sender<u64>,
}

struct Inner {
    file: File,
    events: VecDeque<Event>,
    next_seq: u64,
    last: Option<View>,
    /// Whether older events than memory holds are in the file.
    evicted: bool,
}

impl EventLog {
    /// Opens (or creates) `<data_dir>/events.jsonl`. Earlier events are loaded so that `seq`
    /// keeps growing across restarts and `/v1/events?since=0` shows the node's history.
    /// A torn last line (a kill in the middle of a write) is skipped.
    pub fn open(data_dir: &Path, node_id: NodeId) -> Result<EventLog, EventLogError> {
        let path = data_dir.join(EVENTS_FILE);
        let open_err = |source| EventLogError::Open {
            path: path.clone(),
            source,
        };
        let mut events = VecDeque::new();
        let mut next_seq = 1;
        let mut evicted = false;
        if let Ok(f) = File::open(&path) {
            for line in BufReader::new(f).lines() {
                let line = line.map_err(open_err)?;
                if let Ok(ev) = serde_json::from_str::<Event>(&line) {
                    next_seq = next_seq.max(ev.seq + 1);
                    events.push_back(ev);
                    if events.len() > KEEP_IN_MEMORY {
                        events.pop_front();
                        evicted = true;
                    }
                }
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(open_err)?;
        // A torn last line would glue onto the next event: start on a fresh line.
        if file.metadata().map(|m| m.len() > 0).unwrap_or(false) {
            let _ = file.write_all(b"\n");
        }
        Ok(EventLog {
            node_id,
            path,
            latest: watch::Sender::new(next_seq - 1),
            inner: Mutex::new(Inner {
                file,
                events,
                next_seq,
                last: None,
                evicted,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `state` stamped `t_mono_ns` if it differs from the last recorded state, and
    /// returns the new event. The line is written to the file before this returns.
    pub fn record(&self, t_mono_ns: u64, state: View) -> Option<Event> {
        let mut inner = self.inner.lock().expect("event log lock");
        if inner.last == Some(state) {
            return None;
        }
        let ev = Event {
            seq: inner.next_seq,
            t_mono_ns,
            node_id: self.node_id,
            view: state,
        };
        inner.next_seq += 1;
        inner.last = Some(state);
        let mut line = serde_json::to_vec(&ev).expect("event serialises");
        line.push(b'\n');
        if let Err(e) = inner.file.write_all(&line) {
            tracing::error!(path = %self.path.display(), error = %e, "cannot append to event log");
        }
        inner.events.push_back(ev.clone());
        if inner.events.len() > KEEP_IN_MEMORY {
            inner.events.pop_front();
            inner.evicted = true;
        }
        self.latest.send_replace(ev.seq);
        tracing::info!(
            role = state.role.as_str(),
            term = state.term,
            leader = ?state.leader,
            seq = ev.seq,
            "role change"
        );
        Some(ev)
    }

    /// The last recorded state, if any.
    pub fn last(&self) -> Option<View> {
        self.inner.lock().expect("event log lock").last
    }

    /// The `seq` of the last recorded event (0 when there is none).
    pub fn latest_seq(&self) -> u64 {
        *self.latest.borrow()
    }

    /// Told the `seq` of each new event (a follower that is slow sees only the latest).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// Events with `seq >= from`, at most `limit`: from memory, or from the file when memory
    /// no longer reaches back that far (a follower far behind loses nothing).
    pub fn replay(&self, from: u64, limit: usize) -> Vec<Event> {
        let in_memory = {
            let inner = self.inner.lock().expect("event log lock");
            !inner.evicted || inner.events.front().is_some_and(|e| e.seq <= from)
        };
        if in_memory {
            return self.since(from, limit).0;
        }
        read_events_file(&self.path)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.seq >= from)
            .take(limit)
            .collect()
    }

    /// Events with `seq >= since` (at most `limit`), and the `seq` to ask for next.
    pub fn since(&self, since: u64, limit: usize) -> (Vec<Event>, u64) {
        let inner = self.inner.lock().expect("event log lock");
        let events: Vec<Event> = inner
            .events
            .iter()
            .filter(|e| e.seq >= since)
            .take(limit)
            .cloned()
            .collect();
        let next = events.last().map(|e| e.seq + 1).unwrap_or(since.max(
            // Nothing new: the caller may ask again from where the log is now.
            if since == 0 { 1 } else { since },
        ));
        (events, next)
    }
}

/// The live followers of the event log (`GET /v1/watch`): at most `max` at once; one more is
/// refused, and counted.
pub struct Watchers {
    slots: Arc<Semaphore>,
    max: usize,
    refused: AtomicU64,
}

impl Watchers {
    pub fn new(max: usize) -> Watchers {
        Watchers {
            slots: Arc::new(Semaphore::new(max)),
            max,
            refused: AtomicU64::new(0),
        }
    }

    /// A slot for one more follower, held until it goes; `None` (counted) when all are taken.
    pub fn enter(&self) -> Option<OwnedSemaphorePermit> {
        let slot = self.slots.clone().try_acquire_owned().ok();
        if slot.is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Followers now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Followers refused since the node started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// Reads an `events.jsonl` file, skipping torn lines (used by the chaos runner and tests).
pub fn read_events_file(path: &Path) -> std::io::Result<Vec<Event>> {
    let f = File::open(path)?;
    let mut out = Vec::new();
    for line in BufReader::new(f).lines() {
        if let Ok(ev) = serde_json::from_str::<Event>(&line?) {
            out.push(ev);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role::Role;

    fn st(role: Role, term: u64, leader: Option<NodeId>) -> View {
        View { role, term, leader }
    }

    #[test]
    fn records_only_changes_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), 3).unwrap();
        assert!(log.record(10, st(Role::Follower, 1, Some(1))).is_some());
        assert!(log.record(11, st(Role::Follower, 1, Some(1))).is_none());
        let ev = log.record(12, st(Role::Leader, 2, Some(3))).unwrap();
        assert_eq!(ev.seq, 2);
        assert_eq!(ev.node_id, 3);
        let (evs, next) = log.since(0, 100);
        assert_eq!(evs.len(), 2);
        assert_eq!(next, 3);
        drop(log);

        // A torn line from a kill mid-write is skipped, and seq continues.
        let path = dir.path().join(EVENTS_FILE);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"seq\":3,\"t_mo")
            .unwrap();
        let log = EventLog::open(dir.path(), 3).unwrap();
        let ev = log.record(20, st(Role::Follower, 2, None)).unwrap();
        assert_eq!(ev.seq, 3);
        let on_disk = read_events_file(&path).unwrap();
        assert_eq!(
            on_disk.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let (evs, next) = log.since(3, 100);
        assert_eq!(evs.len(), 1);
        assert_eq!(next, 4);
        let (evs, next) = log.since(4, 100);
        assert!(evs.is_empty());
        assert_eq!(next, 4);
    }

    #[test]
    fn followers_are_told_of_each_event_and_replay_it_from_memory_or_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), 1).unwrap();
        let mut rx = log.subscribe();
        assert_eq!(log.latest_seq(), 0);
        for term in 1..=(KEEP_IN_MEMORY as u64 + 5) {
            log.record(term, st(Role::Follower, term, None));
        }
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), KEEP_IN_MEMORY as u64 + 5);
        // Seq 1..5 left memory: they come from the file, in order, without a gap.
        let early = log.replay(2, 3);
        assert_eq!(early.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
        let late = log.replay(KEEP_IN_MEMORY as u64 + 4, 10);
        assert_eq!(late.len(), 2);
        // A reopened log tells its followers where it is.
        drop(log);
        let log = EventLog::open(dir.path(), 1).unwrap();
        assert_eq!(log.latest_seq(), KEEP_IN_MEMORY as u64 + 5);
    }

    #[test]
    fn watchers_are_bounded_and_refusals_counted() {
        let w = Watchers::new(2);
        let a = w.enter().unwrap();
        let _b = w.enter().unwrap();
        assert!(w.enter().is_none());
        assert_eq!((w.open(), w.refused()), (2, 1));
        drop(a);
        let _c = w.enter().expect("a freed slot");
        assert_eq!(w.open(), 2);
    }
}
