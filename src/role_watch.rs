//! `GET /v1/roles/watch[?names=a,b|prefix=P][&since=SEQ]`: the named roles as a stream of
//! Server-Sent Events (quorum mode; docs/design/roles.md, "API"). First each watched role's
//! state (`event: role`, its line of `GET /v1/roles`), then each grant, release and revocation
//! this node's log applies to a watched role (`event: granted|released|revoked`, the JSON of
//! [`RoleEvent`]), and `event: lost` when this node's own claim on one lapsed while its log
//! still grants it (roles/holder.rs, `lapsed`), each with `id: SEQ`, the node's sequence of
//! role events (roles/feed.rs).
//! Once the states (or the events a resume asked for) are all sent, `event: synced`.
//! `Last-Event-ID: N` (or `?since=S`) resumes after event N (from S) without a gap while the
//! node keeps those events; otherwise (older events, a snapshot that replaced the roles since,
//! a resume point of an earlier run of the node) the stream says `event: reset` and sends the
//! states again, as an etcd watch on a compacted revision must list again. A state read while
//! a change is being applied may show it and be followed by its event too: events are at least
//! once, and applying one twice changes nothing.
//!
//! A stream takes a watcher's slot as `/v1/watch` does (src/watch.rs), with its keep-alive.

use std::collections::{BTreeSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::connections::{LocalClient, Remote};
use crate::engine::{RolesQuery, RolesReply, RolesRequest};
use crate::error::ApiError;
use crate::node::Node;
use crate::roles::feed::{RoleEvents, Since};
use crate::watch::{start_of, take_slot, KEEP_ALIVE};
use electd_client::{RoleEvent, RoleInfo, RoleName};

/// The SSE event type of a role's state.
pub const STATE: &str = "role";
/// The SSE event type that tells a watcher its resume point is gone: the states follow.
pub const RESET: &str = "reset";
/// The SSE event type that tells a watcher it has caught up (the states, or the events it
/// resumed from, are all sent), as Kubernetes' bookmark or etcd's progress notice does.
pub const SYNCED: &str = "synced";
/// The most names one stream may watch.
pub const NAMES_MAX: usize = 100;
/// Roles read per page when the states are sent, and the most pages (a million roles).
const PAGE: usize = 1000;
const MAX_PAGES: usize = 1000;

#[derive(Deserialize)]
pub(crate) struct RoleWatchQuery {
    /// Comma-separated role names, at most [`NAMES_MAX`].
    names: Option<String>,
    /// Every role whose name starts with this (when no `names`).
    prefix: Option<String>,
    /// Resume from this event on (`seq >= since`).
    since: Option<u64>,
}

/// Which roles a stream watches.
enum Filter {
    Names(BTreeSet<RoleName>),
    /// Names starting with this (empty: every role).
    Prefix(String),
}

impl Filter {
    fn of(q: &RoleWatchQuery) -> Result<Filter, ApiError> {
        let Some(names) = &q.names else {
            return Ok(Filter::Prefix(q.prefix.clone().unwrap_or_default()));
        };
        if q.prefix.is_some() {
            return Err(ApiError::bad_request(
                "invalid_query",
                "give names or prefix, not both",
            ));
        }
        let names: BTreeSet<RoleName> = names
            .split(',')
            .map(|n| {
                RoleName::new(n.trim())
                    .map_err(|e| ApiError::bad_request("invalid_role_name", e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        if names.len() > NAMES_MAX {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!(
                    "a watch names at most {NAMES_MAX} roles, not {}",
                    names.len()
                ),
            ));
        }
        Ok(Filter::Names(names))
    }

    fn watches(&self, name: &RoleName) -> bool {
        match self {
            Filter::Names(names) => names.contains(name),
            Filter::Prefix(p) => name.as_str().starts_with(p.as_str()),
        }
    }
}

pub(crate) async fn get_role_watch(
    State(node): State<Arc<Node>>,
    remote: Option<axum::Extension<Remote>>,
    local: Option<axum::Extension<LocalClient>>,
    headers: HeaderMap,
    q: Result<Query<RoleWatchQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = q?;
    let events = node
        .engine()
        .role_events()
        .map_err(|e| node.roles_error(e))?;
    let filter = Filter::of(&q)?;
    // Subscribed before anything is read, so that no change falls between the two; the
    // request is checked whole before it takes a slot.
    let changed = events.subscribe();
    let latest = events.latest();
    let start = start_of(&headers, q.since, latest)?;
    let slot = take_slot(&node, remote, local)?;
    // A resume point past the end (of an earlier run of the node): said, then the states.
    let resumed = q.since.is_some() || headers.contains_key("last-event-id");
    let queue = match (resumed, start) {
        (true, None) => VecDeque::from([reset(latest)]),
        _ => VecDeque::new(),
    };
    let follow = Follow {
        stop: node.stopping(),
        node,
        events,
        changed,
        filter,
        next: start.unwrap_or(latest + 1),
        states_due: start.is_none(),
        sync_due: true,
        queue,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        f.next_event().await.map(|ev| (Ok(ev), f))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// One stream's place in the role events.
struct Follow {
    node: Arc<Node>,
    events: RoleEvents,
    changed: watch::Receiver<u64>,
    filter: Filter,
    /// The seq of the next event to send.
    next: u64,
    /// The watched roles' states are to be sent (at the start, and after a reset).
    states_due: bool,
    /// `synced` is to be sent once the stream has caught up (at the start, after a reset).
    sync_due: bool,
    queue: VecDeque<SseEvent>,
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
            // Marked seen before the feed is read: a change recorded after the read wakes us.
            self.changed.borrow_and_update();
            if std::mem::take(&mut self.states_due) {
                self.queue_states().await?;
                self.sync_due = true;
                continue;
            }
            match self.events.since(self.next) {
                Since::Reset { next } => {
                    self.queue.push_back(reset(next - 1));
                    self.next = next;
                    self.states_due = true;
                    continue;
                }
                Since::Events(events) => {
                    for e in events {
                        self.next = e.seq + 1;
                        if self.filter.watches(&e.name) {
                            self.queue.push_back(change(&e));
                        }
                    }
                    if !self.queue.is_empty() {
                        continue;
                    }
                }
            }
            if std::mem::take(&mut self.sync_due) {
                self.queue.push_back(synced(self.next - 1));
                continue;
            }
            tokio::select! {
                changed = self.changed.changed() => changed.ok()?,
                _ = self.stop.cancelled() => return None,
            }
        }
    }

    /// Queues the state of every watched role the table knows, each with the id of the last
    /// event before it; `None` when the node stops.
    async fn queue_states(&mut self) -> Option<()> {
        let id = self.next - 1;
        let mut after = None;
        for _ in 0..MAX_PAGES {
            let query = RolesQuery {
                prefix: match &self.filter {
                    Filter::Prefix(p) if !p.is_empty() => Some(p.clone()),
                    _ => None,
                },
                after: after.take(),
                limit: Some(PAGE),
            };
            let page = match self.node.engine().roles(RolesRequest::List(query)).await {
                Ok(RolesReply::Page(p)) => p,
                // Stopping, or a reply of another kind: nothing more to send.
                _ => return None,
            };
            for r in page.roles.iter().filter(|r| self.filter.watches(&r.name)) {
                self.queue.push_back(state(r, id));
            }
            match page.next {
                Some(n) => after = Some(n.to_string()),
                None => return Some(()),
            }
        }
        Some(())
    }
}

/// A role's state, with the id of the last event before it.
fn state(r: &RoleInfo, id: u64) -> SseEvent {
    SseEvent::default()
        .event(STATE)
        .id(id.to_string())
        .json_data(r)
        .expect("a role serialises")
}

/// A grant, release, revocation or lapse.
fn change(e: &RoleEvent) -> SseEvent {
    SseEvent::default()
        .event(e.kind.as_str())
        .id(e.seq.to_string())
        .json_data(e)
        .expect("a role event serialises")
}

/// The stream has caught up with event `id`.
fn synced(id: u64) -> SseEvent {
    SseEvent::default()
        .event(SYNCED)
        .id(id.to_string())
        .json_data(serde_json::json!({ "seq": id }))
        .expect("a sync serialises")
}

/// The stream's resume point is gone: the states follow, then the events after `id`.
fn reset(id: u64) -> SseEvent {
    SseEvent::default()
        .event(RESET)
        .id(id.to_string())
        .json_data(serde_json::json!({
            "message": "the role events asked for are no longer kept on this node (or a \
                        snapshot replaced the roles since): the roles' states follow"
        }))
        .expect("a reset serialises")
}
