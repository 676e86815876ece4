//! The tests of `src/transport.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use axum::routing::post;
use futures_util::future::BoxFuture;
use tower::ServiceExt;

use super::*;
use crate::config::{Peer, Secret};
use crate::faults::FaultSet;
use crate::role::Mode;

const SECRET: &str = "0123456789abcdef-secret";

fn config(id: NodeId) -> Config {
    let dir = std::env::temp_dir();
    let mut cfg = crate::config::single_member(&dir, Mode::Quorum);
    cfg.id = id;
    cfg.cluster_id = "c1".into();
    cfg.cluster_secret = Some(Secret::from(SECRET));
    cfg.peers = (1..=3)
        .map(|id| Peer {
            id,
            addr: format!("127.0.0.1:{}", 7000 + id),
            priority: 0,
        })
        .collect();
    cfg
}

/// `body` sent by `a` to node 2's `/peer/echo`, and the answer it took.
async fn echo(a: &Transport, body: &'static str) -> Result<String, TransportError> {
    a.call::<_, String>(2, "/peer/echo", "echo", &body, Duration::from_secs(2))
        .await
}

/// Node `id`'s peer router: `/peer/echo` answers the body it got, behind [`guard`].
fn router(id: NodeId, wire: Arc<dyn Wire>) -> axum::Router {
    let t = Arc::new(transport(id, wire));
    axum::Router::new()
        .route("/peer/echo", post(|body: Bytes| async move { body }))
        .layer(axum::middleware::from_fn_with_state(t, guard))
}

fn transport(id: NodeId, wire: Arc<dyn Wire>) -> Transport {
    let cfg = config(id);
    Transport::with_wire(
        &cfg,
        Arc::new(Faults::new(1)),
        Arc::new(Counters::default()),
        wire,
        crate::clock::system(),
    )
}

/// The wire between node 1 and the others, with an attacker on it: it carries requests to
/// the member's router, records every answer, and (when told) rewrites the answer: a forged
/// grant, an earlier answer replayed, or another member's answer.
#[derive(Default)]
struct Path {
    routers: Mutex<BTreeMap<NodeId, axum::Router>>,
    answers: Mutex<Vec<Response<Bytes>>>,
    attack: Mutex<Option<Attack>>,
}

#[derive(Clone, Copy)]
enum Attack {
    Forge,
    ReplayFirst,
    FromMember(NodeId),
}

impl Wire for Path {
    fn send(
        &self,
        to: NodeId,
        req: Request<Bytes>,
        _timeout: Duration,
    ) -> BoxFuture<'_, Result<Response<Bytes>, WireError>> {
        Box::pin(async move {
            let attack = *self.attack.lock().unwrap();
            let to = match attack {
                Some(Attack::FromMember(other)) => other,
                _ => to,
            };
            let router = self.routers.lock().unwrap()[&to].clone();
            let res = router.oneshot(req.map(Body::from)).await.unwrap();
            let (parts, body) = res.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let res = Response::from_parts(parts, bytes);
            let mut answers = self.answers.lock().unwrap();
            answers.push(res.clone());
            Ok(match attack {
                Some(Attack::Forge) => {
                    let mut forged = Response::new(Bytes::from_static(b"\"granted\""));
                    *forged.headers_mut() = res.headers().clone();
                    forged
                }
                Some(Attack::ReplayFirst) => answers[0].clone(),
                _ => res,
            })
        })
    }
}

/// In HMAC mode an answer is taken only when the member it was sent to signed it over
/// this request: a forged grant (the genuine answer's headers, another body), an answer
/// recorded earlier and replayed, and another member's genuine answer are each no answer
/// (issue 30: an on-path attacker's "granted" and "success" made two claimants).
#[tokio::test]
async fn a_forged_replayed_or_borrowed_answer_is_no_answer() {
    let path = Arc::new(Path::default());
    for id in 2..=3 {
        let r = router(id, path.clone());
        path.routers.lock().unwrap().insert(id, r);
    }
    let a = transport(1, path.clone());
    let call = |body: &'static str| echo(&a, body);
    assert_eq!(
        call("one").await.unwrap(),
        "one",
        "a signed answer is taken"
    );
    for attack in [Attack::Forge, Attack::ReplayFirst, Attack::FromMember(3)] {
        *path.attack.lock().unwrap() = Some(attack);
        let r = call("two").await;
        assert!(matches!(r, Err(TransportError::UnsignedAnswer(2))), "{r:?}");
    }
    *path.attack.lock().unwrap() = None;
    assert_eq!(call("three").await.unwrap(), "three");
    let refused = a.counters.snapshot().rejected_peer_requests;
    assert_eq!(refused.get("answer_bad_signature"), Some(&3));
}

/// The forger of the fault set (src/faults.rs) on node 1's link to 2: the first answer is
/// genuine and recorded, the next ones forged or replayed, and each refused; the withheld
/// request is delivered late. On 2's side, 1's requests rewritten are refused by 2, and
/// 2's unsigned refusal is no answer to 1.
#[tokio::test]
async fn the_forgers_answers_and_rewrites_are_refused() {
    let path = Arc::new(Path::default());
    let b = Arc::new(transport(2, path.clone()));
    let r = axum::Router::new()
        .route("/peer/echo", post(|body: Bytes| async move { body }))
        .layer(axum::middleware::from_fn_with_state(b.clone(), guard));
    path.routers.lock().unwrap().insert(2, r);
    let a = transport(1, path.clone());
    let call = |body: &'static str| echo(&a, body);
    assert_eq!(call("warm").await.unwrap(), "warm");
    a.faults.replace(FaultSet {
        forge_to: [2].into(),
        ..Default::default()
    });
    assert_eq!(call("recorded").await.unwrap(), "recorded");
    for _ in 0..4 {
        let r = call("forged").await;
        assert!(matches!(r, Err(TransportError::UnsignedAnswer(2))), "{r:?}");
    }
    tokio::time::sleep(crate::faults::HOLD + Duration::from_millis(500)).await;
    let counts = a.faults.get().forger.unwrap();
    assert_eq!((counts.forged, counts.replayed, counts.withheld), (2, 2, 1));
    let refused = a.counters.snapshot().rejected_peer_requests;
    assert_eq!(refused.get("answer_bad_signature"), Some(&4));
    a.faults.replace(FaultSet::default());
    b.faults.replace(FaultSet {
        forge_to: [1].into(),
        ..Default::default()
    });
    for _ in 0..2 {
        let r = call("rewritten").await;
        assert!(matches!(r, Err(TransportError::UnsignedAnswer(2))), "{r:?}");
    }
    assert_eq!(b.faults.get().forger.unwrap().rewritten, 2);
    let refused = b.counters.snapshot().rejected_peer_requests;
    assert_eq!(refused.get("bad_signature"), Some(&2));
    b.faults.replace(FaultSet::default());
    assert_eq!(call("healed").await.unwrap(), "healed");
}

/// The sender's address travels inside the request's MAC: rewritten on the way (so that
/// the receiver would learn an attacker's address for the sender), the request is refused.
#[tokio::test]
async fn a_rewritten_sender_address_is_refused() {
    let b = transport(2, Arc::new(Path::default()));
    let a = transport(1, Arc::new(Path::default()));
    let auth = a.auth.as_ref().unwrap();
    let proof = auth.sign("c1", 1, "127.0.0.1:7001", 0, "POST", "/peer/echo", b"{}", 1);
    let signed = |addr| Signed {
        cluster: "c1",
        from: 1,
        addr,
        method: "POST",
        path: "/peer/echo",
        epoch: 0,
        session: proof.session,
        seq: proof.seq,
        ts_ms: 1,
        body: b"{}",
    };
    let b_auth = b.auth.as_ref().unwrap();
    assert_eq!(
        b_auth.verify(&signed("10.6.6.6:7001"), &proof.mac_hex),
        Err(crate::auth::AuthError::BadSignature)
    );
    assert_ne!(
        b_auth.verify(&signed("127.0.0.1:7001"), &proof.mac_hex),
        Err(crate::auth::AuthError::BadSignature)
    );
}

/// Issue 30: a secret holder grew a receiver's address book (and its session windows)
/// without limit: any id that named its address was learned and kept for ever, removed
/// members too. Now at most `MAX_STRANGERS` senders no membership names are learned (the
/// next one is refused, signed, 403), and the membership in force prunes the book and the
/// sessions of those it drops.
#[tokio::test]
async fn senders_outside_the_membership_are_bounded_and_pruned() {
    let path = Arc::new(Path::default());
    let b = Arc::new(transport(2, path.clone()));
    let r = axum::Router::new()
        .route("/peer/echo", post(|body: Bytes| async move { body }))
        .layer(axum::middleware::from_fn_with_state(b.clone(), guard));
    path.routers.lock().unwrap().insert(2, r);
    let stranger = |id: NodeId| {
        let mut cfg = config(id);
        cfg.peers.push(Peer {
            id,
            addr: format!("127.0.0.1:{}", 7000 + id),
            priority: 0,
        });
        Transport::with_wire(
            &cfg,
            Arc::new(Faults::new(1)),
            Arc::new(Counters::default()),
            path.clone(),
            crate::clock::system(),
        )
    };
    let first = 10;
    let last = first + crate::wire::MAX_STRANGERS as NodeId - 1;
    for id in first..=last {
        assert_eq!(echo(&stranger(id), "hi").await.unwrap(), "hi", "node {id}");
    }
    let r = echo(&stranger(last + 1), "one too many").await;
    assert!(
        matches!(
            &r,
            Err(TransportError::Refused(2, StatusCode::FORBIDDEN, _))
        ),
        "{r:?}"
    );
    assert!(!b.peers.contains(last + 1));
    // The membership in force: 1, 2, 3. The strangers are forgotten, and one more may come.
    b.keep_members(&BTreeSet::from([1, 2, 3]));
    assert!(!b.peers.contains(first) && b.peers.contains(3));
    assert_eq!(echo(&stranger(last + 1), "now").await.unwrap(), "now");
}
