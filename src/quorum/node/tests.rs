//! The quorum node's tests, on real openraft in this process: claims and their records, votes,
//! pre-votes, hellos and storage failures.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use openraft::raft::VoteRequest;

use super::*;
use crate::quorum::driver::{probe, serve, Driver};
use crate::quorum::identity::Recognition;
use crate::quorum::inbox::CoreOwner;
use crate::quorum::protocol::{append, vote, Probe};
use crate::quorum::types::Command;
use crate::role::{Role, View};
use crate::transport::PeerId;
use axum::Extension;
use tokio_util::sync::CancellationToken;

/// A one-member quorum node in this process (it elects itself), and its stop token.
async fn single_node(dir: &std::path::Path) -> (Arc<QuorumNode>, CancellationToken) {
    node_of(dir, 1, Flaws::default()).await
}

/// Node 1 of a cluster of `members` in this process (the others never start), with `flaws`.
async fn node_of(
    dir: &std::path::Path,
    members: u64,
    flaws: Flaws,
) -> (Arc<QuorumNode>, CancellationToken) {
    let (q, stop, _) = node_on(dir, members, flaws, None).await;
    (q, stop)
}

/// The driver's task: its end, and the core it owned.
type Running = tokio::task::JoinHandle<(Result<(), String>, CoreOwner)>;

/// [`node_of`] with its state on `disk` (else in `dir`), and its running loops; its
/// incarnation taken as confirmed (the others never start to record it).
async fn node_on(
    dir: &std::path::Path,
    members: u64,
    flaws: Flaws,
    disk: Option<Arc<dyn crate::quorum::storage::Disk>>,
) -> (Arc<QuorumNode>, CancellationToken, Running) {
    node_started(dir, members, flaws, disk, true).await
}

/// [`node_on`], its incarnation `confirmed` or as new.
async fn node_started(
    dir: &std::path::Path,
    members: u64,
    flaws: Flaws,
    disk: Option<Arc<dyn crate::quorum::storage::Disk>>,
    confirmed: bool,
) -> (Arc<QuorumNode>, CancellationToken, Running) {
    let mut cfg = crate::config::single_member(dir, crate::role::Mode::Quorum);
    // The peers are never reached: no secret to share.
    cfg.insecure = true;
    for id in 2..=members {
        cfg.peers.push(crate::config::Peer {
            id,
            addr: format!("127.0.0.1:{}", 9 + id),
            priority: 0,
        });
    }
    let counters = Arc::new(Counters::default());
    let faults = Arc::new(crate::faults::Faults::new(1));
    let transport = Arc::new(Transport::new(
        &cfg,
        faults,
        counters.clone(),
        crate::clock::system(),
        None,
    ));
    let events = Arc::new(EventLog::open(dir, 1).unwrap());
    let store = match disk {
        Some(disk) => Store::open_on(disk, 1, "t").unwrap(),
        None => Store::open(dir, 1, "t").unwrap(),
    };
    let plumbing = Plumbing {
        transport,
        events,
        counters,
        clock: crate::clock::system(),
    };
    let cfg = ValidConfig::new(cfg).expect("a valid config");
    let (q, core) = QuorumNode::start(&cfg, store, plumbing, 1, flaws)
        .await
        .unwrap();
    if confirmed {
        q.store.confirm_identity().await.unwrap();
    }
    let stop = CancellationToken::new();
    let run = tokio::spawn(Driver::run_owning(q.clone(), core, stop.clone()));
    (q, stop, run)
}

/// `req` through the node's vote handler, as a peer would send it; its answer.
async fn ask_vote(q: &Arc<QuorumNode>, req: &VoteRequest<NodeId>) -> VoteResponse<NodeId> {
    let body = Bytes::from(serde_json::to_vec(req).unwrap());
    let res = vote(State(q.clone()), body).await.unwrap();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    let answer: Result<VoteResponse<NodeId>, serde_json::Value> =
        serde_json::from_slice(&bytes).unwrap();
    answer.expect("a vote response")
}

async fn until_claiming(q: &QuorumNode) -> bool {
    for _ in 0..200 {
        if q.view().view.role == Role::Leader {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A vote request whose handler is dropped between suspending the
/// claim and resuming it (client gone, request timeout) must not leave the claim suspended.
// One thread, so that the handler's first poll is all that runs before the drop. Needs
// the feature `flaws` (on in the workspace's tests: the lab enables it).
#[cfg(feature = "flaws")]
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_vote_request_does_not_suspend_the_claim_for_good() {
    let dir = tempfile::tempdir().unwrap();
    // The flaw lets the request past the refusal inside the node's promise, to the suspend.
    let flaws = Flaws {
        vote_while_leading: true,
        ..Flaws::default()
    };
    let (q, stop) = node_of(dir.path(), 1, flaws).await;
    assert!(
        until_claiming(&q).await,
        "the single node claims within 2 s"
    );
    let term = q.raft_metrics().current_term;
    // A higher-term candidate with an empty log: openraft refuses it (log behind), but
    // only after the claim was suspended.
    let req = VoteRequest::<NodeId>::new(openraft::Vote::new(term + 1, 2), None);
    let body = Bytes::from(serde_json::to_vec(&req).unwrap());
    let call = vote(State(q.clone()), body);
    // Poll the handler once (it suspends the claim and waits for openraft), then drop it.
    use futures_util::FutureExt;
    if let Some(r) = call.now_or_never() {
        panic!("the handler answered at once: {:?}", r.map(|r| r.status()));
    }
    assert!(
        until_claiming(&q).await,
        "the claim came back after the dropped request: {:?}",
        q.view()
    );
    q.shutdown().await;
    stop.cancel();
}

/// A vote request in the term openraft has already moved to (by adopting a higher vote
/// from an answer, which no handler of electd sees) is refused while a promise of this node
/// can still run: the same term is no excuse. Here openraft adopts the candidate's vote
/// through `Raft::vote` directly, as it would from a HigherVote; the same request through
/// the handler must then be refused (it was granted, as openraft's vote equals it, when
/// only higher terms were checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vote_in_an_adopted_term_is_refused_inside_the_promise() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop) = single_node(dir.path()).await;
    assert!(until_claiming(&q).await);
    // openraft grants a vote once the leader has led for a follower lease.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(until_claiming(&q).await, "still claiming");
    let m = q.raft_metrics();
    let req = VoteRequest::<NodeId>::new(
        openraft::Vote::new(m.current_term + 1, 2),
        q.store.last_log_id(),
    );
    let adopted = q.raft.vote(req.clone()).await.unwrap();
    assert!(adopted.vote_granted, "openraft adopts the higher vote");
    let answer = ask_vote(&q, &req).await;
    assert!(
        !answer.vote_granted,
        "a same-term vote was granted inside the promise"
    );
    q.shutdown().await;
    stop.cancel();
}

/// A node refuses every vote for a follower lease after it starts: before a crash it may
/// have answered promises it cannot know of, and openraft keeps no lease for a restored
/// vote that is not committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_votes_for_a_follower_lease_after_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop) = node_of(dir.path(), 3, Flaws::default()).await;
    let req = VoteRequest::<NodeId>::new(openraft::Vote::new(5, 2), q.store.last_log_id());
    let answer = ask_vote(&q, &req).await;
    assert!(!answer.vote_granted, "granted right after the start");
    // After a follower lease, the same request is granted.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = ask_vote(&q, &req).await;
    assert!(answer.vote_granted, "refused after a follower lease");
    q.shutdown().await;
    stop.cancel();
}

/// A new data dir votes for nobody, and grants no pre-vote, until ⌈n/2⌉ other members
/// recorded its incarnation (identity.rs); then it votes like any node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_data_dir_votes_only_once_its_incarnation_is_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop, _) = node_started(dir.path(), 3, Flaws::default(), None, false).await;
    // Past the start's follower lease: only the identity can refuse now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let req = VoteRequest::<NodeId>::new(openraft::Vote::new(5, 2), q.store.last_log_id());
    assert!(
        !ask_vote(&q, &req).await.vote_granted,
        "a new data dir voted"
    );
    let pre = q
        .on_prevote_request(
            2,
            PreVoteRequest {
                term: 5,
                last_log_id: q.store.last_log_id(),
            },
        )
        .await;
    assert_eq!(pre.refused.as_deref(), Some("unconfirmed"), "{pre:?}");
    q.store.confirm_identity().await.unwrap();
    assert!(
        ask_vote(&q, &req).await.vote_granted,
        "refused once confirmed"
    );
    q.shutdown().await;
    stop.cancel();
}

/// A new data dir refuses a leader's probe (`503 unconfirmed`: its acknowledgement would count
/// for a claim, and it has forgotten its votes; docs/safety.md, step 10) and takes an append
/// without the mark as any node does (it catches up); once confirmed it acknowledges probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_data_dir_acknowledges_no_probe_until_it_is_confirmed() {
    use axum::response::IntoResponse;
    use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
    let dir = tempfile::tempdir().unwrap();
    let (q, stop, _) = node_started(dir.path(), 3, Flaws::default(), None, false).await;
    let heartbeat = AppendEntriesRequest::<TypeConfig> {
        vote: openraft::Vote::new_committed(5, 2),
        prev_log_id: None,
        entries: Vec::new(),
        leader_commit: None,
    };
    let marked = Probe {
        append: &heartbeat,
        probe: true,
    };
    let probe = Bytes::from(serde_json::to_vec(&marked).unwrap());
    let plain = Bytes::from(serde_json::to_vec(&heartbeat).unwrap());
    let send = |body: Bytes| {
        let q = q.clone();
        async move {
            let res = match append(State(q), Extension(PeerId(2)), body).await {
                Ok(r) => r,
                Err(e) => e.into_response(),
            };
            let status = res.status();
            let body = axum::body::to_bytes(res.into_body(), 1 << 16)
                .await
                .unwrap();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let (status, body) = send(probe.clone()).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("unconfirmed"), "{body}");
    assert!(
        q.raft_metrics().current_term < 5,
        "the refused probe was taken"
    );
    let (status, body) = send(plain).await;
    assert_eq!(status, 200, "{body}");
    let taken: Result<AppendEntriesResponse<NodeId>, serde_json::Value> =
        serde_json::from_str(&body).unwrap();
    assert_eq!(taken.ok(), Some(AppendEntriesResponse::Success), "{body}");
    q.store.confirm_identity().await.unwrap();
    let (status, body) = send(probe).await;
    assert_eq!(status, 200, "refused once confirmed: {body}");
    q.shutdown().await;
    stop.cancel();
}

/// A member records the first incarnation it hears from a peer, durably, and refuses
/// another one, also after its own restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_records_a_peers_first_incarnation_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop) = node_of(dir.path(), 3, Flaws::default()).await;
    let hello = |incarnation| Hello {
        incarnation,
        membership: None,
    };
    // Node 1 applied nothing yet (no leader): a hello from a log whose membership is
    // entry 5 is one it cannot judge (identity.rs, rule 3): it records nothing.
    let later = Hello {
        incarnation: 6,
        membership: Some(5),
    };
    let a = q.clone().on_hello(2, later).await.unwrap();
    assert!(a.behind && !a.accepted && a.known.is_none(), "{a:?}");
    let a = q.clone().on_hello(2, hello(7)).await.unwrap();
    // The answer names node 1's own incarnation (confirmed by node_of), for node 2 to
    // record in turn (rule 4).
    let mine = q.store.identity().unwrap().incarnation;
    assert_eq!(
        a,
        HelloAnswer {
            accepted: true,
            known: None,
            member: true,
            behind: false,
            incarnation: Some(mine),
        }
    );
    let a = q.clone().on_hello(2, hello(7)).await.unwrap();
    assert!(a.accepted);
    let a = q.clone().on_hello(3, hello(9)).await.unwrap();
    assert!(a.accepted);
    // Node 1 records what an accepting member answers with: its own incarnation.
    let answer = |incarnation| HelloAnswer {
        accepted: true,
        member: true,
        incarnation: Some(incarnation),
        ..HelloAnswer::default()
    };
    q.hellos.record_answer(3, &answer(9)).await;
    q.hellos.record_answer(3, &answer(10)).await;
    assert_eq!(
        q.store.recognise_peer(3, 9).await.unwrap(),
        Recognition::Same
    );
    q.shutdown().await;
    stop.cancel();
    drop(q);
    let store = Store::open(dir.path(), 1, "t").unwrap();
    assert_eq!(
        store.recognise_peer(2, 8).await.unwrap(),
        Recognition::Replaced { was: 7 }
    );
    assert_eq!(store.recognise_peer(3, 9).await.unwrap(), Recognition::Same);
    assert!(store.confirmed(), "the node's own confirmation is kept too");
}

/// A restarted node's events keep their order in time, and its claim is stamped where it
/// began: the view before the first probe (openraft's new leader, not yet claiming) is
/// written before that probe goes out, never while it is out (then the claim, stamped at
/// the probe's send instant, came before the event written ahead of it: `t_mono_ns` went
/// back with `seq`, and the chaos checkers saw the node end as a candidate: S2 seeds 2
/// and 8). Each restart re-elects the one member, from a log that already has entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_stamps_its_claim_at_its_start_after_every_earlier_event() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..8 {
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await, "run {run}: claims");
        // The claim is recorded just after it is granted: until then, at most 2 s.
        for _ in 0..200 {
            if q.events.last().is_some_and(|v| v.role == Role::Leader) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let term = q.raft_metrics().current_term;
        let since = {
            let now = q.clock.boot_ns();
            let core = q.core.read();
            core.lease().current(term, now).expect("a claim").since_ns
        };
        let events = q.events.since(0, usize::MAX).0;
        for w in events.windows(2) {
            assert!(
                w[1].t_mono_ns >= w[0].t_mono_ns,
                "run {run}: time goes back: {:?} then {:?}",
                w[0],
                w[1]
            );
        }
        let n = events.len();
        assert_eq!(
            events[n - 1].view.role,
            Role::Leader,
            "run {run}: {events:?}"
        );
        // In a new log the claim may be the first event.
        let prev = n.checked_sub(2).map_or(&events[0], |i| &events[i]);
        // Raised to an earlier claim's end, the start loses nothing (events.rs, `record`).
        let after_a_claim = prev.view.role != Role::Leader
            && n.checked_sub(3).is_some_and(|i| {
                events[i].view.role == Role::Leader && events[i].view.term == term
            });
        assert!(
            after_a_claim || n == 1 || prev.t_mono_ns <= q.clock.mono_of_boot(since),
            "run {run}: {prev:?} was written while the probe that started the claim \
             (sent at mono {}) was out: {events:?}",
            q.clock.mono_of_boot(since)
        );
        q.shutdown().await;
        stop.cancel();
    }
}

/// The driver's probe (driver/probe.rs) records the view as it stands before the probe goes
/// out: an event recorded while the probe is out (openraft's metrics changed) can then not
/// come after the claim the probe starts. Here the claim has lapsed (the node's view is
/// "candidate", its log's last event "follower") and the metrics receiver has changes
/// unseen, so the step records while its probe is out. Without the record first,
/// "candidate" was stamped after the probe's send instant and the claim's start was raised
/// past it (what a restarted node did: chaos S2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_step_records_the_view_before_its_probe_goes_out() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop, run) = node_on(dir.path(), 1, Flaws::default(), None).await;
    assert!(until_claiming(&q).await);
    stop.cancel();
    // The test steps the core from here on, as the driver would.
    let (_, mut core) = run.await.unwrap();
    let term = q.raft_metrics().current_term;
    for round in 0..10 {
        // The claim ended, and the event log last told of another view (a restarted
        // node's log ends in its earlier run), so that the probe step has a change to record.
        let now = q.clock.boot_ns();
        core.modify(|c| c.lease_mut().revoke(now));
        q.events
            .record(
                q.clock.mono_ns(),
                View::without_leader(Role::Follower, term),
            )
            .unwrap();
        // A receiver with a change unseen (a log entry written and applied since). openraft
        // answers a write before its metrics show it applied (docs/design/openraft.md, "A
        // write is answered before the metrics show it"), so the test waits, with a bound,
        // until they do.
        let mut metrics = q.raft.metrics();
        metrics.borrow_and_update();
        let written = q
            .raft
            .client_write(Command::Incarnations(BTreeMap::new()))
            .await
            .unwrap();
        q.raft
            .wait(Some(Duration::from_secs(5)))
            .applied_index_at_least(Some(written.log_id.index), "the write applied")
            .await
            .unwrap();
        assert!(metrics.has_changed().unwrap());
        let probe = probe::probe_recording(&q, term, &mut metrics);
        assert!(serve(&q, &mut core, probe).await);
        q.record_view();
        let since = {
            let now = q.clock.boot_ns();
            q.core.read().lease().current(term, now).unwrap().since_ns
        };
        let events = q.events.since(0, usize::MAX).0;
        let [.., prev, last] = &events[..] else {
            panic!("round {round}: {events:?}")
        };
        assert_eq!(last.view.role, Role::Leader, "round {round}: {events:?}");
        assert_ne!(prev.view.role, Role::Leader, "round {round}: {events:?}");
        assert!(
            prev.t_mono_ns <= q.clock.mono_of_boot(since),
            "round {round}: {prev:?} was written after the probe went out (mono {}), \
             the claim's start raised to it: {last:?}",
            q.clock.mono_of_boot(since)
        );
    }
    serve(&q, &mut core, q.shutdown()).await;
}

/// Once stopping, a node never claims again in its process, even if a
/// probe in flight at the stop is acknowledged after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_node_never_claims_again() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop) = single_node(dir.path()).await;
    assert!(until_claiming(&q).await);
    let term = q.raft_metrics().current_term;
    // The core told that the node stops (what `shutdown` asks first), its claim closed.
    q.ask(q.stopping(&q.raft_metrics())).await;
    // The driver keeps running (its stop token is not cancelled) and keeps getting
    // acknowledgements from its one-member quorum: none of them may claim.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_ne!(q.view().view.role, Role::Leader);
        assert!(
            !probe::probe(&q, term).await,
            "a probe after the close claims nothing"
        );
    }
    q.shutdown().await;
    stop.cancel();
}

/// A disk whose writes fail from a moment the test picks.
#[derive(Default)]
struct FailingDisk {
    inner: crate::quorum::storage::MemDisk,
    failing: std::sync::atomic::AtomicBool,
}

impl crate::quorum::storage::Disk for FailingDisk {
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::other("injected: the disk refuses writes"));
        }
        self.inner.write(bytes)
    }
    fn read(
        &self,
    ) -> Result<Option<(std::path::PathBuf, Vec<u8>)>, crate::quorum::storage::StoreError> {
        self.inner.read()
    }
    fn blocks(&self) -> bool {
        false
    }
}

/// When the vote and log can no longer be written, openraft stops and the engine says so
/// (`/v1/health` 503; the binary then exits), instead of answering healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_state_write_makes_the_engine_unhealthy() {
    use crate::engine::Engine;
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(FailingDisk::default());
    // Node 1 of three, alone: it cannot win, but each election it starts writes a vote.
    let (q, stop, run) = node_on(dir.path(), 3, Flaws::default(), Some(disk.clone())).await;
    let _ = q.raft.trigger().elect().await;
    assert_eq!(q.health(), Ok(()));
    disk.failing
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = q.raft.trigger().elect().await;
    let mut health = Ok(());
    for _ in 0..200 {
        health = q.health();
        if health.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let why = health.expect_err("healthy with a disk that refuses every write");
    assert!(why.contains("openraft stopped"), "{why}");
    let ended = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .map(|r| r.map(|(ended, _)| ended));
    assert!(
        matches!(ended, Ok(Ok(Err(_)))),
        "the engine's run ends with an error (the binary exits): {ended:?}"
    );
    stop.cancel();
}

/// Issue 30: a `/peer/raft/remove` withheld on the path and delivered after the node was
/// removed and added back would have removed it again. A removal now names the membership
/// the sender asked in, and the receiver refuses any other one (and one that names none).
#[tokio::test]
async fn a_removal_from_another_membership_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (q, stop) = single_node(dir.path()).await;
    assert!(until_claiming(&q).await, "node 1 leads");
    let now = q.members.membership_index();
    for stale in [None, now.map(|i| i + 7)] {
        let e = q
            .clone()
            .on_remove(
                1,
                RemoveRequest {
                    id: 1,
                    membership: stale,
                },
            )
            .await
            .expect_err("refused");
        assert!(e.contains("ask again"), "{e}");
    }
    assert_eq!(q.members.membership_index(), now, "nothing removed");
    stop.cancel();
}
