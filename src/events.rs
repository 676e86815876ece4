//! The event log: one event per change of (role, term, leader), stamped on the shared monotonic
//! clock, kept in memory for `/v1/events` and written through to `<data_dir>/events.jsonl`
//! so that it survives the node being killed. Its followers (`/v1/watch`) are told of each new
//! event and read it from here at their own pace; [`Watchers`] bounds how many there are.
//!
//! An event the file refuses (a full or failing disk) stays in memory and waits, with those
//! after it, in order: each later record and [`EventLog::retry`] (every second) write them
//! again, so that the file has every event once the disk takes writes again. Meanwhile the
//! log is unhealthy ([`EventLog::health`], `/v1/health` 503). Events that never reached the
//! file and are no longer in memory are a gap that readers of the file are told of (`gap`
//! events of `/v1/watch`).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::clock::Clock;
use crate::counters::Counters;
use crate::lease::HoldsLease;
use crate::role::{NodeId, Role, View};

pub use electd_client::Event;

/// How many events stay in memory for `/v1/events`; the file keeps them all.
const KEEP_IN_MEMORY: usize = 10_000;

/// The file index keeps the byte offset of one event in this many, so that a follower far
/// behind reads at most this many lines more than it asked for.
const INDEX_EVERY: u64 = 256;

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
    /// The file told of an earlier run when it was opened.
    earlier_run: bool,
    /// Set when the process is taken as dead ([`EventLog::seal`]): nothing is recorded after.
    sealed: std::sync::atomic::AtomicBool,
    /// Held while a leased engine judges its view and records it
    /// ([`EventLog::record_leased_view`]): a view judged before another thread's change (a
    /// resign, a shutdown) cannot be written after that change's own event.
    judging: Mutex<()>,
}

/// Whether a leased engine's `view` is a change to record, after `last` (the last view this
/// run recorded). The first view of a run is recorded whatever it is when the file tells of an
/// earlier run: the checkers know a restarted node only from its next event, and a first view
/// equal to the initial one (a fresh store beside an old file, as the simulator's wiped disks
/// leave it) would otherwise leave the file ending in the old run's claim (seed 6400000071 of
/// the simulator's membership schedules). In a new log the initial view is no change.
fn is_change(last: Option<View>, earlier_run: bool, view: View) -> bool {
    match last {
        Some(last) => last != view,
        None => earlier_run || view != View::INITIAL,
    }
}

struct Inner {
    file: File,
    /// The file's length: where the next line starts.
    len: u64,
    /// `(seq, byte offset of its line)` of one event in [`INDEX_EVERY`], in `seq` order: a
    /// follower behind memory starts reading the file near its place, not at the top.
    index: Vec<(u64, u64)>,
    events: VecDeque<Event>,
    next_seq: u64,
    last: Option<View>,
    /// Whether older events than memory holds are in the file.
    evicted: bool,
    /// The stamp of the last event recorded (of an earlier run too): no later event is stamped
    /// before it (`t_mono_ns` never decreases with `seq`, api-v1.md).
    last_t_mono_ns: u64,
    /// Events recorded but not yet in the file, oldest first.
    unwritten: VecDeque<Event>,
    /// Why the last write failed, while any event waits.
    failure: Option<String>,
    /// The file may end in part of a line (a failed write): the next line starts on a fresh one.
    torn: bool,
}

/// What an event log file holds from earlier runs, as [`EventLog::open`] loads it.
#[derive(Default)]
struct Earlier {
    /// The latest events, at most [`KEEP_IN_MEMORY`].
    events: VecDeque<Event>,
    index: Vec<(u64, u64)>,
    next_seq: u64,
    /// Whether older events were dropped from memory (they stay in the file).
    evicted: bool,
    last_t_mono_ns: u64,
}

impl Earlier {
    /// Reads the events of the file at `path`, if there is one; a torn line is skipped, and
    /// told of.
    fn read(path: &Path) -> std::io::Result<Earlier> {
        let mut e = Earlier {
            next_seq: 1,
            ..Earlier::default()
        };
        let Ok(f) = File::open(path) else {
            return Ok(e);
        };
        let mut lines = EventLines::new(f, 0);
        for line in lines.by_ref() {
            let (at, ev) = line?;
            e.next_seq = e.next_seq.max(ev.seq + 1);
            e.last_t_mono_ns = e.last_t_mono_ns.max(ev.t_mono_ns);
            index_line(&mut e.index, ev.seq, at);
            e.events.push_back(ev);
            if e.events.len() > KEEP_IN_MEMORY {
                e.events.pop_front();
                e.evicted = true;
            }
        }
        if lines.unreadable > 0 {
            // Torn lines are expected (a kill, or a full disk, in the middle of a write);
            // they are told of, not passed over in silence.
            tracing::warn!(
                path = %path.display(),
                lines = lines.unreadable,
                "event log: lines that are not events (torn writes) skipped"
            );
        }
        Ok(e)
    }
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
        let Earlier {
            events,
            index,
            next_seq,
            evicted,
            last_t_mono_ns,
        } = Earlier::read(&path).map_err(open_err)?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(open_err)?;
        let mut len = file.metadata().map_err(open_err)?.len();
        // A torn last line would glue onto the next event: start on a fresh line.
        if len > 0 && file.write_all(b"\n").is_ok() {
            len += 1;
        }
        Ok(EventLog {
            node_id,
            path,
            latest: watch::Sender::new(next_seq - 1),
            earlier_run: next_seq > 1,
            judging: Mutex::new(()),
            sealed: Default::default(),
            inner: Mutex::new(Inner {
                file,
                len,
                index,
                events,
                next_seq,
                last: None,
                evicted,
                last_t_mono_ns,
                unwritten: VecDeque::new(),
                failure: None,
                torn: false,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records nothing from now on: the lab's simulator crashes a node in its own process,
    /// where the dead incarnation's tasks (a probe still out) could otherwise write into the
    /// file its successor has opened, as a killed process never does.
    pub fn seal(&self) {
        let _inner = self.inner.lock().expect("event log lock");
        self.sealed.store(true, Ordering::SeqCst);
    }

    /// Records `view` stamped `t_mono_ns` if it differs from the last view recorded, and counts
    /// a change of leader (a new leader named) in `counters`; answers the view recorded before
    /// it. The one way an engine records its role changes.
    pub fn record_view(&self, t_mono_ns: u64, view: View, counters: &Counters) -> Option<View> {
        let prev = self.last().unwrap_or(View::INITIAL);
        self.record(t_mono_ns, view)?;
        if view.leader.is_some() && view.leader != prev.leader {
            counters.leader_changed();
        }
        counters.view_changed(self.node_id, prev, view, t_mono_ns);
        Some(prev)
    }

    /// Judges the view with `judge` and records it if it differs from the last view recorded,
    /// stamped as the leased modes (quorum, mutex) stamp a change of role: by their `lease`
    /// ([`crate::lease::Lease::stamp_change`]: a claim's start at the send time of what started it, its end
    /// never before it ended).
    ///
    /// Judging and writing happen under one lock: a view judged by one thread before another
    /// thread changed the lease (a resign, a shutdown) and recorded that change cannot be
    /// written after it (a stale "leader" after the closing event, the file's last line at
    /// shutdown).
    pub fn record_leased_view(
        &self,
        judge: impl FnOnce() -> View,
        lease: &impl HoldsLease,
        clock: &dyn Clock,
        counters: &Counters,
    ) {
        let _judging = self.judging.lock().expect("event log judging lock");
        let view = judge();
        let last = self.last();
        if !is_change(last, self.earlier_run, view) {
            return;
        }
        let prev = last.unwrap_or(View::INITIAL);
        let (stamp, ended) = lease.with_lease(|lease| {
            let stamp = lease.stamp_change(prev.role, view.role, view.term, clock);
            let ended = (prev.role == Role::Leader && view.role != Role::Leader)
                .then(|| lease.end_of(prev.term));
            (stamp, ended)
        });
        if self.record_view(stamp, view, counters).is_some() {
            if let Some(cause) = ended {
                counters.claim_ended(cause);
            }
        }
    }

    /// Records `state` stamped `t_mono_ns` if it differs from the last recorded state, and
    /// returns the new event. The line is written to the file before this returns (or, when the
    /// file refuses it, kept to be written again: see the module's notes).
    ///
    /// An event is never stamped before the event before it: `t_mono_ns` is raised to the last
    /// stamp when it is earlier. The one case where a leased engine asks for that loses no
    /// claim: a claim's end recorded while the probe that renews it was out (stamped at the
    /// end, `quorum/driver/probe.rs`), then that probe granted (its claim stamped at the probe's send
    /// instant, which the ended claim covered up to its end). Every other change is recorded
    /// before the probe that could start a claim is sent, so a claim's start is never moved.
    pub fn record(&self, t_mono_ns: u64, state: View) -> Option<Event> {
        let mut inner = self.inner.lock().expect("event log lock");
        if inner.last == Some(state) || self.sealed.load(Ordering::SeqCst) {
            return None;
        }
        let t_mono_ns = t_mono_ns.max(inner.last_t_mono_ns);
        inner.last_t_mono_ns = t_mono_ns;
        let ev = Event {
            seq: inner.next_seq,
            t_mono_ns,
            node_id: self.node_id,
            view: state,
        };
        inner.next_seq += 1;
        inner.last = Some(state);
        inner.unwritten.push_back(ev.clone());
        if inner.unwritten.len() > KEEP_IN_MEMORY {
            // The disk has refused this many: the oldest will never be written (a gap).
            inner.unwritten.pop_front();
        }
        inner.write_unwritten(&self.path);
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

    /// Writes the events that the file refused before, if any (the node calls it every
    /// second).
    pub fn retry(&self) {
        let mut inner = self.inner.lock().expect("event log lock");
        if !inner.unwritten.is_empty() {
            inner.write_unwritten(&self.path);
        }
    }

    /// `Err` with the reason while events wait for the file: the log is not durable.
    pub fn health(&self) -> Result<(), String> {
        let inner = self.inner.lock().expect("event log lock");
        match (&inner.failure, inner.unwritten.len()) {
            (_, 0) => Ok(()),
            (why, n) => Err(format!(
                "event log {}: {n} events not written: {}",
                self.path.display(),
                why.as_deref().unwrap_or("?")
            )),
        }
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
    /// no longer reaches back that far (a follower far behind loses nothing). The file is read
    /// on tokio's blocking pool, from the indexed line nearest `from`: a follower catching up
    /// costs the node's runtime nothing, and reads what it asked for, not the whole file.
    pub async fn replay(self: &Arc<Self>, from: u64, limit: usize) -> Vec<Event> {
        if let Some(events) = self.replay_memory(from, limit) {
            return events;
        }
        let log = self.clone();
        tokio::task::spawn_blocking(move || log.replay_file(from, limit))
            .await
            .unwrap_or_default()
    }

    /// Events with `seq >= from` (at most `limit`) if memory still reaches back to `from`.
    fn replay_memory(&self, from: u64, limit: usize) -> Option<Vec<Event>> {
        let inner = self.inner.lock().expect("event log lock");
        let reaches = !inner.evicted || inner.events.front().is_some_and(|e| e.seq <= from);
        reaches.then(|| inner.newer(from, limit))
    }

    /// Events with `seq >= from` (at most `limit`) read from the file, starting at the indexed
    /// line nearest below `from`. Blocking.
    fn replay_file(&self, from: u64, limit: usize) -> Vec<Event> {
        let start = {
            let inner = self.inner.lock().expect("event log lock");
            let i = inner.index.partition_point(|&(seq, _)| seq <= from);
            i.checked_sub(1).map_or(0, |i| inner.index[i].1)
        };
        let Ok(f) = File::open(&self.path) else {
            return Vec::new();
        };
        EventLines::new(f, start)
            .map_while(Result::ok)
            .map(|(_, ev)| ev)
            .filter(|e| e.seq >= from)
            .take(limit)
            .collect()
    }

    /// Events with `seq >= since` (at most `limit`) from memory, and the `seq` to ask for next.
    pub fn since(&self, since: u64, limit: usize) -> (Vec<Event>, u64) {
        let events = self
            .inner
            .lock()
            .expect("event log lock")
            .newer(since, limit);
        let next = next_after(&events, since);
        (events, next)
    }

    /// [`EventLog::since`] reaching back into the file for events no longer in memory (what
    /// `GET /v1/events` answers): a reader far behind gets every event, none skipped.
    pub async fn page(self: &Arc<Self>, since: u64, limit: usize) -> (Vec<Event>, u64) {
        let events = self.replay(since, limit).await;
        let next = next_after(&events, since);
        (events, next)
    }
}

/// The `since` of the page after `events`, read from `since`: past the last one, or, with
/// nothing new, where the log is now.
fn next_after(events: &[Event], since: u64) -> u64 {
    events.last().map_or(since.max(1), |e| e.seq + 1)
}

impl Inner {
    /// Writes the waiting events to the file in order, up to the first the file refuses.
    fn write_unwritten(&mut self, path: &Path) {
        while let Some(ev) = self.unwritten.front() {
            let mut line = Vec::with_capacity(128);
            if self.torn {
                line.push(b'\n');
            }
            serde_json::to_writer(&mut line, ev).expect("event serialises");
            line.push(b'\n');
            let seq = ev.seq;
            match self.file.write_all(&line) {
                Ok(()) => {
                    let at = self.len + u64::from(self.torn);
                    self.len += line.len() as u64;
                    self.torn = false;
                    index_line(&mut self.index, seq, at);
                    self.unwritten.pop_front();
                }
                Err(e) => {
                    if self.failure.is_none() {
                        tracing::error!(path = %path.display(), error = %e, "cannot append to event log");
                    }
                    self.failure = Some(e.to_string());
                    // Part of the line may be in the file: the next write starts a fresh line.
                    let len = self.file.metadata().map(|m| m.len()).unwrap_or(self.len);
                    self.torn |= len != self.len;
                    self.len = len;
                    return;
                }
            }
        }
        if self.failure.take().is_some() {
            tracing::info!(path = %path.display(), "event log written again");
        }
    }

    /// The events in memory with `seq >= from`, at most `limit`.
    fn newer(&self, from: u64, limit: usize) -> Vec<Event> {
        let first = self.events.partition_point(|e| e.seq < from);
        self.events.range(first..).take(limit).cloned().collect()
    }
}

/// Indexes the line of event `seq` at byte `at` if it is [`INDEX_EVERY`] past the last indexed.
fn index_line(index: &mut Vec<(u64, u64)>, seq: u64, at: u64) {
    if index
        .last()
        .is_none_or(|&(last, _)| seq >= last + INDEX_EVERY)
    {
        index.push((seq, at));
    }
}

/// The events of an `events.jsonl` file from byte `start` on, each with the offset of its line;
/// torn or foreign lines (a kill in the middle of a write) are skipped.
struct EventLines {
    reader: BufReader<File>,
    at: u64,
    line: Vec<u8>,
    /// Lines skipped because they are not events.
    unreadable: u64,
}

impl EventLines {
    fn new(mut file: File, start: u64) -> EventLines {
        let at = file.seek(SeekFrom::Start(start)).unwrap_or(0);
        EventLines {
            reader: BufReader::new(file),
            at,
            line: Vec::new(),
            unreadable: 0,
        }
    }
}

impl Iterator for EventLines {
    type Item = std::io::Result<(u64, Event)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            let at = self.at;
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => return None,
                Ok(n) => self.at += n as u64,
                Err(e) => return Some(Err(e)),
            }
            match serde_json::from_slice::<Event>(&self.line) {
                Ok(ev) => return Some(Ok((at, ev))),
                Err(_) if self.line.iter().all(u8::is_ascii_whitespace) => {}
                Err(_) => self.unreadable += 1,
            }
        }
    }
}

/// How many events a second the followers that are catching up get, all together.
///
/// A follower far behind (a resume from an old `seq`), or one whose client stopped reading,
/// is sent its backlog until the socket's buffers are full: up to megabytes, tens of
/// thousands of events, each rendered as `/v1/leader` JSON. Unpaced, a few such followers
/// kept a debug-built leader's runtime busy long enough to lose its claim. Paced, they cost
/// the node a bounded share of a core, and a follower at the live end (one event at a time)
/// is never paced.
pub const CATCH_UP_EVENTS_PER_SEC: u32 = 20_000;

/// The live followers of the event log (`GET /v1/watch`): at most `max` at once, and at most
/// `per_client` of one client (its IP address), so that slots are not first come first
/// served for a client that takes them all; one more is refused, and counted. Their catching
/// up is paced together ([`Watchers::pace`]).
pub struct Watchers {
    slots: Arc<Semaphore>,
    max: usize,
    per_client: usize,
    /// The streams each client holds now.
    clients: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    refused: AtomicU64,
    /// When the next batch of catching up may be sent: a virtual clock that each batch moves
    /// on by its share, as in GCRA. It is ten lines, so no rate-limiter crate for it.
    next_batch: Mutex<tokio::time::Instant>,
}

impl Watchers {
    pub fn new(max: usize, per_client: usize) -> Watchers {
        Watchers {
            slots: Arc::new(Semaphore::new(max)),
            max,
            per_client: per_client.min(max),
            clients: Arc::default(),
            refused: AtomicU64::new(0),
            next_batch: Mutex::new(tokio::time::Instant::now()),
        }
    }

    /// Waits for the turn of a backlog batch of `events` events, so that all followers
    /// together catch up at most [`CATCH_UP_EVENTS_PER_SEC`].
    pub async fn pace(&self, events: usize) {
        let cost = Duration::from_secs(1) / CATCH_UP_EVENTS_PER_SEC * events as u32;
        let turn = {
            let mut next = self.next_batch.lock().expect("pace lock");
            let turn = (*next).max(tokio::time::Instant::now());
            *next = turn + cost;
            turn
        };
        tokio::time::sleep_until(turn).await;
    }

    /// A slot for one more follower of `client` (its IP address; `None`: not known, as in
    /// the simulator), held until it goes; `None` (counted) when all are taken, or the
    /// client's share.
    pub fn enter(&self, client: Option<std::net::IpAddr>) -> Option<WatchSlot> {
        let refuse = || {
            self.refused.fetch_add(1, Ordering::Relaxed);
            None
        };
        let mut clients = self.clients.lock().expect("watchers lock");
        if let Some(ip) = client {
            if clients.get(&ip).copied().unwrap_or(0) >= self.per_client {
                return refuse();
            }
        }
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            return refuse();
        };
        if let Some(ip) = client {
            *clients.entry(ip).or_default() += 1;
        }
        Some(WatchSlot {
            _permit: permit,
            client,
            clients: self.clients.clone(),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// The most streams one client may hold.
    pub fn per_client(&self) -> usize {
        self.per_client
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

/// A follower's slot ([`Watchers::enter`]): freed, and its client's count lowered, on drop.
pub struct WatchSlot {
    _permit: OwnedSemaphorePermit,
    client: Option<std::net::IpAddr>,
    clients: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let Some(ip) = self.client else {
            return;
        };
        let mut clients = self.clients.lock().expect("watchers lock");
        if let Some(n) = clients.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                clients.remove(&ip);
            }
        }
    }
}

/// Reads an `events.jsonl` file, skipping torn lines (used by the chaos runner and tests).
pub fn read_events_file(path: &Path) -> std::io::Result<Vec<Event>> {
    Ok(read_events_counted(path)?.0)
}

/// Reads an `events.jsonl` file: its events, and how many of its lines are not events (a torn
/// write, a foreign line). A node writes each line with one `write` of the whole line, so a
/// kill does not tear one: a checker counts such lines and fails on them (issue 48, item 7).
pub fn read_events_counted(path: &Path) -> std::io::Result<(Vec<Event>, u64)> {
    let mut lines = EventLines::new(File::open(path)?, 0);
    let events = lines
        .by_ref()
        .map(|line| line.map(|(_, ev)| ev))
        .collect::<std::io::Result<Vec<Event>>>()?;
    Ok((events, lines.unreadable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ms;
    use crate::lease::Lease;

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

    /// Each end of a claim is counted once, by its cause: the lease running out (lost), a
    /// resign of the term, the node stopping; a leader's view recorded again is no end.
    #[test]
    fn the_end_of_a_claim_is_counted_by_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let (lease, clock, counters) = (
            Mutex::new(Lease::default()),
            crate::clock::testing::ManualClock::default(),
            Counters::default(),
        );
        let log = EventLog::open(dir.path(), 5).unwrap();
        let ended = |c: &Counters| c.snapshot().claims_ended;
        let mut term = 0;
        let mut claim_then = |end: &dyn Fn(&mut Lease, u64)| {
            term += 1;
            lease.lock().unwrap().grant(term, clock.read(), ms(100));
            log.record_leased_view(
                || st(Role::Leader, term, Some(5)),
                &lease,
                &clock,
                &counters,
            );
            log.record_leased_view(
                || st(Role::Leader, term, Some(5)),
                &lease,
                &clock,
                &counters,
            );
            end(&mut lease.lock().unwrap(), term);
            log.record_leased_view(|| st(Role::Follower, term, None), &lease, &clock, &counters);
        };
        let now = clock.boot_ns();
        claim_then(&|_, _| {});
        assert_eq!(ended(&counters), [("lost".to_string(), 1)].into());
        claim_then(&|l, t| l.resign(t, now));
        // A claim that had run out (100 ms) before the resign or the shutdown was lost.
        claim_then(&|l, t| l.resign(t, now + ms(150)));
        claim_then(&|l, _| l.close(now));
        assert_eq!(
            ended(&counters),
            [
                ("lost".to_string(), 2),
                ("resigned".to_string(), 1),
                ("stopped".to_string(), 1)
            ]
            .into()
        );
    }

    /// A node killed while it claimed starts again on a fresh store beside its old file: its
    /// first view, the initial one, is recorded, so the file no longer ends in the claim. In a
    /// new log the initial view is no change; after an earlier run any first view is one.
    #[test]
    fn the_first_view_after_a_restart_is_recorded_even_when_initial() {
        let dir = tempfile::tempdir().unwrap();
        let (lease, clock, counters) = (
            Mutex::new(Lease::default()),
            crate::clock::testing::ManualClock::default(),
            Counters::default(),
        );
        let log = EventLog::open(dir.path(), 5).unwrap();
        log.record_leased_view(|| View::INITIAL, &lease, &clock, &counters);
        assert_eq!(log.latest_seq(), 0, "a new log's initial view is no change");
        log.record(10, st(Role::Leader, 9, Some(5))).unwrap();
        drop(log);
        let log = EventLog::open(dir.path(), 5).unwrap();
        log.record_leased_view(|| View::INITIAL, &lease, &clock, &counters);
        assert_eq!(log.latest_seq(), 2);
        assert_eq!(log.last(), Some(View::INITIAL));
        log.record_leased_view(|| View::INITIAL, &lease, &clock, &counters);
        assert_eq!(log.latest_seq(), 2, "then only changes");
        assert!(is_change(None, true, st(Role::Leader, 9, Some(5))));
        assert!(!is_change(Some(View::INITIAL), true, View::INITIAL));
    }

    /// Within one node `t_mono_ns` never decreases with `seq` (api-v1.md), in memory, in the
    /// file and across a reopen: a stamp earlier than the last event's is raised to it.
    #[test]
    fn time_never_goes_back_with_seq_even_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), 2).unwrap();
        log.record(100, st(Role::Candidate, 1, None)).unwrap();
        let ev = log.record(60, st(Role::Leader, 1, Some(2))).unwrap();
        assert_eq!(ev.t_mono_ns, 100, "raised to the event before it");
        drop(log);
        let log = EventLog::open(dir.path(), 2).unwrap();
        let ev = log.record(10, st(Role::Follower, 2, None)).unwrap();
        assert_eq!(
            ev.t_mono_ns, 100,
            "the file's last stamp holds after a reopen"
        );
        let stamps: Vec<u64> = read_events_file(&dir.path().join(EVENTS_FILE))
            .unwrap()
            .iter()
            .map(|e| e.t_mono_ns)
            .collect();
        assert_eq!(stamps, [100, 100, 100]);
    }

    /// A view judged by one thread (the driver: "leader") while another changes the lease
    /// and records that change (a resign or shutdown: "candidate") is never written after the
    /// change's own event: judging and writing are one step. (With the view judged outside the
    /// lock, the stale "leader" was appended after the closing event and stayed the file's
    /// last line at shutdown.)
    #[test]
    fn a_view_judged_before_a_racing_change_is_never_written_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(EventLog::open(dir.path(), 4).unwrap());
        let lease = Arc::new(Mutex::new(Lease::default()));
        let clock = Arc::new(crate::clock::testing::ManualClock::default());
        let counters = Arc::new(Counters::default());
        let leading = st(Role::Leader, 3, Some(4));
        let closed = st(Role::Candidate, 3, None);
        let (racing_done, racer) = (Arc::new(AtomicU64::new(0)), std::sync::Barrier::new(2));
        std::thread::scope(|scope| {
            log.record_leased_view(
                || {
                    // The racing change starts while this view is being judged.
                    scope.spawn(|| {
                        racer.wait();
                        log.record_leased_view(|| closed, &*lease, &*clock, &counters);
                        racing_done.store(1, Ordering::SeqCst);
                    });
                    racer.wait();
                    std::thread::sleep(Duration::from_millis(50));
                    assert_eq!(
                        racing_done.load(Ordering::SeqCst),
                        0,
                        "the racing change waits for this judgement to be written"
                    );
                    leading
                },
                &*lease,
                &*clock,
                &counters,
            );
        });
        assert_eq!(
            log.last(),
            Some(closed),
            "the later change is the last event"
        );
        let file = read_events_file(&dir.path().join(EVENTS_FILE)).unwrap();
        assert_eq!(
            file.iter().map(|e| e.view).collect::<Vec<_>>(),
            [leading, closed],
            "and the file's last line"
        );
    }

    /// `GET /v1/events?since=` reaches back into the file: events no longer in memory are read
    /// from it, none skipped (memory alone answered from its oldest event on, silently).
    #[tokio::test]
    async fn a_page_from_before_memory_is_read_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(EventLog::open(dir.path(), 1).unwrap());
        for term in 1..=(KEEP_IN_MEMORY as u64 + 5) {
            log.record(term, st(Role::Follower, term, None)).unwrap();
        }
        let (mem, _) = log.since(1, 3);
        assert_eq!(
            mem[0].seq, 6,
            "memory alone starts after the evicted events"
        );
        let (events, next) = log.page(1, 3).await;
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(next, 4);
        let (events, next) = log.page(KEEP_IN_MEMORY as u64 + 5, 10).await;
        assert_eq!(events.len(), 1);
        assert_eq!(next, KEEP_IN_MEMORY as u64 + 6);
        assert_eq!(log.page(next, 10).await, (Vec::new(), next));
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
        assert!(log.replay_memory(2, 3).is_none());
        let early = log.replay_file(2, 3);
        assert_eq!(early.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
        let late = log.replay_memory(KEEP_IN_MEMORY as u64 + 4, 10).unwrap();
        assert_eq!(late.len(), 2);
        // A reopened log tells its followers where it is.
        drop(log);
        let log = EventLog::open(dir.path(), 1).unwrap();
        assert_eq!(log.latest_seq(), KEEP_IN_MEMORY as u64 + 5);
    }

    /// A follower far behind is served from the indexed line nearest its place: every `from`
    /// gets exactly the events from it on, across torn lines, the index's steps and a reopen.
    #[test]
    fn the_file_is_read_from_the_indexed_line_nearest_the_follower() {
        let dir = tempfile::tempdir().unwrap();
        let total = 3 * INDEX_EVERY + 7;
        let log = EventLog::open(dir.path(), 1).unwrap();
        for term in 1..=total / 2 {
            log.record(term, st(Role::Follower, term, None));
        }
        drop(log);
        // A kill in the middle of a write, then a restart.
        let path = dir.path().join(EVENTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"seq\":99,\"t_mo\xff").unwrap();
        let log = EventLog::open(dir.path(), 1).unwrap();
        for term in total / 2 + 1..=total {
            log.record(term, st(Role::Follower, term, None));
        }
        let index = log.inner.lock().unwrap().index.clone();
        assert!(index.len() >= 3, "{index:?}");
        for from in [
            1,
            2,
            INDEX_EVERY,
            INDEX_EVERY + 1,
            total / 2,
            total / 2 + 1,
            total,
        ] {
            let got = log.replay_file(from, 5);
            let want: Vec<u64> = (from..=total).take(5).collect();
            assert_eq!(
                got.iter().map(|e| e.seq).collect::<Vec<_>>(),
                want,
                "from {from}"
            );
        }
        assert!(log.replay_file(total + 1, 5).is_empty());
        // The index, rebuilt at open, points where the log itself did.
        drop(log);
        let reopened = EventLog::open(dir.path(), 1).unwrap();
        assert_eq!(reopened.inner.lock().unwrap().index, index);
        let all = read_events_file(&path).unwrap();
        assert_eq!(all.len() as u64, total);
    }

    #[test]
    fn watchers_are_bounded_and_refusals_counted() {
        let w = Watchers::new(2, 2);
        let a = w.enter(None).unwrap();
        let _b = w.enter(None).unwrap();
        assert!(w.enter(None).is_none());
        assert_eq!((w.open(), w.refused()), (2, 1));
        drop(a);
        let _c = w.enter(None).expect("a freed slot");
        assert_eq!(w.open(), 2);
    }

    /// One client cannot take every slot (issue 30): past its share it is refused while
    /// another still gets one; a stream it closes gives its share back.
    #[test]
    fn one_client_holds_at_most_its_share_of_the_watchers() {
        let w = Watchers::new(4, 2);
        let (greedy, other) = (Some([10, 0, 0, 1].into()), Some([10, 0, 0, 2].into()));
        let a = w.enter(greedy).unwrap();
        let _b = w.enter(greedy).unwrap();
        assert!(w.enter(greedy).is_none(), "a third stream of one client");
        let _c = w.enter(other).expect("another client's stream");
        assert_eq!((w.open(), w.refused()), (3, 1));
        drop(a);
        let _d = w.enter(greedy).expect("its share given back");
        // A share above the whole acts as the whole.
        assert_eq!(Watchers::new(3, 16).per_client(), 3);
    }
}
