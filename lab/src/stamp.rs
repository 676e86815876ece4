//! `electd-lab stamp FILE`: a stand-in application for the tests of `electd run`. While it
//! lives it appends `<CLOCK_MONOTONIC ns> <ELECTD_TERM> <pid>` to FILE every millisecond, so
//! that the file shows when it ran (to the millisecond) and under which claim; the test judges
//! every stamp against the node's claim intervals from its event log. It never outlives its
//! supervisor (it ends when its parent changes) nor a minute; with `--outlive-parent` it stays
//! after its parent is gone (to show that `electd run` kills it), for at most 20 s.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The longest a stamp process runs.
const AT_MOST: Duration = Duration::from_secs(60);
/// The longest a stamp process runs with `--outlive-parent`.
const ORPHAN_AT_MOST: Duration = Duration::from_secs(20);

#[derive(clap::Args, Debug)]
pub struct StampArgs {
    /// The file to append stamps to.
    pub file: PathBuf,
    /// Go on when the parent is gone (a process that its supervisor must kill).
    #[arg(long)]
    pub outlive_parent: bool,
}

pub fn main(args: StampArgs) -> ExitCode {
    let term = std::env::var("ELECTD_TERM").unwrap_or_default();
    let pid = std::process::id();
    let parent = rustix::process::getppid();
    let mut f = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.file)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("stamp: cannot open {}: {e}", args.file.display());
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let at_most = if args.outlive_parent {
        ORPHAN_AT_MOST
    } else {
        AT_MOST
    };
    let parent_ok = || args.outlive_parent || rustix::process::getppid() == parent;
    while started.elapsed() < at_most && parent_ok() {
        let line = format!("{} {term} {pid}\n", electd::clock::mono_ns());
        if f.write_all(line.as_bytes()).is_err() {
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    ExitCode::SUCCESS
}
