//! [`LegacyNode`], the one runner of the legacy algorithms: it feeds a state machine ([`Algorithm`]) its
//! inputs (start, a tick every `timing.heartbeat_ms`, messages from `/peer/msg`, delivery
//! outcomes) and carries out its outputs (messages over the shared peer transport, role changes
//! into the event log). The same node runs bully and ring.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Json, Router};
use tokio_util::sync::CancellationToken;

use futures_util::future::BoxFuture;

use super::core::{Algorithm, MsgKind, Ticks};
use crate::clock::Clock;
use crate::config::Config;
use crate::counters::Counters;
use crate::engine::{Engine, Judged, Plumbing, ResignError, Running};
use crate::error::ApiError;
use crate::events::EventLog;
use crate::role::{Mode, NodeId, Resigned, Role, View};
use crate::transport::{decode_peer, PeerId, Transport};

/// Path of every legacy peer message.
pub const PATH_MSG: &str = "/peer/msg";

/// A legacy-mode node running algorithm `A`.
pub struct LegacyNode<A: Algorithm> {
    alg: Mutex<A>,
    view: Mutex<View>,
    transport: Arc<Transport>,
    events: Arc<EventLog>,
    counters: Arc<Counters>,
    /// Where role changes are stamped.
    clock: Arc<dyn Clock>,
    /// Deadline of one message: past it the message counts as not delivered (the ring then
    /// skips that successor): half a follower lease.
    msg_timeout: Duration,
    ticks: Ticks,
    /// The tick loop runs.
    running: Running,
    /// Bully or ring, for what the API says about this mode.
    mode: Mode,
}

impl<A: Algorithm + Send + 'static> LegacyNode<A>
where
    A::Msg: MsgKind + Sync,
{
    /// Creates the state machine, starts it (it calls an election) and the tick loop.
    pub fn start(cfg: &Config, plumbing: Plumbing, stop: CancellationToken) -> Arc<Self> {
        let Plumbing {
            transport,
            events,
            counters,
            clock,
        } = plumbing;
        let t = cfg.timing;
        let ticks = Ticks::from_timing(t.heartbeat_ms, t.follower_lease_ms);
        let (running, guard) = Running::start();
        let node = Arc::new(LegacyNode {
            running,
            alg: Mutex::new(A::new(cfg.id, cfg.member_ids(), ticks)),
            view: Mutex::new(View::INITIAL),
            transport,
            events,
            counters,
            clock,
            msg_timeout: Duration::from_millis(t.follower_lease_ms / 2),
            ticks,
            mode: cfg.mode,
        });
        tracing::info!(?ticks, "legacy algorithm timeouts (ticks of one heartbeat)");
        node.apply(|a| a.start());
        let tick_node = node.clone();
        let period = Duration::from_millis(t.heartbeat_ms);
        tokio::spawn(async move {
            let _running = guard;
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => tick_node.apply(|a| a.tick()),
                }
            }
        });
        node
    }

    /// Feeds one input to the algorithm, then carries out its outputs. The one place legacy
    /// modes record role changes: "became leader" is stamped before the view changes, anything
    /// else after, so claim intervals in the log err wide.
    fn apply(self: &Arc<Self>, input: impl FnOnce(&mut A)) {
        let before = self.clock.mono_ns();
        let out = {
            let mut alg = self.alg.lock().expect("algorithm lock");
            input(&mut alg);
            let out = alg.take_outbox();
            if let Some(last) = out.view_changes.last() {
                *self.view.lock().expect("view lock") = *last;
            }
            out
        };
        let after = self.clock.mono_ns();
        for &view in &out.view_changes {
            let stamp = if view.role == Role::Leader {
                before
            } else {
                after
            };
            let prev = self.events.record_view(stamp, view, &self.counters);
            if view.role == Role::Candidate && prev.is_some_and(|p| p.role != Role::Candidate) {
                self.counters.election_started();
            }
        }
        for (to, msg) in out.msgs {
            self.send(to, msg);
        }
    }

    /// Sends one message in the background; its outcome goes back to the algorithm.
    fn send(self: &Arc<Self>, to: NodeId, msg: A::Msg) {
        let node = self.clone();
        tokio::spawn(async move {
            let res: Result<serde_json::Value, _> = node
                .transport
                .call(to, PATH_MSG, msg.kind(), &msg, node.msg_timeout)
                .await;
            match res {
                Ok(_) => node.apply(|a| a.delivered(to, &msg)),
                Err(e) => {
                    tracing::debug!(to, kind = msg.kind(), error = %e, "not delivered");
                    node.apply(|a| a.delivery_failed(to, msg));
                }
            }
        });
    }
}

async fn receive<A: Algorithm + Send + 'static>(
    State(node): State<Arc<LegacyNode<A>>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError>
where
    A::Msg: MsgKind + Sync,
{
    let msg: A::Msg = decode_peer(&node.counters, &body)?;
    node.counters.received(msg.kind());
    node.apply(|a| a.step(from, msg));
    Ok(Json(serde_json::json!({"ok": true})))
}

impl<A: Algorithm + Send + 'static> Engine for LegacyNode<A>
where
    A::Msg: MsgKind + Sync,
{
    fn view(&self) -> Judged {
        Judged::unleased(*self.view.lock().expect("view lock"))
    }

    fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route(PATH_MSG, post(receive::<A>))
            .with_state(self)
    }

    fn health(&self) -> Result<(), String> {
        self.running.check("the tick loop")
    }

    fn status(&self) -> serde_json::Value {
        let details = self.alg.lock().expect("algorithm lock").details();
        let mut status = serde_json::json!({
            "ticks": {
                "answer_timeout": self.ticks.answer_timeout,
                "coordinator_timeout": self.ticks.coordinator_timeout,
                "failure_timeout": self.ticks.failure_timeout,
                "announce_interval": self.ticks.announce_interval,
            },
            "message_timeout_ms": self.msg_timeout.as_millis() as u64,
        });
        if let (Some(out), serde_json::Value::Object(more)) = (status.as_object_mut(), details) {
            out.extend(more);
        }
        status
    }

    fn resign(&self, _to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(async move { Err(ResignError::NotSupported(self.mode)) })
    }

    /// The algorithms have no handoff: a stopping coordinator simply stops announcing, and the
    /// others notice after `failure_timeout`. The log records that it no longer leads.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        stop.cancel();
        let view = {
            let mut view = self.view.lock().expect("view lock");
            *view = View::without_leader(Role::Follower, view.term);
            *view
        };
        self.events
            .record_view(self.clock.mono_ns(), view, &self.counters);
        Box::pin(async {})
    }
}
