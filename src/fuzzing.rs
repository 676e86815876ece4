//! Entry points of the fuzz targets (`fuzz/`, cargo-fuzz; bounded runs in `scripts/test.sh`):
//! everything a node decodes from bytes that someone else controls. Each takes arbitrary bytes
//! and must return without panicking, whatever they hold.
//!
//! - [`peer_message`]: every peer message body exactly as the `/peer/` handlers decode it
//!   (openraft's append, vote and snapshot requests, the pre-vote and the resignation, bully,
//!   ring and invitation messages),
//!   and the admin fault set; a decoded legacy message is then stepped through a state machine
//!   of each algorithm, from every member the transport would let through.
//! - [`config_text`]: a config file through parsing (with its error hint) and validation.
//! - [`peer_auth`]: the proof headers of a peer request through verification: a MAC that was not
//!   made with the key is refused, and requests signed with the key are accepted exactly as the
//!   replay window says (once each, never a replay, whatever the sequence numbers).

use std::collections::{BTreeSet, HashMap};

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};

use crate::auth::{AuthError, PeerAuth, Proof, Signed, EPOCH_LIFETIME, MAX_SESSIONS, SEQ_WINDOW};
use crate::config::{Config, Secret};
use crate::faults::FaultSet;
use crate::legacy::{Algorithm, Bully, BullyMsg, Invitation, InvitationMsg, Ring, RingMsg, Ticks};
use crate::quorum::{Hello, PreVoteRequest, Resign, TypeConfig};
use crate::role::NodeId;

const MEMBERS: [NodeId; 5] = [1, 2, 3, 4, 5];
const ME: NodeId = 3;

/// Decodes `data` as each peer message type, and steps the legacy ones.
pub fn peer_message(data: &[u8]) {
    let _ = serde_json::from_slice::<AppendEntriesRequest<TypeConfig>>(data);
    let _ = serde_json::from_slice::<VoteRequest<NodeId>>(data);
    let _ = serde_json::from_slice::<InstallSnapshotRequest<TypeConfig>>(data);
    let _ = serde_json::from_slice::<Resign>(data);
    let _ = serde_json::from_slice::<PreVoteRequest>(data);
    let _ = serde_json::from_slice::<Hello>(data);
    if let Ok(set) = serde_json::from_slice::<FaultSet>(data) {
        let _ = set.validate(&MEMBERS);
    }
    if let Ok(msg) = serde_json::from_slice::<BullyMsg>(data) {
        drive::<Bully>(msg);
    }
    if let Ok(msg) = serde_json::from_slice::<RingMsg>(data) {
        drive::<Ring>(msg);
    }
    if let Ok(msg) = serde_json::from_slice::<InvitationMsg>(data) {
        drive::<Invitation>(msg);
    }
}

/// A fresh node and one that has run an election, each stepped with `msg` from every other
/// member, ticked, and told that sending `msg` failed.
fn drive<A: Algorithm>(msg: A::Msg) {
    let ticks = Ticks::from_timing(50, 300);
    for started in [false, true] {
        for from in MEMBERS.into_iter().filter(|&m| m != ME) {
            let mut a = A::new(ME, MEMBERS.to_vec(), ticks);
            if started {
                a.start();
                for _ in 0..3 {
                    a.tick();
                }
            }
            a.step(from, msg.clone());
            a.tick();
            a.delivery_failed(from, msg.clone());
            let _ = a.view();
            let _ = a.take_outbox();
        }
    }
}

/// Parses `data` as a config file and validates it.
pub fn config_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = Config::from_toml(text, std::path::Path::new("fuzz.toml")) {
        let _ = cfg.validate();
    }
}

/// The cluster secret of [`peer_auth`]'s receiver. The target holds it, as a peer does, so that
/// it can sign requests properly; the fuzzer's bytes never contain it.
pub const PEER_AUTH_KEY: &str = "fuzzing-secret-0123456789";

/// The MAC of `s` made with [`PEER_AUTH_KEY`], as a sender computes it ([`PeerAuth::tag`]: the
/// target needs MACs for any session and sequence number, which `PeerAuth::sign` does not give).
fn key_mac(s: &Signed<'_>) -> [u8; crate::auth::MAC_LEN] {
    static KEY: std::sync::OnceLock<PeerAuth> = std::sync::OnceLock::new();
    KEY.get_or_init(|| PeerAuth::new(crate::config::Secret::from(PEER_AUTH_KEY)))
        .tag(s)
}

/// A request of the fuzz targets, to `/peer/msg` of cluster `fuzz`.
fn request(
    from: NodeId,
    epoch: u64,
    session: u64,
    seq: u64,
    ts_ms: u64,
    body: &[u8],
) -> Signed<'_> {
    Signed {
        cluster: "fuzz",
        from,
        addr: "",
        method: "POST",
        path: "/peer/msg",
        epoch,
        session,
        seq,
        ts_ms,
        body,
    }
}

/// Peer authentication, both ways:
/// - `forged_requests`: the bytes as the proof headers of a request, whose MAC the fuzzer
///   made without the key: it must be refused as `bad_signature`;
/// - `signed_requests`: the bytes as a script of requests that the target signs with the key
///   (some for another epoch, replays, sequence numbers near `u64::MAX`, more sessions than a
///   receiver keeps): each must be accepted or refused as the replay window and the epoch say.
pub fn peer_auth(data: &[u8]) {
    forged_requests(data);
    signed_requests(data);
}

/// Splits `data` at newlines into timestamp, sequence number, MAC and body, and verifies them as
/// a request to a node with [`PEER_AUTH_KEY`]: a MAC other than the key's for those parts is
/// refused, before anything else is looked at.
fn forged_requests(data: &[u8]) {
    // The bytes as an `x-electd-proof` value: parsed without a panic, and what parses writes
    // back the same once it is normalised.
    if let Some(p) = std::str::from_utf8(data)
        .ok()
        .and_then(|v| Proof::parse(v, 0))
    {
        assert_eq!(Proof::parse(&p.header(), 0).map(|q| q.seq), Some(p.seq));
    }
    let mut parts = data.splitn(4, |b| *b == b'\n');
    let mut field = || std::str::from_utf8(parts.next().unwrap_or_default()).unwrap_or("");
    let ts_ms = field().parse::<u64>().unwrap_or(0);
    let nonce = field().parse::<u64>().unwrap_or(0);
    let mac = field().to_string();
    let body = data.splitn(4, |b| *b == b'\n').nth(3).unwrap_or_default();
    let auth = PeerAuth::new(Secret::from(PEER_AUTH_KEY));
    // Signed for the receiver's own epoch (and once for another), so that a MAC that matches
    // would reach the sequence window.
    for epoch in [auth.epoch(), ts_ms] {
        let signed = request(2, epoch, ts_ms ^ nonce, nonce, ts_ms, body);
        let got = auth.verify(&signed, &mac);
        // Only the key's MAC (in any hex case) may pass; the fuzzer cannot make it.
        let keys = hex::decode(&mac).is_ok_and(|m| m == key_mac(&signed));
        if !keys {
            assert_eq!(
                got,
                Err(AuthError::BadSignature),
                "a MAC not made with the key: {signed:?} MAC {mac:?}"
            );
        }
    }
}

/// What the receiver must have accepted from one sender's session: the highest sequence number
/// and every one accepted.
#[derive(Default)]
struct Window {
    top: u64,
    taken: BTreeSet<u64>,
}

/// What the model holds of one sender's sessions in one epoch.
type Senders = HashMap<NodeId, Vec<(u64, Window)>>;

/// The receiver as docs/security.md's "Peer authentication" describes it: its epoch, when it
/// began and a window for each of at most [`MAX_SESSIONS`] sessions of each sender; and the
/// epoch before, taken until two lifetimes after it began ([`EPOCH_LIFETIME`]).
struct Model {
    epoch: u64,
    since_ms: u64,
    senders: Senders,
    previous: Option<(u64, Senders, u64)>,
}

impl Model {
    /// Whether the receiver must draw a new epoch at `now_ms`; if so the model keeps the one
    /// it had as the previous (or forgets it, two lifetimes on) and awaits the new number.
    fn age(&mut self, now_ms: u64) -> bool {
        let life = EPOCH_LIFETIME.as_millis() as u64;
        if self
            .previous
            .as_ref()
            .is_some_and(|(_, _, until)| now_ms >= *until)
        {
            self.previous = None;
        }
        if now_ms - self.since_ms < life {
            return false;
        }
        let until = self.since_ms + 2 * life;
        let old = std::mem::take(&mut self.senders);
        self.previous = (now_ms < until).then_some((self.epoch, old, until));
        self.since_ms = now_ms;
        true
    }

    /// What the receiver must answer to a request with a valid MAC, and the model after it.
    fn verify(
        &mut self,
        from: NodeId,
        epoch: u64,
        session: u64,
        seq: u64,
    ) -> Result<(), AuthError> {
        let current = epoch == self.epoch;
        let senders = match &mut self.previous {
            _ if current => &mut self.senders,
            Some((e, senders, _)) if *e == epoch => senders,
            _ => return Err(AuthError::StaleEpoch),
        };
        let sessions = senders.entry(from).or_default();
        let at = match sessions.iter().position(|(id, _)| *id == session) {
            Some(at) => at,
            None if sessions.len() < MAX_SESSIONS => {
                sessions.push((session, Window::default()));
                sessions.len() - 1
            }
            // Too many sessions: the receiver starts a new epoch (the caller learns it), or,
            // in the previous epoch, refuses.
            None => return Err(AuthError::StaleEpoch),
        };
        let w = &mut sessions[at].1;
        // Within the window below the highest, a number not taken before is taken (requests
        // overtake one another); at or above it, always; older, never.
        let fresh = !w.taken.contains(&seq) && (seq > w.top || w.top - seq < SEQ_WINDOW);
        if !fresh {
            return Err(AuthError::Replayed);
        }
        w.top = w.top.max(seq);
        w.taken.insert(seq);
        Ok(())
    }
}

/// How many requests one input makes at most (each 9 bytes of it).
const MAX_REQUESTS: usize = 64;

/// The sender, epoch, session and sequence number record `op`/`raw` signs with: the current
/// epoch, the previous one, or any; a fresh number, a low or a high one, or the previous
/// request's again (a replay).
fn addressed(
    op: u8,
    raw: u64,
    model: &Model,
    previous: Option<(NodeId, u64, u64, u64)>,
) -> (NodeId, u64, u64, u64) {
    let from: NodeId = if op & 0x80 != 0 { 4 } else { 2 };
    let session = 1 + u64::from(op & 0x0f) % 10;
    let epoch = if op & 0x40 != 0 {
        raw
    } else if op & 0x08 != 0 {
        // The previous epoch, while there is one (a sender that has not heard of the new).
        model.previous.as_ref().map_or(model.epoch, |(e, _, _)| *e)
    } else {
        model.epoch
    };
    match (op >> 4) & 3 {
        0 => (from, epoch, session, raw),
        1 => (from, epoch, session, raw % 256),
        2 => (from, epoch, session, u64::MAX - raw % 256),
        _ => previous.unwrap_or((from, epoch, session, raw)),
    }
}

/// Reads `data` as requests of 9 bytes (an op byte, then 8 little-endian bytes `raw`), signs
/// each with the key and checks the receiver's answer against [`Model`]. The op byte: bit 7 the
/// sender (node 2 or 4); bit 6 signed for the epoch `raw` instead of the receiver's; bits 4–5
/// the sequence number: `raw`, `raw % 256` (dense: reorderings and repeats), `u64::MAX - raw %
/// 256` (the top of the range), or the previous request again, as it was (a replay); bits 0–3
/// the session, one of 10 (more than the [`MAX_SESSIONS`] a receiver keeps a sender). An op
/// byte of `0x3f` or `0xff` moves the receiver's clock on by `raw` ms modulo three epoch
/// lifetimes instead (its epochs age; a request signed for the previous one may follow).
fn signed_requests(data: &[u8]) {
    let auth = PeerAuth::new(Secret::from(PEER_AUTH_KEY));
    let t0 = tokio::time::Instant::now();
    let mut now_ms = 0u64;
    let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
    let mut model = Model {
        epoch: auth.epoch_at(t0),
        since_ms: 0,
        senders: HashMap::new(),
        previous: None,
    };
    let mut previous: Option<(NodeId, u64, u64, u64)> = None;
    for rec in data.chunks_exact(9).take(MAX_REQUESTS) {
        let op = rec[0];
        let raw = u64::from_le_bytes(rec[1..9].try_into().expect("8 bytes"));
        if op & 0x3f == 0x3f {
            now_ms += raw % (3 * EPOCH_LIFETIME.as_millis() as u64);
            let before = model.epoch;
            let rotated = model.age(now_ms);
            let got = auth.epoch_at(at(now_ms));
            assert_eq!(
                got != before,
                rotated,
                "epoch {before} -> {got} at {now_ms} ms"
            );
            model.epoch = got;
            continue;
        }
        let (from, epoch, session, seq) = addressed(op, raw, &model, previous);
        previous = Some((from, epoch, session, seq));
        let signed = request(from, epoch, session, seq, raw, rec);
        let mac = hex::encode(key_mac(&signed));
        let want = model.verify(from, epoch, session, seq);
        let epoch_before = model.epoch;
        let got = auth.verify_at(&signed, &mac, at(now_ms));
        assert_eq!(got, want, "{signed:?}");
        if epoch == epoch_before && want == Err(AuthError::StaleEpoch) {
            // A session too many: a new epoch, in which nothing earlier passes.
            let fresh = auth.epoch_at(at(now_ms));
            assert_ne!(fresh, epoch_before, "no new epoch after {signed:?}");
            model.epoch = fresh;
            model.since_ms = now_ms;
            model.senders.clear();
            model.previous = None;
        }
        // A request that was accepted is refused when it comes again.
        if got.is_ok() {
            assert_eq!(
                auth.verify_at(&signed, &mac, at(now_ms)),
                Err(AuthError::Replayed),
                "{signed:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds of the fuzz corpora, and some hostile inputs, run through every entry point
    /// (the fuzz targets themselves need cargo-fuzz and a nightly toolchain).
    #[test]
    fn entry_points_take_seeds_and_garbage() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
        let mut inputs: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"{".to_vec(),
            b"\xff\xfe".to_vec(),
            b"id = 1\n\xe2\x82".to_vec(),
            "[timing]\nheartbeat_ms = \"\u{1F600}\"".as_bytes().to_vec(),
            b"1\n2\nzz\n{}".to_vec(),
            br#"{"Election":{"epoch":18446744073709551615}}"#.to_vec(),
            br#"{"vote":{"leader_id":{"term":1,"node_id":2},"committed":false},"last_log_id":null}"#.to_vec(),
        ];
        let mut seeds = 0;
        for target in ["peer_message", "config_text", "peer_auth"] {
            if let Ok(entries) = std::fs::read_dir(dir.join(target)) {
                for e in entries.flatten() {
                    inputs.push(std::fs::read(e.path()).unwrap());
                    seeds += 1;
                }
            }
        }
        assert!(seeds >= 10, "the seed corpora in fuzz/seeds/ are missing");
        for data in &inputs {
            peer_message(data);
            config_text(data);
            peer_auth(data);
        }
    }

    /// The target's MACs are the node's: a request signed by `PeerAuth::sign` with the key
    /// carries the MAC [`key_mac`] makes for its parts.
    #[test]
    fn the_targets_macs_are_the_nodes() {
        let sender = PeerAuth::new(Secret::from(PEER_AUTH_KEY));
        for body in [&b""[..], b"{}", b"\n\xff"] {
            let p = sender.sign(
                "fuzz",
                2,
                "",
                77,
                "POST",
                "/peer/msg",
                body,
                1_700_000_000_000,
            );
            let s = request(2, p.epoch, p.session, p.seq, p.ts_ms, body);
            assert_eq!(hex::encode(key_mac(&s)), p.mac_hex);
        }
    }

    /// One request of [`signed_requests`]' script.
    fn op(op: u8, raw: u64) -> Vec<u8> {
        let mut v = vec![op];
        v.extend_from_slice(&raw.to_le_bytes());
        v
    }

    /// Scripts that reach each rule: accepted once and its replay refused, reordered within the
    /// window, older than the window, another epoch, a session too many.
    #[test]
    fn signed_scripts_reach_the_window_and_the_epoch() {
        let scripts: Vec<Vec<u8>> = vec![
            [op(0x00, 5), op(0x30, 0), op(0x00, 3), op(0x00, 5)].concat(),
            [op(0x00, 70_000), op(0x00, 4_465), op(0x00, 4_464)].concat(),
            [op(0x40, 9), op(0x80, 1), op(0x00, 1)].concat(),
            (0..10u8)
                .flat_map(|i| op(i, 1))
                .chain(op(0x00, 2))
                .collect(),
            [op(0x10, 300), op(0x10, 299)].concat(),
        ];
        for data in &scripts {
            peer_auth(data);
        }
    }

    /// Sequence numbers at the top of the range: the highest, then ones just below it, which
    /// are inside the window and new, so accepted. (The target found that `Window::accept` in
    /// src/auth.rs computed `seq + SEQ_WINDOW`, which overflowed there: a panic in a debug
    /// build, and a new number refused as `replayed` in a release build.)
    #[test]
    fn sequence_numbers_at_the_top_of_the_range() {
        peer_auth(&[op(0x20, 0), op(0x20, 1), op(0x20, 255), op(0x00, 0)].concat());
    }
}
