//! Peer authentication: every peer request proves that its sender knows the cluster secret.
//!
//! The sender signs with HMAC-SHA256 (RustCrypto's `hmac` and `sha2`) over
//!
//! ```text
//! electd-peer-v1 \n cluster id \n sender id \n METHOD \n path \n timestamp ms \n nonce \n body
//! ```
//!
//! and sends the timestamp (wall-clock ms since the Unix epoch, the only clock that two machines
//! share), the nonce (a per-process counter) and the hex MAC in `x-electd-ts`, `x-electd-nonce`
//! and `x-electd-auth`. The receiver refuses, with 401 and a reason counted in `/metrics`:
//! a missing header (`missing_auth`), a MAC that does not match (`bad_signature`), a timestamp
//! outside the replay window of ±[`REPLAY_WINDOW_MS`] (`stale_timestamp`), and a MAC it has
//! already accepted inside the window (`replayed`). The sender id and the cluster id are covered
//! by the MAC, so neither can be swapped. Responses are not signed: a peer answers only on a
//! connection that the caller opened to the member's configured address.
//!
//! The secret is a [`Secret`]: its `Debug` is redacted, it is never serialised, and it appears in
//! no log and no status.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::{ExposeSecret, Secret};
use crate::role::NodeId;

pub const HDR_TS: &str = "x-electd-ts";
pub const HDR_NONCE: &str = "x-electd-nonce";
pub const HDR_AUTH: &str = "x-electd-auth";

/// How far a request's timestamp may be from the receiver's clock, either way.
pub const REPLAY_WINDOW_MS: u64 = 30_000;
/// Most MACs remembered for replay detection; past it the oldest are forgotten first.
const REMEMBERED_MAX: usize = 200_000;

type HmacSha256 = Hmac<Sha256>;

/// The signed parts of one request.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    pub cluster: &'a str,
    pub from: NodeId,
    pub method: &'a str,
    pub path: &'a str,
    pub ts_ms: u64,
    pub nonce: u64,
    pub body: &'a [u8],
}

/// The headers a signed request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    pub ts_ms: u64,
    pub nonce: u64,
    pub mac_hex: String,
}

/// Why a request's proof was refused; `reason()` is the label counted in `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("peer request carries no proof of the cluster secret")]
    Missing,
    #[error("peer request's signature does not match")]
    BadSignature,
    #[error("peer request's timestamp is outside the replay window")]
    Stale,
    #[error("peer request was already received (replay)")]
    Replayed,
}

impl AuthError {
    pub fn reason(self) -> &'static str {
        match self {
            AuthError::Missing => "missing_auth",
            AuthError::BadSignature => "bad_signature",
            AuthError::Stale => "stale_timestamp",
            AuthError::Replayed => "replayed",
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One node's signer and verifier.
pub struct PeerAuth {
    secret: Secret,
    nonce: AtomicU64,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    macs: HashSet<[u8; 32]>,
    order: VecDeque<(u64, [u8; 32])>,
}

impl PeerAuth {
    pub fn new(secret: Secret) -> PeerAuth {
        PeerAuth {
            secret,
            nonce: AtomicU64::new(0),
            seen: Mutex::new(Seen::default()),
        }
    }

    fn mac(&self, s: &Signed<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(self.secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        let head = format!(
            "electd-peer-v1\n{}\n{}\n{}\n{}\n{}\n{}\n",
            s.cluster, s.from, s.method, s.path, s.ts_ms, s.nonce
        );
        mac.update(head.as_bytes());
        mac.update(s.body);
        mac
    }

    /// Signs a request stamped `ts_ms` (wall-clock, [`wall_ms`] when sending) with a fresh nonce.
    pub fn sign(
        &self,
        cluster: &str,
        from: NodeId,
        method: &str,
        path: &str,
        body: &[u8],
        ts_ms: u64,
    ) -> Proof {
        let s = Signed {
            cluster,
            from,
            method,
            path,
            ts_ms,
            nonce: self.nonce.fetch_add(1, Ordering::Relaxed),
            body,
        };
        let tag = self.mac(&s).finalize().into_bytes();
        Proof {
            ts_ms: s.ts_ms,
            nonce: s.nonce,
            mac_hex: to_hex(&tag),
        }
    }

    /// Checks a received request at wall-clock time `now_ms`; on success remembers its MAC so
    /// that the same request is refused if it comes again inside the window.
    pub fn verify(&self, s: &Signed<'_>, mac_hex: &str, now_ms: u64) -> Result<(), AuthError> {
        let given = from_hex(mac_hex).ok_or(AuthError::BadSignature)?;
        // The MAC first, in constant time: an unauthenticated request learns nothing else.
        self.mac(s)
            .verify_slice(&given)
            .map_err(|_| AuthError::BadSignature)?;
        if s.ts_ms.abs_diff(now_ms) > REPLAY_WINDOW_MS {
            return Err(AuthError::Stale);
        }
        let mut seen = self.seen.lock().expect("replay set lock");
        let horizon = now_ms.saturating_sub(2 * REPLAY_WINDOW_MS);
        while let Some(&(ts, key)) = seen.order.front() {
            if ts >= horizon && seen.order.len() < REMEMBERED_MAX {
                break;
            }
            seen.order.pop_front();
            seen.macs.remove(&key);
        }
        if !seen.macs.insert(given) {
            return Err(AuthError::Replayed);
        }
        seen.order.push_back((now_ms, given));
        Ok(())
    }
}

fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn from_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(secret: &str) -> PeerAuth {
        PeerAuth::new(Secret::from(secret))
    }

    fn signed<'a>(p: &Proof, body: &'a [u8]) -> Signed<'a> {
        Signed {
            cluster: "c1",
            from: 2,
            method: "POST",
            path: "/peer/raft/vote",
            ts_ms: p.ts_ms,
            nonce: p.nonce,
            body,
        }
    }

    #[test]
    fn accepts_a_fresh_signed_request_once() {
        let (a, b) = (auth("0123456789abcdef"), auth("0123456789abcdef"));
        let p = a.sign("c1", 2, "POST", "/peer/raft/vote", b"{}", wall_ms());
        assert_eq!(p.mac_hex.len(), 64);
        let now = p.ts_ms;
        assert_eq!(b.verify(&signed(&p, b"{}"), &p.mac_hex, now), Ok(()));
        assert_eq!(
            b.verify(&signed(&p, b"{}"), &p.mac_hex, now + 5),
            Err(AuthError::Replayed)
        );
        // The next request differs in its nonce even within the same millisecond.
        let q = a.sign("c1", 2, "POST", "/peer/raft/vote", b"{}", wall_ms());
        assert_ne!(p.mac_hex, q.mac_hex);
        assert_eq!(b.verify(&signed(&q, b"{}"), &q.mac_hex, now), Ok(()));
    }

    #[test]
    fn every_signed_part_matters() {
        let a = auth("0123456789abcdef");
        let p = a.sign(
            "c1",
            2,
            "POST",
            "/peer/raft/vote",
            b"{\"term\":3}",
            wall_ms(),
        );
        let now = p.ts_ms;
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
                ts_ms: base.ts_ms + 1,
                ..base
            },
            Signed {
                nonce: base.nonce + 1,
                ..base
            },
        ];
        for v in variants {
            assert_eq!(
                a.verify(&v, &p.mac_hex, now),
                Err(AuthError::BadSignature),
                "{v:?}"
            );
        }
        // Another secret, a malformed MAC.
        assert_eq!(
            auth("another secret!!").verify(&base, &p.mac_hex, now),
            Err(AuthError::BadSignature)
        );
        assert_eq!(a.verify(&base, "zz", now), Err(AuthError::BadSignature));
        assert_eq!(
            a.verify(&base, &"g".repeat(64), now),
            Err(AuthError::BadSignature)
        );
        // The untouched request still passes.
        assert_eq!(a.verify(&base, &p.mac_hex, now), Ok(()));
    }

    #[test]
    fn replay_window_both_ways() {
        let a = auth("0123456789abcdef");
        let p = a.sign("c1", 2, "POST", "/x", b"", wall_ms());
        let s = signed(&p, b"");
        let s = Signed { path: "/x", ..s };
        assert_eq!(
            a.verify(&s, &p.mac_hex, p.ts_ms + REPLAY_WINDOW_MS + 1),
            Err(AuthError::Stale)
        );
        assert_eq!(
            a.verify(&s, &p.mac_hex, p.ts_ms - REPLAY_WINDOW_MS - 1),
            Err(AuthError::Stale)
        );
        assert_eq!(a.verify(&s, &p.mac_hex, p.ts_ms + REPLAY_WINDOW_MS), Ok(()));
    }

    #[test]
    fn remembered_macs_are_forgotten_after_the_window() {
        let a = auth("0123456789abcdef");
        let t0 = wall_ms();
        for i in 0..100 {
            let p = a.sign("c1", 2, "POST", "/x", b"", wall_ms());
            let s = Signed {
                path: "/x",
                ..signed(&p, b"")
            };
            a.verify(&s, &p.mac_hex, t0 + i).unwrap();
        }
        assert_eq!(a.seen.lock().unwrap().macs.len(), 100);
        // One request much later pushes all the old ones out.
        let later = t0 + 3 * REPLAY_WINDOW_MS;
        let p = a.sign("c1", 2, "POST", "/x", b"", wall_ms());
        let s = Signed {
            path: "/x",
            ts_ms: later,
            ..signed(&p, b"")
        };
        let mac = to_hex(&a.mac(&s).finalize().into_bytes());
        a.verify(&s, &mac, later).unwrap();
        let seen = a.seen.lock().unwrap();
        assert_eq!(seen.macs.len(), 1);
        assert_eq!(seen.order.len(), 1);
    }

    #[test]
    fn hex_round_trip() {
        let bytes: [u8; 32] = std::array::from_fn(|i| (i * 8) as u8);
        assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes));
        assert_eq!(from_hex(&to_hex(&bytes).to_uppercase()), Some(bytes));
    }
}
