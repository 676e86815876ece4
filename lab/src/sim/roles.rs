//! Named roles in the quorum simulator ([`Spec::roles`](super::quorum::Spec::roles);
//! docs/design/roles.md). Once the cluster has formed, each first member stands for every role
//! of [`ROLES`], asked on itself with the admin token; from then on every sample asks each
//! running member `GET /v1/claim/{name}` for one role in turn, as the role's application would, and
//! each 200 is a promise on that role from the instant it was asked until `lease_ms` later.
//! The schedule's faults (crashes, pauses, cuts, loss, membership changes, wipes) move the
//! roles, and so do the placement settings changed on the schedule's way ([`settings`]). Judged
//! at the end by the chaos suite's role checker
//! (`checkers::role_promise_keeping`): no member claims a role inside another member's promise
//! on it, no token is claimed by two members; and as sampled: a role's token never goes back,
//! and every 200 carries a token and a lease.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use electd_client::{NodeId, RoleClaimInfo};

use super::clock::SimClock;
use super::net::Net;
use crate::chaos::checkers::{role_moves, role_promise_keeping};
use crate::chaos::record::Promise;

/// The roles every first member stands for.
pub const ROLES: [&str; 3] = ["sim-a", "sim-b", "sim-c"];

/// What the sampler saw of the roles.
#[derive(Default)]
pub struct RoleWatch {
    promises: BTreeMap<String, Vec<Promise>>,
    /// The highest token claimed on each role so far.
    top: BTreeMap<String, u64>,
    violations: Vec<String>,
    /// Candidacies applied at the start.
    pub stood: u64,
}

/// One member's answer on one role, asked at `sent_ns`: `None` when it gave none (paused, not
/// running).
pub struct Answer {
    role: &'static str,
    node: NodeId,
    sent_ns: u64,
    got: Option<(u16, Option<RoleClaimInfo>)>,
}

/// Each of `ids` stands for every role, asked on itself with `token` (answered once applied);
/// the candidacies applied.
pub async fn stand(net: &Net, ids: &[NodeId], token: &str) -> u64 {
    let mut applied = 0;
    for &id in ids {
        for role in ROLES {
            let req = Request::put(format!("/v1/roles/{role}/candidates/{id}"))
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .expect("a request");
            applied += u64::from(matches!(net.ask(id, req).await, Some((200, _))));
        }
    }
    applied
}

/// Placement settings changed on the schedule's way, asked in the background (the schedule's
/// timing is the seed's) on the first of `ids` with the admin `token`: that member drained
/// (`max_roles` 0) and the first role preferred on the last member, or (`lift`) both taken back.
/// The roles move by hand-overs under whatever faults the schedule drew.
pub fn settings(net: &Arc<Net>, ids: &[NodeId], token: &str, lift: bool) {
    let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else {
        return;
    };
    let role = ROLES[0];
    let asks = [
        (
            format!("/v1/members/{first}/max_roles"),
            r#"{"max_roles":0}"#.to_string(),
        ),
        (
            format!("/v1/roles/{role}/preferred"),
            format!(r#"{{"node":{last}}}"#),
        ),
    ];
    for (path, body) in asks {
        let req = match lift {
            true => Request::delete(path).body(Body::empty()),
            false => Request::put(path)
                .header("content-type", "application/json")
                .body(Body::from(body)),
        };
        let req = req.map(|mut r| {
            let bearer = format!("Bearer {token}").parse().expect("a header value");
            r.headers_mut().insert("authorization", bearer);
            r
        });
        let net = net.clone();
        tokio::spawn(async move { net.ask(first, req.expect("a request")).await });
    }
}

/// Asks each of `ids` for its claim on one role, each at the instant `clock` says: the
/// `round`-th sample asks member i about role `round + i` (of [`ROLES`]), so each sample asks
/// about every role and each member is asked about each every third sample. (All three every
/// sample made a schedule 2.7 times as long: the asks cost the simulator more than the rest.)
pub async fn ask(net: &Net, ids: &[NodeId], clock: &SimClock, round: usize) -> Vec<Answer> {
    let mut out = Vec::new();
    for (i, &node) in ids.iter().enumerate() {
        let role = ROLES[(round + i) % ROLES.len()];
        let req = Request::get(format!("/v1/claim/{role}"))
            .body(Body::empty())
            .expect("a request");
        let sent_ns = clock.now_ns();
        let got = (net.ask(node, req).await)
            .map(|(status, bytes)| (status, serde_json::from_slice(&bytes).ok()));
        out.push(Answer {
            role,
            node,
            sent_ns,
            got,
        });
    }
    out
}

impl RoleWatch {
    /// Records the answers of a sample, `t` ms into the run.
    pub fn record(&mut self, answers: Vec<Answer>, t: u64) {
        for Answer {
            role,
            node,
            sent_ns,
            got,
        } in answers
        {
            let claim = match got {
                // No answer, not the holder (503), or the role not created yet (404): no claim.
                None | Some((503 | 404, _)) => continue,
                Some((200, Some(c))) => c,
                Some((status, _)) => {
                    self.violation(format!(
                        "at {t} ms node {node} answered the claim on {role} with status \
                         {status} or a body that is not the contract's"
                    ));
                    continue;
                }
            };
            let (Some(token), true) = (claim.token, claim.node == Some(node)) else {
                self.violation(format!(
                    "at {t} ms node {node} claims {role} without its token or its id: {claim:?}"
                ));
                continue;
            };
            let top = self.top.get(role).copied().unwrap_or(0);
            if token < top {
                let v = format!(
                    "at {t} ms node {node} claims {role} with token {token} after token {top}"
                );
                self.violation(v);
            }
            self.top.insert(role.to_string(), top.max(token));
            self.promises
                .entry(role.to_string())
                .or_default()
                .push(Promise {
                    node,
                    term: token,
                    from_ns: sent_ns,
                    until_ns: sent_ns + claim.lease_ms * 1_000_000,
                });
        }
    }

    /// Kept up to 20 (one that lasts is seen at every sample).
    fn violation(&mut self, v: String) {
        if self.violations.len() < 20 {
            self.violations.push(v);
        }
    }

    /// The violations seen and found by the role checker; the promises judged; how often a
    /// role changed hands (tokens claimed, less one per role claimed).
    pub fn judge(&self, start_ns: u64) -> (Vec<String>, u64, u64) {
        let mut out = self.violations.clone();
        let (k, shared) = role_promise_keeping(&self.promises);
        let what = ("a role's promise broken", "token", "role promises");
        out.extend(k.first_broken(start_ns, what));
        out.extend(shared);
        (out, k.promises, role_moves(&self.promises))
    }
}
