//! Peer authentication: every peer request proves that its sender knows the cluster secret, and
//! none is accepted twice, with no clock that two machines would have to agree on.
//!
//! The sender signs with HMAC-SHA256 (RustCrypto's `hmac` and `sha2`) over
//!
//! ```text
//! electd-peer-v4 \n cluster id \n sender id \n sender address \n METHOD \n path \n epoch \n session \n seq \n ts ms \n body
//! ```
//!
//! and sends the timestamp in `x-electd-ts` and the rest in one header, `x-electd-proof:
//! EPOCH.SESSION.SEQ.MAC` ([`Proof`]): the epoch and the session as 16 hex digits, the sequence
//! number in hex, the MAC's first 128 bits (RFC 2104's truncation, at half the hash's length)
//! as 32 hex digits. (Up to v3 these were five headers and the whole MAC: about 90 bytes more a
//! request, and the answer's proof below about 50 more; at 160 peer messages a second those
//! were a third of the peer traffic's growth from signing the answers.)
//!
//! Replay protection is a challenge and a sequence, as in IPsec's anti-replay window:
//! - The **epoch** is the receiver's challenge: a random number it draws when it starts and sends
//!   on every answer to a peer request (in `x-electd-answer`, or `x-electd-epoch` on an answer it
//!   does not sign). It accepts only requests signed for
//!   its current epoch, so nothing recorded before it started passes (`stale_epoch`); a sender
//!   learns the epoch from that answer and signs again at once (one round trip a receiver start).
//! - The **session** is drawn by the sender when it starts, and **seq** counts its requests.
//!   Within one epoch the receiver remembers, for each sender and session, the highest seq and
//!   which of the [`SEQ_WINDOW`] below it it accepted: a seq seen before, or older than the
//!   window, is `replayed`. It keeps [`MAX_SESSIONS`] sessions a sender; a sender that started
//!   more often than that in one epoch makes the receiver draw a new epoch and forget them all
//!   (only a holder of the secret can open a session).
//! - **Epochs age** ([`EPOCH_LIFETIME`]): the receiver draws a new epoch when its current one
//!   is that old, and accepts requests signed for the one before for one more lifetime (a
//!   sender learns the new one from the next answer, so none is refused in passing). A
//!   membership change that drops a peer draws a new one at once and drops the one before
//!   ([`PeerAuth::forget`]): every sender then pays one `stale_epoch` round trip. So a
//!   request withheld on the path and delivered late is refused once it is two lifetimes old,
//!   however few requests its sender made since: requests expire in the receiver's own time.
//!   The receiver's monotonic clock decides, no other machine's.
//! - The **timestamp** (the sender's wall clock) decides nothing: the receiver reports how far
//!   it is from its own wall clock (`clock_offset_ms` per peer in `/v1/status`, a warning in the
//!   log past [`CLOCK_SKEW_WARN_MS`]). Leases and claims are judged on each node's monotonic
//!   clock (src/clock.rs), so a node whose wall clock is wrong is neither refused nor trusted
//!   less for it (docs/security.md, "Peer authentication").
//!
//! A missing header is `missing_auth`, a MAC that does not match `bad_signature`; each refusal is
//! a 401 counted by reason in `/metrics`. The sender id, its address (`x-electd-addr`, which a
//! receiver may learn the sender's address from) and the cluster id are covered by the MAC, so
//! none can be swapped.
//!
//! **Answers are signed too.** A request's answer is worth as much as a vote or an
//! acknowledgement (a claim rests on a majority of answers), and the network between hosts is
//! hostile in this mode: it may forge and replay answers. The receiver of an authenticated
//! request signs its answer ([`PeerAuth::answer_mac`]; `x-electd-answer: EPOCH.MAC`, as the
//! request's proof writes them) over
//!
//! ```text
//! electd-answer-v2 \n cluster id \n answering member \n its epoch \n status \n the request's MAC \n body
//! ```
//!
//! The request's MAC is unique (its sequence number), so an answer recorded earlier answers no
//! other request; the answering member is the one the request was sent to, so a member's answer
//! cannot stand for another's. The sender checks it ([`PeerAuth::verify_answer`]) before it
//! reads the answer, the epoch in it included; an answer without a valid MAC is no answer
//! (counted as `rejected_peer_answers`, logged once per peer).
//!
//! The secret is a [`Secret`]: its `Debug` is redacted, it is never serialised, and it appears in
//! no log and no status. The epoch and the session come from the operating system's random
//! source, not from the node's `--seed`: they are challenges, which a seed would make
//! predictable, and they change no decision of the node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::config::{ExposeSecret, Secret};
use crate::role::NodeId;

/// The sender's wall clock (ms since the Unix epoch), with or without a secret.
pub const HDR_TS: &str = "x-electd-ts";
/// A signed request's proof: `EPOCH.SESSION.SEQ.MAC` ([`Proof`]).
pub const HDR_PROOF: &str = "x-electd-proof";
/// The receiver's epoch on an answer it does not sign (a request without a valid MAC), in 16
/// hex digits as the proofs write it; a signed answer names it in [`HDR_ANSWER`].
pub const HDR_EPOCH: &str = "x-electd-epoch";
/// The sender's own address (quorum mode), covered by the request's MAC: a member that has
/// not yet applied the change that added the sender learns it from its requests, or it could
/// never hear from a leader added while it was cut off (the address book is kept from the
/// log, which that leader sends).
pub const HDR_ADDR: &str = "x-electd-addr";
/// A signed answer's epoch and MAC: `EPOCH.MAC` (see the module's notes).
pub const HDR_ANSWER: &str = "x-electd-answer";
/// The bytes of a MAC that travel: HMAC-SHA256's first 128 bits.
pub const MAC_LEN: usize = 16;

/// How many sequence numbers below a sender's highest the receiver still tells apart; an older
/// one is refused. A sender's requests overtake one another by far fewer (a request is signed
/// after the fault layer's delay, just before it is sent).
pub const SEQ_WINDOW: u64 = 1 << 16;
/// Sessions remembered per sender within one epoch.
pub const MAX_SESSIONS: usize = 8;
/// How long a receiver keeps one epoch before it draws the next; a request is accepted at most
/// two of these after its epoch began, so at most that long after it was signed.
pub const EPOCH_LIFETIME: std::time::Duration = std::time::Duration::from_secs(10);
/// A peer whose wall clock differs from ours by more than this is named in the log.
pub const CLOCK_SKEW_WARN_MS: u64 = 1_000;

type HmacSha256 = Hmac<Sha256>;

/// The signed parts of one request.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    pub cluster: &'a str,
    pub from: NodeId,
    /// The address the sender names for itself (`x-electd-addr`; empty when it names none).
    pub addr: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    /// The receiver's epoch the sender signed for (0: not known yet).
    pub epoch: u64,
    pub session: u64,
    pub seq: u64,
    pub ts_ms: u64,
    pub body: &'a [u8],
}

/// The signed parts of one answer to a signed request.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    pub cluster: &'a str,
    /// The member that answers: the one the request was sent to.
    pub from: NodeId,
    /// Its epoch as a receiver, which the answer also names in `x-electd-answer`.
    pub epoch: u64,
    pub status: u16,
    /// The MAC of the request answered (hex, as it travelled in its proof).
    pub request_mac: &'a str,
    pub body: &'a [u8],
}

/// What a signed request carries besides its timestamp: [`HDR_PROOF`], `EPOCH.SESSION.SEQ.MAC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    pub epoch: u64,
    pub session: u64,
    pub seq: u64,
    pub ts_ms: u64,
    pub mac_hex: String,
}

impl Proof {
    /// The proof as request headers: [`HDR_TS`] and [`HDR_PROOF`].
    pub fn headers(&self) -> [(&'static str, String); 2] {
        [(HDR_TS, self.ts_ms.to_string()), (HDR_PROOF, self.header())]
    }

    /// The value of [`HDR_PROOF`].
    pub fn header(&self) -> String {
        format!(
            "{:016x}.{:016x}.{:x}.{}",
            self.epoch, self.session, self.seq, self.mac_hex
        )
    }

    /// The epoch, session, sequence number and MAC (hex) of a [`HDR_PROOF`] value, with
    /// `ts_ms` from [`HDR_TS`]; `None` when it is not of that form. Only the form
    /// [`Proof::header`] writes is taken (lowercase hex digits, nothing else): the receiver
    /// binds its answer to the MAC as it travelled, so a MAC rewritten in another case on the
    /// way would pass the request and fail the answer.
    pub fn parse(value: &str, ts_ms: u64) -> Option<Proof> {
        let hex = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let mut parts = value.split('.');
        let mut num = || {
            let s = parts.next().filter(|s| hex(s) && s.len() <= 16)?;
            u64::from_str_radix(s, 16).ok()
        };
        let (epoch, session, seq) = (num()?, num()?, num()?);
        let mac_hex = parts.next()?;
        if parts.next().is_some() || mac_hex.len() != 2 * MAC_LEN || !hex(mac_hex) {
            return None;
        }
        Some(Proof {
            epoch,
            session,
            seq,
            ts_ms,
            mac_hex: mac_hex.to_string(),
        })
    }
}

/// The value of [`HDR_ANSWER`]: the answering member's epoch and the answer's MAC (hex).
pub fn answer_header(epoch: u64, mac_hex: &str) -> String {
    format!("{epoch:016x}.{mac_hex}")
}

/// The epoch and the MAC (hex) of a [`HDR_ANSWER`] value.
pub fn parse_answer_header(value: &str) -> Option<(u64, &str)> {
    let (epoch, mac) = value.split_once('.')?;
    Some((u64::from_str_radix(epoch, 16).ok()?, mac))
}

/// Why a request's proof was refused; `reason()` is the label counted in `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("peer request carries no proof of the cluster secret")]
    Missing,
    #[error("peer request's signature does not match")]
    BadSignature,
    #[error("peer request was signed for another epoch of this node (sign again for the one its answer names)")]
    StaleEpoch,
    #[error("peer request was already received (replay)")]
    Replayed,
}

impl AuthError {
    pub fn reason(self) -> &'static str {
        match self {
            AuthError::Missing => "missing_auth",
            AuthError::BadSignature => "bad_signature",
            AuthError::StaleEpoch => "stale_epoch",
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

/// A random number other than 0 (0 stands for "not known").
fn draw() -> u64 {
    loop {
        let x = rand::rngs::OsRng.next_u64();
        if x != 0 {
            return x;
        }
    }
}

/// The sequence numbers of one sender's session that the receiver has accepted: the highest,
/// and a ring of [`SEQ_WINDOW`] bits for those below it (bit `seq % SEQ_WINDOW`).
struct Window {
    top: u64,
    bits: Vec<u64>,
}

impl Window {
    fn new() -> Window {
        Window {
            top: 0,
            bits: vec![0; (SEQ_WINDOW / 64) as usize],
        }
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % SEQ_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Takes `seq` if it was not taken before and is not older than the window.
    fn accept(&mut self, seq: u64) -> bool {
        if seq > self.top {
            // Forget what the ring held for the numbers that now fall out of the window.
            let fresh = seq - self.top;
            if fresh >= SEQ_WINDOW {
                self.bits.fill(0);
            } else {
                for s in (self.top + 1)..=seq {
                    let (w, b) = Window::bit(s);
                    self.bits[w] &= !b;
                }
            }
            self.top = seq;
        } else if self.top - seq >= SEQ_WINDOW {
            // Older than the window (written without an addition: `seq + SEQ_WINDOW` overflowed
            // near u64::MAX, a panic under the receiver's lock in debug builds).
            return false;
        }
        let (w, b) = Window::bit(seq);
        if self.bits[w] & b != 0 {
            return false;
        }
        self.bits[w] |= b;
        true
    }
}

/// What a receiver accepted from each sender in one epoch: its sessions and their windows.
type Sessions = HashMap<NodeId, Vec<(u64, Window)>>;

/// The receiving side's state: its epoch, when it began and what it accepted in it, and the
/// epoch before, still accepted until `until`.
struct Receiver {
    epoch: u64,
    since: Instant,
    sessions: Sessions,
    previous: Option<(u64, Sessions, Instant)>,
}

impl Receiver {
    fn new(now: Instant) -> Receiver {
        Receiver {
            epoch: draw(),
            since: now,
            sessions: HashMap::new(),
            previous: None,
        }
    }

    /// At `now`: a new epoch if the current one is [`EPOCH_LIFETIME`] old, the current one
    /// kept as the previous until two lifetimes after it began; a previous one past that,
    /// forgotten.
    fn age(&mut self, now: Instant) {
        if self
            .previous
            .as_ref()
            .is_some_and(|(_, _, until)| now >= *until)
        {
            self.previous = None;
        }
        if now.saturating_duration_since(self.since) < EPOCH_LIFETIME {
            return;
        }
        let until = self.since + 2 * EPOCH_LIFETIME;
        let old = std::mem::take(&mut self.sessions);
        self.previous = (now < until).then_some((self.epoch, old, until));
        self.epoch = draw();
        self.since = now;
    }

    /// The sessions of `epoch`, if requests signed for it are accepted.
    fn sessions_of(&mut self, epoch: u64) -> Option<&mut Sessions> {
        if epoch == self.epoch {
            return Some(&mut self.sessions);
        }
        match &mut self.previous {
            Some((e, sessions, _)) if *e == epoch => Some(sessions),
            _ => None,
        }
    }
}

/// One node's signer and verifier.
pub struct PeerAuth {
    secret: Secret,
    /// This process's session as a sender, and its next sequence number.
    session: u64,
    seq: AtomicU64,
    /// The epoch each peer last told us (what we sign for).
    epochs: Mutex<HashMap<NodeId, u64>>,
    receiver: Mutex<Receiver>,
}

impl PeerAuth {
    pub fn new(secret: Secret) -> PeerAuth {
        PeerAuth {
            secret,
            session: draw(),
            seq: AtomicU64::new(1),
            epochs: Mutex::new(HashMap::new()),
            receiver: Mutex::new(Receiver::new(Instant::now())),
        }
    }

    fn mac(&self, s: &Signed<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(self.secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        let head = format!(
            "electd-peer-v4\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n",
            s.cluster, s.from, s.addr, s.method, s.path, s.epoch, s.session, s.seq, s.ts_ms
        );
        mac.update(head.as_bytes());
        mac.update(s.body);
        mac
    }

    /// The MAC of request `s` (what [`PeerAuth::sign`] puts in its proof), for any session and
    /// sequence number: the fuzz target signs with it.
    pub fn tag(&self, s: &Signed<'_>) -> [u8; MAC_LEN] {
        let full = self.mac(s).finalize().into_bytes();
        full[..MAC_LEN]
            .try_into()
            .expect("a MAC is longer than MAC_LEN")
    }

    fn answer(&self, a: &Answer<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(self.secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        let head = format!(
            "electd-answer-v2\n{}\n{}\n{}\n{}\n{}\n",
            a.cluster, a.from, a.epoch, a.status, a.request_mac
        );
        mac.update(head.as_bytes());
        mac.update(a.body);
        mac
    }

    /// The MAC of answer `a` (hex), which its sender puts in [`HDR_ANSWER`].
    pub fn answer_mac(&self, a: &Answer<'_>) -> String {
        to_hex(&self.answer(a).finalize().into_bytes()[..MAC_LEN])
    }

    /// Whether `mac_hex` is the MAC of answer `a` (compared in constant time).
    pub fn verify_answer(&self, a: &Answer<'_>, mac_hex: &str) -> bool {
        from_hex(mac_hex).is_some_and(|given| self.answer(a).verify_truncated_left(&given).is_ok())
    }

    /// This node's current epoch as a receiver (sent on every answer to a peer request).
    pub fn epoch(&self) -> u64 {
        self.epoch_at(Instant::now())
    }

    /// [`PeerAuth::epoch`] at `now` (the fuzz target moves time on by itself).
    pub fn epoch_at(&self, now: Instant) -> u64 {
        let mut r = self.receiver.lock().expect("receiver lock");
        r.age(now);
        r.epoch
    }

    /// The epoch of `peer` that requests to it are signed for (0 until it has answered once).
    pub fn epoch_of(&self, peer: NodeId) -> u64 {
        let epochs = self.epochs.lock().expect("epochs lock");
        epochs.get(&peer).copied().unwrap_or(0)
    }

    /// Forgets what this node keeps of `peers` (their sessions as senders, their epochs as
    /// receivers): they left the membership. Their windows go, so the epoch goes too: a new
    /// one is drawn and the previous one no longer accepted, or a request a removed member
    /// signed before its removal would pass again, replayed, once that id was added back
    /// within the epoch's life (`a_forgotten_peers_requests_do_not_pass_again`). Every other
    /// peer re-signs after one `stale_epoch` answer.
    pub fn forget(&self, peers: &[NodeId]) {
        let mut r = self.receiver.lock().expect("receiver lock");
        let mut epochs = self.epochs.lock().expect("epochs lock");
        for id in peers {
            epochs.remove(id);
        }
        *r = Receiver::new(Instant::now());
    }

    /// `peer` answered with `epoch`: requests to it are signed for that one from now on.
    pub fn learn_epoch(&self, peer: NodeId, epoch: u64) {
        self.epochs.lock().expect("epochs lock").insert(peer, epoch);
    }

    /// Signs a request for the receiver's `epoch`, stamped `ts_ms` (wall-clock, [`wall_ms`]
    /// when sending), with the next sequence number of this session.
    #[allow(clippy::too_many_arguments)]
    pub fn sign(
        &self,
        cluster: &str,
        from: NodeId,
        addr: &str,
        epoch: u64,
        method: &str,
        path: &str,
        body: &[u8],
        ts_ms: u64,
    ) -> Proof {
        let s = Signed {
            cluster,
            from,
            addr,
            method,
            path,
            epoch,
            session: self.session,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            ts_ms,
            body,
        };
        let tag = self.mac(&s).finalize().into_bytes();
        Proof {
            epoch: s.epoch,
            session: s.session,
            seq: s.seq,
            ts_ms: s.ts_ms,
            mac_hex: to_hex(&tag[..MAC_LEN]),
        }
    }

    /// Checks a received request; on success remembers its sequence number so that the same
    /// request is refused if it comes again.
    pub fn verify(&self, s: &Signed<'_>, mac_hex: &str) -> Result<(), AuthError> {
        self.verify_at(s, mac_hex, Instant::now())
    }

    /// [`PeerAuth::verify`] at `now` (the fuzz target moves time on by itself).
    pub fn verify_at(&self, s: &Signed<'_>, mac_hex: &str, now: Instant) -> Result<(), AuthError> {
        let given = from_hex(mac_hex).ok_or(AuthError::BadSignature)?;
        // The MAC first, in constant time: an unauthenticated request learns nothing else.
        self.mac(s)
            .verify_truncated_left(&given)
            .map_err(|_| AuthError::BadSignature)?;
        let mut r = self.receiver.lock().expect("receiver lock");
        r.age(now);
        let current = s.epoch == r.epoch;
        let Some(epoch_sessions) = r.sessions_of(s.epoch) else {
            return Err(AuthError::StaleEpoch);
        };
        let sessions = epoch_sessions.entry(s.from).or_default();
        let at = match sessions.iter().position(|(id, _)| *id == s.session) {
            Some(at) => at,
            None if sessions.len() < MAX_SESSIONS => {
                sessions.push((s.session, Window::new()));
                sessions.len() - 1
            }
            None if current => {
                // More sender restarts in one epoch than we remember: start a new epoch, in
                // which nothing signed before can pass, and forget every window.
                *r = Receiver::new(now);
                return Err(AuthError::StaleEpoch);
            }
            // The previous epoch: sign for the current one.
            None => return Err(AuthError::StaleEpoch),
        };
        if sessions[at].1.accept(s.seq) {
            Ok(())
        } else {
            Err(AuthError::Replayed)
        }
    }
}

fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// A MAC as it travels ([`MAC_LEN`] bytes in hex).
fn from_hex(text: &str) -> Option<[u8; MAC_LEN]> {
    let mut out = [0u8; MAC_LEN];
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
}
