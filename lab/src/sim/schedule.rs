//! Schedules of faults for the quorum simulator, drawn from a seed: partitions (halves,
//! isolations, bridges, a ring of majorities), one-way cuts (written on either side), message
//! loss and delay, pauses longer than the lease, crashes with restarts (some inside the
//! followers' lease), resignations, and heals, each followed by a stretch of simulated time.

use std::fmt;

use electd::NodeId;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

/// Whom a step aims at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Whoever claims the leader role when the step runs (any member when nobody does).
    Leader,
    Node(NodeId),
}

/// One step of a schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Every cut, loss and delay cleared.
    Heal,
    /// No traffic between the groups (each direction written on its sender or its receiver).
    Split(Vec<Vec<NodeId>>),
    /// `target` cut off from everyone.
    Isolate(Target),
    /// Two sides that only `bridge` connects.
    Bridge {
        left: Vec<NodeId>,
        right: Vec<NodeId>,
        bridge: NodeId,
    },
    /// Each member reaches only its two neighbours on a ring: everyone sees a majority, no two
    /// the same one.
    RingOfMajorities,
    /// Messages from `from` to `to` are lost (written `block_to` on `from`, or `block_from` on
    /// `to`); the other way works.
    OneWay {
        from: Target,
        to: NodeId,
        on_receiver: bool,
    },
    /// Every member loses each message it sends or receives with this probability.
    Loss(f64),
    /// `node` delays every message it sends.
    Delay { node: NodeId, ms: u64 },
    /// `target` crashes (SIGKILL) and starts again after `down_ms` on what it had made durable.
    Crash { target: Target, down_ms: u64 },
    /// `target` is stopped (SIGSTOP) for `ms`, longer than its lease, then resumed.
    Pause { target: Target, ms: u64 },
    /// The claimant resigns, naming `to` or not.
    Resign { to: Option<NodeId> },
}

/// A step and how long the schedule runs after it, in simulated ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    pub step: Step,
    pub then_ms: u64,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Leader => f.write_str("the leader"),
            Target::Node(n) => write!(f, "node {n}"),
        }
    }
}

/// Draws `steps` steps for members `1..=nodes` with timings around `follower_lease_ms`.
pub fn draw(rng: &mut StdRng, nodes: usize, steps: usize, follower_lease_ms: u64) -> Vec<Timed> {
    let ids: Vec<NodeId> = (1..=nodes as NodeId).collect();
    let f = follower_lease_ms;
    (0..steps)
        .map(|_| Timed {
            step: step(rng, &ids, f),
            then_ms: rng.gen_range(f / 3..=8 * f),
        })
        .collect()
}

fn target(rng: &mut StdRng, ids: &[NodeId]) -> Target {
    if rng.gen_bool(0.5) {
        Target::Leader
    } else {
        Target::Node(*ids.choose(rng).expect("members"))
    }
}

fn step(rng: &mut StdRng, ids: &[NodeId], f: u64) -> Step {
    let mut shuffled = ids.to_vec();
    shuffled.shuffle(rng);
    match rng.gen_range(0..12) {
        0 | 1 => Step::Heal,
        2 => {
            let cut = rng.gen_range(1..ids.len());
            Step::Split(vec![shuffled[..cut].to_vec(), shuffled[cut..].to_vec()])
        }
        3 => Step::Isolate(target(rng, ids)),
        4 if ids.len() >= 3 => {
            let bridge = shuffled[0];
            let rest = &shuffled[1..];
            let cut = rng.gen_range(1..rest.len());
            Step::Bridge {
                left: rest[..cut].to_vec(),
                right: rest[cut..].to_vec(),
                bridge,
            }
        }
        5 if ids.len() >= 5 => Step::RingOfMajorities,
        6 => Step::OneWay {
            from: target(rng, ids),
            to: shuffled[0],
            on_receiver: rng.gen_bool(0.5),
        },
        7 => Step::Loss(rng.gen_range(1..=4) as f64 / 10.0),
        8 => Step::Delay {
            node: shuffled[0],
            ms: rng.gen_range(0..=f),
        },
        9 => Step::Crash {
            target: target(rng, ids),
            // Often back within the followers' lease, sometimes long after.
            down_ms: rng.gen_range(0..=3 * f),
        },
        10 => Step::Pause {
            target: target(rng, ids),
            // Past the lease (the claim lease is below the followers'), up to three times it.
            ms: rng.gen_range(f + 1..=3 * f),
        },
        _ => Step::Resign {
            to: rng.gen_bool(0.5).then(|| shuffled[0]),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::mem::discriminant;

    /// Every kind of step, pauses past the lease included, turns up in a few schedules.
    #[test]
    fn schedules_draw_every_kind_of_step() {
        let mut rng = StdRng::seed_from_u64(3);
        let steps: Vec<Step> = (0..20)
            .flat_map(|_| draw(&mut rng, 5, 8, 150))
            .map(|t| t.step)
            .collect();
        let kinds: std::collections::BTreeSet<String> = steps
            .iter()
            .map(|s| format!("{:?}", discriminant(s)))
            .collect();
        assert_eq!(kinds.len(), 11, "kinds drawn: {kinds:?}");
        for s in &steps {
            if let Step::Pause { ms, .. } = s {
                assert!(*ms > 150, "a pause of {ms} ms is within the lease");
            }
        }
    }
}
