//! The tests of `src/auth.rs`.

use super::*;

fn auth(secret: &str) -> PeerAuth {
    PeerAuth::new(Secret::from(secret))
}

fn signed<'a>(p: &Proof, body: &'a [u8]) -> Signed<'a> {
    Signed {
        cluster: "c1",
        from: 2,
        addr: "127.0.0.1:7002",
        method: "POST",
        path: "/peer/raft/vote",
        epoch: p.epoch,
        session: p.session,
        seq: p.seq,
        ts_ms: p.ts_ms,
        body,
    }
}

/// `a` signs a request to `b` for `b`'s epoch.
fn sign_to(a: &PeerAuth, b: &PeerAuth, body: &[u8], ts_ms: u64) -> Proof {
    a.sign(
        "c1",
        2,
        "127.0.0.1:7002",
        b.epoch(),
        "POST",
        "/peer/raft/vote",
        body,
        ts_ms,
    )
}

#[test]
fn accepts_a_signed_request_once() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    let p = sign_to(&a, &b, b"{}", wall_ms());
    assert_eq!(p.mac_hex.len(), 2 * MAC_LEN);
    assert_eq!(Proof::parse(&p.header(), p.ts_ms), Some(p.clone()));
    assert_eq!(b.verify(&signed(&p, b"{}"), &p.mac_hex), Ok(()));
    assert_eq!(
        b.verify(&signed(&p, b"{}"), &p.mac_hex),
        Err(AuthError::Replayed)
    );
    // The next request differs in its sequence number even within the same millisecond.
    let q = sign_to(&a, &b, b"{}", p.ts_ms);
    assert_ne!(p.mac_hex, q.mac_hex);
    assert_eq!(b.verify(&signed(&q, b"{}"), &q.mac_hex), Ok(()));
}

/// A removed member's requests, captured before its removal, do not pass again when its
/// id is added back: forgetting its windows starts a new epoch.
#[test]
fn a_forgotten_peers_requests_do_not_pass_again() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    let p = sign_to(&a, &b, b"{}", wall_ms());
    assert_eq!(b.verify(&signed(&p, b"{}"), &p.mac_hex), Ok(()));
    b.forget(&[2]);
    assert_eq!(
        b.verify(&signed(&p, b"{}"), &p.mac_hex),
        Err(AuthError::StaleEpoch),
        "replayed after the sender was forgotten"
    );
    // Signed anew for the new epoch, the sender passes.
    let q = sign_to(&a, &b, b"{}", wall_ms());
    assert_eq!(b.verify(&signed(&q, b"{}"), &q.mac_hex), Ok(()));
}

#[test]
fn no_clock_decides() {
    // Requests stamped an hour ahead and a day behind pass, once each.
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    for ts in [wall_ms() + 3_600_000, wall_ms() - 86_400_000, 0, u64::MAX] {
        let p = sign_to(&a, &b, b"{}", ts);
        assert_eq!(b.verify(&signed(&p, b"{}"), &p.mac_hex), Ok(()), "{ts}");
        assert_eq!(
            b.verify(&signed(&p, b"{}"), &p.mac_hex),
            Err(AuthError::Replayed)
        );
    }
}

#[test]
fn a_request_for_another_epoch_is_stale() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    // Before it knows b's epoch, a signs for 0.
    assert_eq!(a.epoch_of(9), 0);
    let p = a.sign(
        "c1",
        2,
        "127.0.0.1:7002",
        a.epoch_of(9),
        "POST",
        "/x",
        b"",
        1,
    );
    let s = Signed {
        path: "/x",
        ..signed(&p, b"")
    };
    assert_eq!(b.verify(&s, &p.mac_hex), Err(AuthError::StaleEpoch));
    a.learn_epoch(9, b.epoch());
    assert_eq!(a.epoch_of(9), b.epoch());
    let p = a.sign(
        "c1",
        2,
        "127.0.0.1:7002",
        a.epoch_of(9),
        "POST",
        "/x",
        b"",
        1,
    );
    let s = Signed {
        path: "/x",
        ..signed(&p, b"")
    };
    assert_eq!(b.verify(&s, &p.mac_hex), Ok(()));
    // A receiver that restarted (a new PeerAuth, a new epoch) refuses what was recorded
    // before, though it remembers nothing.
    let b2 = auth("0123456789abcdef");
    assert_eq!(b2.verify(&s, &p.mac_hex), Err(AuthError::StaleEpoch));
}

#[test]
fn a_restarted_sender_is_a_new_session() {
    let b = auth("0123456789abcdef");
    let a1 = auth("0123456789abcdef");
    let p1 = sign_to(&a1, &b, b"", 1);
    assert_eq!(b.verify(&signed(&p1, b""), &p1.mac_hex), Ok(()));
    // Its successor starts its sequence again at 1, in a session of its own.
    let a2 = auth("0123456789abcdef");
    let p2 = sign_to(&a2, &b, b"", 1);
    assert_eq!(p1.seq, p2.seq);
    assert_eq!(b.verify(&signed(&p2, b""), &p2.mac_hex), Ok(()));
    // The first session's request is still remembered.
    assert_eq!(
        b.verify(&signed(&p1, b""), &p1.mac_hex),
        Err(AuthError::Replayed)
    );
}

/// Issue 30: a request withheld on the path stays valid only while its epoch is the
/// receiver's current or previous one: at most two [`EPOCH_LIFETIME`]s, in the receiver's
/// own time, however few requests its sender made since. A rotation refuses nothing in
/// passing: requests signed for the previous epoch are still taken for a lifetime.
#[test]
fn a_withheld_request_expires_within_two_epoch_lifetimes() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    let t0 = Instant::now();
    let e0 = b.epoch_at(t0);
    let held = sign_to(&a, &b, b"{}", 1);
    let sent = sign_to(&a, &b, b"{}", 1);
    let at = |s: u64| t0 + std::time::Duration::from_millis(s);
    let life = EPOCH_LIFETIME.as_millis() as u64;
    assert_eq!(
        b.verify_at(&signed(&sent, b"{}"), &sent.mac_hex, at(1)),
        Ok(())
    );
    // One lifetime on: a new epoch, and the previous one still taken.
    let e1 = b.epoch_at(at(life));
    assert_ne!(e1, e0);
    // A sender that has not heard of the new one yet signs for the one it knows.
    let late = a.sign(
        "c1",
        2,
        "127.0.0.1:7002",
        e0,
        "POST",
        "/peer/raft/vote",
        b"{}",
        1,
    );
    assert_eq!(
        b.verify_at(&signed(&late, b"{}"), &late.mac_hex, at(life + 1)),
        Ok(()),
        "refused in passing"
    );
    assert_eq!(
        b.verify_at(&signed(&sent, b"{}"), &sent.mac_hex, at(life + 2)),
        Err(AuthError::Replayed),
        "the previous epoch's window is kept"
    );
    // Two lifetimes after its epoch began, the withheld request is stale.
    assert_eq!(
        b.verify_at(&signed(&held, b"{}"), &held.mac_hex, at(2 * life)),
        Err(AuthError::StaleEpoch)
    );
    // And a receiver that heard nothing for a long time takes no old request either.
    let c = auth("0123456789abcdef");
    let old = sign_to(&a, &c, b"{}", 1);
    assert_eq!(
        c.verify_at(&signed(&old, b"{}"), &old.mac_hex, at(5 * life)),
        Err(AuthError::StaleEpoch)
    );
}

#[test]
fn too_many_sessions_start_a_new_epoch() {
    let b = auth("0123456789abcdef");
    let first = b.epoch();
    let mut kept = Vec::new();
    for _ in 0..MAX_SESSIONS {
        let a = auth("0123456789abcdef");
        let p = sign_to(&a, &b, b"", 1);
        assert_eq!(b.verify(&signed(&p, b""), &p.mac_hex), Ok(()));
        kept.push(p);
    }
    let a = auth("0123456789abcdef");
    let p = sign_to(&a, &b, b"", 1);
    assert_eq!(
        b.verify(&signed(&p, b""), &p.mac_hex),
        Err(AuthError::StaleEpoch)
    );
    assert_ne!(b.epoch(), first);
    // Nothing signed for the old epoch passes, remembered or not.
    for p in &kept {
        assert_eq!(
            b.verify(&signed(p, b""), &p.mac_hex),
            Err(AuthError::StaleEpoch)
        );
    }
    let p = sign_to(&a, &b, b"", 1);
    assert_eq!(b.verify(&signed(&p, b""), &p.mac_hex), Ok(()));
}

/// Issue 48, item 3: a sender that is not admitted gets nothing kept, not even a window;
/// an admitted one is asked about once an epoch.
#[test]
fn nothing_is_kept_for_a_sender_not_admitted() {
    let (a, b) = (auth("s3cret-s3cret-16"), auth("s3cret-s3cret-16"));
    let epoch = b.epoch();
    let sign = || {
        let p = sign_to(&a, &b, b"{}", 1);
        let s = signed(&p, b"{}");
        (p, s)
    };
    let (p, s) = sign();
    let now = Instant::now();
    assert_eq!(
        b.verify_admitted(&s, &p.mac_hex, now, || false),
        Err(AuthError::Unadmitted)
    );
    let kept = |b: &PeerAuth| {
        let mut r = b.receiver.lock().unwrap();
        r.sessions_of(epoch).map_or(0, |s| s.len())
    };
    assert_eq!(kept(&b), 0, "no window for a sender refused");
    let asked = std::cell::Cell::new(0);
    let admit = || {
        asked.set(asked.get() + 1);
        true
    };
    assert_eq!(b.verify_admitted(&s, &p.mac_hex, now, admit), Ok(()));
    let (q, t) = sign();
    assert_eq!(b.verify_admitted(&t, &q.mac_hex, now, || false), Ok(()));
    assert_eq!((kept(&b), asked.get()), (1, 1), "asked once, then known");
    assert_eq!(AuthError::Unadmitted.reason(), "unknown_peer");
}

/// Changing the cluster secret node by node (issue 48, item 5): each step's nodes talk both
/// ways, requests and answers, with the step's before and after; a node with the old secret
/// only does not pass once the old one is dropped.
#[test]
fn a_secret_rolled_node_by_node_is_taken_both_ways() {
    let (old, new) = (
        Secret::from("old-secret-0123456"),
        Secret::from("new-secret-0123456"),
    );
    let behind = PeerAuth::rolling(old.clone(), Some(new.clone()));
    let ahead = PeerAuth::rolling(new.clone(), Some(old.clone()));
    let done = PeerAuth::new(new.clone());
    let stale = PeerAuth::new(old.clone());
    // Every pair the procedure puts side by side: a step apart, both ways.
    let pairs = [
        (&behind, &behind),
        (&behind, &ahead),
        (&ahead, &behind),
        (&ahead, &done),
        (&done, &ahead),
    ];
    for (a, b) in pairs {
        let p = sign_to(a, b, b"{}", 1);
        assert_eq!(b.verify(&signed(&p, b"{}"), &p.mac_hex), Ok(()));
        let answer = Answer {
            cluster: "c1",
            from: 3,
            epoch: 9,
            status: 200,
            request_mac: &p.mac_hex,
            body: b"{}",
        };
        assert!(
            a.verify_answer(&answer, &b.answer_mac(&answer)),
            "answers too"
        );
    }
    let p = sign_to(&stale, &done, b"{}", 1);
    assert_eq!(
        done.verify(&signed(&p, b"{}"), &p.mac_hex),
        Err(AuthError::BadSignature),
        "the old secret alone, once dropped"
    );
}

#[test]
fn the_window_takes_reordering_and_refuses_the_old() {
    let mut w = Window::new();
    assert!(w.accept(5));
    assert!(w.accept(3), "overtaken, not seen yet");
    assert!(!w.accept(3));
    assert!(!w.accept(5));
    assert!(w.accept(5 + SEQ_WINDOW - 1));
    assert!(!w.accept(5), "seen, still inside the window");
    assert!(
        !w.accept(4),
        "just below the window: (top - SEQ_WINDOW, top]"
    );
    assert!(w.accept(6), "not seen, still inside the window");
    assert!(w.accept(5 + SEQ_WINDOW + 10));
    assert!(!w.accept(7), "not seen, but now outside the window");
    // A jump past the whole window forgets everything below it.
    let top = 5 + SEQ_WINDOW + 10;
    assert!(w.accept(top + 3 * SEQ_WINDOW));
    assert!(w.accept(top + 3 * SEQ_WINDOW - 1));
    assert!(!w.accept(top));
}

#[test]
fn every_signed_part_matters() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    let p = sign_to(&a, &b, b"{\"term\":3}", wall_ms());
    let base = signed(&p, b"{\"term\":3}");
    let variants = [
        Signed {
            body: b"{\"term\":4}",
            ..base
        },
        Signed {
            path: "/peer/raft/append",
            ..base
        },
        Signed {
            method: "GET",
            ..base
        },
        Signed {
            cluster: "c2",
            ..base
        },
        Signed { from: 3, ..base },
        Signed {
            addr: "10.9.9.9:7002",
            ..base
        },
        Signed {
            epoch: base.epoch + 1,
            ..base
        },
        Signed {
            session: base.session + 1,
            ..base
        },
        Signed {
            seq: base.seq + 1,
            ..base
        },
        Signed {
            ts_ms: base.ts_ms + 1,
            ..base
        },
    ];
    for v in variants {
        assert_eq!(
            b.verify(&v, &p.mac_hex),
            Err(AuthError::BadSignature),
            "{v:?}"
        );
    }
    // Another secret, a malformed MAC.
    assert_eq!(
        auth("another secret!!").verify(&base, &p.mac_hex),
        Err(AuthError::BadSignature)
    );
    assert_eq!(b.verify(&base, "zz"), Err(AuthError::BadSignature));
    assert_eq!(
        b.verify(&base, &"g".repeat(64)),
        Err(AuthError::BadSignature)
    );
    // The untouched request still passes.
    assert_eq!(b.verify(&base, &p.mac_hex), Ok(()));
}

/// A proof is taken only as it is written: lowercase hex, four fields.
#[test]
fn a_proof_is_taken_only_in_its_own_form() {
    let mac = "0123456789abcdef0123456789abcdef";
    let p = Proof::parse(&format!("ff.1.2a.{mac}"), 7).expect("a proof");
    assert_eq!((p.epoch, p.session, p.seq, p.ts_ms), (255, 1, 42, 7));
    for bad in [
        format!("ff.1.2a.{}", mac.to_uppercase()),
        format!("FF.1.2a.{mac}"),
        format!("+ff.1.2a.{mac}"),
        format!("ff..2a.{mac}"),
        format!("ff.1.2a.{mac}.0"),
        format!("ff.1.2a.{}", &mac[1..]),
        format!("10000000000000000.1.2.{mac}"),
        format!("ff.1.2a.{}g", &mac[1..]),
    ] {
        assert_eq!(Proof::parse(&bad, 7), None, "{bad}");
    }
}

#[test]
fn hex_round_trip() {
    let bytes: [u8; MAC_LEN] = std::array::from_fn(|i| (i * 8) as u8);
    assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes));
    assert_eq!(from_hex(&to_hex(&bytes).to_uppercase()), Some(bytes));
}

/// An answer's MAC binds the request it answers, the answering member, its epoch, the
/// status and the body: an answer recorded earlier, another member's, or one whose grant
/// was rewritten does not pass; nor does one made without the secret.
#[test]
fn every_part_of_an_answer_matters() {
    let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
    let p = sign_to(&a, &b, b"{}", wall_ms());
    let q = sign_to(&a, &b, b"{}", wall_ms());
    let base = Answer {
        cluster: "c1",
        from: 3,
        epoch: b.epoch(),
        status: 200,
        request_mac: &p.mac_hex,
        body: b"{\"vote_granted\":false}",
    };
    let mac = b.answer_mac(&base);
    assert!(a.verify_answer(&base, &mac));
    for v in [
        Answer {
            body: b"{\"vote_granted\":true}",
            ..base
        },
        Answer {
            request_mac: &q.mac_hex,
            ..base
        },
        Answer { from: 2, ..base },
        Answer {
            epoch: base.epoch + 1,
            ..base
        },
        Answer {
            status: 401,
            ..base
        },
        Answer {
            cluster: "c2",
            ..base
        },
    ] {
        assert!(!a.verify_answer(&v, &mac), "{v:?}");
    }
    assert!(!auth("another secret!!").verify_answer(&base, &mac));
    assert!(!a.verify_answer(&base, ""));
    assert!(!a.verify_answer(&base, &"0".repeat(64)));
}
