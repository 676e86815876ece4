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
    /// The sender is neither a member nor a sender the receiver may learn (its stranger cap
    /// is full): nothing is kept for it, not even a replay window.
    #[error("peer request's sender is no member of this node's membership, and no more strangers are kept")]
    Unadmitted,
}

impl AuthError {
    pub fn reason(self) -> &'static str {
        match self {
            AuthError::Missing => "missing_auth",
            AuthError::BadSignature => "bad_signature",
            AuthError::StaleEpoch => "stale_epoch",
            AuthError::Replayed => "replayed",
            AuthError::Unadmitted => "unknown_peer",
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
    /// A second secret taken as well as `secret` while the cluster's secret is changed, node by
    /// node (`cluster_secret_previous`, docs/operations.md, "Changing the cluster secret"):
    /// requests and answers MAC'd with it pass; nothing is signed with it.
    also: Option<Secret>,
    /// This process's session as a sender, and its next sequence number.
    session: u64,
    seq: AtomicU64,
    /// The epoch each peer last told us (what we sign for).
    epochs: Mutex<HashMap<NodeId, u64>>,
    receiver: Mutex<Receiver>,
}

impl PeerAuth {
    pub fn new(secret: Secret) -> PeerAuth {
        PeerAuth::rolling(secret, None)
    }

    /// A signer with `secret` that also takes what `also` MAC'd (a secret being rolled).
    pub fn rolling(secret: Secret, also: Option<Secret>) -> PeerAuth {
        PeerAuth {
            also,
            secret,
            session: draw(),
            seq: AtomicU64::new(1),
            epochs: Mutex::new(HashMap::new()),
            receiver: Mutex::new(Receiver::new(Instant::now())),
        }
    }

    /// The secrets a MAC is checked against: the one signed with, then the rolled one.
    fn secrets(&self) -> impl Iterator<Item = &Secret> {
        std::iter::once(&self.secret).chain(self.also.as_ref())
    }

    fn mac(&self, s: &Signed<'_>) -> HmacSha256 {
        Self::mac_with(&self.secret, s)
    }

    fn mac_with(secret: &Secret, s: &Signed<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(secret.expose_secret().as_bytes())
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
        Self::answer_with(&self.secret, a)
    }

    fn answer_with(secret: &Secret, a: &Answer<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(secret.expose_secret().as_bytes())
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
        from_hex(mac_hex).is_some_and(|given| {
            self.secrets().any(|k| {
                Self::answer_with(k, a)
                    .verify_truncated_left(&given)
                    .is_ok()
            })
        })
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
        self.verify_admitted(s, mac_hex, now, || true)
    }

    /// [`PeerAuth::verify_at`] for a receiver that keeps windows only for the senders it
    /// admits: once the MAC held and the epoch is current, a sender this epoch keeps nothing
    /// for is asked about (`admit`: a member, or a stranger within the cap) before anything is
    /// kept for it; refused, it costs no memory (issue 48, item 3: a window of [`SEQ_WINDOW`]
    /// bits, 8 KiB, was kept for every `from` a secret holder wrote, before the stranger cap
    /// refused it). `admit` runs under the receiver's lock.
    pub fn verify_admitted(
        &self,
        s: &Signed<'_>,
        mac_hex: &str,
        now: Instant,
        admit: impl FnOnce() -> bool,
    ) -> Result<(), AuthError> {
        let given = from_hex(mac_hex).ok_or(AuthError::BadSignature)?;
        // The MAC first, in constant time (against each secret taken): an unauthenticated
        // request learns nothing else.
        if !self
            .secrets()
            .any(|k| Self::mac_with(k, s).verify_truncated_left(&given).is_ok())
        {
            return Err(AuthError::BadSignature);
        }
        let mut r = self.receiver.lock().expect("receiver lock");
        r.age(now);
        let current = s.epoch == r.epoch;
        let Some(epoch_sessions) = r.sessions_of(s.epoch) else {
            return Err(AuthError::StaleEpoch);
        };
        if !epoch_sessions.contains_key(&s.from) && !admit() {
            return Err(AuthError::Unadmitted);
        }
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
mod tests;
