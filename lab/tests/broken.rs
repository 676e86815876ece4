//! Broken variants on real processes: the node with a deliberate flaw (the lab's
//! `electd-flawed` binary, `--lab-flaw NAME`; src/engine.rs, `Flaws`) run through a chaos
//! scenario, so that the checkers of the chaos suite are shown to catch what they are for.
//! (The simulator's broken variants are in tests/sim.rs.)

use electd_client::Mode;
use electd_lab::chaos::runner::{run_one_with, Layer, RunSpec, Scenario};

/// Runs `scenario` (quorum mode, application layer, seed 1) on nodes with `flaw`, and checks
/// that the checkers fail the run: C2 sees two claimants and C6 broken promises.
fn caught(scenario: Scenario, flaw: &str) {
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    let flawed = bin.with_file_name("electd-flawed");
    assert!(
        flawed.is_file(),
        "no {} (build it: cargo build -p electd --features flaws --bin electd-flawed)",
        flawed.display()
    );
    let spec = RunSpec {
        mode: Mode::Quorum,
        scenario,
        layer: Layer::App,
        seed: 1,
        tls: false,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (r, _) = rt.block_on(run_one_with(&spec, &flawed, None, &["--lab-flaw", flaw]));
    eprintln!("{}", serde_json::to_string(&r).unwrap());
    assert!(r.skipped.is_none(), "the run happened: {r:?}");
    assert!(!r.passed, "a broken node passed: {r:?}");
    assert!(r.split_brain_ms > 0.0, "C2 sees two claimants: {r:?}");
    assert!(
        r.promises_broken.is_some_and(|n| n > 0),
        "C6 sees broken promises: {r:?}"
    );
}

/// The leader isolated (S3) while its claim lease is three follower leases (`long-lease`,
/// docs/safety.md's step 3 left out): the isolated leader goes on claiming after the majority
/// elected another.
#[test]
fn the_chaos_checkers_catch_a_claim_that_outlives_the_election_timeout() {
    caught(Scenario::S3, "long-lease");
}

/// The forger on the leader's links (S20) against a node that takes answers as they come
/// (`accept-unsigned-answers`: the transport before bedd083): the forged acknowledgements keep
/// the cut-off leader claiming while the others elect another.
#[test]
fn the_chaos_checkers_catch_answers_taken_unsigned() {
    caught(Scenario::S20, "accept-unsigned-answers");
}
