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
//! A lost message is never reported as such to the sender: the sender waits until its request
//! deadline and sees a timeout, as it would behind an iptables DROP rule.

use std::sync::Mutex;
use std::time::Duration;

pub use electd_client::FaultSet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::role::NodeId;

/// What the fault layer decides for one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver after this delay.
    Deliver(Duration),
    /// Lose the message.
    Drop,
}

/// The fault set in force plus the seeded random source for drop decisions.
pub struct Faults {
    set: Mutex<FaultSet>,
    rng: Mutex<StdRng>,
}

impl Faults {
    pub fn new(seed: u64) -> Faults {
        Faults {
            set: Mutex::new(FaultSet::default()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    pub fn get(&self) -> FaultSet {
        self.set.lock().expect("faults lock").clone()
    }

    pub fn replace(&self, set: FaultSet) {
        *self.set.lock().expect("faults lock") = set;
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

#[cfg(test)]
mod tests {
    use super::*;

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
