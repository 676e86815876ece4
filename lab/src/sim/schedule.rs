//! Schedules of faults for the quorum simulator, drawn from a seed: partitions (halves,
//! isolations, bridges, a ring of majorities), one-way cuts (written on either side), message
//! loss and delay, pauses longer than the lease, crashes with restarts (some inside the
//! followers' lease), resignations, squeezes of a long-running leader, and heals, each
//! followed by a stretch of simulated time; and the timings the nodes run with
//! ([`draw_timing`]), across the range the config accepts.

use std::fmt;

use electd::Timing;
use electd_client::NodeId;

use super::net::Rule;
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
    /// Asymmetric cuts around the leader L, which has led for a while, with delayed answers:
    /// L's appends to half the others are lost (their own requests to L and L's answers
    /// pass), so their leases run out; the answers of the rest to L's appends are lost for
    /// `hold_ms`, so L's own contact lapses and it grants a pre-vote; the vote requests of
    /// the cut-off nodes reach L `vote_delay_ms` late. When the answers come back L claims
    /// again, and the vote request arrives inside the promise it just answered.
    Squeeze { hold_ms: u64, vote_delay_ms: u64 },
    /// The network's rules become these (a test's own schedule; never drawn).
    Rules(Vec<Rule>),
    /// A new member (the next unused id) starts on an empty disk with `join`, and the claimant
    /// is asked to add it (a learner, caught up, then a voter).
    Add,
    /// `target` is removed from the membership (the leader hands over first when it is the
    /// target) and stopped `linger_ms` later.
    Remove { target: Target, linger_ms: u64 },
    /// A replaced machine: `target` is removed, stopped and its disk wiped; after `down_ms` it
    /// starts on the empty disk with `join` and is added again, under the same id.
    Replace { target: Target, down_ms: u64 },
    /// A wiped disk: `target` crashes, its disk is wiped, and after `down_ms` it starts again
    /// as the member it was, without `join`. It must never vote as that member (docs/operations.md,
    /// "Changing the members"): it refuses to run, or waits unconfirmed; it is then replaced.
    Wipe { target: Target, down_ms: u64 },
    /// Growth past every retry window (issue 29, finding 1): members are removed until three
    /// are left; `target` (never the leader) is cut off, both ways, from the members then
    /// added up to seven, for `hold_ms` after the last add (longer than the rounds of hellos,
    /// [`hello_window_ms`], so that they never hear its incarnation from it); then the cut
    /// heals, and at once `target`'s disk is wiped and it starts again without join after
    /// `down_ms`, cut off from the members it grew with: only the members added know it then.
    /// Judged as [`Step::Wipe`]: it must never be confirmed.
    Grow {
        target: Target,
        hold_ms: u64,
        down_ms: u64,
    },
    /// A wiped voter started again with `join`, without being removed (issue 29, finding 2):
    /// `target` crashes, its disk is wiped, and after `down_ms` it starts again with join. The
    /// leader appends to it, but it must never be confirmed, and no leader may hand over to it
    /// (it cannot campaign); then it is replaced.
    WipeJoin { target: Target, down_ms: u64 },
    /// A member that learns a removal from a snapshot (issue 29, finding 3): every cut, loss
    /// and delay heals; `lagging` (never the leader) loses every append and snapshot sent to
    /// it while `victim` is removed and leaders resign until the log has moved on past what
    /// the leader keeps, so that it is sent a snapshot once its requests pass again; then
    /// members crash until the victim's confirmation needs `lagging`, and the victim is added
    /// back on a new data dir: it must be confirmed. The crashed members start again.
    Starve { lagging: Target, victim: Target },
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

/// Draws the timings of one schedule across what the config accepts: a follower lease F from
/// 12 ms to 1 s (uniform in its logarithm), a beat from F/25 (at least 2 ms) to a third of
/// the claim lease (at most 100 ms), and half the time an explicit claim lease anywhere from
/// three beats to the least margin below F, else the default (F less a fifth).
pub fn draw_timing(rng: &mut StdRng) -> Timing {
    let f = (12.0 * (1000.0f64 / 12.0).powf(rng.gen::<f64>())).round() as u64;
    let default_lease = f - f / 5;
    let hb = rng.gen_range((f / 25).max(2)..=(default_lease / 3).min(100));
    let mut t = Timing {
        heartbeat_ms: hb,
        follower_lease_ms: f,
        lease_ms: 0,
    };
    if rng.gen_bool(0.5) {
        t.lease_ms = rng.gen_range(3 * hb..=f - t.min_margin_ms());
    }
    t
}

/// Draws one step for the members `ids` as they are when it runs, membership changes among
/// the kinds (a schedule with membership changes draws each step when it comes, since the
/// members change).
pub fn draw_with_members(rng: &mut StdRng, ids: &[NodeId], follower_lease_ms: u64) -> Timed {
    let f = follower_lease_ms;
    let step = if rng.gen_bool(0.3) {
        membership_step(rng, ids, f)
    } else {
        step(rng, ids, f)
    };
    Timed {
        step,
        then_ms: rng.gen_range(f / 3..=8 * f),
    }
}

/// How many rounds of hellos a confirmed node sends after a change of the membership
/// (`HELLO_ROUNDS` in src/quorum/hellos.rs, which the crate keeps to itself).
pub const HELLO_ROUNDS: u32 = 20;

/// How long a confirmed node says hello to a member that never answers, after a change of
/// the membership: each round waits a follower lease for the answers, then a pause that
/// starts at a beat and doubles up to a second (hellos.rs, `Hellos::say`); about 16 s at
/// the default timings.
pub fn hello_window_ms(t: &Timing) -> u64 {
    (0..HELLO_ROUNDS)
        .map(|k| t.follower_lease_ms + (t.heartbeat_ms << k.min(20)).min(1_000))
        .sum()
}

/// One of the steps that set up the preconditions of issue 29's findings (none a quarter of
/// the time), for the members `ids` as they are when it runs; `preferred` is the member of
/// the highest priority, if the schedule gave priorities. A schedule with membership changes
/// draws at most one, from a random source of its own, so that the schedules drawn before
/// them stay as they were when it draws none.
pub fn draw_lapse(
    rng: &mut StdRng,
    ids: &[NodeId],
    t: &Timing,
    preferred: Option<NodeId>,
) -> Option<Timed> {
    let f = t.follower_lease_ms;
    let step = match rng.gen_range(0..4) {
        0 => Step::Grow {
            target: Target::Node(*ids.choose(rng).expect("members")),
            hold_ms: hello_window_ms(t) + rng.gen_range(f..=10 * f),
            down_ms: rng.gen_range(0..=3 * f),
        },
        1 => Step::WipeJoin {
            target: match preferred {
                Some(p) if rng.gen_bool(0.8) => Target::Node(p),
                _ => target(rng, ids),
            },
            down_ms: rng.gen_range(0..=3 * f),
        },
        2 => Step::Starve {
            lagging: Target::Node(*ids.choose(rng).expect("members")),
            victim: target(rng, ids),
        },
        _ => return None,
    };
    Some(Timed {
        step,
        then_ms: rng.gen_range(f / 3..=8 * f),
    })
}

/// Most members a schedule with membership changes grows to, and fewest it shrinks to.
pub const MOST_MEMBERS: usize = 7;
pub const FEWEST_MEMBERS: usize = 3;

fn membership_step(rng: &mut StdRng, ids: &[NodeId], f: u64) -> Step {
    match rng.gen_range(0..4) {
        0 if ids.len() < MOST_MEMBERS => Step::Add,
        0 | 1 if ids.len() > FEWEST_MEMBERS => Step::Remove {
            target: target(rng, ids),
            linger_ms: rng.gen_range(0..=3 * f),
        },
        0..=2 => Step::Replace {
            target: target(rng, ids),
            down_ms: rng.gen_range(0..=3 * f),
        },
        _ => Step::Wipe {
            target: target(rng, ids),
            down_ms: rng.gen_range(0..=3 * f),
        },
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
    match rng.gen_range(0..13) {
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
            // Up to a fifth of the follower lease: round trips well under it must work.
            ms: rng.gen_range(0..=f / 5),
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
        11 => Step::Resign {
            to: rng.gen_bool(0.5).then(|| shuffled[0]),
        },
        _ => Step::Squeeze {
            // About one follower lease: long enough for the leader's own contact to lapse,
            // short enough that its next probe is answered before the late vote request.
            hold_ms: rng.gen_range(f - f / 10..=f + f / 10),
            // Below the deadline of the vote request (3/8 F), so that it still arrives.
            vote_delay_ms: rng.gen_range(f / 10..=f / 3),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::mem::discriminant;

    /// Every drawn timing passes the config's validation, and the draws span the range.
    #[test]
    fn drawn_timings_are_valid_and_span_the_range() {
        let mut rng = StdRng::seed_from_u64(5);
        let (mut min_f, mut max_f, mut max_hb, mut explicit) = (u64::MAX, 0, 0, 0);
        for _ in 0..2000 {
            let t = draw_timing(&mut rng);
            let mut cfg = electd::Config::from_toml(
                "id = 1\ndata_dir = \"d\"\n[[peers]]\nid = 1\naddr = \"127.0.0.1:9\"\n",
                std::path::Path::new("t.toml"),
            )
            .unwrap();
            cfg.timing = t;
            cfg.validate().unwrap_or_else(|e| panic!("{t:?}: {e}"));
            min_f = min_f.min(t.follower_lease_ms);
            max_f = max_f.max(t.follower_lease_ms);
            max_hb = max_hb.max(t.heartbeat_ms);
            explicit += u64::from(t.lease_ms != 0);
        }
        assert!(min_f <= 13 && max_f >= 950, "{min_f}..{max_f}");
        assert!(max_hb >= 90, "{max_hb}");
        assert!((800..1200).contains(&explicit), "{explicit}");
    }

    /// The hellos after a change last about 16 s at the default timings, plus a follower
    /// lease of waiting per round; a growth's cut outlasts them; every issue-29 step is drawn.
    #[test]
    fn lapses_outlast_the_hellos_and_are_all_drawn() {
        let t = Timing::default();
        assert_eq!(hello_window_ms(&t), 15_890 + 20 * t.follower_lease_ms);
        let mut rng = StdRng::seed_from_u64(4);
        let ids: Vec<NodeId> = (1..=5).collect();
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..100 {
            match draw_lapse(&mut rng, &ids, &t, Some(3)).map(|l| l.step) {
                Some(Step::Grow { hold_ms, .. }) => {
                    assert!(hold_ms > hello_window_ms(&t));
                    kinds.insert("grow");
                }
                Some(Step::WipeJoin { .. }) => {
                    kinds.insert("wipe-join");
                }
                Some(Step::Starve { .. }) => {
                    kinds.insert("starve");
                }
                Some(other) => panic!("{other:?}"),
                None => {
                    kinds.insert("none");
                }
            }
        }
        assert_eq!(kinds.len(), 4, "{kinds:?}");
    }

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
        assert_eq!(kinds.len(), 12, "kinds drawn: {kinds:?}");
        // With membership changes, the four of those too, at every size between the bounds.
        let mut members = 0;
        for n in FEWEST_MEMBERS..=MOST_MEMBERS {
            let ids: Vec<NodeId> = (1..=n as NodeId).collect();
            for _ in 0..200 {
                match draw_with_members(&mut rng, &ids, 150).step {
                    Step::Add => assert!(n < MOST_MEMBERS, "an add at {n} members"),
                    Step::Remove { .. } => assert!(n > FEWEST_MEMBERS, "a removal at {n}"),
                    Step::Replace { .. } | Step::Wipe { .. } => {}
                    _ => continue,
                }
                members += 1;
            }
        }
        assert!(members > 200, "{members} membership steps of 1,000");
        for s in &steps {
            if let Step::Pause { ms, .. } = s {
                assert!(*ms > 150, "a pause of {ms} ms is within the lease");
            }
        }
    }
}
