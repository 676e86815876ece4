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
//! - [`peer_auth`]: the proof headers of a peer request through verification.

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};

use crate::auth::{PeerAuth, Signed};
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

/// Splits `data` at newlines into timestamp, sequence number, MAC and body, and verifies them as
/// a request to a node with a fixed secret.
pub fn peer_auth(data: &[u8]) {
    let mut parts = data.splitn(4, |b| *b == b'\n');
    let mut field = || std::str::from_utf8(parts.next().unwrap_or_default()).unwrap_or("");
    let ts_ms = field().parse::<u64>().unwrap_or(0);
    let nonce = field().parse::<u64>().unwrap_or(0);
    let mac = field().to_string();
    let body = data.splitn(4, |b| *b == b'\n').nth(3).unwrap_or_default();
    let auth = PeerAuth::new(Secret::from("fuzzing-secret-0123456789"));
    // Signed for the receiver's own epoch (and once for another), so that a MAC that matches
    // reaches the sequence window.
    for epoch in [auth.epoch(), ts_ms] {
        let signed = Signed {
            cluster: "fuzz",
            from: 2,
            method: "POST",
            path: "/peer/msg",
            epoch,
            session: ts_ms ^ nonce,
            seq: nonce,
            ts_ms,
            body,
        };
        let _ = auth.verify(&signed, &mac);
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
}
