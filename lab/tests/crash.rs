//! Crash durability (docs/security.md, "Hardening"): 50 SIGKILLs at random moments per mode, elections and start-ups
//! included; every node comes back on its own data, one leader is agreed, and (quorum) no term
//! is led twice. The seed is printed; `electd-lab ctl crash-loop --seed N` replays a schedule on the
//! bundled cluster, and `scripts/crash-soak.sh` runs 1000 cycles.

mod common;

use common::TestCluster;
use electd_client::Mode;

const CYCLES: usize = 50;

fn crash_loop(mode: Mode) {
    let tc = TestCluster::start(mode, 5);
    let seed: u64 = std::env::var("ELECTD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!(
        "crash loop {}: seed {seed} (replay: ELECTD_CRASH_SEED={seed})",
        mode.as_str()
    );
    let rt = TestCluster::rt();
    let report = rt.block_on(electd_lab::crashloop::crash_loop(
        &tc.c, tc.timing, CYCLES, seed, 10,
    ));
    match report {
        Ok(r) => {
            eprintln!("{r:?}");
            assert_eq!(r.cycles, CYCLES);
            assert!(r.leader_kills > 0, "no kill hit a leader: {r:?}");
            if mode == Mode::Quorum {
                // C1 and C2 were judged by the loop over the merged event logs.
                assert!(r.durable_checks > 0, "{r:?}");
            }
        }
        Err(e) => {
            tc.dump_logs();
            panic!("crash loop failed (seed {seed}): {e}");
        }
    }
}

#[test]
fn quorum_survives_50_random_kills() {
    crash_loop(Mode::Quorum);
}

#[test]
fn bully_survives_50_random_kills() {
    crash_loop(Mode::Bully);
}

#[test]
fn ring_survives_50_random_kills() {
    crash_loop(Mode::Ring);
}
