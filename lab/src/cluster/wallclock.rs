//! Each node's wall clock, set apart from the host's: nodes run under libfaketime (Debian's
//! `libfaketime`, by `LD_PRELOAD`), which adds the offset in `run/node<ID>.wallclock` to every
//! CLOCK_REALTIME read and leaves the monotonic clocks alone (`FAKETIME_DONT_FAKE_MONOTONIC`).
//! The offset file is read again on every read of the wall clock (`FAKETIME_NO_CACHE`), so a
//! write jumps a running node's wall clock at once: Jepsen's clock nemesis, without touching
//! the host's clock.
//!
//! electd reads CLOCK_BOOTTIME and CLOCK_MONOTONIC through rustix's direct system calls
//! (src/clock.rs), which libfaketime cannot see anyway; what moves is what reads the wall clock:
//! the timestamp of peer requests (src/auth.rs), log lines, `started_unix_s`.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use electd_client::NodeId;

use super::dir::{io, Cluster, CtlError};

/// Where Debian's libfaketime package puts the library.
const LIBFAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// The libfaketime library, or why there is none (`scripts/lib/faketime.sh` installs it).
pub fn libfaketime() -> Result<PathBuf, String> {
    LIBFAKETIME
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| {
            format!(
                "libfaketime is not installed (apt-get install libfaketime; looked for {})",
                LIBFAKETIME.join(", ")
            )
        })
}

impl Cluster {
    /// The file that holds node `id`'s wall-clock offset.
    pub fn wall_clock_file(&self, id: NodeId) -> PathBuf {
        self.run.join(format!("node{id}.wallclock"))
    }

    /// Sets node `id`'s wall clock `offset_s` seconds from the host's (negative: behind), from
    /// its next read of the clock on; for a node that is not running, from its start. Written
    /// to a temp file and renamed over the offset file, so that a node never reads half of it
    /// (libfaketime exits on an offset it cannot parse).
    pub fn set_wall_clock(&self, id: NodeId, offset_s: i64) -> Result<(), CtlError> {
        let path = self.wall_clock_file(id);
        let tmp = path.with_extension("wallclock.tmp");
        fs::write(&tmp, format!("{offset_s:+}\n")).map_err(io(&tmp))?;
        fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Runs node `id`'s process under libfaketime with its offset file (written `+0` first if
    /// there is none), when the cluster's nodes run so ([`Cluster::wall_clocks`]).
    pub(super) fn with_wall_clock(&self, id: NodeId, cmd: &mut Command) -> Result<(), CtlError> {
        let Some(lib) = &self.wall_clocks else {
            return Ok(());
        };
        let file = self.wall_clock_file(id);
        if !file.exists() {
            self.set_wall_clock(id, 0)?;
        }
        cmd.env("LD_PRELOAD", lib)
            .env("FAKETIME_TIMESTAMP_FILE", &file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .env("NO_FAKE_STAT", "1")
            .env_remove("FAKETIME");
        Ok(())
    }
}
