//! The `/peer/raft/*` handlers of [`QuorumNode`]: openraft's append, vote and snapshot RPCs,
//! and electd's own pre-vote and resign notices, each judged against the claim and the
//! follower-lease gate.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, VoteRequest,
};

use super::election::{judge_prevote, Pledge, PreVoteRefusal, PreVoteRequest, PreVoteResponse};
use super::node::{QuorumNode, Resign};
use super::types::TypeConfig;
use crate::error::ApiError;
use crate::role::NodeId;
use crate::transport::{decode_peer, PeerId};

pub(super) async fn append(
    State(q): State<Arc<QuorumNode>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: AppendEntriesRequest<TypeConfig> = decode_peer(&q.stats, &body)?;
    q.stats.received(if req.entries.is_empty() {
        "heartbeat"
    } else {
        "append"
    });
    // In a task of its own: once openraft has the append, the contact is recorded even if
    // this request is dropped (client gone, timeout), or the gate would miss an append that
    // renewed openraft's lease.
    let res = tokio::spawn(async move {
        let leader = req.vote.leader_id().voted_for();
        let commit = req.leader_commit.map(|l| l.index);
        let _admitted = q.gate.admit().await;
        let res = q.raft.append_entries(req).await;
        if let (Ok(r), Some(l)) = (&res, leader) {
            if l == from && !matches!(r, AppendEntriesResponse::HigherVote(_)) {
                q.gate.heard(q.clock.boot_ns(), Some((l, commit)));
                q.campaign.lock().expect("campaign").settled();
                *q.contact.lock().expect("contact") = Some((l, q.clock.mono_ns()));
            }
        }
        res
    })
    .await
    .map_err(internal)?;
    Ok(Json(res).into_response())
}

/// A join error of a handler's task (a panic): 500, the node keeps running.
fn internal(e: tokio::task::JoinError) -> ApiError {
    tracing::error!(error = %e, "peer handler task failed");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the request could not be handled",
    )
}

pub(super) async fn vote(
    State(q): State<Arc<QuorumNode>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: VoteRequest<NodeId> = decode_peer(&q.stats, &body)?;
    q.stats.received("vote");
    // In a task of its own, so that the claim is resumed even if this request is dropped
    // between suspend and resume (test: `a_dropped_vote_request_does_not_suspend_the_claim_for_good`).
    let res = tokio::spawn(async move {
        let term = req.vote.leader_id().get_term();
        let higher = term > q.raft.metrics().borrow().current_term;
        let now = q.clock.boot_ns();
        let f = q.election.follower_lease_ns;
        let inside_promise = {
            let mut lease = q.lease.lock().expect("lease");
            // No vote, for any term, while a promise this node answered can still run: until a
            // follower lease after its latest acknowledged probe, as every follower that
            // acknowledged it refuses, and after its start (README, safety step 4). openraft
            // stamps a leader's own lease only once, when it is elected, and keeps none on a
            // vote it adopted from a higher vote in an answer, whose term it then shares with
            // the candidate.
            let inside_promise = lease.promised_until(f).is_some_and(|until| now < until);
            if inside_promise {
                q.flaws.votes_inside_promise.fetch_add(1, Relaxed);
            }
            let refused = lease.vote_refused_until(f).is_some_and(|until| now < until);
            if refused && !q.flaws.vote_while_leading {
                drop(lease);
                tracing::debug!(term, "vote refused: a promise of this node can still run");
                return Ok(q.refuse_vote());
            }
            if higher {
                // Stop claiming before openraft can hand our vote to a higher term.
                lease.suspend(now);
            }
            inside_promise
        };
        // Under the gate's read side, like an append: the election driver sees a vote this
        // node granted before it campaigns itself, or campaigns first and openraft refuses
        // the request (one vote per term).
        let admitted = q.gate.admit().await;
        let res = q.raft.vote(req).await;
        let granted = matches!(&res, Ok(r) if r.vote_granted);
        if higher {
            // An error may come after openraft saved the grant: fence as if it had.
            let fence = granted || res.is_err();
            q.lease.lock().expect("lease").resume(fence.then_some(term));
            q.wake.notify_one();
        } else if granted {
            q.lease
                .lock()
                .expect("lease")
                .voted(term, q.clock.boot_ns());
            q.wake.notify_one();
        }
        if granted && inside_promise {
            q.flaws.granted_inside_promise.fetch_add(1, Relaxed);
        }
        if granted {
            // A granted vote restarts the follower lease (as in Raft), so that this node does
            // not race the candidate it just voted for.
            q.gate.heard(q.clock.boot_ns(), None);
        }
        drop(admitted);
        res
    })
    .await
    .map_err(internal)?;
    Ok(Json(res).into_response())
}

/// Another member asks whether this node would vote for it in its next term: judged by this
/// node's own follower lease and log, changing nothing durable.
pub(super) async fn prevote(
    State(q): State<Arc<QuorumNode>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: PreVoteRequest = decode_peer(&q.stats, &body)?;
    q.stats.received("prevote");
    let term = q.raft.metrics().borrow().current_term;
    let timing = q.election;
    let (now, contact) = (q.clock.boot_ns(), q.gate.contact().at_ns);
    let verdict = {
        let mut pledge = q.pledge.lock().expect("pledge");
        let verdict = if q.lease.lock().expect("lease").is_closed() {
            Err(PreVoteRefusal::Stopping)
        } else {
            judge_prevote(
                now,
                contact,
                &timing,
                q.store.last_log_id(),
                *pledge,
                from,
                &req,
            )
        };
        if verdict.is_ok() {
            *pledge = Some(Pledge {
                to: from,
                until_ns: now + timing.pledge_ns(),
            });
        }
        verdict
    };
    let lease_left_us = (verdict == Err(PreVoteRefusal::LeaderAlive))
        .then(|| (contact + timing.follower_lease_ns).saturating_sub(now) / 1000);
    Ok(Json(PreVoteResponse {
        granted: verdict.is_ok(),
        term,
        refused: verdict.err().map(|r| r.code().to_string()),
        lease_left_us,
    })
    .into_response())
}

/// A follower hears that its leader resigned: the named successor campaigns first, as soon as
/// the followers' leases allow, everyone else one stagger step later (election.rs).
pub(super) async fn resign(
    State(q): State<Arc<QuorumNode>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: Resign = decode_peer(&q.stats, &body)?;
    q.stats.received("resign");
    let m = q.metrics();
    if m.current_leader == Some(from) && m.current_term == req.term {
        q.campaign
            .lock()
            .expect("campaign")
            .handoff(req.term, req.successor == q.id);
        q.gate.heard(0, None);
        tracing::info!(
            term = req.term,
            successor = req.successor,
            "leader {from} resigned"
        );
    }
    Ok(Json(serde_json::json!({"ok": true})).into_response())
}

pub(super) async fn snapshot(
    State(q): State<Arc<QuorumNode>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: InstallSnapshotRequest<TypeConfig> = decode_peer(&q.stats, &body)?;
    q.stats.received("snapshot");
    let res = tokio::spawn(async move {
        let leader = req.vote.leader_id().voted_for();
        let _admitted = q.gate.admit().await;
        let vote = req.vote;
        let res = q.raft.install_snapshot(req).await;
        // Accepted only when openraft's vote did not outrank the sender's: a stale leader's
        // snapshot is answered `Ok` too, with the higher vote.
        if matches!(&res, Ok(r) if r.vote <= vote) {
            q.gate.heard(q.clock.boot_ns(), leader.map(|l| (l, None)));
        }
        res
    })
    .await
    .map_err(internal)?;
    Ok(Json(res).into_response())
}
