//! Skipping a test for want of a tool, so that the skip is seen and counted, never taken for a
//! pass (issue 28). libtest has no outcome "skipped": a test that returns early is shown as
//! PASS. So a test that cannot run calls [`skip`], which
//!
//! 1. appends `<test>: <reason>` to the file named by `ELECTD_SKIPS_FILE`, when set
//!    (`scripts/test.sh` sets it, lists every line and counts those tests as skipped, not
//!    passed);
//! 2. prints `SKIPPED <test>: <reason>` to stderr;
//! 3. panics, so that the test fails, when `CI=true`, whoever runs it: there `scripts/test.sh`
//!    must be able to install every tool the suite needs, so a missing one is a broken install,
//!    not a reason to run less (issue 48, item 8: it failed only as root).
//!
//! Only a missing tool is a reason to skip (no PostgreSQL, no libfaketime, no Chromium, not root
//! for iptables or a mount); a tool that is there and fails is a failure of the test.

use std::io::Write;

/// The environment variable naming the file that skips are appended to.
pub const SKIPS_FILE_ENV: &str = "ELECTD_SKIPS_FILE";

/// The running test as nextest names it in its `PASS`/`FAIL` lines (`<binary id> <test>`, e.g.
/// `electd-lab::mutex one_holder…`), so that `scripts/test.sh` can tell which passes were
/// skips. Outside nextest: the test binary's name (without cargo's hash) and libtest's name of
/// the test's thread.
pub fn current_test() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let binary = var("NEXTEST_BINARY_ID").unwrap_or_else(|| {
        let exe = std::env::args().next().unwrap_or_default();
        let stem = std::path::Path::new(&exe)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        // cargo names test binaries `<name>-<16 hex digits>`.
        match stem.rsplit_once('-') {
            Some((name, hash))
                if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                name.to_string()
            }
            _ => stem,
        }
    });
    let test = var("NEXTEST_TEST_NAME")
        .unwrap_or_else(|| std::thread::current().name().unwrap_or("main").to_string());
    format!("{binary} {test}")
}

/// Whether a skip fails the test here: on CI (`CI=true`), whoever runs it.
pub fn skips_fail() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (part of) the running test because `missing`, which names the tool that is missing
/// (and why it cannot be had here). Records and prints the skip; panics on CI (see
/// the module's doc). The caller returns (or leaves out the part) after it.
pub fn skip(missing: &str) {
    skip_as(&current_test(), missing)
}

/// [`skip`] for a test named `test` (a test's own name, when it is not the running one).
pub fn skip_as(test: &str, missing: &str) {
    // One line a skip, whatever the reason holds.
    let line = format!("{test}: {}", missing.replace(['\n', '\r'], " "));
    if let Some(path) = std::env::var_os(SKIPS_FILE_ENV).filter(|p| !p.is_empty()) {
        // One write of one line in append mode: tests running at once do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            // A skip that cannot be recorded would be counted as a pass: fail instead.
            panic!(
                "{test} skipped ({missing}), and the skip cannot be written to {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
    eprintln!("SKIPPED {line}");
    if skips_fail() {
        panic!(
            "{test} skipped on CI as root, where scripts/test.sh installs every tool: {missing}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside nextest the name is the binary's without cargo's hash, and the test's thread's.
    #[test]
    fn the_running_test_is_named() {
        let name = current_test();
        assert!(
            name.ends_with("skip::tests::the_running_test_is_named"),
            "{name}"
        );
        if std::env::var_os("NEXTEST_BINARY_ID").is_some() {
            assert!(name.starts_with("electd-lab "), "{name}");
        }
    }

    /// A skip is one line in the file; the test goes on, or fails on CI as root.
    #[test]
    fn a_skip_is_written_as_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skips");
        // The variable is this process's: under nextest each test runs in a process of its
        // own; under cargo test the value the suite set is put back at once.
        let before = std::env::var_os(SKIPS_FILE_ENV);
        std::env::set_var(SKIPS_FILE_ENV, &file);
        let outcomes = [
            std::panic::catch_unwind(|| skip_as("electd-lab::t a_test", "no tool\non PATH")),
            std::panic::catch_unwind(|| skip_as("electd-lab::t b_test", "no other tool")),
        ];
        match before {
            Some(v) => std::env::set_var(SKIPS_FILE_ENV, v),
            None => std::env::remove_var(SKIPS_FILE_ENV),
        }
        for o in outcomes {
            assert_eq!(o.is_err(), skips_fail(), "a skip panics exactly on CI");
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "electd-lab::t a_test: no tool on PATH\nelectd-lab::t b_test: no other tool\n"
        );
    }
}
