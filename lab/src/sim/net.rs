//! The simulated network: every member's router (the node's whole HTTP app, its `/peer/`
//! routes behind the same guard and fault layer as on the network) in one map, and an
//! in-memory [`Wire`] per member that carries its peer requests there after a seeded latency.
//!
//! A crashed member has no router: requests to it fail at once, as to a closed port. Each
//! start of a member is a new incarnation; whatever an earlier incarnation still sends, or
//! whatever answer reaches it, is lost, as a dead process's would be.
//!
//! Beyond what a member's fault set can say, the network itself can lose or hold one kind of
//! message on one link ([`Rule`]): the appends from a leader to one follower while that
//! follower's own requests and the answers to them pass, the answers of another follower, the
//! vote requests of a candidate. This is what a fault set cannot express, and what the
//! simulator's squeeze step needs (`schedule::Step::Squeeze`).
//!
//! A paused member (SIGSTOP) reads and writes nothing: what it sends, what is sent to it and
//! the answers to its requests wait, as in socket buffers, until it resumes; its senders'
//! deadlines run meanwhile. Its own timers keep running (one runtime holds every member):
//! what a real stop adds, every overdue timer firing at once on resume, is what the chaos
//! scenario S11 does to real processes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use axum::Router;
use electd::quorum::{HelloAnswer, PATH_HELLO, PATH_SNAPSHOT, PATH_VOTE};
use electd::{Wire, WireError};
use electd_client::NodeId;
use futures_util::future::BoxFuture;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Notify;
use tower::ServiceExt;

/// A leader's resignation notice (protocol.rs, `PATH_RESIGN`, which the crate does not export).
const PATH_RESIGN: &str = "/peer/raft/resign";

/// One-way latency of a message, drawn uniformly in this range (µs).
const LATENCY_US: (u64, u64) = (100, 1_500);

struct Member {
    router: Router,
    incarnation: u64,
}

/// The members' routers and the network's random source.
pub struct Net {
    state: Mutex<State>,
    /// Told whenever a member resumes.
    resumed: Notify,
}

/// Which part of an exchange a [`Rule`] acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leg {
    /// The request, from its sender to its receiver.
    Request,
    /// The answer, from the request's receiver back to its sender.
    Answer,
}

/// What a [`Rule`] does to the messages it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Lost: the exchange never completes (the sender waits for its own deadline).
    Drop,
    /// Held this long before it goes on.
    Delay(Duration),
}

/// One kind of message on one link: `leg`s travelling from `from` to `to` of exchanges whose
/// path starts with `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub from: NodeId,
    pub to: NodeId,
    pub path: &'static str,
    pub leg: Leg,
    pub effect: Effect,
}

struct State {
    members: BTreeMap<NodeId, Member>,
    /// What the network does to some kinds of messages, beyond the members' fault sets.
    rules: Vec<Rule>,
    /// Incarnations ever started, per member (a crashed member keeps its count).
    started: BTreeMap<NodeId, u64>,
    /// Members stopped (SIGSTOP) now.
    paused: BTreeSet<NodeId>,
    rng: StdRng,
    /// Snapshots each member accepted (`/peer/raft/snapshot` answered 200).
    snapshots: BTreeMap<NodeId, u64>,
    /// Every resignation notice delivered (`/peer/raft/resign`).
    handovers: Vec<Handover>,
    /// Every vote granted, as the candidate read it: when, by which incarnation of which
    /// member (the network's count of its starts), to whom.
    grants: Vec<(tokio::time::Instant, NodeId, u64, NodeId)>,
    /// For each incarnation of each member (the network's count of its starts), the members
    /// that answered a hello of its that they recorded it (`accepted`).
    accepted: BTreeMap<(NodeId, u64), BTreeSet<NodeId>>,
}

/// A leader's resignation notice as a follower received it: who resigned, in which term, and
/// whom it named to campaign first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handover {
    pub at: tokio::time::Instant,
    pub from: NodeId,
    pub to: NodeId,
    pub term: u64,
    pub successor: NodeId,
}

impl Net {
    pub fn new(seed: u64) -> Arc<Net> {
        Arc::new(Net {
            state: Mutex::new(State {
                members: BTreeMap::new(),
                rules: Vec::new(),
                started: BTreeMap::new(),
                paused: BTreeSet::new(),
                rng: StdRng::seed_from_u64(seed),
                snapshots: BTreeMap::new(),
                handovers: Vec::new(),
                grants: Vec::new(),
                accepted: BTreeMap::new(),
            }),
            resumed: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("net")
    }

    /// The next incarnation of member `id`, and the wire it sends through.
    pub fn incarnate(self: &Arc<Self>, id: NodeId) -> (u64, Arc<dyn Wire>) {
        let mut st = self.state();
        let n = st.started.entry(id).or_default();
        *n += 1;
        let wire = MemWire {
            from: id,
            incarnation: *n,
            net: self.clone(),
        };
        (*n, Arc::new(wire))
    }

    /// Member `id` (incarnation `incarnation`) is up and answers on `router`.
    pub fn attach(&self, id: NodeId, incarnation: u64, router: Router) {
        let m = Member {
            router,
            incarnation,
        };
        self.state().members.insert(id, m);
    }

    /// Member `id` crashed: nothing reaches it, nothing it sent arrives any more.
    pub fn detach(&self, id: NodeId) {
        self.state().members.remove(&id);
        self.resume(id);
    }

    /// Member `id` stops (SIGSTOP): it reads and sends nothing until [`Net::resume`].
    pub fn pause(&self, id: NodeId) {
        self.state().paused.insert(id);
    }

    /// Member `id` runs again (SIGCONT): what waited for it moves on.
    pub fn resume(&self, id: NodeId) {
        if self.state().paused.remove(&id) {
            self.resumed.notify_waiters();
        }
    }

    /// Until member `id` is not paused.
    async fn awake(&self, id: NodeId) {
        loop {
            // Registered before the check, so that no resume is missed.
            let resumed = self.resumed.notified();
            if !self.state().paused.contains(&id) {
                return;
            }
            resumed.await;
        }
    }

    /// Every member gone, at the end of a simulation. The routers hold the nodes and the nodes
    /// hold their wires, which hold the network: this breaks the circle, so that the nodes,
    /// their files and their tasks are freed with the runtime.
    pub fn clear(&self) {
        self.state().members.clear();
    }

    /// How many snapshots member `id` accepted so far.
    pub fn snapshots(&self, id: NodeId) -> u64 {
        self.state().snapshots.get(&id).copied().unwrap_or(0)
    }

    /// The resignation notices delivered so far, in order.
    pub fn handovers(&self) -> Vec<Handover> {
        self.state().handovers.clone()
    }

    /// Notes what the simulation counts of a request `from` → `to` at `path` that `to`
    /// answered with `status`.
    fn observe(&self, from: NodeId, to: NodeId, path: &str, body: &[u8], status: u16) {
        if status != 200 {
            return;
        }
        if path.starts_with(PATH_SNAPSHOT) {
            *self.state().snapshots.entry(to).or_default() += 1;
        } else if path.starts_with(PATH_RESIGN) {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
                return;
            };
            if let (Some(term), Some(successor)) = (v["term"].as_u64(), v["successor"].as_u64()) {
                self.state().handovers.push(Handover {
                    at: tokio::time::Instant::now(),
                    from,
                    to,
                    term,
                    successor,
                });
            }
        }
    }

    /// Notes what an answer that reached `from` (its incarnation of the network's count) tells:
    /// a vote `to` granted it, or that `to` recorded the incarnation its hello named.
    fn observe_answer(&self, from: (NodeId, u64), to: NodeId, path: &str, answer: &[u8]) {
        let mut st = self.state();
        if path.starts_with(PATH_VOTE) {
            let granted = serde_json::from_slice::<serde_json::Value>(answer)
                .is_ok_and(|v| v["Ok"]["vote_granted"] == true);
            let voter = st.members.get(&to).map(|m| m.incarnation);
            if let (true, Some(voter)) = (granted, voter) {
                st.grants
                    .push((tokio::time::Instant::now(), to, voter, from.0));
            }
        } else if path.starts_with(PATH_HELLO)
            && serde_json::from_slice::<HelloAnswer>(answer).is_ok_and(|a| a.accepted)
        {
            st.accepted.entry(from).or_default().insert(to);
        }
    }

    /// The members that answered a hello of incarnation `incarnation` of member `id` that they
    /// recorded it.
    pub fn recorded_by(&self, id: NodeId, incarnation: u64) -> BTreeSet<NodeId> {
        let st = self.state();
        st.accepted
            .get(&(id, incarnation))
            .cloned()
            .unwrap_or_default()
    }

    /// The candidates incarnation `incarnation` of member `id` granted a vote to, as they
    /// read its answers.
    pub fn votes_granted(&self, id: NodeId, incarnation: u64) -> Vec<NodeId> {
        (self.state().grants.iter())
            .filter(|g| (g.1, g.2) == (id, incarnation))
            .map(|g| g.3)
            .collect()
    }

    /// The network's count of member `id`'s starts: the incarnation running, if up.
    pub fn incarnation(&self, id: NodeId) -> Option<u64> {
        self.state().members.get(&id).map(|m| m.incarnation)
    }

    /// Replaces the network's rules.
    pub fn set_rules(&self, rules: Vec<Rule>) {
        self.state().rules = rules;
    }

    /// The effect on a `leg` travelling `from` → `to` of an exchange at `path`, if a rule
    /// matches (the first one).
    fn effect(&self, from: NodeId, to: NodeId, path: &str, leg: Leg) -> Option<Effect> {
        self.state()
            .rules
            .iter()
            .find(|r| r.from == from && r.to == to && r.leg == leg && path.starts_with(r.path))
            .map(|r| r.effect)
    }

    /// Applies the rules to one leg: waits out a delay; never returns for a lost message.
    async fn pass(&self, from: NodeId, to: NodeId, path: &str, leg: Leg) {
        match self.effect(from, to, path, leg) {
            Some(Effect::Drop) => std::future::pending().await,
            Some(Effect::Delay(d)) => tokio::time::sleep(d).await,
            None => {}
        }
    }

    fn latency(&self) -> Duration {
        let us = self.state().rng.gen_range(LATENCY_US.0..=LATENCY_US.1);
        Duration::from_micros(us)
    }

    /// Whether `incarnation` of member `id` is the one running.
    fn current(&self, id: NodeId, incarnation: u64) -> bool {
        self.state()
            .members
            .get(&id)
            .is_some_and(|m| m.incarnation == incarnation)
    }

    fn router(&self, id: NodeId) -> Option<Router> {
        self.state().members.get(&id).map(|m| m.router.clone())
    }

    /// A request of the simulation itself (admin, `/v1/leader`) to member `id`, at once; none
    /// to a paused member (its answer would come after it resumes, judged then).
    pub async fn ask(&self, id: NodeId, req: Request<Body>) -> Option<(u16, Bytes)> {
        if self.state().paused.contains(&id) {
            return None;
        }
        let router = self.router(id)?;
        let res = router.oneshot(req).await.ok()?;
        let status = res.status().as_u16();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .ok()?;
        Some((status, bytes))
    }
}

/// The wire of one incarnation of one member.
struct MemWire {
    from: NodeId,
    incarnation: u64,
    net: Arc<Net>,
}

impl MemWire {
    async fn carry(&self, to: NodeId, req: Request<Bytes>) -> Result<Response<Bytes>, WireError> {
        // A paused sender writes nothing yet.
        self.net.awake(self.from).await;
        tokio::time::sleep(self.net.latency()).await;
        let path = req.uri().path().to_string();
        self.net.pass(self.from, to, &path, Leg::Request).await;
        // A paused receiver reads nothing yet.
        self.net.awake(to).await;
        if !self.net.current(self.from, self.incarnation) {
            // The sender died while its request was on the way.
            return std::future::pending().await;
        }
        let Some(router) = self.net.router(to) else {
            return Err(WireError::Unreachable(format!("node {to} is down")));
        };
        let sent = req.body().clone();
        let res = router
            .oneshot(req.map(Body::from))
            .await
            .expect("a router never fails");
        self.net
            .observe(self.from, to, &path, &sent, res.status().as_u16());
        let (parts, body) = res.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .map_err(|e| WireError::Unreachable(e.to_string()))?;
        tokio::time::sleep(self.net.latency()).await;
        self.net.pass(to, self.from, &path, Leg::Answer).await;
        // A paused sender reads its answer when it resumes.
        self.net.awake(self.from).await;
        if !self.net.current(self.from, self.incarnation) {
            // The answer reaches a process that is gone.
            return std::future::pending().await;
        }
        if parts.status == 200 {
            self.net
                .observe_answer((self.from, self.incarnation), to, &path, &bytes);
        }
        Ok(Response::from_parts(parts, bytes))
    }
}

impl Wire for MemWire {
    fn send(
        &self,
        to: NodeId,
        req: Request<Bytes>,
        _timeout: Duration,
    ) -> BoxFuture<'_, Result<Response<Bytes>, WireError>> {
        // The transport bounds the whole exchange by its deadline.
        Box::pin(self.carry(to, req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use tokio::time::Instant;

    fn echo() -> Router {
        Router::new().route("/peer/x", post(|| async { "ok" }))
    }

    fn req() -> Request<Bytes> {
        Request::post("/peer/x")
            .body(Bytes::new())
            .expect("a request")
    }

    /// A rule loses or holds one kind of message on one link, one way, and nothing else.
    #[tokio::test(start_paused = true)]
    async fn a_rule_acts_on_one_kind_of_message_on_one_link() {
        let net = Net::new(1);
        let (i1, w1) = net.incarnate(1);
        let (i2, w2) = net.incarnate(2);
        net.attach(1, i1, echo());
        net.attach(2, i2, echo());
        let hold = Duration::from_millis(300);
        net.set_rules(vec![
            Rule {
                from: 2,
                to: 1,
                path: "/peer/x",
                leg: Leg::Answer,
                effect: Effect::Drop,
            },
            Rule {
                from: 1,
                to: 2,
                path: "/peer/x",
                leg: Leg::Request,
                effect: Effect::Delay(Duration::from_millis(100)),
            },
        ]);
        // 1's request to 2 is held 100 ms, then 2's answer is lost.
        let lost = tokio::time::timeout(hold, w1.send(2, req(), hold)).await;
        assert!(lost.is_err(), "an answer lost by a rule arrived");
        // 2's request to 1 and 1's answer pass.
        let started = Instant::now();
        w2.send(1, req(), hold).await.expect("the other way works");
        assert!(started.elapsed() < Duration::from_millis(10));
        net.set_rules(Vec::new());
        let started = Instant::now();
        w1.send(2, req(), hold).await.expect("no rule, no loss");
        assert!(started.elapsed() < Duration::from_millis(10));
    }

    /// A paused member reads, writes and answers nothing until it resumes; then the held
    /// messages move on.
    #[tokio::test(start_paused = true)]
    async fn a_paused_member_holds_its_traffic_until_it_resumes() {
        let net = Net::new(1);
        let (i1, w1) = net.incarnate(1);
        let (i2, w2) = net.incarnate(2);
        net.attach(1, i1, echo());
        net.attach(2, i2, echo());
        let hold = Duration::from_secs(2);
        net.pause(2);
        assert!(net
            .ask(2, Request::get("/").body(Body::empty()).unwrap())
            .await
            .is_none());
        let started = Instant::now();
        let resume = {
            let net = net.clone();
            async move {
                tokio::time::sleep(hold).await;
                net.resume(2);
            }
        };
        // Each exchange notes when it completed.
        let timed = |w: Arc<dyn Wire>, to| async move {
            let res = w.send(to, req(), hold).await;
            (res, started.elapsed())
        };
        let ((a, ta), (b, tb), ()) = tokio::join!(timed(w1.clone(), 2), timed(w2, 1), resume);
        assert_eq!(a.expect("delivered after the resume").status(), 200);
        assert_eq!(b.expect("sent after the resume").status(), 200);
        assert!(ta >= hold, "a paused member answered after {ta:?}");
        assert!(tb >= hold, "a paused member sent after {tb:?}");
        // Running, the same exchange takes only the latencies.
        let started = Instant::now();
        w1.send(2, req(), hold).await.expect("delivered");
        assert!(started.elapsed() < Duration::from_millis(10));
    }
}
