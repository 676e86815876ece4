//! The application-layer fault set (admin API, `scripts/cluster.sh partition`), applied inside
//! the peer transport so that every mode sees the same faults.
//!
//! Semantics, chosen so that an app-layer fault looks to the algorithms like a network fault:
//! - `block_to`: every message this node sends to those peers is lost: requests before sending,
//!   responses to their requests after the request was processed (a one-way cut loses replies).
//! - `block_from`: every message from those peers is lost on arrival: their requests
//!   unprocessed, and their responses to this node's requests. So a cut from A to B means the
//!   same written `block_to: [B]` on A or `block_from: [A]` on B (`docs/design/api-v1.md`).
//! - `drop_rate`: every message this node sends or receives is lost with that probability.
//! - `delay_ms`: every message this node sends (requests and responses) waits that long first.
//! - `block_to_store`, `block_from_store` (mutex mode): statements to the store lost before it
//!   runs them, or its answers lost after it ran them; the drop rate and the delay apply to
//!   statements as to messages.
//!
//! - `forge_to`: the forger, below.
//!
//! A lost message is never reported as such to the sender: the sender waits until its request
//! deadline and sees a timeout, as it would behind an iptables DROP rule.
//!
//! # The forger
//!
//! `forge_to: [B, …]` on node A puts a network adversary on the links between A and B: an
//! attacker who holds no cluster secret, sees every byte, and may withhold, substitute, replay
//! or rewrite any of them (issue 30: before answers were signed, such a proxy between nodes made
//! two claimants). It lives in A's transport, and that is the same as a process on the path:
//! it acts exactly where A's bytes leave for B and where B's bytes arrive at A, after A signed
//! and before A checks; it reads the requests and answers as they are on the wire (headers,
//! body, MAC); it holds no key (it never calls [`crate::auth`]: what it sends is either bytes
//! it saw or bytes it made without the secret); and what it does to a message is only what a
//! proxy can do to it. Being inside A it also sees the path a request went to and its body,
//! which a proxy sees too (without TLS). What it does:
//!
//! - **On A's side, A's requests to B** ([`Faults::forge_answer`], called after the wire would
//!   have returned and before the answer is checked): the first request of each path goes
//!   through, and its genuine answer (2xx) is recorded ([`Faults::record_answer`]). From then on
//!   every request of that path is withheld from B and answered by the forger: in turn a
//!   **forged** answer (the recorded genuine answer's headers, MAC included, with a body that
//!   grants or acknowledges: `vote_granted`/`granted`/`accepted`/`ok` set, an append's
//!   `"Success"`, a vote grant naming the candidate's own vote from the request) and a
//!   **replayed** one (the recorded answer, verbatim).
//! - **Withheld, delivered much later**: of the requests it withholds, one per path at a time
//!   ([`Faults::hold`]) is delivered to B verbatim [`HOLD`] later (counted when delivered,
//!   [`Faults::delivered_late`]); the others are lost. B takes a late request for what it is
//!   (an old term, a sequence number seen or out of the window).
//! - **On A's side, B's requests to A** ([`Faults::rewrite_request`], before A authenticates
//!   them): in turn `x-electd-addr` rewritten to an address of the attacker's, and the
//!   sequence number in `x-electd-proof` rewritten to one near `u64::MAX` (which, taken, would
//!   close B's window for good). Both are inside the request's MAC: A refuses them (`bad_signature`)
//!   and its refusal is unsigned, so B has no answer either.
//!
//! So for a node that checks what it gets, the forger cuts A from B both ways, and everything
//! it made up is refused (`rejected_peer_requests.answer_bad_signature` on A,
//! `bad_signature` on B); a node that took answers as they came would see B grant and
//! acknowledge everything while B hears nothing of it (the lab's flaw
//! `accept-unsigned-answers`). What it did is counted in the fault set's `forger` (forged,
//! replayed, withheld, rewritten), kept across fault sets until the node stops. Without a
//! cluster secret nothing is signed and everything forged is taken: the forger then shows what
//! `insecure = true` means.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Response};
pub use electd_client::wire::ForgerCounts;
pub use electd_client::FaultSet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::role::NodeId;

/// What the fault layer decides for one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver after this delay.
    Deliver(Duration),
    /// Lose the message.
    Drop,
}

/// How long the forger withholds the request it delivers late: many election timeouts at the
/// lab's timings, a few at the defaults.
pub const HOLD: Duration = Duration::from_millis(1_500);

/// The fault set in force plus the seeded random source for drop decisions, and the forger's
/// memory.
pub struct Faults {
    set: Mutex<FaultSet>,
    rng: Mutex<StdRng>,
    forger: Mutex<Forger>,
}

/// What the forger recorded and did.
#[derive(Default)]
struct Forger {
    /// The genuine answer of each (peer, path), recorded while forging on that link.
    answers: BTreeMap<(u64, String), Response<Bytes>>,
    /// The (peer, path) whose withheld request waits to be delivered late.
    held: BTreeSet<(u64, String)>,
    /// Turns: forged or replayed, address or sequence number.
    turn: u64,
    counts: ForgerCounts,
}

impl Faults {
    pub fn new(seed: u64) -> Faults {
        Faults {
            set: Mutex::new(FaultSet::default()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            forger: Mutex::new(Forger::default()),
        }
    }

    /// The fault set in force, with what the forger did so far.
    pub fn get(&self) -> FaultSet {
        let mut set = self.set.lock().expect("faults lock").clone();
        let counts = self.forger.lock().expect("forger lock").counts;
        set.forger = (!counts.is_zero()).then_some(counts);
        set
    }

    /// Puts `set` in force (its `forger` counts are the node's, not the caller's). The forger
    /// forgets the answers it recorded on a link it no longer sits on.
    pub fn replace(&self, set: FaultSet) {
        {
            let mut f = self.forger.lock().expect("forger lock");
            f.answers.retain(|(peer, _), _| set.forge_to.contains(peer));
        }
        *self.set.lock().expect("faults lock") = FaultSet {
            forger: None,
            ..set
        };
    }

    /// Whether the forger sits on the link to `peer`.
    pub fn forges(&self, peer: NodeId) -> bool {
        self.set
            .lock()
            .expect("faults lock")
            .forge_to
            .contains(&peer)
    }

    /// The forger's answer to this node's request to `to` at `path` with `body`, in place of
    /// `to`'s, once it recorded a genuine one of that path (`None`: the request goes through,
    /// and its answer is to be recorded with [`Faults::record_answer`]). In turn a forged
    /// grant or acknowledgement and the recorded answer replayed.
    pub fn forge_answer(&self, to: NodeId, path: &str, body: &[u8]) -> Option<Response<Bytes>> {
        if !self.forges(to) {
            return None;
        }
        let mut f = self.forger.lock().expect("forger lock");
        let genuine = f.answers.get(&(to, path.to_string()))?.clone();
        f.turn += 1;
        if f.turn % 2 == 1 {
            f.counts.forged += 1;
            let mut forged = Response::new(Bytes::from(forge_body(path, body, genuine.body())));
            *forged.status_mut() = genuine.status();
            *forged.headers_mut() = genuine.headers().clone();
            Some(forged)
        } else {
            f.counts.replayed += 1;
            Some(genuine)
        }
    }

    /// `to`'s genuine answer to a request at `path`, while the forger sits on the link: kept
    /// (the last success of each path) to forge and replay.
    pub fn record_answer(&self, to: NodeId, path: &str, res: &Response<Bytes>) {
        if !res.status().is_success() || !self.forges(to) {
            return;
        }
        let mut copy = Response::new(res.body().clone());
        *copy.status_mut() = res.status();
        *copy.headers_mut() = res.headers().clone();
        let mut f = self.forger.lock().expect("forger lock");
        f.answers.insert((to, path.to_string()), copy);
    }

    /// Whether the request to `to` at `path` that the forger withholds is the one it delivers
    /// [`HOLD`] later (one per link and path at a time; the others are lost).
    pub fn hold(&self, to: NodeId, path: &str) -> bool {
        let mut f = self.forger.lock().expect("forger lock");
        f.held.insert((to, path.to_string()))
    }

    /// The withheld request to `to` at `path` was delivered (or its delivery failed).
    pub fn delivered_late(&self, to: NodeId, path: &str) {
        let mut f = self.forger.lock().expect("forger lock");
        f.held.remove(&(to, path.to_string()));
        f.counts.withheld += 1;
    }

    /// A request from `from` just arrived: with the forger on the link, rewritten in turn in
    /// its sender address and its sequence number (near `u64::MAX`), before it is checked.
    pub fn rewrite_request(&self, from: NodeId, headers: &mut HeaderMap) {
        if !self.forges(from) {
            return;
        }
        let mut f = self.forger.lock().expect("forger lock");
        f.turn += 1;
        f.counts.rewritten += 1;
        if f.turn % 2 == 1 {
            let addr = format!("10.66.66.66:{}", 7000 + from % 1000);
            headers.insert(
                crate::auth::HDR_ADDR,
                HeaderValue::from_str(&addr).expect("an address is a header value"),
            );
        } else {
            // The sequence number in the proof; a request without one (no secret) gets a proof
            // of the forger's own, which no MAC backs.
            let seq = u64::MAX - (f.turn % 1024);
            let ts = crate::auth::wall_ms();
            let proof = headers
                .get(crate::auth::HDR_PROOF)
                .and_then(|v| crate::auth::Proof::parse(v.to_str().ok()?, ts))
                .unwrap_or_else(|| crate::auth::Proof {
                    epoch: 1,
                    session: 1,
                    seq,
                    ts_ms: ts,
                    mac_hex: "0".repeat(2 * crate::auth::MAC_LEN),
                });
            let forged = crate::auth::Proof { seq, ..proof };
            headers.insert(
                crate::auth::HDR_PROOF,
                HeaderValue::from_str(&forged.header()).expect("a proof is a header value"),
            );
        }
    }

    fn lose(&self, rate: f64) -> bool {
        rate > 0.0 && self.rng.lock().expect("rng lock").gen_bool(rate)
    }

    /// A message this node is about to send to `to` (a request, or a response to `to`'s request).
    pub fn on_send(&self, to: NodeId) -> Verdict {
        let set = self.set.lock().expect("faults lock").clone();
        if set.block_to.contains(&to) || self.lose(set.drop_rate) {
            Verdict::Drop
        } else {
            Verdict::Deliver(Duration::from_millis(set.delay_ms))
        }
    }

    /// This node's request to `to` at `path`, once [`Faults::on_send`] let it go: what the
    /// fault set's `paths` make of it (lost, or delayed; the first rule that names the leg).
    pub fn on_send_path(&self, to: NodeId, path: &str) -> Verdict {
        let set = self.set.lock().expect("faults lock");
        // A rule that only holds the answer (`answer_delay_ms`) says nothing of the request.
        let rule = set.paths.iter().find(|p| {
            p.to == to
                && p.path == path
                && p.lose != Some(electd_client::wire::Leg::Answer)
                && (p.lose.is_some() || p.delay_ms > 0)
        });
        match rule {
            Some(p) if p.lose.is_some() => Verdict::Drop,
            Some(p) => Verdict::Deliver(Duration::from_millis(p.delay_ms)),
            None => Verdict::Deliver(Duration::ZERO),
        }
    }

    /// Whether `to`'s answer to this node's request at `path` is lost (the fault set's
    /// `paths`): `to` ran the request.
    pub fn answer_lost(&self, to: NodeId, path: &str) -> bool {
        let set = self.set.lock().expect("faults lock");
        set.paths.iter().any(|p| {
            p.to == to && p.path == path && p.lose == Some(electd_client::wire::Leg::Answer)
        })
    }

    /// How long `to`'s answer to this node's request at `path` is held once it came (the fault
    /// set's `paths`; zero: none).
    pub fn answer_delay(&self, to: NodeId, path: &str) -> Duration {
        let set = self.set.lock().expect("faults lock");
        let rule = set
            .paths
            .iter()
            .find(|p| p.to == to && p.path == path && p.answer_delay_ms > 0);
        Duration::from_millis(rule.map_or(0, |p| p.answer_delay_ms))
    }

    /// Holds `to`'s answer to this node's request at `path`, just come, as long as the fault
    /// set's `paths` say: whether it is then taken (false: it would come past `deadline`, and
    /// is lost).
    pub async fn hold_answer(
        &self,
        to: NodeId,
        path: &str,
        deadline: tokio::time::Instant,
    ) -> bool {
        let late = self.answer_delay(to, path);
        if late.is_zero() {
            return true;
        }
        if tokio::time::Instant::now() + late >= deadline {
            return false;
        }
        tokio::time::sleep(late).await;
        true
    }

    /// A statement this node is about to send its store (mutex mode).
    pub fn on_send_store(&self) -> Verdict {
        let set = self.set.lock().expect("faults lock").clone();
        if set.block_to_store || self.lose(set.drop_rate) {
            Verdict::Drop
        } else {
            Verdict::Deliver(Duration::from_millis(set.delay_ms))
        }
    }

    /// The store's answer to a statement of this node, just arrived (mutex mode).
    pub fn on_receive_store(&self) -> Verdict {
        let set = self.set.lock().expect("faults lock").clone();
        if set.block_from_store || self.lose(set.drop_rate) {
            Verdict::Drop
        } else {
            Verdict::Deliver(Duration::ZERO)
        }
    }

    /// A message that has just arrived from `from`: a request, or the response to a request
    /// of this node.
    pub fn on_receive(&self, from: NodeId) -> Verdict {
        let set = self.set.lock().expect("faults lock").clone();
        if set.block_from.contains(&from) || self.lose(set.drop_rate) {
            Verdict::Drop
        } else {
            Verdict::Deliver(Duration::ZERO)
        }
    }
}

/// The body of a forged answer to a request at `path` with body `request`, from a genuine
/// answer of that path: every grant and acknowledgement set, every refusal taken out; an
/// append (openraft's `Result<AppendEntriesResponse, _>`) acknowledged; a vote (openraft's
/// `Result<VoteResponse, _>`) granted for the candidate's own vote and log. Not JSON: as it was.
pub fn forge_body(path: &str, request: &[u8], genuine: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(genuine) else {
        return genuine.to_vec();
    };
    let req = serde_json::from_slice::<Value>(request).unwrap_or(Value::Null);
    if path.ends_with("/append") {
        v = json!({"Ok": "Success"});
    } else if path.ends_with("/vote") && req.get("vote").is_some() {
        v = json!({"Ok": {
            "vote": req["vote"],
            "vote_granted": true,
            "last_log_id": req.get("last_log_id").cloned().unwrap_or(Value::Null),
        }});
    } else {
        grant(&mut v);
        if path.ends_with("/prevote") {
            if let (Some(t), Some(obj)) =
                (req.get("term").and_then(Value::as_u64), v.as_object_mut())
            {
                obj.insert("term".into(), json!(t.saturating_sub(1)));
            }
        }
    }
    serde_json::to_vec(&v).expect("JSON serialises")
}

/// Sets every grant and acknowledgement in `v` and takes every refusal out.
fn grant(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for key in ["refused", "lease_left_us", "known", "behind"] {
                m.remove(key);
            }
            for (k, x) in m.iter_mut() {
                let flag = matches!(
                    k.as_str(),
                    "vote_granted" | "granted" | "accepted" | "ok" | "success" | "member"
                );
                if flag && x.is_boolean() {
                    *x = Value::Bool(true);
                } else {
                    grant(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(grant),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path fault acts on its peer, path and leg only: a lost request, a lost answer, a
    /// delay.
    #[test]
    fn path_faults_act_on_their_peer_path_and_leg() {
        use electd_client::wire::{Leg, PathFault};
        let f = Faults::new(1);
        let rule = |to, path: &str, lose, delay_ms| PathFault {
            answer_delay_ms: 0,
            to,
            path: path.into(),
            lose,
            delay_ms,
        };
        f.replace(FaultSet {
            paths: vec![
                rule(2, "/peer/raft/append", Some(Leg::Request), 0),
                rule(3, "/peer/raft/append", Some(Leg::Answer), 0),
                rule(2, "/peer/raft/vote", None, 40),
            ],
            ..FaultSet::default()
        });
        assert_eq!(f.on_send_path(2, "/peer/raft/append"), Verdict::Drop);
        assert!(!f.answer_lost(2, "/peer/raft/append"));
        let delivered = Verdict::Deliver(Duration::ZERO);
        assert_eq!(f.on_send_path(3, "/peer/raft/append"), delivered);
        assert!(f.answer_lost(3, "/peer/raft/append"));
        assert!(!f.answer_lost(3, "/peer/raft/vote"));
        let late = Verdict::Deliver(Duration::from_millis(40));
        assert_eq!(f.on_send_path(2, "/peer/raft/vote"), late);
        assert_eq!(f.on_send_path(4, "/peer/raft/vote"), delivered);
        // An answer held: the request goes at once, and a later rule on the request holds.
        let held = PathFault {
            answer_delay_ms: 50,
            ..rule(2, "/peer/roles/renew", None, 0)
        };
        f.replace(FaultSet {
            paths: vec![held, rule(2, "/peer/roles/renew", Some(Leg::Request), 0)],
            ..FaultSet::default()
        });
        assert_eq!(
            f.answer_delay(2, "/peer/roles/renew"),
            Duration::from_millis(50)
        );
        assert_eq!(f.answer_delay(3, "/peer/roles/renew"), Duration::ZERO);
        assert_eq!(f.on_send_path(2, "/peer/roles/renew"), Verdict::Drop);
        assert!(!f.answer_lost(2, "/peer/roles/renew"));
    }

    #[test]
    fn forged_bodies_grant_and_acknowledge() {
        let vote_req = br#"{"vote":{"leader_id":{"term":5,"node_id":1},"committed":false},"last_log_id":null}"#;
        let refused = br#"{"Ok":{"vote":{"leader_id":{"term":4,"node_id":2},"committed":true},"vote_granted":false,"last_log_id":null}}"#;
        let v: Value =
            serde_json::from_slice(&forge_body("/peer/raft/vote", vote_req, refused)).unwrap();
        assert_eq!(v["Ok"]["vote_granted"], true);
        assert_eq!(v["Ok"]["vote"]["leader_id"]["term"], 5);
        let v: Value = serde_json::from_slice(&forge_body(
            "/peer/raft/append",
            b"{}",
            br#"{"Ok":{"HigherVote":{}}}"#,
        ))
        .unwrap();
        assert_eq!(v, json!({"Ok": "Success"}));
        let v: Value = serde_json::from_slice(&forge_body(
            "/peer/raft/prevote",
            br#"{"term":7,"last_log_id":null}"#,
            br#"{"granted":false,"term":6,"refused":"leader_alive","lease_left_us":10}"#,
        ))
        .unwrap();
        assert_eq!(v, json!({"granted": true, "term": 6}));
        assert_eq!(
            forge_body("/peer/msg", b"{}", br#"{"ok":false}"#),
            br#"{"ok":true}"#
        );
    }

    #[test]
    fn the_forger_records_then_forges_and_replays_then_forgets() {
        let f = Faults::new(1);
        let answer = |body: &'static str| {
            let mut r = Response::new(Bytes::from_static(body.as_bytes()));
            r.headers_mut()
                .insert("x-electd-answer", HeaderValue::from_static("00"));
            r
        };
        f.record_answer(2, "/peer/msg", &answer(r#"{"ok":false}"#));
        assert!(
            f.forge_answer(2, "/peer/msg", b"{}").is_none(),
            "not on the link"
        );
        f.replace(FaultSet {
            forge_to: [2].into(),
            ..Default::default()
        });
        assert!(
            f.forge_answer(2, "/peer/msg", b"{}").is_none(),
            "nothing recorded"
        );
        f.record_answer(2, "/peer/msg", &answer(r#"{"ok":false}"#));
        let forged = f.forge_answer(2, "/peer/msg", b"{}").unwrap();
        assert_eq!(forged.body().as_ref(), br#"{"ok":true}"#);
        assert_eq!(forged.headers()["x-electd-answer"], "00");
        let replayed = f.forge_answer(2, "/peer/msg", b"{}").unwrap();
        assert_eq!(replayed.body().as_ref(), br#"{"ok":false}"#);
        assert!(f.forge_answer(3, "/peer/msg", b"{}").is_none());
        assert!(f.hold(2, "/peer/msg") && !f.hold(2, "/peer/msg"));
        f.delivered_late(2, "/peer/msg");
        let mut h = HeaderMap::new();
        f.rewrite_request(2, &mut h);
        f.rewrite_request(2, &mut h);
        assert!(h.contains_key(crate::auth::HDR_ADDR));
        let proof = h[crate::auth::HDR_PROOF].to_str().unwrap();
        let seq = crate::auth::Proof::parse(proof, 0).unwrap().seq;
        assert!(seq > u64::MAX - 1024);
        let counts = ForgerCounts {
            forged: 1,
            replayed: 1,
            withheld: 1,
            rewritten: 2,
        };
        assert_eq!(f.get().forger, Some(counts));
        f.replace(FaultSet::default());
        assert_eq!(
            f.get().forger,
            Some(counts),
            "the counts outlive the fault set"
        );
        assert!(f.get().forge_to.is_empty());
        assert!(f.forge_answer(2, "/peer/msg", b"{}").is_none());
    }

    #[test]
    fn blocks_are_directional() {
        let f = Faults::new(1);
        f.replace(FaultSet {
            block_to: [3].into(),
            block_from: [4].into(),
            ..Default::default()
        });
        assert_eq!(f.on_send(3), Verdict::Drop);
        assert_eq!(f.on_send(4), Verdict::Deliver(Duration::ZERO));
        assert_eq!(f.on_receive(4), Verdict::Drop);
        assert_eq!(f.on_receive(3), Verdict::Deliver(Duration::ZERO));
    }

    #[test]
    fn drop_rate_is_seeded_and_roughly_right() {
        let count = |seed| {
            let f = Faults::new(seed);
            f.replace(FaultSet {
                drop_rate: 0.3,
                ..Default::default()
            });
            (0..10_000)
                .filter(|_| f.on_send(2) == Verdict::Drop)
                .count()
        };
        assert_eq!(count(7), count(7), "same seed, same decisions");
        let n = count(7);
        assert!((2_700..3_300).contains(&n), "30% of 10000, got {n}");
    }
}
