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

use super::core::{Algorithm, MsgKind, Outbox, Ticks, MAX_EPOCH};
use super::epoch_file::{EpochFile, EpochNames};
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
    /// The highest epoch in stable storage, raised before a message names a higher one, and
    /// which epochs above it messages may name (epoch_file.rs, [`EpochNames`]).
    epochs: Mutex<(EpochFile, EpochNames)>,
    /// The members: only what they name counts as heard.
    members: Vec<NodeId>,
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
    /// Creates the state machine from the epoch kept in the data dir, starts it (it calls an
    /// election) and the tick loop. An epoch file that cannot be read stops the start, naming
    /// it.
    pub fn start(
        cfg: &Config,
        plumbing: Plumbing,
        stop: CancellationToken,
    ) -> Result<Arc<Self>, String> {
        let epochs = EpochFile::open(&cfg.data_dir)?;
        let Plumbing {
            transport,
            events,
            counters,
            clock,
        } = plumbing;
        let t = cfg.timing;
        let ticks = Ticks::from_timing(t.heartbeat_ms, t.follower_lease_ms);
        let (running, guard) = Running::start();
        let mut alg = A::new(cfg.id, cfg.member_ids(), ticks);
        alg.restore_epoch(epochs.stored());
        let node = Arc::new(LegacyNode {
            running,
            alg: Mutex::new(alg),
            epochs: Mutex::new((epochs, EpochNames::default())),
            members: cfg.member_ids(),
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
        Ok(node)
    }

    /// Feeds one input to the algorithm, then carries out its outputs. The one place legacy
    /// modes record role changes: "became leader" is stamped before the view changes, anything
    /// else after, so claim intervals in the log err wide.
    fn apply(self: &Arc<Self>, input: impl FnOnce(&mut A)) {
        self.apply_heard(None, input)
    }

    /// [`LegacyNode::apply`] of a message from `heard`'s member naming `heard`'s epoch: noted
    /// as heard (when the sender is a member) under the algorithm's lock, before the algorithm
    /// steps, so that what the algorithm names next is judged in the order things happened.
    fn apply_heard(self: &Arc<Self>, heard: Option<(NodeId, u64)>, input: impl FnOnce(&mut A)) {
        let before = self.clock.mono_ns();
        let out = {
            let mut alg = self.alg.lock().expect("algorithm lock");
            if let Some((_, epoch)) = heard.filter(|(from, _)| self.members.contains(from)) {
                let (file, names) = &mut *self.epochs.lock().expect("epoch file");
                names.heard(epoch, file.stored());
            }
            input(&mut alg);
            let out = alg.take_outbox();
            self.store_epoch(&*alg, &out);
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
        // What a message may name (epoch_file.rs, `EpochNames`): an epoch stored, or one a
        // member made and named first. An epoch this node made and could not store (a full
        // disk) is named by no message, or after a restart the node could make that number
        // again for another group (issue 48, item 5). To the algorithm such a message is one
        // lost on the way; the node's health says why until the write succeeds.
        let (withheld, sent): (Vec<_>, Vec<_>) = {
            let (file, names) = &*self.epochs.lock().expect("epoch file");
            (out.msgs.into_iter()).partition(|(_, m)| !names.may_name(m.epoch(), file.stored()))
        };
        for (to, msg) in withheld {
            self.withhold(to, msg);
        }
        for (to, msg) in sent {
            self.send(to, msg);
        }
    }

    /// Stable storage before any message names the new epoch (epoch_file.rs): the highest the
    /// algorithm has seen, and any of `out`'s messages names above that (an invitation names
    /// the group it is forming before its coordinator adopts it); then what was named is noted
    /// ([`EpochNames::named`]: those above the stored number no member named are this node's).
    fn store_epoch(&self, alg: &A, out: &Outbox<A::Msg>) {
        let named = || out.msgs.iter().map(|(_, m)| m.epoch()).chain([alg.epoch()]);
        let epoch = named().max().unwrap_or_default();
        let (file, names) = &mut *self.epochs.lock().expect("epoch file");
        let failing = file.health().is_err();
        let raised = file.raise(epoch);
        // Logged when writes start and stop failing, not at every retry (every tick).
        match (&raised, failing) {
            (Err(e), false) => tracing::error!(
                error = %e,
                epoch,
                stored = file.stored(),
                "cannot store the epoch: messages naming an epoch this node made above the \
                 stored one are withheld until a write succeeds"
            ),
            (Ok(()), true) if file.health().is_ok() => {
                tracing::info!(stored = file.stored(), "the epoch is stored again")
            }
            _ => {}
        }
        names.named(named(), file.stored());
    }

    /// A message not sent: the algorithm hears of it as of a delivery that failed, after the
    /// deadline a sent one would have had.
    fn withhold(self: &Arc<Self>, to: NodeId, msg: A::Msg) {
        let node = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(node.msg_timeout).await;
            node.apply(|a| a.delivery_failed(to, msg));
        });
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
    if msg.epoch() > MAX_EPOCH {
        node.counters.rejected("bad_epoch");
        return Err(ApiError::bad_request(
            "bad_epoch",
            format!("epoch {} is above {MAX_EPOCH}", msg.epoch()),
        ));
    }
    node.counters.received(msg.kind());
    node.apply_heard(Some((from, msg.epoch())), |a| a.step(from, msg));
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
        self.running.check("the tick loop")?;
        self.epochs.lock().expect("epoch file").0.health()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::invitation::Group;
    use crate::legacy::{Invitation, InvitationMsg};

    /// A single-member invitation node on `dir`.
    fn node_on(dir: &std::path::Path) -> (Arc<LegacyNode<Invitation>>, CancellationToken) {
        let cfg = crate::config::single_member(dir, Mode::Invitation);
        let counters = Arc::new(Counters::default());
        let transport = Arc::new(Transport::new(
            &cfg,
            Arc::new(crate::faults::Faults::new(1)),
            counters.clone(),
            crate::clock::system(),
            None,
        ));
        let plumbing = Plumbing {
            transport,
            events: Arc::new(EventLog::open(dir, 1).unwrap()),
            counters,
            clock: crate::clock::system(),
        };
        let stop = CancellationToken::new();
        let node = LegacyNode::<Invitation>::start(&cfg, plumbing, stop.clone()).unwrap();
        (node, stop)
    }

    /// An invitation node on `dir` whose epoch file cannot be written (its temp file's name
    /// taken by a directory, as a full disk would fail the write), with a member 2 that never
    /// answers; after ten beats, with the epoch of its own group.
    async fn unstorable_node(
        dir: &std::path::Path,
    ) -> (
        Arc<LegacyNode<Invitation>>,
        Arc<Counters>,
        CancellationToken,
        u64,
    ) {
        std::fs::create_dir(dir.join("legacy-epoch.tmp")).unwrap();
        let mut cfg = crate::config::single_member(dir, Mode::Invitation);
        cfg.peers.push(crate::config::Peer {
            id: 2,
            addr: "127.0.0.1:9".into(),
            priority: 0,
        });
        let counters = Arc::new(Counters::default());
        let transport = Arc::new(Transport::new(
            &cfg,
            Arc::new(crate::faults::Faults::new(1)),
            counters.clone(),
            crate::clock::system(),
            None,
        ));
        let plumbing = Plumbing {
            transport,
            events: Arc::new(EventLog::open(dir, 1).unwrap()),
            counters: counters.clone(),
            clock: crate::clock::system(),
        };
        let stop = CancellationToken::new();
        let node = LegacyNode::<Invitation>::start(&cfg, plumbing, stop.clone()).unwrap();
        // Ten beats: the node invites and checks on node 2 all along.
        tokio::time::sleep(Duration::from_millis(10 * cfg.timing.heartbeat_ms)).await;
        let epoch = node.alg.lock().unwrap().epoch();
        assert!(epoch >= 1, "a group of its own");
        assert_eq!(node.epochs.lock().unwrap().0.stored(), 0, "the write fails");
        (node, counters, stop, epoch)
    }

    /// Node 2 invites `node` to its group `number`; the invitation is taken.
    async fn invited_by_2(node: &Arc<LegacyNode<Invitation>>, number: u64) {
        let invitation = serde_json::to_vec(&InvitationMsg::Invitation {
            group: Group {
                number,
                coordinator: 2,
            },
        })
        .unwrap();
        let Json(answer) =
            receive::<Invitation>(State(node.clone()), Extension(PeerId(2)), invitation.into())
                .await
                .expect("a member's invitation is taken");
        assert_eq!(answer["ok"], true);
    }

    /// Issue 48, item 5: an epoch that could not be stored is named by no message that leaves
    /// the node, and the node says why. Before, the failure was logged and the messages sent
    /// anyway: after a restart the node could make that group number again.
    #[tokio::test]
    async fn no_message_names_an_epoch_that_was_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let (node, counters, stop, epoch) = unstorable_node(dir.path()).await;
        let sent = counters.snapshot().total_sent();
        assert_eq!(
            sent, 0,
            "messages naming group {epoch} (not stored) left the node"
        );
        let why = node
            .health()
            .expect_err("unhealthy while the epoch is not stored");
        assert!(
            why.contains("legacy-epoch") && why.contains("not stored"),
            "{why}"
        );
        stop.cancel();
    }

    /// A group another member made (and stored) may be named: node 2 invites node 1 to a
    /// group above any node 1 could store, and node 1's Accept leaves. (Before the rule knew
    /// this, a merge's own invitations, named before their coordinator adopts the number, were
    /// withheld too: invitation groups never merged, issue 48's CI.)
    #[tokio::test]
    async fn a_node_that_cannot_store_still_names_the_epochs_it_heard() {
        let dir = tempfile::tempdir().unwrap();
        let (node, counters, stop, epoch) = unstorable_node(dir.path()).await;
        invited_by_2(&node, epoch + 5).await;
        let accepts = || counters.snapshot().messages_sent.get("accept").copied();
        for _ in 0..100 {
            if accepts().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(accepts(), Some(1), "the Accept left (within 1 s)");
        assert_eq!(
            node.epochs.lock().unwrap().0.stored(),
            0,
            "still not stored"
        );
        stop.cancel();
    }

    /// A member naming this node's own unstored number back does not free it: the node
    /// made that number and could make it again after a restart (issue 48, item 5's review:
    /// the rule before compared numbers only, and once node 2 named group N, node 1's Accept
    /// and every message of its own group N left, N still not stored).
    #[tokio::test]
    async fn a_number_made_here_stays_unnamed_when_a_member_names_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let (node, counters, stop, epoch) = unstorable_node(dir.path()).await;
        invited_by_2(&node, epoch).await;
        let beats = Duration::from_millis(10 * 30);
        tokio::time::sleep(beats).await;
        assert_eq!(
            counters.snapshot().total_sent(),
            0,
            "a message naming {epoch}, made here and not stored, left: {:?}",
            counters.snapshot().messages_sent
        );
        stop.cancel();
    }

    /// Issue 33, item 2: one message naming group `u64::MAX` made every node adopt it, and
    /// every group it made after was `u64::MAX` again (saturated). Now it is refused at the door
    /// (400 `bad_epoch`) and the node's counter is untouched; the counter it keeps survives a
    /// restart, so the restarted node's group is numbered above the one it had.
    #[tokio::test]
    async fn a_group_number_beyond_the_bound_is_refused_and_the_counter_survives() {
        let dir = tempfile::tempdir().unwrap();
        let (node, stop) = node_on(dir.path());
        let before = node.alg.lock().unwrap().epoch();
        assert!(before >= 1, "a group of its own at start");
        let forged = InvitationMsg::AreYouCoordinator {
            group: crate::legacy::invitation::Group {
                number: u64::MAX,
                coordinator: 1,
            },
        };
        let body = Bytes::from(serde_json::to_vec(&forged).unwrap());
        let res = receive(State(node.clone()), Extension(PeerId(1)), body).await;
        let err = res.expect_err("refused");
        assert_eq!(
            (err.status, err.code),
            (axum::http::StatusCode::BAD_REQUEST, "bad_epoch")
        );
        assert_eq!(node.alg.lock().unwrap().epoch(), before, "not adopted");
        stop.cancel();
        drop(node);
        let (again, stop) = node_on(dir.path());
        let after = again.alg.lock().unwrap().epoch();
        assert!(after > before, "restarted at group {after}, had {before}");
        stop.cancel();
    }
}
