//! `electd-lab stamp FILE`: a stand-in application for the tests of `electd run`. While it
//! lives it appends `<CLOCK_MONOTONIC ns> <ELECTD_TERM> <pid>` to FILE every millisecond, so
//! that the file shows when it ran (to the millisecond) and under which claim; the test judges
//! every stamp against the node's claim intervals from its event log. It never outlives its
//! supervisor (it ends when its parent changes) nor a minute.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The longest a stamp process runs.
const AT_MOST: Duration = Duration::from_secs(60);

#[derive(clap::Args, Debug)]
pub struct StampArgs {
    /// The file to append stamps to.
    pub file: PathBuf,
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
    while started.elapsed() < AT_MOST && rustix::process::getppid() == parent {
        let line = format!("{} {term} {pid}\n", electd::clock::mono_ns());
        if f.write_all(line.as_bytes()).is_err() {
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    ExitCode::SUCCESS
}
