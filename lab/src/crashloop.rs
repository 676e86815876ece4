//! The crash loop (docs/security.md, "Hardening"): SIGKILL nodes of a running cluster at random moments, the leader
//! half the time, elections and start-ups included, and restart each on its own data dir; then
//! judge the whole run. Used by the test suite (50 cycles) and by `electd-lab ctl crash-loop`
//! (`scripts/crash-soak.sh`, 1000 cycles).
//!
//! Each cycle: wait a random 0..2×`follower_lease` (so kills land in steady state, in
//! elections and right after the previous restart), kill the victim, leave it down a random
//! 0..(lease + 2×`follower_lease`), start it again. Four cycles in five then wait until it answers and check that
//! its term did not go back (quorum mode: the persisted vote survived); the fifth goes on at
//! once, so that the next kill may hit a node that is still starting. A node that exits on
//! its own, or refuses to start (a corrupt state file), fails the run at once.
//!
//! At the end: every node runs, all agree on one leader, and in quorum mode the merged event
//! logs show no term led twice (C1) and never two claimants at once (C2).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::chaos::checkers::{election_safety, leader_changes, split_brain};
use crate::chaos::record::Recorder;
use crate::cluster::{claimants, Cluster, Observed};
use electd::config::Timing;
use electd_client::Mode;
use electd_client::NodeId;

/// What a crash loop did and saw.
#[derive(Debug, Default)]
pub struct CrashReport {
    pub cycles: usize,
    pub seed: u64,
    /// Kills that hit the node claiming the role at that moment.
    pub leader_kills: usize,
    /// Kills that hit a node started less than one check ago (still starting).
    pub early_kills: usize,
    /// Restarts whose term was read back and found not to have gone back.
    pub durable_checks: usize,
    /// Claims taken over the run (C3's leader changes), from the event logs.
    pub leader_changes: u64,
    pub final_leader: NodeId,
    pub final_term: u64,
    pub elapsed_ms: u64,
}

const WAIT: Duration = Duration::from_secs(30);

/// Runs `cycles` crash cycles on the running cluster `c` (all nodes up, in `c.mode()`);
/// `progress` prints a line every `progress` cycles (0: never).
pub async fn crash_loop(
    c: &Cluster,
    timing: Timing,
    cycles: usize,
    seed: u64,
    progress: usize,
) -> Result<CrashReport, String> {
    let mut run = Run {
        c,
        timing,
        mode: c.mode(),
        ids: c.ids(),
        rng: StdRng::seed_from_u64(seed),
        rec: Recorder::new(),
        report: CrashReport {
            cycles,
            seed,
            ..CrashReport::default()
        },
        just_started: None,
    };
    c.wait_agreed(WAIT)
        .await
        .ok_or("no agreed leader before the crash loop")?;
    for cycle in 1..=cycles {
        run.cycle()
            .await
            .map_err(|e| format!("cycle {cycle}: {e}"))?;
        if progress > 0 && cycle % progress == 0 {
            println!(
                "cycle {cycle}/{cycles}: {} leader kills so far",
                run.report.leader_kills
            );
        }
    }
    run.finish().await
}

/// One crash loop under way.
struct Run<'a> {
    c: &'a Cluster,
    timing: Timing,
    mode: Mode,
    ids: Vec<NodeId>,
    rng: StdRng,
    rec: Recorder,
    report: CrashReport,
    /// The node restarted last, when the loop went on without waiting for it.
    just_started: Option<NodeId>,
}

impl Run<'_> {
    /// Wait, kill a victim, leave it down, start it again; check its term when it answers.
    async fn cycle(&mut self) -> Result<(), String> {
        let (c, timing) = (self.c, self.timing);
        let pause = self.rng.gen_range(0..=2 * timing.follower_lease_ms);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let states = c.states().await;
        for id in &self.ids {
            if Some(*id) != self.just_started && matches!(states.get(id), Some(Observed::Down)) {
                return Err(format!("node {id} exited on its own"));
            }
        }
        let victim = self.pick_victim(&claimants(&states));
        let term_before = states.get(&victim).and_then(Observed::term);
        self.rec.kill(c, victim);
        // Down for up to lease + 2 election timeouts: long enough, often, for the others to
        // elect (a leader back within the followers' lease simply resumes its term).
        let down = timing.effective_lease_ms() + 2 * timing.follower_lease_ms;
        tokio::time::sleep(Duration::from_millis(self.rng.gen_range(0..=down))).await;
        self.rec
            .start(c, victim, self.mode)
            .map_err(|e| format!("restarting node {victim}: {e}"))?;
        if self.rng.gen_ratio(1, 5) {
            self.just_started = Some(victim);
            return Ok(());
        }
        self.just_started = None;
        let term_after = wait_up(c, victim).await?;
        if let (Some(before), true) = (term_before, self.mode == Mode::Quorum) {
            if term_after < before {
                return Err(format!(
                    "node {victim} came back in term {term_after}, below the term {before} it \
                     had persisted"
                ));
            }
            self.report.durable_checks += 1;
        }
        Ok(())
    }

    /// The leader half the time (when one claims), else any node; counted in the report.
    fn pick_victim(&mut self, claiming: &[NodeId]) -> NodeId {
        let victim = if !claiming.is_empty() && self.rng.gen_bool(0.5) {
            claiming[self.rng.gen_range(0..claiming.len())]
        } else {
            self.ids[self.rng.gen_range(0..self.ids.len())]
        };
        if claiming.contains(&victim) {
            self.report.leader_kills += 1;
        }
        if self.just_started == Some(victim) {
            self.report.early_kills += 1;
        }
        victim
    }

    /// Every node up, one agreed leader, and (quorum mode) the merged logs safe.
    async fn finish(mut self) -> Result<CrashReport, String> {
        let c = self.c;
        if let Some(id) = self.just_started {
            wait_up(c, id).await?;
        }
        let leader = c
            .wait_agreed(WAIT)
            .await
            .ok_or(format!("no agreed leader within {WAIT:?} after the loop"))?;
        let states = c.states().await;
        for id in &self.ids {
            if !matches!(states.get(id), Some(Observed::Up(_))) {
                return Err(format!("node {id} is not up at the end"));
            }
        }
        self.report.final_leader = leader;
        self.report.final_term = states.get(&leader).and_then(Observed::term).unwrap_or(0);
        let log = self.rec.run_log(c, self.mode, Vec::new());
        self.report.elapsed_ms = (log.end_ns - log.start_ns) / 1_000_000;
        self.report.leader_changes = leader_changes(&log);
        if self.mode == Mode::Quorum {
            let safety = election_safety(&log).ok_or("no quorum log")?;
            if !safety.safe {
                return Err(format!("terms led twice: {:?}", safety.conflicts));
            }
            let sb = split_brain(&log);
            if sb.split_brain_ns > 0 {
                return Err(format!("two claimants at once: {:?}", sb.spans));
            }
        }
        Ok(self.report)
    }
}

/// Waits until node `id` answers; returns its term.
async fn wait_up(c: &Cluster, id: NodeId) -> Result<u64, String> {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(info) = c.leader_info(id).await {
            return Ok(info.term);
        }
        if tokio::time::Instant::now() >= until {
            return Err(format!(
                "node {id} did not come back within {WAIT:?} (see {})",
                c.log_file(id).display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
