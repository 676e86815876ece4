//! Liveness where the model allows it (docs/testing.md, "Model checking"): from the states
//! seeded random walks reach, faults and all, the faults end, and a node must claim within a
//! bound ([`bound_ns`]). The faults end as the simulator's and the chaos suite's final heal
//! ends them: every stopped node restarts, every message in flight is delivered and none is
//! lost or held any more, and each node's timers fire when they are due. What is left is the
//! core and the model's openraft: a pre-vote round, an election, a probe, a claim.
//!
//! A safety property may not break on the way either; the claim that ends the heal is judged
//! against every promise made before it, as every state is.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stateright::Model;

use super::{search, Act, NodeId, QuorumModel, RaftRole, State, START_NS};

/// How long after the heal a node must claim at the latest: three follower leases, what
/// docs/operations.md calls a failover that took too long (`ElectdLeaderlessStretchLong`).
/// A threshold measured against, not derived: the followers wait out their lease of F from
/// their last contact (a restarted node's openraft refuses votes for F after its start), the
/// campaign slots add a stagger step per rank, and each election a split vote loses costs up
/// to its timeout (F/2, `outcome_ns`), a stagger step and up to F/2 of jitter (election/mod.rs,
/// `failed`), so that two lost in a row would pass it. The model's messages take no time.
pub fn bound_ns(model: &QuorumModel) -> u64 {
    3 * model.timing.election.follower_lease_ns
}

/// One heal: how long after it a node claimed, and in how many steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Healed {
    pub took_ns: u64,
    pub steps: usize,
}

/// What the liveness check found.
#[derive(Debug)]
pub struct LiveReport {
    pub seed: u64,
    pub walks: usize,
    /// States healed (every state of every walk).
    pub healed: usize,
    pub bound_ns: u64,
    /// The longest heal, and the walk's actions to the state it started from.
    pub slowest: Option<(Healed, Vec<Act>)>,
    /// The first state from which no node claimed within the bound (or a property broke):
    /// why, the walk's actions to it, and the heal's steps from it.
    pub failed: Option<(String, Vec<Act>, Vec<Act>)>,
    pub took: Duration,
}

/// The model a heal runs in: no bound on terms, the clock or the messages in flight (a heal
/// loses nothing), no more faults.
fn healing(model: &QuorumModel) -> QuorumModel {
    QuorumModel {
        max_term: u64::from(u32::MAX),
        max_in_flight: 64,
        max_crashes: 0,
        max_wipes: 0,
        max_resigns: 0,
        max_dups: 0,
        max_snapshots: 0,
        horizon_ns: u64::MAX - START_NS,
        ..model.clone()
    }
}

/// Ends the faults in `from` and runs the cluster until a node claims: at most `bound` later
/// ([`bound_ns`]), with no property broken on the way; `Err` says what happened instead, and
/// `steps_taken` (when given) gets the heal's own steps.
pub fn heal(
    model: &QuorumModel,
    from: &State,
    bound: u64,
    seed: u64,
    mut steps_taken: Option<&mut Vec<Act>>,
) -> Result<Healed, String> {
    let m = healing(model);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = from.clone();
    let start = s.now;
    let mut ticked: Vec<u64> = vec![0; model.size() as usize];
    let mut restarted = 0u8;
    for steps in 0..10_000 {
        if let Some(broke) = s.ghost.broken() {
            return Err(format!("{broke} while healing, {steps} steps in"));
        }
        if claims(&m, &s) {
            let took_ns = s.now - start;
            return match took_ns <= bound {
                true => Ok(Healed { took_ns, steps }),
                false => Err(format!(
                    "the first claim came {} ms after the heal, past the bound of {} ms",
                    took_ns / 1_000_000,
                    bound / 1_000_000
                )),
            };
        }
        if s.now - start > bound {
            return Err(format!(
                "no node claimed within {} ms of the heal",
                bound / 1_000_000
            ));
        }
        let Some(act) = fair(&m, &s, &mut ticked, &mut restarted, &mut rng) else {
            return Err("nothing is left to happen, and no node claims".into());
        };
        if let Some(t) = steps_taken.as_mut() {
            t.push(act.clone());
        }
        s = m
            .next_state(&s, act)
            .ok_or("a step of the heal was refused")?;
    }
    Err("the heal took 10,000 steps without a claim".into())
}

/// Some running node claims now.
fn claims(m: &QuorumModel, s: &State) -> bool {
    m.ids().any(|id| {
        let (Some(l), Some(raft)) = (s.live(id), s.view(id)) else {
            return false;
        };
        l.core.claim(s.now, &raft).is_some()
    })
}

/// The next step of a world without faults: a stopping node exits, a stopped node restarts
/// (once: a node whose data dir the members refuse stops again, for good, as the node exits);
/// a message in flight
/// delivered (one drawn from `rng`: the network does not keep order); openraft's replication
/// of a leader's log to a follower that lacks it; a pre-vote round whose answers are all in
/// and did not win ends (driver/campaign.rs, `pre_vote`); a leader's role turn, once at each
/// instant; a campaign or a hello that is due; else the clock moves to the next instant some
/// node waits for. A probe or an election out ends when it is answered, or at its deadline
/// (`AdvanceTo` stops there: mod.rs, `deadlines_passed`).
fn fair(
    m: &QuorumModel,
    s: &State,
    ticked: &mut [u64],
    restarted: &mut u8,
    rng: &mut StdRng,
) -> Option<Act> {
    // A graceful stop under way ends first: the node exits, and restarts below.
    if let Some(id) = m.ids().find(|id| s.live(*id).is_some_and(|l| l.stopping)) {
        return Some(Act::Exit(id));
    }
    let stopped = |id: &NodeId| s.live(*id).is_none() && *restarted & super::bit(*id) == 0;
    if let Some(id) = m.ids().find(stopped) {
        *restarted |= super::bit(id);
        return Some(Act::Restart(id));
    }
    let mut acts = Vec::new();
    m.actions(s, &mut acts);
    // A message to a node that stopped for good is never delivered.
    let deliverable: Vec<_> = s
        .net
        .iter()
        .filter(|msg| s.live(msg.to()).is_some())
        .collect();
    if !deliverable.is_empty() {
        let msg = deliverable[rng.gen_range(0..deliverable.len())];
        return Some(Act::Deliver(msg.clone()));
    }
    // openraft's replication: a leader's log reaches every running follower that lacks it.
    for id in m.ids() {
        if s.live(id).is_none_or(|l| l.role != RaftRole::Leader) {
            continue;
        }
        let log = &s.node(id).disk.log;
        let lacks =
            |to: &NodeId| *to != id && s.live(*to).is_some() && s.node(*to).disk.log != *log;
        if let Some(to) = m.ids().find(lacks) {
            return Some(Act::Replicate(id, to));
        }
    }
    for id in m.ids() {
        let Some(l) = s.live(id) else { continue };
        let slot = &mut ticked[(id - 1) as usize];
        let turn = l.role == RaftRole::Leader && l.probe.is_none() && *slot != s.now;
        let candidates = [
            (l.round.is_some(), Act::GiveUpRound(id)),
            (turn, Act::Tick(id)),
            (true, Act::Campaign(id)),
            (true, Act::SayHello(id)),
        ];
        for (wanted, act) in candidates {
            if wanted && acts.contains(&act) {
                if act == Act::Tick(id) {
                    *slot = s.now;
                }
                return Some(act);
            }
        }
    }
    s.next_instants(m).first().map(|t| Act::AdvanceTo(*t))
}

/// Heals every state of `walks` random walks of `depth` steps from the start (seeded, each
/// chosen as a [`search::Walk`]), for at most `timeout`; stops at the first state that does
/// not heal.
pub fn check(model: &QuorumModel, seed: u64, depth: usize, timeout: Duration) -> LiveReport {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut report = LiveReport {
        seed,
        walks: 0,
        healed: 0,
        bound_ns: bound_ns(model),
        slowest: None,
        failed: None,
        took: Duration::ZERO,
    };
    let mut acts = Vec::new();
    'walks: while started.elapsed() < timeout {
        report.walks += 1;
        let Some(mut s) = model.init_states().pop() else {
            break;
        };
        let mut path = Vec::new();
        let mut walk = search::Walk::new(rng.gen(), depth);
        for _ in 0..=depth {
            let order = rng.gen();
            match heal(model, &s, report.bound_ns, order, None) {
                Ok(h) => {
                    report.healed += 1;
                    if report
                        .slowest
                        .as_ref()
                        .is_none_or(|(w, _)| h.took_ns > w.took_ns)
                    {
                        report.slowest = Some((h, path.clone()));
                    }
                }
                Err(why) => {
                    let mut steps = Vec::new();
                    let _ = heal(model, &s, report.bound_ns, order, Some(&mut steps));
                    report.failed = Some((why, path, steps));
                    break 'walks;
                }
            }
            acts.clear();
            model.actions(&s, &mut acts);
            if acts.is_empty() || !model.within_boundary(&s) {
                break;
            }
            let act = acts[walk.choose(&acts)].clone();
            let Some(next) = model.next_state(&s, act.clone()) else {
                break;
            };
            path.push(act);
            s = next;
        }
    }
    report.took = started.elapsed();
    report
}
