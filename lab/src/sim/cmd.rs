//! `electd-lab sim` (what `scripts/sim.sh` runs): schedules of the quorum simulator, one line
//! per failure with the command that replays it, a line on the timings run and on the paths
//! the flaws take, then `sim: N schedules, V violations`.

use std::process::ExitCode;
use std::time::Instant;

use super::quorum::{run, Flaw, Profile, Reached, Spec};
use super::schedule::MOST_MEMBERS;
use electd::roles::RoleFlaw;

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// How many schedules, from seed --first on (default: one run's worth, 200).
    #[arg(long, default_value_t = 200)]
    pub seeds: u64,
    /// The first seed of the range (default: random, printed).
    #[arg(long)]
    pub first: Option<u64>,
    /// Replay this one schedule and print its timeline.
    #[arg(long, conflicts_with_all = ["seeds", "first"])]
    pub seed: Option<u64>,
    /// Cluster size.
    #[arg(long, default_value_t = 5)]
    pub nodes: usize,
    /// Fault steps per schedule before the final heal.
    #[arg(long, default_value_t = 8)]
    pub steps: usize,
    /// Run a deliberately broken node whose claim lease is three times the followers' lease:
    /// the checkers must report violations.
    #[arg(long = "unsafe", conflicts_with = "vote_while_leading")]
    pub long_lease: bool,
    /// Run a deliberately broken node that votes for a higher term while a promise it
    /// answered can still run (the vote handler before docs/safety.md's step 4 was kept): the
    /// promise checker (C6) must report violations. The summary says in how many schedules a
    /// vote request reached a node inside its own promise, and how many such votes the flaw
    /// granted.
    #[arg(long, conflicts_with = "trust_new_incarnation")]
    pub vote_while_leading: bool,
    /// Run deliberately broken nodes that vote at once on a new data dir, without the members
    /// recording its incarnation (docs/safety.md's step 10 left out): with `--membership`, a
    /// member restarted on a wiped disk must be reported as voting again.
    #[arg(long, conflicts_with = "record_between_probes")]
    pub trust_new_incarnation: bool,
    /// Run deliberately broken nodes that record the end of a claim only between probes (the
    /// role loop before it kept the event log in step during a probe): the sampler must report
    /// an event log that says a node claims while its answers say not.
    #[arg(long)]
    pub record_between_probes: bool,
    /// Run deliberately broken nodes whose leader changes the membership without writing the
    /// voters' incarnations into the log (identity.rs, rule 5 left out): with `--membership`,
    /// a member cut off from the members added while the cluster grew, then wiped, must be
    /// reported as confirmed again.
    #[arg(long, conflicts_with_all = ["long_lease", "vote_while_leading", "trust_new_incarnation", "record_between_probes", "handover_to_unconfirmed", "snapshot_keeps_incarnations"])]
    pub unlogged_incarnations: bool,
    /// Run deliberately broken nodes whose preferred-leader loop hands over without asking
    /// whether the successor's data dir is confirmed: with `--membership`, a handover to a
    /// wiped member of the highest priority started again with join must be reported.
    #[arg(long, conflicts_with_all = ["long_lease", "vote_while_leading", "trust_new_incarnation", "record_between_probes", "snapshot_keeps_incarnations"])]
    pub handover_to_unconfirmed: bool,
    /// Run deliberately broken nodes that keep a removed member's incarnation when a snapshot
    /// tells them of the removal: with `--membership`, the member added back must be reported
    /// as never confirmed.
    #[arg(long, conflicts_with_all = ["long_lease", "vote_while_leading", "trust_new_incarnation", "record_between_probes"])]
    pub snapshot_keeps_incarnations: bool,
    /// Timings: drawn per schedule from its seed across the range the config accepts (from
    /// heartbeat 2 / follower lease 12 to heartbeat 100 / follower lease 1000), or the defaults.
    #[arg(long, value_enum, default_value_t = Profile::Drawn)]
    pub timing: Profile,
    /// Schedules also add, remove and replace members (the leader included) through the admin
    /// API, and wipe a member's disk and start it again without join (it must never vote as
    /// the member it was), from 3 to 7 members.
    #[arg(long)]
    pub membership: bool,
    /// The first members stand for three named roles once the cluster has formed, and every
    /// sample judges each role's promises too (sim/roles.rs).
    #[arg(long)]
    pub roles: bool,
    /// Run deliberately broken nodes with one rule of named roles left out (docs/safety.md,
    /// "Roles"; implies `--roles`): `hasty-revoke` (R4: a holder silent for F/6 taken for dead,
    /// its roles granted at once), `grant-in-first-lease` (R3), `ignore-taken-at` (R2),
    /// `release-at-once` (R5). The role checker must report broken promises.
    #[arg(long, value_name = "FLAW", value_parser = role_flaw, conflicts_with_all = ["long_lease", "vote_while_leading", "trust_new_incarnation", "record_between_probes", "unlogged_incarnations", "handover_to_unconfirmed", "snapshot_keeps_incarnations"])]
    pub role_flaw: Option<RoleFlaw>,
    /// Members that don't vote (ids 101, 102, …) join once the cluster has formed; no
    /// schedule may let one claim the cluster's election or sit in a voter set (docs/safety.md,
    /// "Non-voters").
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        conflicts_with = "membership"
    )]
    pub nonvoters: usize,
    /// Run deliberately broken nodes whose probes count the non-voters' acknowledgements as
    /// voters' (N1 left out; needs `--nonvoters`): a cut-off leader goes on claiming.
    #[arg(long, requires = "nonvoters", conflicts_with_all = ["long_lease", "vote_while_leading", "trust_new_incarnation", "record_between_probes", "unlogged_incarnations", "handover_to_unconfirmed", "snapshot_keeps_incarnations", "role_flaw"])]
    pub count_learner_ack: bool,
}

impl SimArgs {
    fn flaw(&self) -> Option<Flaw> {
        if self.long_lease {
            Some(Flaw::LongLease)
        } else if self.vote_while_leading {
            Some(Flaw::VoteWhileLeading)
        } else if self.trust_new_incarnation {
            Some(Flaw::TrustNewIncarnation)
        } else if self.record_between_probes {
            Some(Flaw::RecordBetweenProbes)
        } else if self.unlogged_incarnations {
            Some(Flaw::UnloggedIncarnations)
        } else if self.handover_to_unconfirmed {
            Some(Flaw::HandoverToUnconfirmed)
        } else if self.snapshot_keeps_incarnations {
            Some(Flaw::SnapshotKeepsIncarnations)
        } else if self.count_learner_ack {
            Some(Flaw::CountLearnerAck)
        } else {
            self.role_flaw.map(Flaw::Role)
        }
    }

    /// The flags that replay a schedule of this run.
    fn flags(&self) -> String {
        let mut f = format!("--nodes {} --steps {}", self.nodes, self.steps);
        match self.flaw() {
            Some(Flaw::LongLease) => f += " --unsafe",
            Some(Flaw::VoteWhileLeading) => f += " --vote-while-leading",
            Some(Flaw::TrustNewIncarnation) => f += " --trust-new-incarnation",
            Some(Flaw::RecordBetweenProbes) => f += " --record-between-probes",
            Some(Flaw::UnloggedIncarnations) => f += " --unlogged-incarnations",
            Some(Flaw::HandoverToUnconfirmed) => f += " --handover-to-unconfirmed",
            Some(Flaw::SnapshotKeepsIncarnations) => f += " --snapshot-keeps-incarnations",
            Some(Flaw::Role(r)) => f += &format!(" --role-flaw {}", r.name()),
            Some(Flaw::CountLearnerAck) => f += " --count-learner-ack",
            None => {}
        }
        if self.nonvoters > 0 {
            f += &format!(" --nonvoters {}", self.nonvoters);
        }
        if self.roles && self.role_flaw.is_none() {
            f += " --roles";
        }
        if self.timing == Profile::Default {
            f += " --timing default";
        }
        if self.membership {
            f += " --membership";
        }
        f
    }
}

/// What a run of schedules saw, beyond its violations.
#[derive(Default)]
struct Tally {
    sim_ms: u64,
    /// Follower leases run, lowest and highest, and beats likewise.
    follower_lease: Option<(u64, u64)>,
    heartbeat: Option<(u64, u64)>,
    explicit_lease: u64,
    promises: u64,
    /// Named roles (`--roles`): promises judged, changes of hands, candidacies applied at the
    /// starts.
    role_promises: u64,
    role_moves: u64,
    roles_stood: u64,
    squeezed: u64,
    /// Schedules in which a vote request reached a node inside its own promise, and in which
    /// such a vote was granted.
    inside_promise: u64,
    granted_inside: u64,
    /// Membership changes that completed, and wiped members that refused to run.
    added: u64,
    removed: u64,
    refused: u64,
    /// The preconditions of issue 29's findings reached.
    reached: Reached,
}

fn widen(range: &mut Option<(u64, u64)>, v: u64) {
    *range = Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
}

impl Tally {
    fn add(&mut self, out: &super::quorum::Outcome) {
        self.sim_ms += out.sim_ms;
        widen(&mut self.follower_lease, out.timing.follower_lease_ms);
        widen(&mut self.heartbeat, out.timing.heartbeat_ms);
        self.explicit_lease += u64::from(out.timing.lease_ms != 0);
        self.promises += out.promises;
        self.role_promises += out.role_promises;
        self.role_moves += out.role_moves;
        self.roles_stood += out.roles_stood;
        self.squeezed += u64::from(out.squeezes > 0);
        self.inside_promise += u64::from(out.votes_inside_promise > 0);
        self.granted_inside += u64::from(out.granted_inside_promise > 0);
        self.added += out.added;
        self.removed += out.removed;
        self.refused += out.refused;
        self.reached.add(&out.reached);
    }

    fn print(&self, schedules: u64) {
        let range =
            |r: Option<(u64, u64)>| r.map_or("-".into(), |(lo, hi)| format!("{lo}..{hi} ms"));
        println!(
            "sim: timings: follower lease {}, heartbeat {}, explicit claim lease in {} schedules",
            range(self.follower_lease),
            range(self.heartbeat),
            self.explicit_lease
        );
        println!(
            "sim: {} promises judged; {} schedules squeezed a leader; a vote request reached a \
             node inside its own promise in {} of {schedules} schedules, granted in {}",
            self.promises, self.squeezed, self.inside_promise, self.granted_inside
        );
        if self.role_promises > 0 {
            println!(
                "sim: roles: {} candidacies applied at the starts, {} promises on named roles \
                 judged, {} changes of hands",
                self.roles_stood, self.role_promises, self.role_moves
            );
        }
        if self.added + self.removed + self.refused > 0 {
            println!(
                "sim: membership: {} adds and {} removals completed; {} members restarted on a \
                 wiped disk refused to run",
                self.added, self.removed, self.refused
            );
            let r = &self.reached;
            println!(
                "sim: reached: {} growths to {MOST_MEMBERS} with a member cut off from those \
                 added past the hellos, {} of them then wiped; {} wiped voters started with \
                 join, not removed, {} of them the preferred member; priorities in {} of \
                 {schedules} schedules, {} handovers to a member of higher priority; {} \
                 snapshots installed on a starved member, {} members added back after one; {} \
                 adds that did not answer judged, {} of them voters",
                r.grown_cut_off,
                r.wiped_after_growth,
                r.wipe_joined,
                r.wipe_joined_preferred,
                r.prioritised,
                r.preferred_handovers,
                r.snapshots,
                r.readded_after_snapshot,
                r.uncertain_judged,
                r.uncertain_members
            );
        }
    }
}

/// Files this process has open.
fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Runs the schedules; exit 1 when any was violated.
pub fn main(args: SimArgs) -> ExitCode {
    let failed = match args.seed {
        Some(seed) => replay(&args, seed),
        None => soak(&args),
    };
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

impl SimArgs {
    /// The schedule of `seed` as these flags ask for it.
    fn spec(&self, seed: u64) -> Spec {
        Spec {
            seed,
            nodes: self.nodes,
            steps: self.steps,
            flaw: self.flaw(),
            profile: self.timing,
            script: None,
            timing: None,
            membership: self.membership,
            lapses: true,
            roles: self.roles || self.role_flaw.is_some(),
            nonvoters: self.nonvoters,
        }
    }
}

/// `--seed S`: one schedule with its timeline; true when it was violated.
fn replay(args: &SimArgs, seed: u64) -> bool {
    let out = run(&args.spec(seed));
    for line in &out.timeline {
        println!("{line}");
    }
    for v in &out.violations {
        println!("VIOLATION {v}");
    }
    let mut tally = Tally::default();
    tally.add(&out);
    tally.print(1);
    println!(
        "sim: seed {seed}: {} ms simulated, highest term {}, {} violations",
        out.sim_ms,
        out.max_term,
        out.violations.len()
    );
    !out.violations.is_empty()
}

/// `--seeds N [--first S]`: N schedules, a line per failure with its replay command; true
/// when any was violated (or left files open).
fn soak(args: &SimArgs) -> bool {
    let flags = args.flags();
    let first = args.first.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000)
            .unwrap_or(1)
    });
    println!(
        "sim: seeds {first}..{} ({flags})",
        first + args.seeds.saturating_sub(1)
    );
    let started = Instant::now();
    let mut violated = 0u64;
    let mut tally = Tally::default();
    let mut files = open_files();
    for seed in first..first + args.seeds {
        let out = run(&args.spec(seed));
        tally.add(&out);
        if let Some(v) = out.violations.first() {
            violated += 1;
            println!("FAIL seed {seed}: {v} (replay: scripts/sim.sh --seed {seed} {flags})");
        }
        // A schedule must free what it opened: a leak would end a long soak.
        let now = open_files();
        if now > files {
            violated += 1;
            println!(
                "FAIL seed {seed}: {} files left open (replay: scripts/sim.sh --seed {seed} {flags})",
                now - files
            );
            files = now;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "sim: {:.1} schedules/s, {:.0} s simulated in {secs:.1} s",
        args.seeds as f64 / secs,
        tally.sim_ms as f64 / 1e3
    );
    tally.print(args.seeds);
    println!("sim: {} schedules, {violated} violations", args.seeds);
    violated > 0
}

/// `--role-flaw NAME`: one of electd's `roles::RoleFlaw`, by its name.
fn role_flaw(name: &str) -> Result<RoleFlaw, String> {
    RoleFlaw::named(name).ok_or_else(|| {
        let names: Vec<&str> = RoleFlaw::ALL.iter().map(|f| f.name()).collect();
        format!("no such flaw (one of: {})", names.join(", "))
    })
}
