//! How the model is checked ([`check`]): breadth first to a depth, or by seeded random walks;
//! and how a walk's counterexample, or its example of a reachability, is made short
//! ([`shrink`]) by playing it again without one action after another ([`replay`]).

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stateright::{Checker, Chooser, Expectation, HasDiscoveries, Model};

use super::{Act, QuorumModel, State, Variant};

/// What a check found for one property.
#[derive(Debug)]
pub struct Found {
    pub property: &'static str,
    /// An `always` property (else a `sometimes`).
    pub always: bool,
    /// For an `always`: the length of the counterexample path; for a `sometimes`: of the
    /// example path. `None`: not found within the bounds.
    pub path_len: Option<usize>,
    pub path: Option<String>,
}

/// What one check explored.
#[derive(Debug)]
pub struct Report {
    pub variant: Variant,
    pub nodes: u64,
    pub search: Search,
    pub depth: usize,
    pub states: usize,
    pub unique: usize,
    pub max_depth: usize,
    pub took: Duration,
    pub found: Vec<Found>,
}

/// Whether `act` may come in `state`: one of its actions, or the clock set to any later
/// instant within the horizon and not past a deadline of a probe or an election out (a delay
/// is a delay, whichever instant it ends at).
fn enabled(model: &QuorumModel, state: &State, act: &Act, buf: &mut Vec<Act>) -> bool {
    if let Act::AdvanceTo(t) = act {
        return *t > state.now && *t <= state.last_instant(model);
    }
    buf.clear();
    model.actions(state, buf);
    buf.contains(act)
}

/// Plays `acts` from the start, skipping any action not enabled where it comes, until
/// `property` is first settled (an `always` fails, a `sometimes` is reached), or another
/// property breaks (the checker goes no further): the actions played, and whether it was
/// settled.
pub fn play(model: &QuorumModel, acts: &[Act], property: &'static str) -> (Vec<Act>, bool) {
    let prop = model.properties().into_iter().find(|p| p.name == property);
    let (Some(prop), Some(mut state)) = (prop, model.init_states().pop()) else {
        return (Vec::new(), false);
    };
    let always = matches!(prop.expectation, Expectation::Always);
    let mut played = Vec::new();
    let mut buf = Vec::new();
    for act in acts {
        if !enabled(model, &state, act, &mut buf) {
            continue;
        }
        let Some(next) = model.next_state(&state, act.clone()) else {
            break;
        };
        state = next;
        played.push(act.clone());
        if (prop.condition)(model, &state) != always {
            return (played, true);
        }
        // Another property broke here: the checker explores nothing past it.
        if state.ghost.broken().is_some() {
            return (played, false);
        }
    }
    (played, false)
}

/// The number of actions of `acts` played when `property` is first settled, if it is
/// ([`play`]).
pub fn replay(model: &QuorumModel, acts: &[Act], property: &'static str) -> Option<usize> {
    let (played, broke) = play(model, acts, property);
    broke.then_some(played.len())
}

/// The counterexample (or example) `acts` made short: actions are left out, one at a time, for
/// as long as what is left still breaks (or reaches) `property`, as a shrinking property test
/// does. Returns the actions that are played.
pub fn shrink(model: &QuorumModel, mut acts: Vec<Act>, property: &'static str) -> Vec<Act> {
    if replay(model, &acts, property).is_none() {
        return acts;
    }
    loop {
        let before = acts.len();
        let mut i = acts.len();
        while i > 0 {
            i -= 1;
            let mut fewer = acts.clone();
            fewer.remove(i);
            if replay(model, &fewer, property).is_some() {
                acts = fewer;
            }
        }
        if acts.len() == before {
            break;
        }
    }
    // Only what is played: the actions skipped as not enabled are left out.
    play(model, &acts, property).0
}

/// How a check explores.
#[derive(Clone, Copy, Debug)]
pub enum Search {
    /// Every state to `depth` steps from the start, breadth first: the shortest paths.
    Breadth { depth: usize },
    /// Random walks of `depth` steps from the start, seeded, each chosen as a [`Walk`].
    Walks { depth: usize, seed: u64 },
}

/// One random walk's choices: each action drawn uniformly among those the model offers, but
/// for a crash, a graceful stop or a wipe (the faults the bounds allow once), none before a step
/// drawn per walk, uniformly over its length. Drawn uniformly from the first step, the faults
/// spent the bounds before any node claimed: of 20,000 walks of 80 steps, 9,887 stopped a node
/// gracefully, none after a claim, and the checker's walks never reached a claim after a
/// leader's graceful stop (none in 60 million states). Drawn so, 940 stops came after a claim,
/// 1,235 named a successor, and 8 walks went on to a claim after it.
pub struct Walk {
    rng: StdRng,
    /// The first step at which a fault may be drawn.
    faults_from: usize,
    steps: usize,
}

impl Walk {
    /// A walk of `depth` steps, seeded.
    pub fn new(seed: u64, depth: usize) -> Walk {
        let mut rng = StdRng::seed_from_u64(seed);
        let faults_from = rng.gen_range(0..=depth);
        Walk {
            rng,
            faults_from,
            steps: 0,
        }
    }

    /// The index in `acts` of the walk's next action.
    pub fn choose(&mut self, acts: &[Act]) -> usize {
        self.steps += 1;
        let calm = |a: &&Act| !matches!(a, Act::Crash(_) | Act::Shutdown(_) | Act::Wipe(_));
        let calms = acts.iter().filter(calm).count();
        if self.steps > self.faults_from || calms == 0 {
            return self.rng.gen_range(0..acts.len());
        }
        let k = self.rng.gen_range(0..calms);
        let (i, _) = acts
            .iter()
            .enumerate()
            .filter(|(_, a)| calm(a))
            .nth(k)
            .expect("k < calms");
        i
    }
}

/// The checker's walks, each chosen as a [`Walk`] of `depth` steps.
#[derive(Clone)]
struct Walker {
    depth: usize,
}

impl Chooser<QuorumModel> for Walker {
    type State = Walk;

    fn new_state(&self, seed: u64) -> Walk {
        Walk::new(seed, self.depth)
    }

    fn choose_initial_state(&self, walk: &mut Walk, states: &[State]) -> usize {
        walk.rng.gen_range(0..states.len())
    }

    fn choose_action(&self, walk: &mut Walk, _: &State, acts: &[Act]) -> usize {
        walk.choose(acts)
    }
}

/// Checks `model` as `search` says, for at most `timeout`; a broken variant stops at its first
/// counterexample.
pub fn check(model: QuorumModel, search: Search, timeout: Duration) -> Report {
    check_bounded(model, search, None, timeout)
}

/// [`check`] bounded by work: the search stops once it has visited `states` states (or settled
/// every property, or the variant broke one), and `guard` is only a guard against a hang, not a
/// budget that a slower machine could cross before the work is done (issue 48, item 10: walks
/// bounded by 45 s reached a second term on this machine and not on a busier CI one).
pub fn check_bounded(
    model: QuorumModel,
    search: Search,
    states: Option<usize>,
    guard: Duration,
) -> Report {
    let shrinker = model.clone();
    let (variant, nodes) = (model.variant, model.nodes);
    let names: Vec<(&'static str, bool)> = model
        .properties()
        .iter()
        .map(|p| (p.name, matches!(p.expectation, Expectation::Always)))
        .collect();
    let started = Instant::now();
    let mut builder = model.checker().threads(2).timeout(guard);
    if let Some(n) = states {
        builder = builder.target_state_count(n);
    }
    if variant != Variant::Sound {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let (checker, depth): (Box<dyn Checker<QuorumModel>>, usize) = match search {
        Search::Breadth { depth } => (
            Box::new(builder.target_max_depth(depth).spawn_bfs().join()),
            depth,
        ),
        Search::Walks { depth, seed } => (
            Box::new(
                builder
                    .target_max_depth(depth)
                    .spawn_simulation(seed, Walker { depth })
                    .join(),
            ),
            depth,
        ),
    };
    let took = started.elapsed();
    let found = names
        .into_iter()
        .map(|(property, always)| {
            let path = checker.discovery(property).map(|p| p.into_actions());
            // A walk's path is as long as the walk: made short. Breadth first, it is already.
            let path = match (path, search) {
                (Some(p), Search::Walks { .. }) => Some(shrink(&shrinker, p, property)),
                (p, _) => p,
            };
            Found {
                property,
                always,
                path_len: path.as_ref().map(Vec::len),
                path: path.map(|p| {
                    p.iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join("\n  ")
                }),
            }
        })
        .collect();
    Report {
        variant,
        nodes,
        search,
        depth,
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        took,
        found,
    }
}
