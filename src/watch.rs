//! `GET /v1/watch`: the node's view as a stream of Server-Sent Events (`docs/design/api-v1.md`,
//! "Watch"). First the current view, then one event per change of (role, term, leader) from
//! the event log, changes to "no leader" included; each carries `event: leader`, `id: SEQ` and
//! the JSON of `/v1/leader`. `Last-Event-ID: N` (or `?since=S`) resumes after event N (from event S)
//! without a gap: what the stream missed is read back from the event log, from its file when
//! memory no longer reaches that far.
//!
//! A watcher costs the node a slot (at most `max_watchers`; one more gets 429) and little
//! else: the stream reads the shared log at the pace its client reads, so a slow watcher
//! only falls behind itself; the log's file is read off the runtime, from an index; and
//! backlogs are sent at a pace shared by all watchers (`events::CATCH_UP_EVENTS_PER_SEC`),
//! so that watchers far behind, or stalled, cannot starve the node's election work.
//!
//! A comment line every [`KEEP_ALIVE`] keeps proxies from closing a quiet stream and lets a
//! client tell a dead node from a quiet one. Streams end when the node stops.
//!
//! `GET /v1/roles/watch` follows the named roles the same way (src/role_watch.rs), in a
//! watcher's slot of the same bound.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::connections::Remote;
use crate::error::ApiError;
use crate::events::Event;
use crate::node::Node;

/// How often a quiet stream carries a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// The SSE event type of every event (`event: leader`).
pub const EVENT: &str = "leader";
/// The SSE event type of a gap in the log (see [`gap`]).
pub const GAP: &str = "gap";
/// How many events a stream reads from the log at a time.
const BATCH: usize = 256;

#[derive(Deserialize)]
pub(crate) struct WatchQuery {
    /// Resume from this event on (`seq >= since`), as `/v1/events?since=` does.
    since: Option<u64>,
}

/// Where a stream starts: the current view, or the log from a `seq` on.
pub(crate) fn start_of(
    headers: &HeaderMap,
    since: Option<u64>,
    latest: u64,
) -> Result<Option<u64>, ApiError> {
    let last_id = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_last_event_id",
                        "Last-Event-ID must be an event seq (a non-negative integer)",
                    )
                })?,
        ),
    };
    let from = last_id.map(|n| n.saturating_add(1)).or(since);
    // A resume point past the log's end (the node's data dir was replaced, say) cannot be
    // continued: start over from the current view.
    Ok(from.filter(|&f| f <= latest + 1))
}

pub(crate) async fn get_watch(
    State(node): State<Arc<Node>>,
    remote: Option<axum::Extension<Remote>>,
    local: Option<axum::Extension<crate::connections::LocalClient>>,
    headers: HeaderMap,
    q: Result<Query<WatchQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = q?;
    // Subscribed before the log is read, so that no event falls between the two; the request
    // is checked whole before it takes a slot.
    let changed = node.events.subscribe();
    let latest = node.events.latest_seq();
    let start = start_of(&headers, q.since, latest)?;
    let slot = take_slot(&node, remote, local)?;
    let mut first = VecDeque::new();
    let next = match start {
        Some(from) => from,
        None => {
            let now = SseEvent::default()
                .event(EVENT)
                .id(latest.to_string())
                .json_data(node.leader_info())
                .expect("a view serialises");
            first.push_back(now);
            latest + 1
        }
    };
    let follow = Follow {
        stop: node.stopping(),
        opened_ns: node.clock.mono_ns(),
        node,
        changed,
        next,
        queue: first,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        f.next_event().await.map(|ev| (Ok(ev), f))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// A watcher's slot (one of `max_watchers`), or 429. A client on the node's own host is its own
/// client (each local application), under the node's whole bound only; any other shares its
/// address's `max_watchers_per_client`.
pub(crate) fn take_slot(
    node: &Node,
    remote: Option<axum::Extension<Remote>>,
    local: Option<axum::Extension<crate::connections::LocalClient>>,
) -> Result<crate::events::WatchSlot, ApiError> {
    let client = remote
        .filter(|_| local.is_none())
        .map(|axum::Extension(Remote(addr))| addr.ip());
    node.watchers.enter(client).ok_or_else(|| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_watchers",
            format!(
                "this node serves at most {} watch streams (max_watchers), at most {} of \
                 one client (max_watchers_per_client)",
                node.watchers.max(),
                node.watchers.per_client()
            ),
        )
    })
}

/// The `gap` event of a stream: events `from..=to` were recorded but are not in the file (the
/// disk refused them) nor in memory any more. Its id is `to`, so that a resume goes on after it.
fn gap(from: u64, to: u64) -> SseEvent {
    SseEvent::default()
        .event(GAP)
        .id(to.to_string())
        .json_data(electd_client::Gap {
            from,
            to,
            message: format!(
                "events {from} to {to} were recorded but could not be written to the event log \
                 file, and are no longer in memory"
            ),
        })
        .expect("a gap serialises")
}

/// One stream's place in the log.
struct Follow {
    node: Arc<Node>,
    changed: watch::Receiver<u64>,
    /// The `seq` of the next event to send.
    next: u64,
    /// Events read from the log and not yet sent.
    queue: VecDeque<SseEvent>,
    /// When the stream opened (CLOCK_MONOTONIC): events recorded since are timed on their
    /// way into it (`electd_watch_lag_seconds`); a backlog a resume asked for is not.
    opened_ns: u64,
    stop: CancellationToken,
    _slot: crate::events::WatchSlot,
}

impl Follow {
    /// The next event to send, waiting for one; `None` when the node stops.
    async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Some(ev);
            }
            // Marked seen before the log is read: an event recorded after the read wakes us.
            self.changed.borrow_and_update();
            let batch = self.node.events.replay(self.next, BATCH).await;
            if batch.len() == BATCH {
                // More is behind it: a backlog, paced with every other follower's.
                self.node.watchers.pace(batch.len()).await;
            }
            if !batch.is_empty() {
                for e in &batch {
                    // Seqs are consecutive: a jump is events that never reached the file and
                    // are no longer in memory. Said, never skipped in silence.
                    let expected = self.next.max(1);
                    if e.seq > expected {
                        self.queue.push_back(gap(expected, e.seq - 1));
                    }
                    self.queue.push_back(self.render(e));
                    self.next = e.seq + 1;
                }
                continue;
            }
            tokio::select! {
                changed = self.changed.changed() => changed.ok()?,
                _ = self.stop.cancelled() => return None,
            }
        }
    }

    /// An event of the log as `/v1/leader` would have answered then, without `lease_ms`: a
    /// lease is a promise counted from the instant its question was sent, and an event has no
    /// question its reader knows the instant of (it is read whenever the stream is read). A
    /// reader that needs a promise asks `GET /v1/claim`; the first event, judged at the
    /// request, carries one.
    fn render(&self, e: &Event) -> SseEvent {
        if e.t_mono_ns >= self.opened_ns {
            let lag = self.node.clock.mono_ns().saturating_sub(e.t_mono_ns);
            self.node
                .counters
                .timings
                .watch_lag
                .observe(lag as f64 / 1e9);
        }
        let info = self.node.render(e.view, None);
        SseEvent::default()
            .event(EVENT)
            .id(e.seq.to_string())
            .json_data(info)
            .expect("a view serialises")
    }
}
